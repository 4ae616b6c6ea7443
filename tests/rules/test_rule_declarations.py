"""Everything about a model rule is declared in its module, and discovery checks it (issue 27):
its page, its severity, its priority among overlapping findings, the --what-if that fixes it.
Alternatives and fixes are passed as functions imported by name, so a typo fails at import."""

from __future__ import annotations

import ast
import inspect
from types import ModuleType

import pytest

from archlint.diagnostics import Severity
from archlint.model.speedups import alternatives, fix_timing
from archlint.model.checks import RuleDeclarationError, check_modules, validated
from archlint.model.speedups.links import code_fixes
from archlint.whatif_names import NAMES


def _rule(name: str = "fake", **declared) -> ModuleType:
    m = ModuleType(f"archlint.model.checks.{name}")
    for key, value in {"CODE": "AL101", "SEVERITY": Severity.WARNING, "PRIORITY": 10, **declared}.items():
        setattr(m, key, value)
    return m


def test_every_rule_module_declares_what_the_registry_checks():
    modules = check_modules()
    assert len(modules) == 20
    assert all(isinstance(m.PRIORITY, int) and isinstance(m.SEVERITY, Severity) for m in modules)
    assert {m.CODE: m.FIXED_BY for m in modules if hasattr(m, "FIXED_BY")} == {
        "AL205": "fold-bn", "AL106": "sdpa", "AL114": "channels-last"}
    assert [m.CODE for m in modules if getattr(m, "JUDGED_BY_WHAT_IF", False)] == ["AL114"]
    assert code_fixes() == {"AL403": ("bf16", "fp16")}


def test_a_well_declared_rule_passes():
    assert validated((_rule(), _rule("other", CODE="AL205", SEVERITY=Severity.INFO, PRIORITY=20, FIXED_BY="fold-bn")))


def test_a_fixed_by_naming_no_what_if_is_an_error():
    with pytest.raises(RuleDeclarationError, match="FIXED_BY 'fold-bnn', not a --what-if transformation"):
        validated((_rule(FIXED_BY="fold-bnn"),))


def test_two_rules_with_one_priority_is_an_error():
    with pytest.raises(RuleDeclarationError, match="PRIORITY 10, as AL101 does"):
        validated((_rule(), _rule("other", CODE="AL102", PRIORITY=10)))


def test_a_missing_priority_is_an_error():
    m = _rule()
    del m.PRIORITY
    with pytest.raises(RuleDeclarationError, match="must declare PRIORITY"):
        validated((m,))


def test_a_severity_other_than_the_page_is_an_error():
    with pytest.raises(RuleDeclarationError, match="AL205-unfused-conv-bn.md says info"):
        validated((_rule(CODE="AL205"),))  # the page says info, the module warning


def test_a_code_without_a_model_rule_page_is_an_error():
    with pytest.raises(RuleDeclarationError, match="AL199 has no model rule page"):
        validated((_rule(CODE="AL199"),))
    with pytest.raises(RuleDeclarationError, match="AL403 has no model rule page"):
        validated((_rule(CODE="AL403", SEVERITY=Severity.INFO),))  # a code rule's page


def test_a_code_declared_twice_is_an_error():
    with pytest.raises(RuleDeclarationError, match="also declared by archlint.model.checks.fake"):
        validated((_rule(), _rule("other", PRIORITY=20)))


def test_judged_by_what_if_needs_a_fix():
    with pytest.raises(RuleDeclarationError, match="JUDGED_BY_WHAT_IF without FIXED_BY"):
        validated((_rule(JUDGED_BY_WHAT_IF=True),))


def test_a_code_rule_priced_by_an_unknown_what_if_is_an_error():
    m = ModuleType("archlint.code.checks.fake")
    m.CODES, m.PRICED_BY_WHAT_IF = ("AL403",), ("bf16", "fp8")
    with pytest.raises(RuleDeclarationError, match="PRICED_BY_WHAT_IF 'fp8'"):
        code_fixes((m,))
    m.PRICED_BY_WHAT_IF = ("bf16",)
    assert code_fixes((m,)) == {"AL403": ("bf16",)} and set(m.PRICED_BY_WHAT_IF) <= set(NAMES)


_TIMED = {"relative_saving": 1, "alternative_ms": 3, "fixed_ms": 2}  # the argument that names what is timed


def test_rules_pass_alternatives_and_fixes_as_names_imported_at_module_level():
    """A typo in an alternative's or a fix's name fails when the rule is imported, not only under
    --latency: every one a rule times is a module-level import from alternatives or fix_timing."""
    timed = set()
    for m in check_modules():
        tree = ast.parse(inspect.getsource(m))
        imported = {a.asname or a.name: node.module for node in tree.body if isinstance(node, ast.ImportFrom)
                    for a in node.names}
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr in _TIMED:
                arg = call.args[_TIMED[func.attr]]
                assert isinstance(arg, ast.Name), f"{m.__name__}: {func.attr} is given {ast.unparse(arg)}, not a function"
                assert imported.get(arg.id) in ("archlint.model.speedups.alternatives", "archlint.model.speedups.fix_timing"), \
                    f"{m.__name__}: {arg.id} is not imported from archlint.model.speedups.alternatives or fix_timing"
                timed.add(getattr(alternatives, arg.id, None) or getattr(fix_timing, arg.id))
    assert len(timed) == 8  # five alternatives, three fixes: the walk found them all
