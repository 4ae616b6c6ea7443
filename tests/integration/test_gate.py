"""The CI gate on RunResult objects: budgets, metric regressions against a baseline, and
grandfathered findings. (End-to-end runs through the CLI are in test_gate_cli.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archlint import gate
from archlint.config import ModelSpec, Settings
from archlint.diagnostics import Diagnostic
from archlint.errors import UsageError
from archlint.result import ModelResult, RunResult, Totals

TARGET = "nets.py:Net"


def model(flops=1_000_000, mac=4_000_000, params=10_000, latency=None, target=TARGET) -> ModelResult:
    totals = Totals(flops=flops, mac_bytes=mac, params=params, latency_ms=latency)
    return ModelResult(
        target=target,
        strategy="fx",
        device="cpu",
        dtype="float32",
        input_shapes=[[1, 3, 32, 32]],
        totals=totals,
        layers=[],
    )


def model_finding(code="AL101", module="stem.conv", message="unbalanced") -> Diagnostic:
    return Diagnostic(code=code, message=message, target=TARGET, node=module.replace(".", "_"), module=module)


def run(*models: ModelResult, diagnostics=()) -> RunResult:
    return RunResult(models=list(models), diagnostics=list(diagnostics))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(root=tmp_path)


def failed(checks):
    return [g for g in checks if not g.passed]


# ── budgets ─────────────────────────────────────────────────────────────────────────────────────


def test_model_under_budget_passes(settings):
    spec = ModelSpec(TARGET, budgets={"max-flops": 2e6, "max-params": 20_000})
    checks = gate.evaluate(run(model()), [spec], settings)
    assert [g.check for g in checks] == ["max-flops", "max-params"]
    assert failed(checks) == []


def test_model_over_budget_fails_naming_the_budget_and_the_excess(settings):
    spec = ModelSpec(TARGET, budgets={"max-flops": 8e5, "max-mac": 1e7})
    (bad,) = failed(gate.evaluate(run(model(flops=1_000_000)), [spec], settings))
    assert bad.check == "max-flops" and bad.target == TARGET
    assert "exceeds budget 800K FLOPs by 25.0%" in bad.message
    assert bad.actual == 1_000_000 and bad.limit == 8e5


def test_latency_budget_without_measurement_fails_and_says_why(settings):
    spec = ModelSpec(TARGET, budgets={"max-latency-ms": 5})
    (bad,) = failed(gate.evaluate(run(model()), [spec], settings))
    assert bad.check == "max-latency-ms" and "--latency" in bad.message


# ── baselines: metrics ─────────────────────────────────────────────────────────────────────────


def saved(settings: Settings, result: RunResult, tmp_path: Path) -> Path:
    path = tmp_path / "baseline.json"
    settings.save_baseline = path
    checks = gate.evaluate(result, [ModelSpec(TARGET)], settings)
    assert failed(checks) == [], "saving a baseline accepts the current state"
    settings.save_baseline = None
    return path


def test_flops_growth_beyond_tolerance_fails_and_says_by_how_much(settings, tmp_path):
    settings.baseline = saved(settings, run(model(flops=1_000_000)), tmp_path)
    (bad,) = failed(gate.evaluate(run(model(flops=1_100_000)), [ModelSpec(TARGET)], settings))
    assert bad.check == "baseline:flops"
    assert bad.message == "FLOPs grew +10.0% over the baseline (1M FLOPs → 1.1M FLOPs, tolerance 2%)"


def test_growth_within_tolerance_and_shrinking_pass(settings, tmp_path):
    settings.baseline = saved(settings, run(model(flops=1_000_000, params=10_000)), tmp_path)
    checks = gate.evaluate(run(model(flops=1_015_000, params=5_000)), [ModelSpec(TARGET)], settings)
    assert failed(checks) == []
    assert {g.check for g in checks} >= {"baseline:flops", "baseline:mac_bytes", "baseline:params"}


def test_tolerance_from_config(settings, tmp_path):
    settings.baseline = saved(settings, run(model(mac=1_000_000)), tmp_path)
    settings.tolerance = {"mac_bytes": 0.5}
    assert failed(gate.evaluate(run(model(mac=1_400_000)), [ModelSpec(TARGET)], settings)) == []
    settings.tolerance = {"mac_bytes": 0.1}
    (bad,) = failed(gate.evaluate(run(model(mac=1_400_000)), [ModelSpec(TARGET)], settings))
    assert bad.check == "baseline:mac_bytes" and "+40.0%" in bad.message and "tolerance 10%" in bad.message


def test_latency_has_a_wider_default_tolerance_and_is_compared_only_when_measured(settings, tmp_path):
    settings.baseline = saved(settings, run(model(latency=10.0)), tmp_path)
    assert failed(gate.evaluate(run(model(latency=12.0)), [ModelSpec(TARGET)], settings)) == []
    (bad,) = failed(gate.evaluate(run(model(latency=13.0)), [ModelSpec(TARGET)], settings))
    assert bad.check == "baseline:latency_ms" and "+30.0%" in bad.message
    assert failed(gate.evaluate(run(model(latency=None)), [ModelSpec(TARGET)], settings)) == []


def test_a_model_missing_from_the_baseline_is_not_a_regression(settings, tmp_path):
    settings.baseline = saved(settings, run(model()), tmp_path)
    checks = gate.evaluate(run(model(target="other.py:Big", flops=10**12)), [ModelSpec("other.py:Big")], settings)
    assert failed(checks) == []
    assert any("not in the baseline" in g.message for g in checks)


# ── baselines: findings ────────────────────────────────────────────────────────────────────────


def test_old_findings_are_grandfathered_and_a_new_one_fails(settings, tmp_path):
    old = [model_finding("AL101", "stem.conv"), model_finding("AL104", "blocks.0.act")]
    settings.baseline = saved(settings, run(model(), diagnostics=old), tmp_path)

    # Same findings, other measured numbers in the message: all grandfathered, the gate passes.
    same = [model_finding("AL101", "stem.conv", "now 40% over"), model_finding("AL104", "blocks.0.act")]
    result = run(model(), diagnostics=same)
    assert failed(gate.evaluate(result, [ModelSpec(TARGET)], settings)) == []
    assert result.diagnostics == []

    # A change adds a finding: only the new one is left to report, and the gate says so.
    added = same + [model_finding("AL102", "blocks.1.conv")]
    result = run(model(), diagnostics=added)
    (bad,) = failed(gate.evaluate(result, [ModelSpec(TARGET)], settings))
    assert [d.code for d in result.diagnostics] == ["AL102"]
    assert bad.check == "baseline:new-findings" and "AL102 at nets.py:Net [blocks.1.conv]" in bad.message


def test_findings_are_counted_not_just_matched(settings, tmp_path):
    settings.baseline = saved(settings, run(model(), diagnostics=[model_finding()]), tmp_path)
    result = run(model(), diagnostics=[model_finding(), model_finding()])
    assert len(failed(gate.evaluate(result, [ModelSpec(TARGET)], settings))) == 1
    assert len(result.diagnostics) == 1


def test_code_finding_fingerprint_survives_moving_the_code(settings, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\nloader = DataLoader(ds, pin_memory=False)\n")
    finding = Diagnostic(code="AL301", message="pin_memory", file=str(script), line=2, column=10)
    settings.baseline = saved(settings, run(diagnostics=[finding]), tmp_path)

    script.write_text("import torch\n\n\ndef main():\n    loader = DataLoader(ds, pin_memory=False)\n")
    moved = Diagnostic(code="AL301", message="pin_memory", file=str(script), line=5, column=14)
    result = run(diagnostics=[moved])
    assert failed(gate.evaluate(result, [], settings)) == [] and result.diagnostics == []

    # The same rule on a different line of code is a new finding.
    script.write_text(script.read_text() + "    val = DataLoader(vs, pin_memory=False)\n")
    new = Diagnostic(code="AL301", message="pin_memory", file=str(script), line=6, column=11)
    result = run(diagnostics=[moved, new])
    (bad,) = failed(gate.evaluate(result, [], settings))
    assert result.diagnostics == [new] and "train.py:6" in bad.message


def test_baseline_file_is_deterministic_and_readable(settings, tmp_path):
    path = saved(
        settings, run(model(), diagnostics=[model_finding("AL104", "b"), model_finding("AL101", "a")]), tmp_path
    )
    data = json.loads(path.read_text())
    assert data["archlint_baseline"] == 1
    assert data["models"][TARGET]["flops"] == 1_000_000
    assert [f["code"] for f in data["findings"]] == ["AL101", "AL104"]
    assert data["findings"][0]["where"] == "nets.py:Net [a]"


@pytest.mark.parametrize("content", ["{not json", '{"models": {}}', "[]"])
def test_a_broken_baseline_is_a_usage_error(settings, tmp_path, content):
    path = tmp_path / "b.json"
    path.write_text(content)
    settings.baseline = path
    with pytest.raises(UsageError, match="b.json"):
        gate.evaluate(run(model()), [ModelSpec(TARGET)], settings)


def test_a_baseline_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    import os

    from archlint import gate
    from archlint.errors import UsageError

    path = tmp_path / "archlint-baseline.json"
    gate.write_baseline({"archlint_baseline": 1, "models": {}, "findings": []}, path)
    before = path.read_bytes()

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(UsageError, match="cannot write the baseline to .*No space left on device"):
        gate.write_baseline({"archlint_baseline": 1, "models": {"m": {}}, "findings": []}, path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp left
    with pytest.raises(UsageError, match="it is a folder"):
        gate.write_baseline({}, tmp_path)
