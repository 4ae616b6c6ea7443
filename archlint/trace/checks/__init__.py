"""The trace rules: one module per code, found by name (a leading underscore marks a helper), each
declaring `CODE`, `SEVERITY`, `PRICE` and `FIX` as every rule does (archlint.declarations, checked
against its page in rules/ when the rules are found), `OPTIONS` (defaults, documented on its page)
and `check(analysis, options) -> list[Diagnostic]`. A rule declaring `ACROSS_RANKS = True` checks
one job's traces together: `check(report, analyses, options)` with archlint.trace.ranks's report.
Adding a rule is one module here and one page in rules/."""

from __future__ import annotations

import functools
from types import ModuleType

from archlint.declarations import Declared, check_declarations, discover


@functools.cache
def _found() -> tuple[ModuleType, ...]:
    found = discover(__name__, __path__)
    check_declarations(found, ("trace",))
    return found


def rules() -> dict[str, Declared]:
    """code → its declaration, checked against its page."""
    return check_declarations(_found(), ("trace",))


def modules() -> tuple[ModuleType, ...]:
    """The rules that read one trace, by module name."""
    return tuple(m for m in _found() if not getattr(m, "ACROSS_RANKS", False))


def rank_modules() -> tuple[ModuleType, ...]:
    """The rules that read several ranks of one job together (archlint/trace/ranks.py)."""
    return tuple(m for m in _found() if getattr(m, "ACROSS_RANKS", False))
