"""`archlint trace --timeout`: a limit on the wall time one trace file may take (read, analyse,
check), so a pathological file (or a FIFO that never ends) cannot hold a CI job forever.

The reader and the analysis are Python loops over bounded pieces of work (a chunk, an event, a
step), so the alarm's exception lands within one piece of work of the limit. Stdlib only.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from archlint.errors import UsageError


class TimedOut(Exception):
    """Raised into the reading or analysing code when --timeout seconds have passed."""


@contextlib.contextmanager
def limit(seconds: float | None) -> Iterator[None]:
    if seconds is None:
        yield
        return
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        raise UsageError("--timeout needs a Unix system and archlint on the main thread")

    def expired(signum: int, frame: object) -> None:
        raise TimedOut

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
