"""Which files to lint: the .py files under the given paths, minus version-control folders,
virtual environments, build output and what .gitignore files exclude.

A file named on the command line is always linted (as ruff does without --force-exclude).
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

from archlint.errors import UsageError

SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", ".bzr", "__pycache__", ".venv", "venv", ".tox", ".nox", ".eggs",
    "build", "dist", "node_modules", "site-packages", ".mypy_cache", ".pytest_cache",
    ".ruff_cache", ".archlint_cache", ".ipynb_checkpoints",
})


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
                hit = fnmatch.fnmatchcase(rel, glob) or (
                    glob.startswith("**/") and fnmatch.fnmatchcase(rel, glob[3:])
                )
            else:
                hit = fnmatch.fnmatchcase(path.name, glob)
            if hit:
                verdict = not negate
        return verdict


def _is_venv(folder: Path) -> bool:
    return (folder / "pyvenv.cfg").is_file() or (folder / "conda-meta").is_dir()


def _walk(folder: Path, ignores: list[GitIgnore], out: list[Path]) -> None:
    own = GitIgnore.load(folder)
    if own is not None:
        ignores = [*ignores, own]
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return  # an unreadable folder has nothing we can lint; its files are never named
    for entry in entries:
        path = Path(entry.path)
        is_dir = entry.is_dir()
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
            _walk(path, ignores, out)
        elif entry.name.endswith(".py") and (entry.is_file() or entry.is_symlink()):
            out.append(path)


def _parent_ignores(folder: Path) -> list[GitIgnore]:
    """.gitignore files above a folder up to its repository root (the folder holding .git)."""
    chain = []
    for parent in folder.resolve().parents:
        ignore = GitIgnore.load(parent)
        if ignore is not None:
            chain.append(ignore)
        if (parent / ".git").exists():
            break
    return chain[::-1]


def discover(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if not path.exists() and not path.is_symlink():
            raise UsageError(f"{path}: no such file or directory; give existing files or folders to lint")
        if path.is_dir():
            found: list[Path] = []
            _walk(path, [_rebase(i, path) for i in _parent_ignores(path)], found)
            files += found
        else:
            files.append(path)
    seen, unique = set(), []
    for f in files:
        key = os.path.normpath(f)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


def _rebase(ignore: GitIgnore, folder: Path) -> GitIgnore:
    """A parent's .gitignore, with its base expressed in the same form as the walked paths."""
    rel = os.path.relpath(ignore.base, folder.resolve())
    rebased = GitIgnore(Path(os.path.normpath(folder / rel)), [])
    rebased.rules = ignore.rules
    return rebased
