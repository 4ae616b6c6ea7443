"""Model rules: one module per rule (or rule family) in this package, found by discovery.

A check module defines
    CODE = "AL101"                      the rule it implements (its page is rules/AL101-*.md)
    OPTIONS = {"threshold": 0.1, ...}   its options with defaults (config/CLI override them); every
                                        rule also takes `min_saving_share`, the materiality floor
    def check(graph, options, ctx) -> Iterable[Diagnostic]
                                        each finding's severity is the rule's proposal (warning, or
                                        info where the advice changes the model); _verdict.judge
                                        decides for all rules whether a warning pays
    CHANGES_MODEL = True                (optional) its alternative computes something else (a new
                                        design, to retrain): its findings are info and say so
    SEVERITY = Severity.WARNING         the severity its findings are proposed at, as its page's front
                                        matter says (a finding may propose info where the advice does
                                        not apply as a fix; _verdict.judge then decides)
    PRIORITY = 130                      where findings of several rules name the same op, the lowest
                                        PRIORITY owns its saving (_verdict.settle): the most specific
                                        rule first; no two rules share one
    FIXED_BY = "fold-bn"                (optional) the --what-if transformation that is its fix
                                        (archlint.whatif_names): with --what-if, its result measured
                                        on the whole model prices the finding (archlint.model.links)
    JUDGED_BY_WHAT_IF = True            (optional, with FIXED_BY) the rule has no static saving: the
                                        what-if's measured saving makes the finding a warning or info
    CHANGES_MODEL = True                (optional) its alternative computes something else (a new
                                        design, to retrain): its findings are info and say so
    FIX_IN_CLASS = True                 (optional) the finding is its module's own forward: repeats
                                        are grouped by the module's class wherever it sits
    EAGER_RECHECK = True                (optional) a warning on a traced capture is checked again on
                                        the eager forward (archlint.model.eager)
    FOUND_BY = "..."                    (instead of check and PRIORITY) another part of the analysis
                                        finds it and calls the module's own functions (AL610: the
                                        --train step's memory model, archlint.model.stepped)
and never traces, times or prints: it is a pure function of the OpGraph (with costs) and options.
`ctx.pricer` is the measure layer's what-if interface (None without --latency). Rules build on
the package's shared helpers: _query (op queries, conv geometry, graph walking), _blocks
(fork/join and module blocks), _pricing (a finding's price and the timed alternatives behind it),
_locate (where a finding points); bytes are said as every output says them (archlint.units).

    PRICE, FIX                          as every rule declares them (archlint.declarations)
    YIELDS_TO = ("AL205",)              (optional) rules that own part of what it counts: when they
                                        run, it leaves that part to them (its check reads
                                        ctx.yielded_to, the ones that run)

Discovery checks every declaration when it imports the rules (RuleDeclarationError): what every
rule declares, against its page (archlint.declarations.check_declarations: a CODE without a page
in rules/ or declared twice, a SEVERITY, PRICE or FIX other than the page's), then a missing or
shared PRIORITY, a FIXED_BY that names no --what-if transformation. Adding a rule is one module
here and one page in rules/.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import networkx as nx

from archlint.config import Settings
from archlint.declarations import (
    Declared,
    RuleDeclarationError,
    check_declarations,
    discover,
)
from archlint.diagnostics import Diagnostic
from archlint.errors import UsageError
from archlint.model.checks import _query, _repeats, _verdict
from archlint.result import Estimate
from archlint.train_result import TrainStep
from archlint.whatif_names import NAMES as WHAT_IF_NAMES

SCOPES = ("model", "train")  # the pages of the rules here: the graph's and the training step's


@dataclass
class CheckContext:
    target: str
    settings: Settings
    pricer: Any = None  # archlint.model.timing.measure.Pricer when latency was measured
    estimate: Estimate | None = None  # --device-spec: models[].estimate; ops carry estimated_ms
    notes: list[str] = field(default_factory=list)  # rules that failed on this model (run_checks)
    train: TrainStep | None = None  # --train: totals.train, the step's costs (archlint.model.train.step)
    device_spec: Any = None  # --device-spec: the archlint.devices.DeviceSpec behind `estimate`
    # the rules the running rule declares it YIELDS_TO that run too (set by run_checks before each rule)
    yielded_to: frozenset[str] = frozenset()


@functools.cache
def _found() -> tuple[ModuleType, ...]:
    return validated(discover(__name__, __path__))


def check_modules() -> tuple[ModuleType, ...]:
    """The rules that check the graph (run_checks runs them)."""
    return tuple(m for m in _found() if not hasattr(m, "FOUND_BY"))


def rules() -> dict[str, Declared]:
    """code → its declaration (archlint.declarations), checked against its page: the graph's rules
    and those another part of the analysis finds (FOUND_BY: AL610, the training step's memory model)."""
    return check_declarations(_found(), SCOPES)


def validated(modules: tuple[ModuleType, ...]) -> tuple[ModuleType, ...]:
    """The rule modules, once each declaration is checked against its page and the others: what
    every rule declares (archlint.declarations), then what model rules add."""
    check_declarations(modules, SCOPES)
    priorities: dict[int, str] = {}
    for m in modules:
        where = f"{m.__name__}: {m.CODE}"
        if hasattr(m, "FOUND_BY"):  # found elsewhere (the step's memory model): no check, no op to own
            if hasattr(m, "check") or hasattr(m, "PRIORITY"):
                raise RuleDeclarationError(f"{where} declares FOUND_BY: it has no check() and no PRIORITY")
            continue
        if not callable(getattr(m, "check", None)):
            raise RuleDeclarationError(f"{where} has no check(graph, options, ctx) and declares no FOUND_BY")
        priority = getattr(m, "PRIORITY", None)
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise RuleDeclarationError(f"{where} must declare PRIORITY, a number (the lowest owns an op first)")
        if priority in priorities:
            raise RuleDeclarationError(
                f"{where} declares PRIORITY {priority}, as {priorities[priority]} does: one rule must own an op first"
            )
        priorities[priority] = m.CODE
        fix = getattr(m, "FIXED_BY", None)
        if fix is not None and fix not in WHAT_IF_NAMES:
            raise RuleDeclarationError(
                f"{where} declares FIXED_BY {fix!r}, not a --what-if transformation ({', '.join(WHAT_IF_NAMES)})"
            )
        if getattr(m, "JUDGED_BY_WHAT_IF", False) and fix is None:
            raise RuleDeclarationError(f"{where} declares JUDGED_BY_WHAT_IF without FIXED_BY: no what-if judges it")
    return modules


def run_checks(graph: nx.DiGraph, ctx: CheckContext) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    used: dict[str, dict] = {}
    classes = {path: info.get("type") for path, info in graph.graph.get("modules", {}).items()}  # for repeats
    for module in check_modules():
        if not ctx.settings.enabled(module.CODE):
            continue
        defaults = _verdict.with_floor(module.OPTIONS)
        options = used[module.CODE] = _typed(module.CODE, ctx.settings.options(module.CODE, defaults), defaults)
        ctx.yielded_to = frozenset(c for c in getattr(module, "YIELDS_TO", ()) if ctx.settings.enabled(c))
        try:
            mine = list(module.check(graph, options, ctx))
        except Exception as exc:  # one rule's bug must not cost the figures and the other rules
            if _strict():
                raise
            ctx.notes.append(
                f"rule {module.CODE} failed on this model and was skipped "
                f"({type(exc).__name__}: {str(exc)[:200]}); the other results stand; please report it"
            )
            continue
        # one finding for what the model repeats block for block (judged below on their sum)
        for d in _repeats.group(mine, classes, getattr(module, "FIX_IN_CLASS", False)):
            if getattr(module, "CHANGES_MODEL", False):
                d.evidence.setdefault("changes_model", True)
            if not ctx.settings.module_ignored(d.code, d.module):
                d.target = d.target or ctx.target
                found.append(d)
    settled = _verdict.settle(found, {m.CODE: m.PRIORITY for m in check_modules()})  # one op's saving, one finding
    model_mac = _query.module_mac(graph)
    for d in settled:
        _verdict.restate(d)  # the statement agrees with the final price
        _verdict.judge(d, used[d.code], ctx, model_mac)
    return sorted(settled, key=Diagnostic.sort_key)


def judge_repriced(graph: nx.DiGraph, diagnostics: list[Diagnostic], ctx: CheckContext) -> None:
    """The one materiality verdict again, for findings repriced after run_checks (a what-if timed
    their fix on the whole model: archlint.model.links)."""
    modules = {m.CODE: m for m in check_modules()}
    model_mac = _query.module_mac(graph)
    for d in diagnostics:
        module = modules.get(d.code)
        if module is None or "what_if" not in d.evidence:
            continue
        defaults = _verdict.with_floor(module.OPTIONS)
        _verdict.judge_again(d, _typed(d.code, ctx.settings.options(d.code, defaults), defaults), ctx, model_mac)


def _strict() -> bool:
    """In archlint's own test suite (its tests/conftest.py sets ARCHLINT_STRICT_RULES) a failing rule
    is a test failure, not a note. Not PYTEST_CURRENT_TEST: that is set in users' own suites too,
    where archlint_budget must keep the other rules' results."""
    return bool(os.environ.get("ARCHLINT_STRICT_RULES"))


def _fits(value: Any, default: Any) -> bool:
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, (int, float)):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, list):
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, type(default))


def _typed(code: str, options: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """Options checked against their defaults' types; a list option also takes "a,b" (from --option)."""
    out = {}
    for name, value in options.items():
        default = defaults[name]
        if isinstance(default, list) and isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not _fits(value, default):
            kind = {bool: "true or false", int: "a number", float: "a number", list: "a list of strings"}
            raise UsageError(f"{code}.{name} must be {kind.get(type(default), type(default).__name__)}, got {value!r}")
        out[name] = value
    return out
