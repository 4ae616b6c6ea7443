"""Info findings (advice that does not pay enough on the basis at hand) never fail a run: not the
exit code, not a baseline's new-findings check."""

from __future__ import annotations

from pathlib import Path

from archlint import gate
from archlint.config import Settings
from archlint.diagnostics import Diagnostic, Price, Severity
from archlint.result import RunResult


def finding(code: str, severity: Severity, module: str) -> Diagnostic:
    price = Price.static("alternative", mac_bytes_saved=1, model_mac_bytes=1000)
    return Diagnostic(
        code=code, message="m", severity=severity, node=module, module=module, target="m.py:Net", price=price
    )


def test_only_warnings_and_errors_fail():
    assert not gate.fails([finding("AL103", Severity.INFO, "a")])
    assert gate.fails([finding("AL103", Severity.INFO, "a"), finding("AL101", Severity.WARNING, "b")])


def test_a_new_info_finding_does_not_fail_the_baseline():
    settings = Settings(root=Path("."))
    baseline = {"archlint_baseline": gate.BASELINE_VERSION, "models": {}, "findings": []}
    result = RunResult(diagnostics=[finding("AL103", Severity.INFO, "a")])
    checks = gate.grandfather(result, baseline, settings)
    assert all(c.passed for c in checks) and result.diagnostics  # still reported, never failing
    result = RunResult(diagnostics=[finding("AL101", Severity.WARNING, "b")])
    assert any(
        not c.passed and c.check == "baseline:new-findings" for c in gate.grandfather(result, baseline, settings)
    )
