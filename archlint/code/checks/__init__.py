"""Code checks: one module per rule or rule family.

A check module defines `CODES` (the codes it can report) and `check(facts) -> Iterable[Finding]`,
a pure function of the file's facts. Modules here are found by name; adding a rule means adding a
module and its page in rules/, nothing else.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from archlint.diagnostics import Fix


@dataclass
class Finding:
    code: str
    node: cst.CSTNode
    message: str
    fix: Callable[[], Fix | None] | None = None  # built only for reported findings (needs positions)


@functools.cache
def modules() -> tuple:
    found = []
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            found.append(importlib.import_module(f"{__name__}.{info.name}"))
    return tuple(found)
