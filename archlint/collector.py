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
