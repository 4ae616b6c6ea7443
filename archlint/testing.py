"""Model budgets in a test suite: `assert_budget` fails a test with a readable account of what
exceeded what. With pytest, the `archlint_budget` fixture (archlint.pytest_plugin) does the same
and also honours `--archlint-baseline FILE` / `--archlint-save-baseline FILE`.

    from archlint.testing import assert_budget

    def test_net_stays_small():
        assert_budget(Net(), (1, 3, 224, 224), max_flops=2e9, max_params=12e6, forbid=["AL205"])
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from archlint.api import Analysis, analyze
from archlint.errors import UsageError


def assert_budget(
    model: Any,
    *inputs: Any,
    max_flops: float | None = None,
    max_mac: float | None = None,
    max_params: float | None = None,
    max_latency_ms: float | None = None,
    forbid: Iterable[str] = (),
    **options: Any,
) -> Analysis:
    """Analyze `model` (as `archlint.analyze`) and raise AssertionError listing every exceeded
    budget (`max_latency_ms` needs `latency=True`), every finding whose code starts with one of
    `forbid`, and, with `baseline=FILE`, every regression against the baseline. Returns the
    Analysis when all is within budget."""
    __tracebackhide__ = True  # pytest shows the user's call, not archlint's own source
    budgets = {"max_flops": max_flops, "max_mac": max_mac, "max_params": max_params, "max_latency_ms": max_latency_ms}
    forbid = forbidden_codes(forbid)  # checked before the model is analyzed: a typo is a usage error at once
    analysis = analyze(model, *inputs, **{k: v for k, v in budgets.items() if v is not None}, **options)
    raise_failures(analysis, forbid)
    return analysis


def raise_failures(analysis: Analysis, forbid: Iterable[str] = ()) -> None:
    """AssertionError saying what failed (over budget, forbidden findings, baseline regressions),
    one line per failure; nothing when all holds."""
    __tracebackhide__ = True
    problems = budget_failures(analysis, forbid)
    if problems:
        raise AssertionError(
            f"archlint: {analysis.model.target} {failure_headline(analysis, forbid)}:\n  " + "\n  ".join(problems)
        )


def failure_headline(analysis: Analysis, forbid: Iterable[str] = ()) -> str:
    """ "is over budget", "has forbidden finding AL205", "regressed against the baseline", joined."""
    failed = [g for g in analysis.result.gate if not g.passed]
    parts = []
    if any(not g.check.startswith("baseline") for g in failed):
        parts.append("is over budget")
    codes = sorted({d.code for d in _forbidden(analysis, forbid)})
    if codes:
        parts.append(f"has forbidden finding{'s' * (len(codes) > 1)} {', '.join(codes)}")
    if any(g.check.startswith("baseline") for g in failed):
        parts.append("regressed against the baseline")
    return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]


def _forbidden(analysis: Analysis, forbid: str | Iterable[str]) -> list:
    prefixes = forbidden_codes(forbid)
    return [d for d in analysis.findings if any(p == "ALL" or d.code.startswith(p) for p in prefixes)]


def forbidden_codes(forbid: str | Iterable[str]) -> list[str]:
    """`forbid` as the CLI's --select reads its codes: a code or prefix each (a comma list in one
    string too), ALL for every rule; an unknown one is a UsageError, as an unknown code given to
    `--select` is (a typo would forbid nothing and the budget would always pass)."""
    from archlint.config import check_selectors, split_codes

    items = [forbid] if isinstance(forbid, str) else list(forbid)
    if not all(isinstance(item, str) for item in items):
        raise UsageError(f"forbid= takes rule codes or prefixes, e.g. ['AL205', 'AL1'], got {forbid!r}")
    codes = [code for item in items for code in split_codes(item)]
    check_selectors(codes, "forbid=")
    return codes


def budget_failures(analysis: Analysis, forbid: Iterable[str] = ()) -> list[str]:
    """One line per failed budget or baseline check and per forbidden finding."""
    lines = [f"{g.check}: {g.message}" for g in analysis.result.gate if not g.passed]
    for d in _forbidden(analysis, forbid):
        where = d.module if d.module else d.target
        lines.append(f"forbidden {d.code} at {where}: {d.message}")
    return lines
