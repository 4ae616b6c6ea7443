"""Code checks: one module per rule or rule family.

A check module defines `CODES` (the codes it can report), `SEVERITY`, `PRICE` and `FIX` as every
rule does (archlint.declarations: checked against each code's page in rules/ when the modules are
found) and `check(facts) -> Iterable[Finding]`, a pure function of the file's facts. A rule priced
by the model analyzed in the same run also defines `price_with_models(diagnostics, models)` (AL403).
Modules here are found by name; adding a rule means adding a module and its page in rules/,
nothing else.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from archlint.declarations import Declared, check_declarations, discover
from archlint.diagnostics import Diagnostic, Fix
from archlint.result import ModelResult


@dataclass
class Finding:
    code: str
    node: cst.CSTNode
    message: str
    fix: Callable[[], Fix | None] | None = None  # built only for reported findings (needs positions)


@functools.cache
def modules() -> tuple:
    found = discover(__name__, __path__)
    check_declarations(found, ("code",))
    return found


@functools.cache
def rules() -> dict[str, Declared]:
    """code → its declaration (its severity is its findings'), checked against its page."""
    return check_declarations(modules(), ("code",))


def price_with_models(diagnostics: list[Diagnostic], models: list[ModelResult]) -> None:
    """The code findings priced by the models analyzed in the same run: each rule that prices
    itself so (its module's `price_with_models`) does."""
    for m in modules():
        if hasattr(m, "price_with_models"):
            m.price_with_models(diagnostics, models)
