"""The one writer of every file archlint makes (`-o`, `--html`, baselines, `trace --diff`'s report,
device specs, the roofline cache): whole or not at all, never onto an input of the run, never
through a link. (--fix rewrites the user's files in archlint/code/writeback.py, under the same
rules from archlint/writeguard.py.)

A regular file (or a new one) is written to a temporary file in its folder, flushed, and renamed
over it, both through the folder's descriptor: a failure (a full disk, a file size limit, a kill)
never leaves a cut or empty report where an old one was, and a link or folder swapped in during the
write is replaced, never followed. A stop (SIGTERM, Ctrl-C) waits the milliseconds until the
temporary file is renamed or removed; one a SIGKILL leaves is removed by the next write to that
folder (writeguard.signals_held, writeguard.clean_stale).

Refused, exit code 2, whatever was there untouched (UsageError: one line naming the file and what
to do):
- a file the run reads (writeguard.input_named): the report would destroy its own input;
- a symbolic link: its target is somebody's file (a committed `archlint.sarif -> ../x` would make
  CI overwrite x). The folders on the way may be links: they are part of the path the user gave.
Anything else that can be opened for writing (`/dev/stdout`, a FIFO, a terminal) is a stream and
is written to as it is, unless it is an input (`-o /dev/stdout >> train.py`).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Any

from archlint import writeguard
from archlint.errors import UsageError

STREAM_FOLDERS = ("/dev/", "/proc/")  # /dev/stdout → /proc/self/fd/1: the shell's redirection, not a file to replace


def write_text(path: Path | str, text: str, what: str = "the report") -> None:
    # backslashreplace: a character no UTF-8 writer takes (a lone surrogate) never loses the report
    write_bytes(path, text.encode("utf-8", "backslashreplace"), what)


def write_bytes(
    path: Path | str, data: bytes, what: str = "the report", *, mode: int | None = None, replace: bool = True
) -> None:
    """`data` written whole to `path` under the rules above. `mode`: a new file's permissions (an
    existing one keeps its own); `replace=False`: a file already there is kept and FileExistsError
    raised, so that of two runs making the same file the first one's stays (a signing key)."""
    path = Path(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise _failed(path, what, exc) from None
    try:
        check_target(path, what)
        if info is not None and _stream(path, info):
            with open(path, "wb") as out:
                out.write(data)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        _replace(path, data, what, mode, replace)
    except FileExistsError:
        if replace:
            raise _failed(path, what, FileExistsError("a file appeared while it was written")) from None
        raise
    except OSError as exc:
        raise _failed(path, what, exc) from None


def guard_run(settings: Any, inputs: dict[str, list[Any]]) -> None:
    """Note the files the run reads (`inputs`: role → paths, plus the config, the baseline and a
    device spec file) and check every output before the run, so that a report named like an input
    (`-o train.py`, a link) fails in one line now, not after the analysis (the writer checks again,
    when the files found in folders are known too)."""
    for role, paths in inputs.items():
        writeguard.note_inputs(paths, role)
    config = Path(settings.root) / "pyproject.toml"
    writeguard.note_inputs([config] if config.is_file() else [], "the config file")
    writeguard.note_inputs([settings.baseline], "the baseline")
    if settings.device_spec and Path(settings.device_spec).is_file():
        writeguard.note_inputs([settings.device_spec], "the device spec")
    named = {"-o": settings.output_file, "--html": settings.html, "--save-baseline": settings.save_baseline}
    check_distinct(named)
    what = {"-o": "the report", "--html": "the HTML report", "--save-baseline": "the baseline"}
    for flag, path in named.items():
        if path is not None:
            check_target(Path(path), what[flag])


def check_target(path: Path, what: str = "the report") -> None:
    """Raise UsageError when `path` must not be written: a folder, a link, an input of the run.
    The command line asks this before a run (so a long analysis is not lost to a typo) and the
    writer again right before it writes."""
    named = shown(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise _failed(path, what, exc) from None
    read = writeguard.input_named(path)  # a stream too: `-o /dev/stdout >> train.py` would truncate it
    if read is not None:
        role, given = read
        same = "" if os.path.abspath(given) == os.path.abspath(path) else f" ({shown(Path(given))})"
        raise UsageError(
            f"cannot write {what} to {named}: it is {role}{same} that this run reads, and the "
            "report would replace it; give another file name"
        )
    if info is not None and _stream(path, info):
        return
    if info is not None and stat.S_ISLNK(info.st_mode):
        raise UsageError(f"cannot write {what}: {writeguard.through_link(path, named)}")
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise UsageError(f"cannot write {what} to {named}: it is a folder; give a file name")


def check_distinct(outputs: dict[str, Path | None]) -> None:
    """Two outputs of one run naming the same file (`-o r.json --html r.json`): one would replace
    the other."""
    seen: dict[object, str] = {}
    for flag, path in outputs.items():
        if path is None:
            continue
        key = writeguard.identity(path) or os.path.realpath(path)
        if key in seen and not _stream(path, _lstat(path)):
            raise UsageError(f"{seen[key]} and {flag} name the same file ({shown(path)}); give each its own file")
        seen[key] = flag


def _stream(path: Path, info: os.stat_result | None) -> bool:
    """A device, FIFO or terminal (or a /dev, /proc link to one or to the shell's redirection):
    written to in place, never replaced."""
    if info is not None and not (
        stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode) or stat.S_ISLNK(info.st_mode)
    ):
        return True
    if info is None or not stat.S_ISLNK(info.st_mode):
        return False
    if os.path.abspath(path).startswith(STREAM_FOLDERS):
        return True
    try:
        target = os.stat(path)
    except OSError:
        return False  # dangling: a link all the same
    return not (stat.S_ISREG(target.st_mode) or stat.S_ISDIR(target.st_mode))


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _replace(path: Path, data: bytes, what: str, mode: int | None, replace: bool) -> None:
    directory = os.open(os.path.realpath(path.parent), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        writeguard.clean_stale(directory)
        try:
            info = os.lstat(path.name, dir_fd=directory)
        except FileNotFoundError:
            info = None
        temp = writeguard.temp_name(path.name)
        with writeguard.signals_held():
            _write_and_rename(directory, temp, path, data, info, what, mode, replace)
        with contextlib.suppress(OSError):  # the rename made durable; some file systems cannot
            os.fsync(directory)
    finally:
        os.close(directory)


def _write_and_rename(
    directory: int,
    temp: str,
    path: Path,
    data: bytes,
    info: os.stat_result | None,
    what: str,
    mode: int | None = None,
    replace: bool = True,
) -> None:
    """The temporary file, complete and flushed, renamed over `path` (with `replace=False` linked
    in, which fails if a file is there); removed on any failure."""
    try:
        fd = os.open(
            temp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o666 if mode is None else mode,
            dir_fd=directory,
        )
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            if info is not None and stat.S_ISREG(info.st_mode):  # an existing report keeps its mode
                os.fchmod(out.fileno(), stat.S_IMODE(info.st_mode))
            os.fsync(out.fileno())
        # the name again, right before the rename: a link swapped in meanwhile is refused (the
        # rename itself would replace the link, never write its target)
        check_target(path, what)
        if replace:
            os.replace(temp, path.name, src_dir_fd=directory, dst_dir_fd=directory)
        else:
            os.link(temp, path.name, src_dir_fd=directory, dst_dir_fd=directory, follow_symlinks=False)
            os.unlink(temp, dir_fd=directory)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=directory)
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
    return UsageError(
        f"cannot write {what} to {shown(path)} ({exc.strerror or exc}); check the path, its permissions "
        "and the free disk space"
    )
