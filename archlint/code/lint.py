"""`archlint train.py src/`: find the files, lint the ones the cache does not know (in parallel),
apply --select/--ignore/per-file-ignores, and hand back Diagnostics (and, with --fix/--diff, fix).

This module imports neither torch nor libcst: a run where every file is cached starts and ends
without loading the parser.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pickle
import sys
from pathlib import Path

from archlint import __version__
from archlint.code.discover import discover
from archlint.code.engine import PARSE_ERROR, lint_bytes, parse_error
from archlint.config import Settings
from archlint.diagnostics import Diagnostic

CACHE_FILE = "code-v1.pickle"
CACHE_LIMIT = 50_000  # entries; beyond it only this run's are kept
PARALLEL_MIN_FILES = 8  # below this, starting workers costs more than it saves


def _fingerprint(settings: Settings) -> bytes:
    options = {k: v for k, v in settings.rule_options.items() if k.startswith(("AL3", "AL4"))}
    return f"{__version__}|{json.dumps(options, sort_keys=True, default=str)}|".encode()


def _cache_path(settings: Settings) -> Path:
    return (settings.cache_dir or settings.root / ".archlint_cache") / CACHE_FILE


def _load_cache(path: Path) -> dict:
    try:
        with path.open("rb") as fh:
            data = pickle.load(fh)
        return data if isinstance(data, dict) else {}
    except FileNotFoundError:
        return {}
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError) as exc:
        print(f"archlint: warning: ignoring unreadable cache {path} ({exc}); linting every file", file=sys.stderr)
        return {}


def _save_cache(path: Path, cache: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        gitignore = path.parent / ".gitignore"
        if not gitignore.exists():
            gitignore.write_text("# Created by archlint\n*\n")
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with tmp.open("wb") as fh:
            pickle.dump(cache, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError as exc:
        print(f"archlint: warning: cannot write the cache at {path} ({exc}); next run lints every file again",
              file=sys.stderr)


def _read(path: Path) -> bytes:
    return path.read_bytes()


def _work(item: tuple[str, bytes]) -> list[Diagnostic]:
    path, data = item
    return lint_bytes(data, path)


def _jobs(settings: Settings) -> int:
    if settings.jobs and settings.jobs > 0:
        return settings.jobs
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def lint_many(items: list[tuple[str, bytes]], jobs: int) -> list[list[Diagnostic]]:
    """Lint (path, content) pairs, on `jobs` processes when there are enough of them."""
    if jobs <= 1 or len(items) < PARALLEL_MIN_FILES:
        return [_work(item) for item in items]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
    ctx = multiprocessing.get_context(method)
    chunk = max(1, len(items) // (jobs * 4))
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        return list(pool.map(_work, items, chunksize=chunk))


def lint_files(files: list[Path], settings: Settings) -> list[Diagnostic]:
    """Every finding in these files (before selection), using and refreshing the cache."""
    cache_path = _cache_path(settings)
    cache = _load_cache(cache_path) if settings.cache else {}
    prefix = _fingerprint(settings)
    results: dict[int, list[Diagnostic]] = {}
    todo: list[tuple[int, str, bytes, str]] = []
    for i, path in enumerate(files):
        name = str(path)
        try:
            data = _read(path)
        except OSError as exc:
            results[i] = [parse_error(name, f"cannot read file: {exc.strerror or exc}; check its permissions", 1, 1)]
            continue
        key = hashlib.blake2b(prefix + data, digest_size=16).hexdigest()
        hit = cache.get(key)
        if hit is not None:
            results[i] = [dataclasses.replace(d, file=name) for d in hit]
        else:
            todo.append((i, name, data, key))
    if todo:
        fresh = lint_many([(name, data) for _, name, data, _ in todo], _jobs(settings))
        for (i, _, _, key), diagnostics in zip(todo, fresh):
            results[i] = diagnostics
            cache[key] = [dataclasses.replace(d, file=None) for d in diagnostics]
        if settings.cache:
            if len(cache) > CACHE_LIMIT:
                cache = {key: cache[key] for _, _, _, key in todo}
            _save_cache(cache_path, cache)
    return [d for i in range(len(files)) for d in results[i]]


def selected(diagnostics: list[Diagnostic], settings: Settings) -> list[Diagnostic]:
    return [d for d in diagnostics if d.code == PARSE_ERROR or settings.enabled(d.code, d.file)]


def lint_paths(paths: list[Path], settings: Settings) -> tuple[list[Diagnostic], int]:
    files = discover(paths)
    if settings.fix or settings.diff:
        from archlint.code.fix import fix_files

        return fix_files(files, settings), len(files)
    return selected(lint_files(files, settings), settings), len(files)
