"""AL611 unfused-optimizer on the --train step: fires on the for-loop and foreach optimizers,
priced from archlint's optimizer cost model on the basis the run has, silent when fused."""

from __future__ import annotations

import pytest
from torch import nn

import archlint
from archlint.devices import resolve
from archlint.diagnostics import Severity
from archlint.model.train.optimizer import parse, step_cost
from archlint.model.train.steptime import optimizer_ms


class MLP(nn.Module):  # 4.2M parameters at batch 8: the optimizer is most of the step's bytes
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(256, 256) for _ in range(4)])

    def forward(self, x):
        return self.layers(x)


class Conv(nn.Module):  # 224 parameters over a large activation: the optimizer is a sliver of the step
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        return self.conv(x)


def _run(model, shape, **options):
    a = archlint.analyze(model, shape, train=True, **options)
    model_doc = a.to_dict()["models"][0]
    return [d for d in a.result.diagnostics if d.code == "AL611"], model_doc


def test_fires_on_the_cpu_default_priced_by_the_bytes_fused_saves():
    (d,), doc = _run(MLP(), (8, 256), optimizer="adamw")
    opt = doc["totals"]["train"]["optimizer"]
    assert opt["implementation"] == "single-tensor" and "for-loop implementation" in d.message
    fused = step_cost(parse("adamw-fused"), opt["params"], opt["tensors"], 4)
    # AdamW's for-loop moves 20 tensor passes per element, the fused kernel 7
    assert opt["mac_bytes"] == 20 * 4 * opt["params"] and fused["mac_bytes"] == 7 * 4 * opt["params"]
    assert d.price.basis == "static" and d.price.mac_bytes_saved == 13 * 4 * opt["params"]
    assert d.price.saving_share == pytest.approx(13 * 4 * opt["params"] / doc["totals"]["train"]["step_mac_bytes"])
    assert d.severity is Severity.WARNING  # located at the step's optimizer, over the floor
    assert d.evidence["launches"] == 8 * 8 and d.evidence["fused_launches"] == 1
    assert "fused=True" in d.price.alternative and d.evidence["step_part"] == "optimizer"


def test_silent_when_fused_and_without_train():
    assert _run(MLP(), (8, 256), optimizer="adamw-fused")[0] == []
    assert [d for d in archlint.analyze(MLP(), (8, 256)).result.diagnostics if d.code == "AL611"] == []


def test_gpu_spec_prices_the_foreach_default_in_estimated_time():
    (d,), doc = _run(MLP(), (8, 256), optimizer="adam", device_spec="h100-sxm")
    train, est = doc["totals"]["train"], doc["estimate"]["train"]
    assert train["optimizer"]["implementation"] == "foreach" and "PyTorch's default on CUDA" in d.message
    fused = step_cost(parse("adam-fused"), train["optimizer"]["params"], train["optimizer"]["tensors"], 4)
    expected = est["optimizer_ms"] - optimizer_ms(fused, resolve("h100-sxm"), "float32", 4)
    assert d.price.basis == "estimated" and d.price.device == "h100-sxm"
    assert d.price.saving_ms == pytest.approx(expected) and expected > 0
    assert d.price.saving_share == pytest.approx(expected / est["step_ms"])
    assert d.evidence["fused_optimizer_ms"] < d.evidence["optimizer_ms"]


def test_sgd_foreach_saves_launches_not_bytes():
    # plain SGD reads p and g and writes p whichever way it runs: no static saving, so info
    (d,), _ = _run(MLP(), (8, 256), optimizer="sgd-foreach")
    assert d.price.mac_bytes_saved == 0 and d.severity is Severity.INFO
    assert "no saving" in d.evidence["verdict"]


def test_under_the_floor_is_info():
    (d,), _ = _run(Conv(), (16, 3, 64, 64), optimizer="adamw")
    assert 0 < d.price.saving_share < 0.01 and d.severity is Severity.INFO
    assert "under the 1% floor" in d.evidence["verdict"]


def test_an_optimizer_archlint_assumed_is_advice():
    (d,), _ = _run(MLP(), (8, 256))  # no optimizer= : archlint's default, AdamW
    assert d.severity is Severity.INFO and d.evidence["optimizer_assumed"]
    assert "name yours with --optimizer" in d.message
