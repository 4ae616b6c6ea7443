"""The process pool that lints files in parallel: each worker holds one file at a time, so a worker
that dies (a crash in the C parser, the OOM killer) costs that one file, which becomes an AL000
finding, while every other file is still linted."""

from __future__ import annotations

import os
from collections.abc import Callable

from archlint import collector, progress
from archlint.code.engine import parse_error
from archlint.code.guard import deep
from archlint.config import Settings
from archlint.diagnostics import Diagnostic

PARALLEL_MIN_FILES = 8  # below this, starting workers costs more than it saves


def jobs(settings: Settings) -> int:
    """How many processes lint at once: --jobs, or else the CPUs this process may run on."""
    if settings.jobs and settings.jobs > 0:
        return settings.jobs
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def lint_many(items: list[tuple], jobs: int, work: Callable, died: Callable[[Diagnostic], object]) -> list:
    """`work(item)` for each (path, content, ...) item, on `jobs` processes when there are enough of
    them; a file whose worker died gets `died(AL000 finding)` as its result."""
    with progress.task("linting files", total=len(items)) as advance:
        if jobs <= 1 or len(items) < PARALLEL_MIN_FILES:
            with collector.paused():  # and one big-stack thread for the batch (guard.deep)
                return deep(lambda: [_advanced(work(item), advance) for item in items])
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
    """One file per worker at a time; a dead worker's file becomes `died(...)` and a fresh worker
    takes its place. (A ProcessPoolExecutor breaks as a whole instead.)"""
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

    results: list = [None] * len(items)
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
        for conn, _process in idle:
            try:
                conn.send(None)
            except OSError:
                pass  # already gone: nothing to stop
            conn.close()
        for process in [p for _, p in idle] + [p for p, _ in busy.values()]:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
    return results


def _died(path: str, exitcode: int | None) -> Diagnostic:
    import signal

    how = f"exit code {exitcode}"
    if exitcode is not None and exitcode < 0:
        try:
            how = f"signal {signal.Signals(-exitcode).name}"
        except ValueError:
            how = f"signal {-exitcode}"
    return parse_error(
        path,
        f"archlint internal error: the worker linting this file died ({how}); "
        "the other files were linted; please report it",
        1,
        1,
    )
