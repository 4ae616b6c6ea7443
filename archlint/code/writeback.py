"""--fix's write: a fixed file replaces its original whole or not at all, only if the original is
unchanged since it was read, and only inside the linted tree.

The new bytes go to a temporary file in the same folder (the same file system, so the rename is
atomic), flushed to disk and given the original's owner, mode and extended attributes (ACLs
included), then renamed over the original. A write that fails part-way (a full disk, a file size
limit, a kill) leaves the original byte for byte as it was; a SIGKILL leaves at most a stray
temporary file (`.NAME.PID.XXXXXXXX.archlint.tmp`, never linted), which the next --fix or report
written to that folder removes once its run is gone (archlint/writeguard.py, which also holds the
rules this module shares with the report writer: no write through a link, none out of the tree).

Right before the rename the original is read again under an exclusive lock: an edit made since
archlint read it (an editor's save) is never overwritten, and two `--fix` runs on the same file
take turns (the second one finds the file changed and leaves it). The lock is waited for
LOCK_WAIT_S at most: a file another process keeps locked is left unchanged with its findings, and
said. An editor that writes in place without a lock can still slip into the microseconds between
that check and the rename.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import time
from pathlib import Path

from archlint import writeguard

TEMP_SUFFIX = writeguard.TEMP_SUFFIX
_REOPEN = 10  # times the original may be replaced under us while we wait for its lock
LOCK_WAIT_S = 2.0  # another --fix run holds the lock for microseconds; anything longer is someone else's
_CLEANED: set[tuple[int, int]] = set()  # folders whose dead runs' temporary files were removed

Refused = writeguard.Refused  # the fixes were not written (the original is untouched); the message says why
inside, trees_of = writeguard.inside, writeguard.trees_of


def replace(path: Path, original: bytes, new: bytes, trees: list[str]) -> None:
    """Replace the file at `path`, which held `original` when read, by `new`. Raises Refused when
    it must not be written, OSError when the write fails; either way the original is untouched."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise Refused(writeguard.through_link(path, "it"))
    folder = os.path.realpath(path.parent)
    if not inside(os.path.join(folder, path.name), trees):
        raise Refused(
            f"it lies outside the linted tree, at {os.path.join(folder, path.name)} through a linked "
            "folder (lint it where it lives to fix it)"
        )
    if info.st_nlink > 1:
        raise Refused(f"it has {info.st_nlink} hard links, which a rewritten file would no longer share")
    directory = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _clean_once(directory)
        if not os.access(path.name, os.W_OK, dir_fd=directory, effective_ids=True, follow_symlinks=False):
            raise PermissionError(13, "Permission denied")  # read-only or immutable: respected
        with writeguard.signals_held():  # a stop (SIGTERM, Ctrl-C) waits until no temporary file is left
            temp = _write_temp(directory, path.name, new, info)
            try:
                with _locked_original(directory, path.name) as current:
                    if current != original:
                        raise Refused(
                            "it changed since archlint read it, saved by an editor or another run (run --fix again)"
                        )
                    os.replace(temp, path.name, src_dir_fd=directory, dst_dir_fd=directory)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp, dir_fd=directory)
                raise
        with contextlib.suppress(OSError):  # the rename made durable; some file systems cannot
            os.fsync(directory)
    finally:
        os.close(directory)


def _write_temp(directory: int, name: str, data: bytes, like: os.stat_result) -> str:
    """A complete, flushed copy of `data` next to `name`, with its owner, mode and attributes."""
    temp = writeguard.temp_name(name)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=directory)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        mine = os.fstat(fd)
        if (mine.st_uid, mine.st_gid) != (like.st_uid, like.st_gid):
            try:
                os.fchown(fd, like.st_uid, like.st_gid)
            except PermissionError:
                raise Refused(
                    f"it belongs to another owner (uid {like.st_uid}, gid {like.st_gid}) that "
                    "archlint cannot give the rewritten file"
                ) from None
        os.fchmod(fd, stat.S_IMODE(like.st_mode))  # after chown, which clears set-id bits
        _copy_attributes(directory, name, fd)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=directory)
        raise
    os.close(fd)
    return temp


def _copy_attributes(directory: int, name: str, fd: int) -> None:
    """Extended attributes (POSIX ACLs are some) of the original onto the new file; one that
    cannot be set is named in a warning (the fix is still written)."""
    if not hasattr(os, "listxattr"):  # pragma: no cover - not Linux
        return
    try:
        source = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory)
    except OSError:
        return  # gone or unreadable: the lock step says so
    try:
        try:
            names = os.listxattr(source)
        except OSError:  # the file system has none
            return
        for attribute in names:
            try:
                os.setxattr(fd, attribute, os.getxattr(source, attribute))
            except OSError as exc:
                print(
                    f"archlint: warning: {name}: extended attribute {attribute} not kept on the fixed file "
                    f"({exc.strerror or exc})",
                    file=sys.stderr,
                )
    finally:
        os.close(source)


def _clean_once(directory: int) -> None:
    """The temporary files killed runs left in this folder, removed once per process."""
    info = os.fstat(directory)
    if (info.st_dev, info.st_ino) not in _CLEANED:
        _CLEANED.add((info.st_dev, info.st_ino))
        writeguard.clean_stale(directory)


def _lock(fcntl, fd: int) -> None:
    """An exclusive lock, waited for LOCK_WAIT_S at most: a file another process keeps locked
    (an editor, a sync tool) is left as it is, and the run goes on with the others."""
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise Refused(
                    f"another process holds a lock on it (flock) for more than {LOCK_WAIT_S:g} s; "
                    "run --fix again when it is released"
                ) from None
            time.sleep(0.02)


@contextlib.contextmanager
def _locked_original(directory: int, name: str):
    """The original's current bytes, read under an exclusive lock held for the block (so the
    rename happens before another `--fix` run can check). None when it is gone or is a link."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no lock, the check alone
        fcntl = None
    for _ in range(_REOPEN):
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory)
        except OSError:  # deleted, or a link now (ELOOP)
            yield None
            return
        try:
            if fcntl is not None:
                _lock(fcntl, fd)
            held = os.fstat(fd)
            try:
                now = os.lstat(name, dir_fd=directory)
            except FileNotFoundError:  # deleted while we waited: not ours to bring back
                yield None
                return
            if (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
                continue  # replaced while we waited (another run's rename): look at the new one
            if not stat.S_ISREG(held.st_mode):
                yield None
                return
            with os.fdopen(os.dup(fd), "rb") as handle:
                current = handle.read()
            yield current
            return
        finally:
            os.close(fd)  # releases the lock
    yield None  # replaced again and again: treated as changed
