"""Everything about a rule is declared in its file, and discovery checks it (issues 27 and 40): for
every family (model, code, trace) its code, severity, price basis and fix safety against its page
(archlint.declarations, one checker); for a model rule also its priority among overlapping findings
and the --what-if that fixes it. Alternatives and fixes are passed as functions imported by name,
so a typo fails at import."""

from __future__ import annotations

import ast
import inspect
from types import ModuleType

import pytest

from archlint import registry
from archlint.code import checks as code_checks
from archlint.declarations import (
    RuleDeclarationError,
    check_declarations,
    declared,
    disagreements,
)
from archlint.diagnostics import Severity
from archlint.model import checks as model_checks
from archlint.model.checks import check_modules, validated
from archlint.model.speedups import alternatives, fix_timing
from archlint.trace import checks as trace_checks

_MODEL = ("static", "measured", "estimated")


def _rule(name: str = "fake", **declared) -> ModuleType:
    m = ModuleType(f"archlint.model.checks.{name}")
    for key, value in {
        "CODE": "AL101",
        "SEVERITY": Severity.WARNING,
        "PRICE": _MODEL,
        "FIX": "none",
        "PRIORITY": 10,
        "check": lambda graph, options, ctx: [],
        **declared,
    }.items():
        setattr(m, key, value)
    return m


def _code_rule(**declared) -> ModuleType:
    m = ModuleType("archlint.code.checks.fake")
    for key, value in {
        "CODES": ("AL407",),
        "SEVERITY": Severity.INFO,
        "PRICE": (),
        "FIX": "unsafe",
        **declared,
    }.items():
        setattr(m, key, value)
    return m


def test_every_rule_module_declares_what_the_registry_checks():
    modules = check_modules()
    # one module per model page: adding a rule edits no count here (its file, its page, its tests)
    assert len(modules) == sum(1 for r in registry.catalog().values() if r.scope == "model") >= 21
    assert all(isinstance(m.PRIORITY, int) and isinstance(m.SEVERITY, Severity) for m in modules)
    assert {m.CODE: m.FIXED_BY for m in modules if hasattr(m, "FIXED_BY")} == {
        "AL205": "fold-bn",
        "AL106": "sdpa",
        "AL114": "channels-last",
    }
    assert [m.CODE for m in modules if getattr(m, "JUDGED_BY_WHAT_IF", False)] == ["AL114"]
    assert {
        m.__name__.rsplit(".", 1)[1]: m.PRICED_BY_WHAT_IF
        for m in code_checks.modules()
        if hasattr(m, "PRICED_BY_WHAT_IF")
    } == {"autocast": ("bf16", "fp16")}


def test_every_rule_of_every_family_is_declared_and_agrees_with_its_page():
    """One declaration per page: every rule page (but AL000, the parse error, which no rule
    reports) is declared by exactly one rule file of its family, and the shared checker passed it."""
    found = {**model_checks.rules(), **code_checks.rules(), **trace_checks.rules()}
    pages = {code for code in registry.catalog() if code != "AL000"}
    assert set(found) == pages
    for code, rule in found.items():
        page = registry.get(code)
        assert (rule.severity, rule.price, rule.fix) == (page.severity, page.price, page.fix), code


def test_a_well_declared_rule_passes():
    assert validated((_rule(), _rule("other", CODE="AL205", SEVERITY=Severity.INFO, PRIORITY=20, FIXED_BY="fold-bn")))


@pytest.mark.parametrize(
    "wrong, message",
    [
        (
            {"PRICE": ("static",)},
            r"declares PRICE \('static',\); its page AL407-zero-grad-set-to-none.md says price: none",
        ),
        ({"PRICE": ("guessed",)}, "must declare PRICE, a tuple of price bases"),
        ({"FIX": "safe"}, "declares FIX 'safe'; its page AL407-zero-grad-set-to-none.md says fix: unsafe"),
        ({"FIX": "maybe"}, "must declare FIX, one of none, safe, unsafe"),
        ({"SEVERITY": Severity.WARNING}, "AL407-zero-grad-set-to-none.md says info"),
        ({"CODES": ("AL501",)}, "AL501 has no code rule page"),  # a trace rule's page
        ({"PRICED_BY_WHAT_IF": ("bf16", "fp8")}, "PRICED_BY_WHAT_IF 'fp8'"),
        ({"YIELDS_TO": ("AL999",)}, "YIELDS_TO 'AL999'"),
    ],
)
def test_the_shared_checker_finds_a_code_rule_that_disagrees_with_its_page(wrong, message):
    assert check_declarations((_code_rule(),), ("code",))  # as declared, it agrees
    with pytest.raises(RuleDeclarationError, match=message):
        check_declarations((_code_rule(**wrong),), ("code",))


def test_a_rule_without_a_declaration_is_an_error():
    m = _code_rule()
    del m.FIX
    with pytest.raises(RuleDeclarationError, match="must declare FIX"):
        check_declarations((m,), ("code",))
    with pytest.raises(RuleDeclarationError, match="declares no CODE"):
        check_declarations((ModuleType("archlint.trace.checks.fake"),), ("trace",))


def test_a_rule_file_reporting_several_codes_declares_each():
    m = _code_rule(
        CODES=("AL301", "AL304"),
        SEVERITY={"AL301": Severity.WARNING, "AL304": Severity.WARNING},
        PRICE={"AL301": (), "AL304": ()},
        FIX={"AL301": "safe", "AL304": "none"},
    )
    assert [(d.code, d.fix) for d in declared(m)] == [("AL301", "safe"), ("AL304", "none")]
    assert check_declarations((m,), ("code",))
    m.FIX = {"AL301": "safe", "AL304": "safe"}
    with pytest.raises(RuleDeclarationError, match="AL304 declares FIX 'safe'"):
        check_declarations((m,), ("code",))


def test_a_model_rule_yields_by_declaration():
    """AL104 leaves the BatchNorms AL205 folds to it by its YIELDS_TO, not by reading AL205's
    enablement: the relation is declared, and discovery checks it names a rule."""
    heavy = next(m for m in check_modules() if m.CODE == "AL104")
    assert heavy.YIELDS_TO == ("AL205",)
    import inspect

    assert "enabled(" not in inspect.getsource(heavy)


def test_a_step_rule_is_found_elsewhere_and_declared_the_same_way():
    al610 = model_checks.rules()["AL610"]
    assert (al610.severity, al610.price, al610.fix) == (Severity.WARNING, ("static",), "none")
    assert "AL610" not in {m.CODE for m in check_modules()}  # run_checks does not run it
    m = _rule("steps", CODE="AL610", PRICE=("static",), FOUND_BY="the memory model")
    with pytest.raises(RuleDeclarationError, match="declares FOUND_BY: it has no check"):
        validated((m,))


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
    with pytest.raises(RuleDeclarationError, match="AL199 has no model or train rule page"):
        validated((_rule(CODE="AL199"),))
    with pytest.raises(RuleDeclarationError, match="AL403 has no model or train rule page"):
        validated((_rule(CODE="AL403", SEVERITY=Severity.INFO),))  # a code rule's page


def test_a_code_declared_twice_is_an_error():
    with pytest.raises(RuleDeclarationError, match="also declared by archlint.model.checks.fake"):
        validated((_rule(), _rule("other", PRIORITY=20)))


def test_judged_by_what_if_needs_a_fix():
    with pytest.raises(RuleDeclarationError, match="JUDGED_BY_WHAT_IF without FIXED_BY"):
        validated((_rule(JUDGED_BY_WHAT_IF=True),))


_TIMED = {"relative_saving": 1, "alternative_ms": 3, "fixed_ms": 2}  # the argument that names what is timed


def test_rules_pass_alternatives_and_fixes_as_names_imported_at_module_level():
    """A typo in an alternative's or a fix's name fails when the rule is imported, not only under
    --latency: every one a rule times is a module-level import from alternatives or fix_timing."""
    timed = set()
    for m in check_modules():
        tree = ast.parse(inspect.getsource(m))
        imported = {
            a.asname or a.name: node.module
            for node in tree.body
            if isinstance(node, ast.ImportFrom)
            for a in node.names
        }
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr in _TIMED:
                arg = call.args[_TIMED[func.attr]]
                assert isinstance(arg, ast.Name), (
                    f"{m.__name__}: {func.attr} is given {ast.unparse(arg)}, not a function"
                )
                assert imported.get(arg.id) in (
                    "archlint.model.speedups.alternatives",
                    "archlint.model.speedups.fix_timing",
                ), f"{m.__name__}: {arg.id} is not imported from archlint.model.speedups.alternatives or fix_timing"
                timed.add(getattr(alternatives, arg.id, None) or getattr(fix_timing, arg.id))
    assert len(timed) == 8  # five alternatives, three fixes: the walk found them all


# ── what the rules do, against what they declare (archlint.declarations.disagreements) ──────────

CODE_PAGES = sorted(code for code, r in registry.catalog().items() if r.scope == "code" and code != "AL000")


@pytest.mark.parametrize("code", CODE_PAGES)
def test_a_code_rule_s_example_carries_the_fix_its_page_declares(code):
    """The page's Example fires the rule (tests/code/test_code_rule_pages.py); here its finding's fix
    is what the page's `fix:` says: none for `none`, and for `safe`/`unsafe` a fix of exactly that
    safety (the strongest it makes: a safe rule may make an unsafe fix where it cannot prove more)."""
    from archlint.code.engine import lint_text
    from tests.code.test_code_rule_pages import block_under

    page = registry.get(code)
    found = [d for d in lint_text(block_under(page.page, "Example"), "example.py") if d.code == code]
    assert found and disagreements(found, code_checks.rules()) == []
    made = {d.fix.applicability.value if d.fix else "none" for d in found}
    strongest = max(made, key=("none", "unsafe", "safe").index)
    assert strongest == page.fix, f"{code}: page says fix: {page.fix}, its Example's findings carry {made}"


def test_the_disagreement_check_finds_a_price_or_a_fix_beyond_the_declaration():
    from archlint.diagnostics import Applicability, Diagnostic, Fix, Price

    rules = {**code_checks.rules(), **trace_checks.rules()}
    priced = Diagnostic("AL407", "m", Severity.INFO, price=Price.static("x", mac_bytes_saved=1, model_mac_bytes=10))
    safe = Diagnostic("AL407", "m", Severity.INFO, fix=Fix("y", Applicability.SAFE, ()))
    unsafe = Diagnostic("AL407", "m", Severity.INFO, fix=Fix("y", Applicability.UNSAFE, ()))
    any_fix = Diagnostic("AL501", "m", Severity.WARNING, fix=Fix("y", Applicability.UNSAFE, ()))
    assert disagreements([unsafe], rules) == []
    assert disagreements([priced, safe, any_fix], rules) == [
        "AL407: a price on the basis 'static'; archlint.code.checks.zero_grad declares PRICE ()",
        "AL407: a safe fix; archlint.code.checks.zero_grad declares FIX 'unsafe'",
        "AL501: a unsafe fix; archlint.trace.checks.input_bound declares FIX 'none'",
    ]


@pytest.mark.parametrize("code", sorted(c for c, r in registry.catalog().items() if r.scope == "model"))
def test_a_model_rule_s_example_prices_as_it_declares(code):
    import torch

    from tests.rules.test_rule_pages import snippet

    from ._graphs import findings, opgraph

    namespace: dict = {"__name__": f"declared_{code}"}
    exec(compile(snippet(registry.get(code).page, "Example"), f"{code}-example", "exec"), namespace)
    if "OPTIMIZER" in namespace:  # a training step: AL611's own tests price it
        pytest.skip("a --train example")
    dtype = getattr(torch, namespace.get("DTYPE", "float32"))
    graph = opgraph(
        namespace["Net"]().to(dtype), namespace["INPUT_SHAPE"], mode=namespace.get("MODE", "eval"), dtype=dtype
    )
    found = [d for d in findings(graph) if d.code == code]
    assert found and disagreements(found, model_checks.rules()) == []


@pytest.mark.parametrize(
    "code", sorted(c for c, r in registry.catalog().items() if r.scope == "trace" and c != "AL512")
)
def test_a_trace_rule_s_scenario_prices_as_it_declares(code, tmp_path):
    from archlint.config import Settings
    from archlint.trace.command import lint_trace
    from tests.trace.scenarios import SCENARIOS

    _, found = lint_trace(SCENARIOS[code](True).write(tmp_path / "t.json"), Settings())
    mine = [d for d in found if d.code == code]
    assert mine and disagreements(found, trace_checks.rules()) == []
