"""`archlint train.py src/`: find the files, lint the ones the cache does not know (in parallel),
apply --select/--ignore/per-file-ignores, and hand back Diagnostics (and, with --fix/--diff, fix).

This module imports neither torch nor libcst: a run where every file is cached starts and ends
without loading the parser.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from pathlib import Path

from archlint import __version__, progress
from archlint.code import cache as cache_files
from archlint.code import guard, notebook
from archlint.code.discover import discover
from archlint.code.engine import PARSE_ERROR, analyze_bytes, parse_error
from archlint.config import Settings
from archlint.diagnostics import Applicability, Diagnostic, Edit, Fix, Severity

CACHE_FILE = "code-v1.json"  # the format: cache.py
PARALLEL_MIN_FILES = 8  # below this, starting workers costs more than it saves


@functools.cache
def linter_source_digest() -> str:
    """A digest of the code linter's own source: a cache written by other linter code (an editable
    install, an upgrade that kept the version number) is never read as if this code had written it."""
    h = hashlib.blake2b(digest_size=8)
    package = Path(__file__).parent
    for path in sorted(package.rglob("*.py")):
        h.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _fingerprint(settings: Settings) -> bytes:
    options = {k: v for k, v in settings.rule_options.items() if k.startswith(("AL3", "AL4"))}
    return f"{__version__}|{linter_source_digest()}|{json.dumps(options, sort_keys=True, default=str)}|".encode()


def _to_record(d: Diagnostic) -> list:
    return [d.code, d.message, d.severity.value, d.line, d.column, d.end_line, d.end_column,
            d.fix.to_dict() if d.fix else None]


def _check_record(record) -> None:
    """Raise ValueError unless the record has the shape _to_record writes (a cache edited by hand or
    by another version must not reach the reporters: a string line number broke the SARIF writer)."""
    if not isinstance(record, list) or len(record) != 8:
        raise ValueError("not a list of 8 fields")
    code, message, _severity, *positions, fix = record
    if not (isinstance(code, str) and isinstance(message, str)):
        raise ValueError("code and message must be strings")
    if not all(p is None or (isinstance(p, int) and not isinstance(p, bool) and p >= 0) for p in positions):
        raise ValueError("line and column must be non-negative integers")
    if fix is not None:
        edits = fix.get("edits") if isinstance(fix, dict) else None
        if not isinstance(edits, list) or not isinstance(fix.get("message"), str):
            raise ValueError("malformed fix")
        for e in edits:
            points = (e["location"]["row"], e["location"]["column"], e["end_location"]["row"],
                      e["end_location"]["column"])
            if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in points) or \
                    not isinstance(e["content"], str):
                raise ValueError("malformed fix edit")


def _from_record(record: list, file: str) -> Diagnostic:
    _check_record(record)
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


def _read(path: Path, max_bytes: int | None = None) -> bytes:
    return guard.read_regular(path, max_bytes)


def _work(item: tuple[str, bytes]) -> tuple[list[Diagnostic], dict | None]:
    """A file's own findings and its facts for the project join (project.py)."""
    path, data = item
    return analyze_bytes(data, path, summarize=True)


def _work_died(dead: Diagnostic) -> tuple[list[Diagnostic], dict | None]:
    return [dead], None


def _jobs(settings: Settings) -> int:
    if settings.jobs and settings.jobs > 0:
        return settings.jobs
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def lint_many(items: list[tuple], jobs: int, work=None, died=None) -> list:
    """Lint (path, content, ...) items with `work`, on `jobs` processes when there are enough of
    them; a file whose worker died gets `died(AL000 finding)` as its result."""
    work, died = (work, died) if work is not None else (_work, _work_died)
    with progress.task("linting files", total=len(items)) as advance:
        if jobs <= 1 or len(items) < PARALLEL_MIN_FILES:
            return [_advanced(work(item), advance) for item in items]
        return _isolated(items, jobs, work, died, advance)


def _advanced(result, advance):
    advance()
    return result


def _serve(conn, work) -> None:
    """A worker: lint one file per message until told to stop (None) or the parent is gone."""
    while True:
        try:
            item = conn.recv()
        except (EOFError, OSError):
            return
        if item is None:
            return
        conn.send(work(item))


def _isolated(items: list[tuple], jobs: int, work, died, advance) -> list:
    """Each worker holds one file at a time, so a worker that dies (a crash in the C parser, the
    OOM killer) costs that one file: it becomes an AL000 finding, a fresh worker takes its place
    and every other file is still linted. (A ProcessPoolExecutor breaks as a whole instead.)"""
    import multiprocessing
    from multiprocessing.connection import wait

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
    ctx = multiprocessing.get_context(method)

    def start():
        parent, child = ctx.Pipe()
        process = ctx.Process(target=_serve, args=(child, work), daemon=True)
        process.start()
        child.close()
        return parent, process

    results: list[list[Diagnostic] | None] = [None] * len(items)
    todo = list(range(len(items) - 1, -1, -1))  # a stack: files go out in order
    idle = [start() for _ in range(min(jobs, len(items)))]
    busy: dict = {}  # connection → (process, index of the file it holds)
    try:
        while todo or busy:
            while idle and todo:
                conn, process = idle.pop()
                i = todo.pop()
                try:
                    conn.send(items[i])
                except OSError:  # died while idle: give the file to a fresh worker
                    todo.append(i)
                    process.join()
                    idle.append(start())
                    continue
                busy[conn] = (process, i)
            for conn in wait(list(busy)):
                process, i = busy.pop(conn)
                try:
                    results[i] = conn.recv()
                    idle.append((conn, process))
                    advance()
                except (EOFError, OSError):
                    process.join()
                    conn.close()
                    results[i] = died(_died(items[i][0], process.exitcode))
                    advance()
                    if todo:
                        idle.append(start())
    finally:
        for conn, process in idle:
            try:
                conn.send(None)
            except OSError:
                pass  # already gone: nothing to stop
            conn.close()
        for process in [p for _, p in idle] + [p for p, _ in busy.values()]:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
    return results  # type: ignore[return-value]


def _died(path: str, exitcode: int | None) -> Diagnostic:
    import signal

    how = f"exit code {exitcode}"
    if exitcode is not None and exitcode < 0:
        try:
            how = f"signal {signal.Signals(-exitcode).name}"
        except ValueError:
            how = f"signal {-exitcode}"
    return parse_error(path, f"archlint internal error: the worker linting this file died ({how}); "
                             "the other files were linted; please report it", 1, 1)


def lint_files(files: list[Path], settings: Settings, paths: list[Path] | None = None) -> list[Diagnostic]:
    """Every finding in these files (before selection), using and refreshing the cache."""
    from archlint.code import project

    cache_path = cache_files.folder(settings) / CACHE_FILE
    cache = cache_files.load(cache_path) if settings.cache else {}
    prefix = _fingerprint(settings)
    store = project.Store(settings)
    results: dict[int, list[Diagnostic]] = {}
    summaries: dict[int, dict | None] = {}
    keys: list[str | None] = [None] * len(files)
    todo: list[tuple[int, str, bytes, str]] = []
    notebooks: dict[int, notebook.Notebook] = {}
    for i, path in enumerate(files):
        name = str(path)
        try:
            data = _read(path, settings.max_file_size)
        except guard.Skip as exc:
            results[i] = [guard.skipped(name, str(exc))]
            continue
        except OSError as exc:
            results[i] = [parse_error(name, f"cannot read file: {exc.strerror or exc}; check its permissions", 1, 1)]
            continue
        if notebook.is_notebook(path):  # its code cells, as one Python text
            try:
                notebooks[i] = notebook.Notebook.parse(data)
            except notebook.NotebookError as exc:
                results[i] = [parse_error(name, f"{exc}; archlint reads Jupyter notebooks (nbformat 4)", 1, 1)]
                continue
            data = notebooks[i].python.encode("utf-8")
        key = hashlib.blake2b(prefix + data, digest_size=16).hexdigest()
        keys[i] = key
        hit = cache.get(key)
        summary = store.summary(key)
        if hit is not None and (summary is not None or key in store.facts):
            try:
                results[i] = [_from_record(r, name) for r in hit]
                summaries[i] = summary
                continue
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
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
            cache_files.save(cache_path, cache, {key for _, _, _, key in todo})
    # the project join: files whose names mean something elsewhere are linted again in context
    for i in notebooks:  # a notebook is linted on its own: no module imports it
        summaries[i] = None
    joined = [None if i in notebooks else key for i, key in enumerate(keys)]
    own = dict(results)
    try:
        results = project.refine(files, joined, dict(own), summaries, settings, store, prefix, _jobs(settings), paths)
    except project.JoinFailed as failure:
        results = _join_again(failure, files, joined, own, summaries, todo, settings, store, prefix, paths)
    store.save()
    lint_files.extracted = len(todo)
    for i, nb in notebooks.items():
        results[i] = [nb.locate(d) for d in results[i]]
    return [d for i in range(len(files)) for d in results[i]]


def _join_again(failure, files, keys, results, summaries, todo, settings: Settings, store, prefix: bytes,
                paths) -> dict:
    """After a failed project join: when facts read from the cache took part, they are evicted, the
    files they came from are extracted again and the join retried (a cache written by a buggy
    version heals itself); otherwise, or when it fails again, each file keeps its own findings."""
    from archlint.code import project

    fresh = {i for i, _, _, _ in todo}
    stale = [i for i in range(len(files)) if keys[i] is not None and i not in fresh and i in summaries]
    evicted = store.evict()
    if evicted or stale:
        if getattr(settings, "verbose", False):
            print(f"archlint: note: the project facts cached for {evicted} file{'s' * (evicted != 1)} could not "
                  f"be joined ({failure}); extracted them again", file=sys.stderr)
        items = []
        for i in stale:
            try:
                items.append((i, str(files[i]), _read(files[i])))
            except (OSError, guard.Skip):
                summaries[i] = None  # gone or replaced since: linted alone
        again = lint_many([(name, data) for _, name, data in items], _jobs(settings)) if items else []
        for (i, _, _), (diagnostics, summary) in zip(items, again):
            results[i], summaries[i] = diagnostics, summary
            store.put_summary(keys[i], summary)
        try:
            return project.refine(files, keys, dict(results), summaries, settings, store, prefix, _jobs(settings),
                                  paths)
        except project.JoinFailed as exc:
            failure = exc
    print(f"archlint: warning: project-wide analysis failed ({failure}); each file was linted alone; "
          "please report this", file=sys.stderr)
    return results


def selected(diagnostics: list[Diagnostic], settings: Settings) -> list[Diagnostic]:
    # A file that could not be read or parsed is always reported; one skipped on purpose (too
    # large, too complex: an info finding) can be ignored like a rule, e.g. per file.
    return [d for d in diagnostics
            if (d.code == PARSE_ERROR and d.severity is Severity.ERROR) or settings.enabled(d.code, d.file)]


def lint_paths(paths: list[Path], settings: Settings) -> tuple[list[Diagnostic], int]:
    files = discover(paths)
    if settings.fix or settings.diff:
        from archlint.code import project
        from archlint.code.fix import fix_files

        lint_files(files, settings, paths)  # the project join: each file's context
        contexts = {f: project.refine.contexts.get(os.path.abspath(f)) for f in files}
        return fix_files(files, settings, contexts, paths), len(files)
    return selected(lint_files(files, settings, paths), settings), len(files)
