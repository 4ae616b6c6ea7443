"""Which files to lint: the .py files under the given paths, minus version-control folders,
virtual environments, build output and what .gitignore files exclude.

A file named on the command line is always linted (as ruff does without --force-exclude).
"""

from __future__ import annotations

import fnmatch
import os
import stat
import sys
from pathlib import Path

from archlint import writeguard
from archlint.errors import UsageError
from archlint.printable import printable

SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".bzr",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".eggs",
        "build",
        "dist",
        "node_modules",
        "site-packages",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".archlint_cache",
        ".ipynb_checkpoints",
    }
)


class GitIgnore:
    """The patterns of one .gitignore, matched against paths relative to its folder.

    Supports what training repositories use: globs, `**`, a leading `/` (anchored), a trailing
    `/` (folders only) and `!` negation.
    """

    def __init__(self, base: Path, lines: list[str]) -> None:
        self.base = base
        self.rules: list[tuple[bool, bool, bool, str]] = []  # (negate, dir_only, anchored, glob)
        for raw in lines:
            line = raw.rstrip("\n").rstrip()
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            line = line[1:] if negate else line
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            anchored = "/" in line
            self.rules.append((negate, dir_only, anchored, line.lstrip("/")))

    @classmethod
    def load(cls, folder: Path) -> GitIgnore | None:
        try:
            text = (folder / ".gitignore").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        ignore = cls(folder, text.splitlines())
        return ignore if ignore.rules else None

    def ignored(self, path: Path, is_dir: bool) -> bool | None:
        """True/False when a pattern decides, None when none matches."""
        rel = Path(os.path.relpath(path, self.base)).as_posix()
        if rel.startswith("../"):
            return None
        verdict = None
        for negate, dir_only, anchored, glob in self.rules:
            if dir_only and not is_dir:
                continue
            if anchored:
                hit = fnmatch.fnmatchcase(rel, glob) or (glob.startswith("**/") and fnmatch.fnmatchcase(rel, glob[3:]))
            else:
                hit = fnmatch.fnmatchcase(path.name, glob)
            if hit:
                verdict = not negate
        return verdict


def _is_venv(folder: Path) -> bool:
    try:
        return (folder / "pyvenv.cfg").is_file() or (folder / "conda-meta").is_dir()
    except OSError:  # unreadable: _walk says so when it tries to list it
        return False


def _warn(path: Path, problem: str) -> None:
    print(printable(f"archlint: warning: {path}: {problem}"), file=sys.stderr)


def _unlisted(folder: Path, problem: str, problems: list[tuple[Path, str]] | None) -> None:
    """A folder whose files could not be found: an error of the run (a gate must not pass over files
    it never saw), as an unreadable file is; a warning where the caller keeps no list."""
    if problems is None:
        _warn(folder, problem)
    else:
        problems.append((folder, problem))


def _walk(
    folder: Path,
    ignores: list[GitIgnore],
    out: list[Path],
    seen: set[tuple[int, int]],
    problems: list[tuple[Path, str]] | None = None,
) -> None:
    try:
        info = folder.stat()
    except OSError as exc:
        _unlisted(folder, f"cannot open this folder ({exc.strerror or exc}); its files were not linted", problems)
        return
    if (info.st_dev, info.st_ino) in seen:  # a symlink back up the tree, or a second way in
        _warn(folder, "folder already walked (a symlink loop or a second link to it); skipped")
        return
    seen.add((info.st_dev, info.st_ino))
    own = GitIgnore.load(folder)
    if own is not None:
        ignores = [*ignores, own]
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        _unlisted(folder, f"cannot list this folder ({exc.strerror or exc}); its files were not linted", problems)
        return
    for entry in entries:
        path = Path(entry.path)
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False  # not reachable as a folder: kept as a file below when named .py
        decided = None
        for ignore in ignores:
            verdict = ignore.ignored(path, is_dir)
            if verdict is not None:
                decided = verdict
        if decided:
            continue
        if is_dir:
            if entry.name in SKIP_DIRS or entry.name.endswith(".egg-info") or _is_venv(path):
                continue
            _walk(path, ignores, out, seen, problems)
        elif entry.name.endswith((".py", ".ipynb")):  # notebooks too, as ruff (archlint/code/notebook.py)
            out.append(path)  # a FIFO or device, even a link to one, is refused when read: AL000


def _parent_ignores(folder: Path) -> list[GitIgnore]:
    """.gitignore files above a folder up to its repository root (the folder holding .git)."""
    chain = []
    for parent in folder.resolve().parents:
        ignore = GitIgnore.load(parent)
        if ignore is not None:
            chain.append(ignore)
        try:
            if (parent / ".git").exists():
                break
        except OSError:
            break
    return chain[::-1]


def discover(paths: list[Path], problems: list[tuple[Path, str]] | None = None) -> list[Path]:
    """The files to lint. A folder that cannot be opened or listed is added to `problems` (path,
    why) when a list is given, else a warning on stderr."""
    files: list[Path] = []
    seen: set[tuple[int, int]] = set()
    for path in paths:
        try:
            is_dir = stat.S_ISDIR(path.stat().st_mode)
        except FileNotFoundError:
            if not path.is_symlink():
                raise UsageError(f"{path}: no such file or directory; give existing files or folders to lint") from None
            is_dir = False  # a dangling link: reading it gives the AL000 that says so
        except OSError:  # e.g. inside a folder we may not enter: reading it says so, per file
            is_dir = False
        if is_dir:
            found: list[Path] = []
            _walk(path, [_rebase(i, path) for i in _parent_ignores(path)], found, seen, problems)
            files += found
        else:
            files.append(path)
    return writeguard.distinct(files, prefer_real=True)


def _rebase(ignore: GitIgnore, folder: Path) -> GitIgnore:
    """A parent's .gitignore, with its base expressed in the same form as the walked paths."""
    rel = os.path.relpath(ignore.base, folder.resolve())
    rebased = GitIgnore(Path(os.path.normpath(folder / rel)), [])
    rebased.rules = ignore.rules
    return rebased
