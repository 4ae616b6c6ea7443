"""One rule convention for the three families (model, code and trace rules), and its one checker.

Every rule file (archlint/model/checks/, archlint/code/checks/, archlint/trace/checks/) declares, at
its top:

    CODE = "AL501"                  the rule (a code-rule file reporting several: CODES = ("AL301", ...))
    SEVERITY = Severity.WARNING     the severity its findings are proposed at: its page's `severity:`
    PRICE = ("estimated",)          the bases (diagnostics.BASES) its findings' prices may have, in that
                                    order; () when its findings carry no price: its page's `price:`
    FIX = "none"                    none | safe | unsafe: the strongest fix its findings carry (a
                                    `safe` rule's fix may be unsafe where it cannot prove more): its
                                    page's `fix:`
  with several CODES, each of SEVERITY, PRICE and FIX may be a dict: code → its value.
  Optional relations, checked here too:
    PRICED_BY_WHAT_IF = ("bf16",)   the --what-if transformations that price it (archlint.whatif_names)
    YIELDS_TO = ("AL205",)          rules whose findings own part of what this rule would count: when
                                    they run, this one leaves it to them (its check reads
                                    ctx.yielded_to); each must be a rule with a page

`check_declarations` is the one check of those declarations against the pages in rules/ and against
each other, used by each family's discovery; `disagreements` checks findings against what their
rule declares (the tests run it on every rule's fixtures). Nothing here imports an analyzer.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType

from archlint import registry
from archlint.diagnostics import BASES, Applicability, Diagnostic, Severity
from archlint.whatif_names import NAMES as WHAT_IF_NAMES

FIXES = ("none", "safe", "unsafe")
_STRENGTH = {"none": 0, "unsafe": 1, "safe": 2}  # a safe fix is more than an unsafe one, which is more than none


class RuleDeclarationError(Exception):
    """A rule file declares something its page or another rule contradicts: a bug in archlint,
    raised when the rules are discovered."""


@dataclass(frozen=True)
class Declared:
    """One rule as its file declares it."""

    code: str
    severity: Severity
    price: tuple[str, ...]
    fix: str
    module: str


def discover(package: str, path: Iterable[str]) -> tuple[ModuleType, ...]:
    """The rule files of a family's package, by name (a leading underscore marks a shared helper)."""
    names = sorted(info.name for info in pkgutil.iter_modules(path) if not info.name.startswith("_"))
    return tuple(importlib.import_module(f"{package}.{name}") for name in names)


def codes_of(module: ModuleType) -> tuple[str, ...]:
    if hasattr(module, "CODES"):
        return tuple(module.CODES)
    return (module.CODE,) if hasattr(module, "CODE") else ()


def _one(module: ModuleType, name: str, code: str):
    value = getattr(module, name, None)
    return value.get(code) if isinstance(value, dict) else value


def declared(module: ModuleType) -> list[Declared]:
    return [
        Declared(
            code,
            _one(module, "SEVERITY", code),
            _one(module, "PRICE", code),
            _one(module, "FIX", code),
            module.__name__,
        )
        for code in codes_of(module)
    ]


def check_declarations(modules: Iterable[ModuleType], scopes: tuple[str, ...]) -> dict[str, Declared]:
    """code → its declaration, each checked against its page (whose `scope:` must be one of
    `scopes`) and the others; the first disagreement raises RuleDeclarationError."""
    pages = registry.catalog()
    found: dict[str, Declared] = {}
    for m in modules:
        if not codes_of(m):
            raise RuleDeclarationError(f"{m.__name__} declares no CODE (or CODES)")
        for d in declared(m):
            where = f"{m.__name__}: {d.code}"
            page = pages.get(d.code)
            if page is None or page.scope not in scopes:
                raise RuleDeclarationError(
                    f"{where} has no {' or '.join(scopes)} rule page in rules/ (rules/CODE-NAME.md, scope: {scopes[0]})"
                )
            if d.code in found:
                raise RuleDeclarationError(f"{where} is also declared by {found[d.code].module}")
            if not isinstance(d.severity, Severity) or d.severity is not page.severity:
                raise RuleDeclarationError(
                    f"{where} declares SEVERITY {d.severity!r}; its page {page.path.name} says {page.severity.value}"
                )
            if not isinstance(d.price, tuple) or any(b not in BASES for b in d.price):
                raise RuleDeclarationError(
                    f"{where} must declare PRICE, a tuple of price bases ({', '.join(BASES)}), "
                    f"or () when its findings carry no price; got {d.price!r}"
                )
            if d.price != page.price:
                said = "no price:" if page.price is None else f"price: {', '.join(page.price) or 'none'}"
                raise RuleDeclarationError(f"{where} declares PRICE {d.price!r}; its page {page.path.name} says {said}")
            if d.fix not in FIXES:
                raise RuleDeclarationError(f"{where} must declare FIX, one of {', '.join(FIXES)}; got {d.fix!r}")
            if d.fix != page.fix:
                raise RuleDeclarationError(
                    f"{where} declares FIX {d.fix!r}; its page {page.path.name} says fix: {page.fix}"
                )
            found[d.code] = d
        unknown = [n for n in getattr(m, "PRICED_BY_WHAT_IF", ()) if n not in WHAT_IF_NAMES]
        if unknown:
            raise RuleDeclarationError(
                f"{m.__name__} declares PRICED_BY_WHAT_IF {unknown[0]!r}, not a --what-if "
                f"transformation ({', '.join(WHAT_IF_NAMES)})"
            )
        strangers = [c for c in getattr(m, "YIELDS_TO", ()) if c not in pages or c in codes_of(m)]
        if strangers:
            raise RuleDeclarationError(
                f"{m.__name__} declares YIELDS_TO {strangers[0]!r}: not another rule with a page"
            )
    return found


def disagreements(diagnostics: Iterable[Diagnostic], rules: dict[str, Declared]) -> list[str]:
    """What findings do that their rule's declaration does not allow: a price on a basis it does
    not declare, a fix stronger than its FIX (any fix where it declares none)."""
    out = []
    for d in diagnostics:
        rule = rules.get(d.code)
        if rule is None:
            continue
        if d.price is not None and d.price.basis not in rule.price:
            out.append(f"{d.code}: a price on the basis {d.price.basis!r}; {rule.module} declares PRICE {rule.price!r}")
        if d.fix is not None:
            done = Applicability(d.fix.applicability).value
            if _STRENGTH[done] > _STRENGTH[rule.fix]:
                out.append(f"{d.code}: a {done} fix; {rule.module} declares FIX {rule.fix!r}")
    return out
