"""Python's cyclic garbage collector paused for a stretch of work that makes many objects and no
cycles worth collecting: a model's capture and its meta training step (thousands of small objects;
the collector's passes cost ~30% of a 1,000-layer capture) and a batch of linted files (each
file's facts break their own cycles when done, so its tree goes with its last reference)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """The collector off for the block, back on after it if it was on (nested blocks leave it to the outer)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def off_to_the_end() -> None:
    """The collector off for the rest of the process: only for the program itself, in a run that
    lints code and nothing else. Such a run leaves no cycles worth collecting (each file's facts
    break theirs) and ends with its report; turned back on after the lint, the collector's first
    pass went over every object the run had made and kept (the parser's modules among them: ~20 ms
    of a 1.5 s run on the evaluation projects), for nothing."""
    gc.disable()
