"""Writing a report file (`-o`, `--html`, a baseline): whole or not at all.

A regular file (or a new one) is written to a temporary file in its folder and renamed over it, so
a failure (a full disk, a kill) never leaves a cut or empty report where an old one was. Anything
else that can be opened for writing (`/dev/stdout`, a FIFO) is written to as it is. Every failure
is one line naming the file and what to do (UsageError: exit code 2).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from archlint.errors import UsageError


def write_text(path: Path, text: str, what: str = "the report") -> None:
    # backslashreplace: a character no UTF-8 writer takes (a lone surrogate) never loses the report
    data = text.encode("utf-8", "backslashreplace")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise _failed(path, what, exc) from None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise UsageError(f"cannot write {what} to {shown(path)}: it is a folder; give a file name")
    try:
        if info is not None and not stat.S_ISREG(info.st_mode):  # a device or FIFO: not renamed over
            with open(path, "wb") as out:
                out.write(data)
            return
        if info is not None and os.path.islink(path):  # the file the link names is the report; the link stays
            path = Path(os.path.realpath(path))
        path.parent.mkdir(parents=True, exist_ok=True)
        _replace(path, data, info)
    except OSError as exc:
        raise _failed(path, what, exc) from None


def _replace(path: Path, data: bytes, info: os.stat_result | None) -> None:
    temp = path.with_name(f".{path.name[:180]}.{os.getpid()}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            if info is not None:  # an existing report keeps its mode
                os.fchmod(out.fileno(), stat.S_IMODE(info.st_mode))
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def shown(path: Path) -> str:
    """The path as the user most likely typed it: the CLI makes output paths absolute (a model's code
    may change the working directory), so one under the working directory is shown relative to it."""
    with contextlib.suppress(ValueError, OSError):
        relative = Path(path).relative_to(Path.cwd())
        if str(relative) != ".":
            return str(relative)
    return str(path)


def _failed(path: Path, what: str, exc: OSError) -> UsageError:
    return UsageError(f"cannot write {what} to {shown(path)} ({exc.strerror or exc}); check the path, its permissions "
                      "and the free disk space")
