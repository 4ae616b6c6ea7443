"""`archlint train.py src/`: find the files, lint the ones the cache does not know (in parallel),
apply --select/--ignore/per-file-ignores, and hand back Diagnostics (and, with --fix/--diff, fix).

This module imports neither torch nor libcst: a run where every file is cached starts and ends
without loading the parser.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from archlint import __version__
from archlint.code.discover import discover
from archlint.code.engine import PARSE_ERROR, analyze_bytes, parse_error
from archlint.config import Settings
from archlint.diagnostics import Applicability, Diagnostic, Edit, Fix, Severity

# JSON, not pickle: the cache lives in the project, and loading a pickle from a cloned repository
# could run code.
CACHE_FILE = "code-v1.json"
CACHE_LIMIT = 50_000  # entries; beyond it only this run's are kept
PARALLEL_MIN_FILES = 8  # below this, starting workers costs more than it saves


def _fingerprint(settings: Settings) -> bytes:
    options = {k: v for k, v in settings.rule_options.items() if k.startswith(("AL3", "AL4"))}
    return f"{__version__}|{json.dumps(options, sort_keys=True, default=str)}|".encode()


def _cache_path(settings: Settings) -> Path:
    return (settings.cache_dir or settings.root / ".archlint_cache") / CACHE_FILE


def _load_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return data
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        print(f"archlint: warning: ignoring unreadable cache {path} ({exc}); linting every file", file=sys.stderr)
        return {}


def _save_cache(path: Path, cache: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        gitignore = path.parent / ".gitignore"
        if not gitignore.exists():
            gitignore.write_text("# Created by archlint\n*\n")
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache, separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        print(f"archlint: warning: cannot write the cache at {path} ({exc}); next run lints every file again",
              file=sys.stderr)


def _to_record(d: Diagnostic) -> list:
    return [d.code, d.message, d.severity.value, d.line, d.column, d.end_line, d.end_column,
            d.fix.to_dict() if d.fix else None]


def _from_record(record: list, file: str) -> Diagnostic:
    code, message, severity, line, column, end_line, end_column, fix = record
    if fix is not None:
        edits = tuple(
            Edit(e["location"]["row"], e["location"]["column"], e["end_location"]["row"],
                 e["end_location"]["column"], e["content"])
            for e in fix["edits"]
        )
        fix = Fix(fix["message"], Applicability(fix["applicability"]), edits)
    return Diagnostic(code, message, Severity(severity), file=file, line=line, column=column,
                      end_line=end_line, end_column=end_column, fix=fix)


def _read(path: Path) -> bytes:
    return path.read_bytes()


def _work(item: tuple[str, bytes]) -> tuple[list[Diagnostic], dict | None]:
    """A file's own findings and its facts for the project join (project.py)."""
    path, data = item
    return analyze_bytes(data, path, summarize=True)


def _jobs(settings: Settings) -> int:
    if settings.jobs and settings.jobs > 0:
        return settings.jobs
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def lint_many(items: list[tuple], jobs: int, work=None) -> list:
    """Lint (path, content) pairs, on `jobs` processes when there are enough of them."""
    work = work or _work
    if jobs <= 1 or len(items) < PARALLEL_MIN_FILES:
        return [work(item) for item in items]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
    ctx = multiprocessing.get_context(method)
    chunk = max(1, len(items) // (jobs * 4))
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        return list(pool.map(work, items, chunksize=chunk))


def lint_files(files: list[Path], settings: Settings, paths: list[Path] | None = None) -> list[Diagnostic]:
    """Every finding in these files (before selection), using and refreshing the cache."""
    from archlint.code import project

    cache_path = _cache_path(settings)
    cache = _load_cache(cache_path) if settings.cache else {}
    prefix = _fingerprint(settings)
    store = project.Store(settings)
    results: dict[int, list[Diagnostic]] = {}
    summaries: dict[int, dict | None] = {}
    keys: list[str | None] = [None] * len(files)
    todo: list[tuple[int, str, bytes, str]] = []
    for i, path in enumerate(files):
        name = str(path)
        try:
            data = _read(path)
        except OSError as exc:
            results[i] = [parse_error(name, f"cannot read file: {exc.strerror or exc}; check its permissions", 1, 1)]
            continue
        key = hashlib.blake2b(prefix + data, digest_size=16).hexdigest()
        keys[i] = key
        hit = cache.get(key)
        summary = store.summary(key)
        if hit is not None and (summary is not None or key in store.facts):
            try:
                results[i] = [_from_record(r, name) for r in hit]
                summaries[i] = summary
                continue
            except (ValueError, KeyError, TypeError) as exc:
                print(f"archlint: warning: malformed cache entry for {name} ({exc!r}); linting it again",
                      file=sys.stderr)
        todo.append((i, name, data, key))
    if todo:
        fresh = lint_many([(name, data) for _, name, data, _ in todo], _jobs(settings))
        for (i, _, _, key), (diagnostics, summary) in zip(todo, fresh):
            results[i] = diagnostics
            summaries[i] = summary
            cache[key] = [_to_record(d) for d in diagnostics]
            store.put_summary(key, summary)
        if settings.cache:
            if len(cache) > CACHE_LIMIT:
                cache = {key: cache[key] for _, _, _, key in todo}
            _save_cache(cache_path, cache)
    # the project join: files whose names mean something elsewhere are linted again in context
    results = project.refine(files, keys, results, summaries, settings, store, prefix, _jobs(settings), paths)
    store.save()
    lint_files.extracted = len(todo)
    return [d for i in range(len(files)) for d in results[i]]


def selected(diagnostics: list[Diagnostic], settings: Settings) -> list[Diagnostic]:
    return [d for d in diagnostics if d.code == PARSE_ERROR or settings.enabled(d.code, d.file)]


def lint_paths(paths: list[Path], settings: Settings) -> tuple[list[Diagnostic], int]:
    files = discover(paths)
    if settings.fix or settings.diff:
        from archlint.code import project
        from archlint.code.fix import fix_files

        lint_files(files, settings, paths)  # the project join: each file's context
        contexts = {f: project.refine.contexts.get(os.path.abspath(f)) for f in files}
        return fix_files(files, settings, contexts), len(files)
    return selected(lint_files(files, settings, paths), settings), len(files)
