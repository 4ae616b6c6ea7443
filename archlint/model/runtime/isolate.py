"""Each model target in its own module namespace.

A target file imports its neighbours by their plain names (`import layers`), and Python caches
them in `sys.modules` by that name: two targets analyzed in one process (`--models`, the
pre-commit hook, two `archlint.analyze` calls) whose folders each hold a `layers.py` would both get
the first one's. While a target is analyzed, the names its folder provides are taken out of
`sys.modules` (so its own files are imported), and afterwards whatever it imported from there is
dropped and what was there before put back. `sys.path` is restored too: the target's folder is on
it only meanwhile, and a model file that edits it changes nothing after.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from archlint.config import ModelSpec

TARGET_PREFIX = "_archlint_target_"  # archlint.model.loading.load.import_file names each target file so
KEEP = ("archlint", "torch")  # never stashed, whatever a folder holds: archlint is running in them


def target_folder(spec: ModelSpec) -> Path | None:
    """The folder a `PATH.py:NAME` target imports its neighbours from; None for other targets."""
    if spec.model is not None or spec.target.startswith("hf:"):
        return None
    file, sep, _ = spec.target.rpartition(":")
    if not sep or not file.endswith(".py"):
        return None
    try:
        return Path(file).resolve().parent
    except (OSError, RuntimeError):
        return None


def package_of(file: Path) -> tuple[Path, str] | None:
    """For a file inside a package (its folder, and maybe those above, hold `__init__.py`): the
    folder above the top package and the dotted name of the file's package (`mypkg.models`), so
    the file is imported as part of it and `from .layers import x` works; None otherwise."""
    parts: list[str] = []
    folder = file.parent
    while (folder / "__init__.py").is_file() and folder.name.isidentifier() and folder != folder.parent:
        parts.append(folder.name)
        folder = folder.parent
    return (folder, ".".join(reversed(parts))) if parts else None


def search_path(folder: Path) -> list[str]:
    """What goes first on sys.path while a target in `folder` is imported and run: its folder (its
    neighbours by plain name), the folder above its top package (`mypkg.layers` by absolute name)
    and the working directory, which `python -m archlint` puts there and the `archlint` script (the
    pre-commit hook) does not: both import the same modules. Entries already there are not added."""
    wanted = [str(folder)]
    package = package_of(folder / "__init__.py") if (folder / "__init__.py").is_file() else None
    if package is not None:
        wanted.append(str(package[0]))
    try:
        wanted.append(os.getcwd())
    except OSError:  # started in a folder since removed
        pass
    present = {os.path.abspath(p or os.curdir) for p in sys.path if isinstance(p, str)}
    return [p for p in dict.fromkeys(wanted) if p == str(folder) or os.path.abspath(p) not in present]


def local_names(folder: Path) -> set[str]:
    """Top-level module names a file or package in `folder` provides when it is first on sys.path."""
    names: set[str] = set()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return names
    for entry in entries:
        name = entry.name.split(".")[0]
        try:
            if entry.is_file() and entry.name.endswith((".py", ".pyc", ".so", ".pyd")):
                names.add(name)
            elif entry.is_dir() and entry.name.isidentifier():
                if os.path.exists(os.path.join(entry.path, "__init__.py")) or entry.name not in sys.modules:
                    names.add(entry.name)  # a package; or a namespace package no imported one outranks
        except OSError:
            continue
    # a standard-library or already-running module keeps its entry: the target sees it as before
    return {
        n
        for n in names
        if n.isidentifier() and n not in sys.stdlib_module_names and n not in KEEP and n not in sys.builtin_module_names
    }


def _top(name: str) -> str:
    return name.partition(".")[0]


def _target(key: str) -> bool:
    """A target file's module: `_archlint_target_…`, or `mypkg.models._archlint_target_…` in a package."""
    return key.rpartition(".")[2].startswith(TARGET_PREFIX)


def _under(module, folder: Path) -> bool:
    """The module's file is the project's own: in the folder, not in an environment kept there."""
    file = getattr(module, "__file__", None)
    if not file:
        return False
    try:
        path = Path(file).resolve()
    except (OSError, RuntimeError):
        return False
    return path.is_relative_to(folder) and not {"site-packages", "dist-packages"} & set(path.parts)


@dataclass
class Scope:
    """`forget_target`: set by the block when the target file must be imported again next time
    (its import patched torch, which archlint.model.runtime.patches puts back after each target)."""

    forget_target: bool = False


@contextlib.contextmanager
def own_modules(spec: ModelSpec):
    """The block runs with the target's folder first on sys.path and its folder's modules its own."""
    folder = target_folder(spec)
    path_list, path_items = sys.path, list(sys.path)
    scope = Scope()
    if folder is None:
        yield scope
        return
    names = local_names(folder)
    package = package_of(folder / "__init__.py") if (folder / "__init__.py").is_file() else None
    own_root = folder
    if package is not None and _top(package[1]) not in KEEP and _top(package[1]) not in sys.stdlib_module_names:
        names.add(_top(package[1]))  # the target's top package is its own too, not an earlier target's `mypkg`
        own_root = package[0] / _top(package[1])
    stashed = {k: sys.modules.pop(k) for k in [k for k in sys.modules if _top(k) in names]}
    before = set(sys.modules)
    sys.path[:0] = search_path(folder)
    try:
        yield scope
    finally:
        for key in [k for k in sys.modules if k not in before]:  # the folder's names were all stashed
            if _target(key) and scope.forget_target:
                del sys.modules[key]
                continue
            if _target(key) or _top(key) in KEEP:
                continue  # the target file itself stays cached under its own unique name
            if _top(key) in names or _under(sys.modules[key], own_root):
                del sys.modules[key]
        sys.modules.update(stashed)
        sys.path = path_list  # a model file may have rebound or edited it
        path_list[:] = path_items
