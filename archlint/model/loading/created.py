"""Where each module of the user's model was created, in the user's own source.

A finding on `block1.conv1` (a torch nn.Conv2d) is useless at `torch/nn/modules/conv.py:388` in a
SARIF upload or a GitHub annotation; it belongs at `self.conv1 = nn.Conv2d(...)` in the user's
`Block.__init__`. While the model is imported and built (`recording()`), every nn.Module records
the innermost frame of its construction that is neither its own constructor chain nor library code
(torch, site-packages, archlint): the assignment in `__init__`, the loop line that appended it, or,
for a model made by a library (`torchvision.models.resnet18()`), the user's builder call.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import sysconfig
import weakref
from pathlib import Path
from types import FrameType

from torch import nn

_SITES: weakref.WeakKeyDictionary[nn.Module, tuple[str, int]] = weakref.WeakKeyDictionary()
_LIBRARY_ROOTS = tuple(
    str(Path(p).resolve())
    for p in {
        Path(nn.__file__).parents[1],  # torch
        Path(__file__).parents[1],  # archlint itself
        sysconfig.get_paths()["scripts"],  # console-script launchers (bin/archlint, bin/pytest)
        sysconfig.get_paths()["stdlib"],
        sysconfig.get_paths()["purelib"],
        sysconfig.get_paths()["platlib"],
    }
)


@functools.cache
def _is_library(filename: str) -> bool:
    if filename.startswith("<"):  # <frozen importlib._bootstrap>, <string>
        return True
    parts = Path(filename).parts
    if "site-packages" in parts or "dist-packages" in parts:
        return True
    resolved = str(Path(filename).resolve())
    return resolved.startswith(_LIBRARY_ROOTS)


def _site(module: nn.Module) -> tuple[str, int] | None:
    frame: FrameType | None = sys._getframe(2)  # the caller of Module.__init__ (through the patch)
    while frame is not None:
        if frame.f_locals.get("self") is not module and not _is_library(frame.f_code.co_filename):
            return str(Path(frame.f_code.co_filename).resolve()), frame.f_lineno
        frame = frame.f_back
    return None


@contextlib.contextmanager
def recording():
    """Record creation sites of the modules constructed inside (nested uses are fine)."""
    original = nn.Module.__init__
    if getattr(original, "_archlint_recording", False):
        yield
        return

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        site = _site(self)
        if site is not None:
            try:
                _SITES[self] = site
            except TypeError:  # a module class that made itself unhashable: no site, as before
                pass

    init._archlint_recording = True
    nn.Module.__init__ = init
    try:
        yield
    finally:
        nn.Module.__init__ = original


def site_of(module: nn.Module) -> tuple[str, int] | None:
    """(absolute file, line) where the module was created in the user's code, if recorded."""
    return _SITES.get(module)
