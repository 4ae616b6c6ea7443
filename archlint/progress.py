"""Progress on long runs: a rich progress display on stderr, only where a person watches it.

Shown when stderr is a terminal, not in CI (`CI` set), not with `--quiet`, and not when a
machine format (json, sarif, ...) goes to stdout. Code that runs long opens a `task` and
advances it; with no display active a task costs nothing, so library callers never see output.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Protocol

from archlint.config import Settings

_display = None  # the rich Progress of the running `shown` block, if any
_say = False  # within a `shown` block of a command-line run that is not --quiet: `say` writes to stderr
command_line = False  # set by the command (archlint.cli): library callers (the API) see no output
_own_threads: set[int] = set()  # idents of threads archlint's own work started (torch.compile's workers)


def wanted(settings: Settings) -> bool:
    machine_stdout = settings.output_format != "text" and settings.output_file is None
    return sys.stderr.isatty() and not os.environ.get("CI") and not settings.quiet and not machine_stdout


@contextlib.contextmanager
def shown(settings: Settings) -> Iterator[None]:
    """Show tasks opened inside this block, if `wanted`; the display vanishes when it ends."""
    global _display, _say
    if _display is not None or not wanted(settings):
        said, _say = _say, command_line and not settings.quiet
        try:
            yield
        finally:
            _say = said
        return
    _say = True
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeRemainingColumn
    from rich.text import Text

    class Count(MofNCompleteColumn):  # "3/10"; nothing for open-ended work (rich would draw "0/?")
        def render(self, task):
            return super().render(task) if task.total is not None else Text("")

    _display = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        Count(),
        TimeRemainingColumn(),
        console=Console(file=sys.stderr),
        transient=True,
        refresh_per_second=4,  # few redraws: timing runs meanwhile
    )
    try:
        with _display:
            yield
    finally:
        _display, _say = None, False


class Advance(Protocol):
    def __call__(self, n: int = 1) -> None: ...


def _unseen(n: int = 1) -> None:
    """Advancing a task with no display: nothing to draw."""


@contextlib.contextmanager
def task(description: str, total: int | None = None) -> Iterator[Advance]:
    """A unit of work; call the yielded function to advance it (by 1 by default)."""
    display = _display
    if display is None:
        yield _unseen
        return
    task_id = display.add_task(description, total=total)

    def advance(n: int = 1) -> None:
        display.advance(task_id, n)

    try:
        yield advance
    finally:
        display.remove_task(task_id)


def say(message: str) -> None:
    """One line on stderr ahead of a long stage (how long it will take), within a command-line run
    that is not --quiet; above the progress display when one is drawn. Nothing outside a `shown`
    block, nothing for library callers."""
    if not _say:
        return
    if _display is not None:
        _display.console.print(message, markup=False, highlight=False)
    else:
        print(message, file=sys.stderr, flush=True)


def own_threads(threads) -> None:
    """Threads that archlint's own work started (torch.compile's workers in --what-if): not the
    model's, when the command says which threads are left at its end."""
    _own_threads.update(t.ident for t in threads if t.ident is not None)


def is_own(thread) -> bool:
    return thread.ident in _own_threads
