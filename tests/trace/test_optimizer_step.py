"""AL520 optimizer-step-share on synthetic traces (tests/trace/scenarios.py: optimizer_step) and on a
real one (../shared/traces: a distributed Shampoo step, HTA's sampled training rank)."""

from __future__ import annotations

from pathlib import Path

import pytest

from archlint.config import Settings
from archlint.declarations import disagreements
from archlint.trace.checks import rules
from archlint.trace.command import lint_trace
from tests.trace.scenarios import optimizer_step

REAL = next(
    (p / "shared" / "traces" for p in Path(__file__).resolve().parents if (p / "shared" / "traces").is_dir()), None
)


def _found(path, **options):
    settings = Settings(rule_options={"AL520": options}) if options else Settings()
    _, diagnostics = lint_trace(path, settings)
    assert disagreements(diagnostics, rules()) == []
    return [d for d in diagnostics if d.code == "AL520"]


def test_an_unfused_adamw_step_is_said_with_the_fused_alternative(tmp_path):
    found = _found(optimizer_step(True).write(tmp_path / "t.json"))
    assert len(found) == 1
    d = found[0]
    assert d.evidence["optimizer"] == "AdamW" and d.evidence["calls"] == 4
    assert d.evidence["gpu_us_per_call"] == pytest.approx(1_500.0)  # 300 kernels × 5 µs
    assert d.evidence["share_of_step"] == pytest.approx(0.15)
    assert "fused=True" in d.message and d.price is None and d.severity.value == "info"


def test_the_fused_step_is_silent_and_the_option_moves_the_line(tmp_path):
    fused = optimizer_step(False).write(tmp_path / "fused.json")
    assert _found(fused) == []  # 0.3 ms of a 10 ms step: 3%
    assert len(_found(fused, min_share=0.02)) == 1


@pytest.mark.skipif(REAL is None, reason="the workplace's real traces are not beside this checkout")
def test_a_distributed_shampoo_step_on_a_real_trace():
    """HTA's sampled training rank (TorchRec, DDP, 2 ProfilerSteps): Shampoo.step launches 55.8 ms per
    call of a 615 ms step, nearly all inside the collectives it opens; no fused alternative is offered."""
    found = _found(REAL / "sampled_training_rank0.json.gz")
    assert len(found) == 1
    d = found[0]
    assert d.evidence["optimizer"] == "Shampoo"
    assert d.evidence["share_of_step"] == pytest.approx(0.0908, abs=0.001)
    assert d.evidence["self_gpu_us_per_call"] < 0.1 * d.evidence["gpu_us_per_call"]
    assert "fused=True" not in d.message and "not a torch.optim class" in d.message
    for other in ("a100_alexnet_inference", "mi250_minitoy_train"):  # no optimizer step; no steady step
        assert _found(REAL / f"{other}.json.gz") == []
