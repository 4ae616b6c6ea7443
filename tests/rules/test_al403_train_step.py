"""AL403 (a CUDA training loop without autocast) priced on the training step when the run has one
(--train): the device spec's estimate of the whole step under autocast (forward and backward in
16 bits, the optimizer in float32), else the what-if's forward speed-up applied to the measured
step's forward and backward; never the forward alone where the step is known."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch
from torch import nn

from archlint.cli import main
from archlint.code.checks.autocast import price_with_models as link_code
from archlint.config import Settings
from archlint.devices import resolve
from archlint.diagnostics import Diagnostic
from archlint.model.analyze import analyze_model
from archlint.model.speedups.precision import autocast_estimate, autocast_step_estimate
from archlint.result import ModelResult, Totals, WhatIf
from archlint.train_result import TrainStep
from tests.whatif.autocast_project import MODEL, TRAIN


def test_train_run_prices_al403_on_the_estimated_step_without_a_what_if(tmp_path, capsys):
    (tmp_path / "model.py").write_text(textwrap.dedent(MODEL))
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN.format(module="model")))
    code = main(
        [
            str(tmp_path / "train.py"),
            f"{tmp_path}/model.py:Net",
            "--input-shape",
            "16,3,64,64",
            "--train",
            "--optimizer",
            "sgd",
            "--device-spec",
            "l4",
            "--output-format",
            "json",
        ]
    )
    out = capsys.readouterr()
    assert code in (0, 1), out.err
    data = json.loads(out.out)
    step = data["models"][0]["estimate"]["train"]
    forward = data["models"][0]["estimate"]
    half = step["autocast"]
    (d,) = [d for d in data["diagnostics"] if d["code"] == "AL403"]
    price = d["price"]
    assert price["basis"] == "estimated" and price["device"] == "l4"
    assert price["saving_ms"] == pytest.approx(step["step_ms"] - half["step_ms"])
    assert price["saving_share"] == pytest.approx(1 - half["step_ms"] / step["step_ms"])
    assert price["share_of"] == "the training step's estimated time"
    assert "on the training step of" in price["alternative"] and "backward" in price["alternative"]
    # forward and backward both gain: more than the forward's saving alone
    assert price["saving_ms"] > forward["latency_ms"] - forward["autocast"]["latency_ms"] > 0
    assert half["optimizer_ms"] == step["optimizer_ms"] and half["loss_ms"] == step["loss_ms"]
    assert "training step" in d["evidence"]["priced_on"]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 64, 3, padding=1)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


def _train_graph():
    from archlint.model.train.optimizer import parse
    from archlint.model.train.step import cost_step

    model = Net()
    graph, _ = analyze_model(model, (torch.randn(16, 3, 64, 64),), Settings(mode="train"))
    train = cost_step(graph, model, parse("sgd"), "mean", [], cuda=True)
    return graph, train


def test_step_estimate_runs_the_backward_in_16_bits_and_keeps_the_optimizer():
    from archlint.model.estimating.estimate import estimate_graph
    from archlint.model.train.steptime import estimate_step

    graph, train = _train_graph()
    spec = resolve("l4")
    step = estimate_step(graph, train, spec, estimate_graph(graph, spec)["latency_ms"])
    half = autocast_step_estimate(graph, spec, step)
    assert half["dtype"] == "bfloat16"
    assert half["forward_ms"] == pytest.approx(autocast_estimate(graph, spec)["latency_ms"])
    assert 0 < half["backward_ms"] < step["backward_ms"]
    assert half["optimizer_ms"] == step["optimizer_ms"]
    assert half["step_ms"] == pytest.approx(
        half["forward_ms"] + half["backward_ms"] + half["loss_ms"] + half["optimizer_ms"]
    )
    # the graph itself is left in float32, its backward terms unchanged
    assert all(op.get("itemsize", 4) == 4 for _, op in graph.nodes(data=True) if op.get("backward_terms"))
    assert (
        estimate_step(graph, train, spec, estimate_graph(graph, spec)["latency_ms"])["backward_ms"]
        == step["backward_ms"]
    )
    assert autocast_step_estimate(graph, resolve("cpu-example"), step) is None


def _train_model(measured: dict | None, spread=(1.4, 1.8), speedup=1.6) -> ModelResult:
    w = WhatIf(
        "bf16", True, "autocast", baseline_ms=10.0, transformed_ms=10.0 / speedup, spread=list(spread), speedup=speedup
    )
    totals = Totals()
    totals.train = TrainStep({"name": "mean"}, {"name": "adam"}, *[0] * 14, measured=measured)
    return ModelResult("m.py:Net", "fx", "cpu", "float32", [[1]], totals, [], what_if=[w], phase="train")


def test_measured_step_prices_forward_and_backward_from_the_forward_speedup():
    d = Diagnostic("AL403", "CUDA training loop runs in float32", file="train.py", line=1)
    link_code([d], [_train_model({"forward_ms": 10.0, "backward_ms": 20.0, "optimizer_ms": 5.0, "step_ms": 36.0})])
    assert d.price.basis == "estimated" and d.price.saving_ms == pytest.approx(30.0 * (1 - 1 / 1.6))
    assert d.price.saving_share == pytest.approx(30.0 * (1 - 1 / 1.6) / 36.0)
    assert "applied to the measured step's forward and backward" in d.price.alternative
    assert d.price.whole == "the training step's measured time"


def test_without_the_step_timed_the_forward_prices_it_and_says_so():
    d = Diagnostic("AL403", "CUDA training loop runs in float32", file="train.py", line=1)
    link_code([d], [_train_model(None)])
    assert d.price.saving_ms == pytest.approx(10.0 * (1 - 1 / 1.6))
    assert d.evidence["priced_on"].startswith("forward only")
    slow = Diagnostic("AL403", "CUDA training loop runs in float32", file="train.py", line=1)
    link_code([slow], [_train_model(None, spread=(0.9, 1.1), speedup=1.0)])
    assert slow.price is None and "measured no speed-up" in slow.message
