"""What archlint may write, shared by its two writers: reports and baselines (archlint/outputs.py)
and --fix (archlint/code/writeback.py).

- never onto a file the run reads (a linted file, the model's file, a trace, the config, the
  baseline it compares with): the commands note their inputs (`note_inputs`) inside
  `run_inputs()`, and a writer asks `input_named` before it writes. A file is the same file by its
  real path and by its (device, inode), so another spelling, a link or a hard link is seen too;
- never through a symbolic link: the link's target is somebody's file, perhaps outside the project
  (a committed `archlint.sarif -> ../x`). The writers refuse it and name the link;
- --fix never writes out of the linted tree (`inside`);
- temporary files are `.NAME.PID.XXXXXXXX.archlint.tmp`, cut in bytes to a legal name; a stop
  (SIGTERM, Ctrl-C) waits while one exists (`signals_held`), and one a SIGKILL left behind is known
  by its dead pid and removed by the next write to that folder (`clean_stale`).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import stat
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

TEMP_SUFFIX = ".archlint.tmp"
NAME_MAX = 255  # bytes in one file name (Linux, macOS)
STALE_AFTER_S = 30.0  # a live writer's temporary file is seconds old; a dead run's older ones go
_TEMP = re.compile(r"^\..*\.(\d+)\.[0-9a-f]{8}" + re.escape(TEMP_SUFFIX) + r"$", re.DOTALL)


class Refused(Exception):
    """Not written (whatever was there is untouched); the message says why and what to do."""


FileId = tuple[int, int]


def identity(path: str | Path) -> FileId | None:
    """(st_dev, st_ino) of the file a path names (links followed), None when it is not there."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return info.st_dev, info.st_ino


def distinct(paths: Iterable[Path], prefer_real: bool = False) -> list[Path]:
    """The paths in the order given, each file once: a file named twice (another spelling, a link
    to it, a hard link) is read once, as first named; one that cannot be stat'ed is kept by its
    normalized spelling. `prefer_real`: where a link and the file it names are both given, the
    file's own name is kept, in the first one's place (--fix writes a file, never a link)."""
    where: dict[object, int] = {}
    out: list[Path] = []
    for path in paths:
        key = identity(path) or os.path.normpath(path)
        if key not in where:
            where[key] = len(out)
            out.append(path)
        elif prefer_real and os.path.islink(out[where[key]]) and not os.path.islink(path):
            out[where[key]] = path
    return out


# Inputs of the run ---------------------------------------------------------------------------------

_RUNS: list[
    dict[object, tuple[str, str]]
] = []  # a stack: the innermost run's inputs, identity or real path → (role, as named)


@contextlib.contextmanager
def run_inputs() -> Iterator[None]:
    """The scope of one command's run: the inputs noted inside it are never written over."""
    _RUNS.append({})
    try:
        yield
    finally:
        _RUNS.pop()


def note_inputs(paths: Iterable[str | Path], role: str) -> None:
    """Record files this run reads (`role` says what they are: "a linted file", "the baseline").
    Outside `run_inputs()` (a library call), nothing is recorded."""
    if not _RUNS:
        return
    table = _RUNS[-1]
    for path in paths:
        if path is None:
            continue
        key = identity(path)  # one stat: thousands of linted files cost milliseconds
        table.setdefault(key if key is not None else os.path.realpath(path), (role, str(path)))


def input_named(path: str | Path) -> tuple[str, str] | None:
    """(role, the input as named) when `path` is a file this run reads, else None."""
    if not _RUNS:
        return None
    table = _RUNS[-1]
    key = identity(path)
    if key is not None and key in table:
        return table[key]
    return table.get(os.path.realpath(path))


# Links and trees -----------------------------------------------------------------------------------


def link_target(path: str | Path) -> str | None:
    """Where a symbolic link points (as written in it), None when `path` is not a link."""
    try:
        return os.readlink(path)
    except (OSError, ValueError):
        return None


def through_link(path: str | Path, named: str | None = None) -> str:
    """Why a link is never written through, naming it (as `named`, default the path): the same
    words for every writer."""
    target = link_target(path)
    to = f" to {target}" if target is not None else ""
    return (
        f"{named or path} is a symbolic link{to}; archlint never writes through a link (it would replace the "
        "link's target): remove the link or give the real file's path"
    )


def inside(real: str, trees: list[str]) -> bool:
    """Whether a resolved path is one of the resolved trees or lies under one."""
    return any(real == tree or real.startswith(tree.rstrip(os.sep) + os.sep) for tree in trees)


def trees_of(paths: list[Path]) -> list[str]:
    """The linted trees: the resolved paths given on the command line."""
    return [os.path.realpath(p) for p in paths]


# Temporary files -----------------------------------------------------------------------------------


def temp_name(name: str) -> str:
    """A fresh temporary name beside `name`: at most NAME_MAX bytes, the original's name cut in
    bytes (a 255-byte name of 84 CJK characters is legal; cut in characters, its temp was not)."""
    tail = f".{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}"
    room = NAME_MAX - 1 - len(tail.encode())
    head = os.fsdecode(os.fsencode(name)[:room])  # a cut inside a character stays bytes (surrogateescape)
    return f".{head}{tail}"


HELD_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, n))


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """While a temporary file exists: SIGTERM, SIGINT and SIGHUP wait (milliseconds, the write's
    time) and are delivered once it is renamed or removed, so a stopped run (CI cancelled, Ctrl-C)
    leaves no temporary file. Only SIGKILL still can; clean_stale removes that one later."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not POSIX
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def clean_stale(directory: int) -> list[str]:
    """Remove the temporary files that dead archlint runs left in a folder (open as `directory`):
    a name of ours, a pid that no longer runs, older than STALE_AFTER_S. The names removed."""
    removed: list[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    now = time.time()
    for name in names:
        match = _TEMP.match(name)
        if match is None or _alive(int(match.group(1))):
            continue
        with contextlib.suppress(OSError):
            info = os.lstat(name, dir_fd=directory)
            if stat.S_ISREG(info.st_mode) and now - info.st_mtime > STALE_AFTER_S:
                os.unlink(name, dir_fd=directory)
                removed.append(name)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True  # ours: this process's writer removes its own
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):  # another user's live process; or not a pid
        return True
    return True
