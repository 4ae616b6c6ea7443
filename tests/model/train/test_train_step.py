"""--train end to end: the JSON fields (and their absence without --train), the optimizer's
costs per implementation, the estimate and the measured step, the CLI's options."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import archlint
from archlint import UsageError
from archlint.model.train.optimizer import parse, step_cost

REPO = Path(__file__).resolve().parents[3]
NEW_LAYER_KEYS = {"flops_backward", "mac_bytes_backward", "backward_terms"}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.fc(y.mean((2, 3)))


def _doc(**options) -> dict:
    return archlint.analyze(Net(), torch.randn(2, 3, 8, 8), **options).to_dict()["models"][0]


def test_a_forward_run_has_none_of_the_training_fields():
    model = _doc()
    assert model["phase"] is None and model["mode"] == "eval"
    assert "train" not in model["totals"] and "memory" not in model
    assert all(not NEW_LAYER_KEYS & set(layer) for layer in model["layers"])


def test_train_json_carries_the_step():
    model = _doc(train=True)
    assert model["phase"] == "train" and model["mode"] == "train"
    t = model["totals"]["train"]
    assert t["forward_flops"] == model["totals"]["flops"]
    conv = next(layer for layer in model["layers"] if layer["kind"] == "conv")
    fc = next(layer for layer in model["layers"] if layer["kind"] == "linear")
    assert set(conv["backward_terms"]) == {"grad_weight", "grad_bias"}  # the raw input needs no gradient
    assert conv["flops_backward"] == conv["flops"]
    assert set(fc["backward_terms"]) == {"grad_input", "grad_weight", "grad_bias"}
    assert fc["flops_backward"] == 2 * fc["flops"]
    assert t["backward_flops"] == sum(layer["flops_backward"] for layer in model["layers"])
    params = sum(p.numel() for p in Net().parameters())
    assert t["trainable_params"] == params and t["frozen_params"] == 0
    assert t["optimizer"]["name"] == "adamw" and t["optimizer_flops"] == 11 * params
    assert t["step_flops"] == t["forward_flops"] + t["backward_flops"] + t["loss_flops"] + t["optimizer_flops"]
    assert any("optimizer adamw (the default" in n for n in model["notes"])
    if importlib.util.find_spec("archlint.model.train.memory") is None:
        assert "memory" not in model  # no memory model in this build: no key pretending
    else:
        assert model["memory"]["peak_bytes"] > model["memory"]["params_bytes"] > 0


def test_optimizer_costs_per_implementation():
    p, n, s = 1000, 4, 4
    plain, foreach, fused = (step_cost(parse(f"adam{v}"), p, n, s) for v in ("", "-foreach", "-fused"))
    assert plain["flops"] == foreach["flops"] == fused["flops"] == 10 * p
    assert plain["mac_bytes"] == foreach["mac_bytes"] == 18 * p * s  # 7 kernels' reads and writes
    assert fused["mac_bytes"] == 7 * p * s  # read p, g, m, v; write p, m, v
    assert plain["launches"] == 7 * n and foreach["launches"] == 7 and fused["launches"] == 1
    assert plain["state_bytes"] == 2 * p * s
    assert step_cost(parse("adamw"), p, n, s)["flops"] == 11 * p  # the decoupled weight decay
    sgd = step_cost(parse("sgd"), p, n, s)
    assert (sgd["flops"], sgd["mac_bytes"], sgd["state_bytes"]) == (p, 3 * p * s, 0)
    assert step_cost(parse("sgd-momentum-fused"), p, n, s)["mac_bytes"] == 5 * p * s
    assert step_cost(parse("adam"), p, n, s, cuda=True)["implementation"] == "foreach"  # torch's CUDA default


def test_a_bad_optimizer_is_a_usage_error():
    with pytest.raises(UsageError, match="adamw\\[-foreach\\|-fused\\]"):
        archlint.analyze(Net(), torch.randn(2, 3, 8, 8), train=True, optimizer="lion")


def test_step_estimate_on_a_device_spec():
    model = _doc(train=True, device_spec="h100-sxm")
    e = model["estimate"]["train"]
    assert e["forward_ms"] == model["estimate"]["latency_ms"]
    assert e["step_ms"] == pytest.approx(e["forward_ms"] + e["backward_ms"] + e["loss_ms"] + e["optimizer_ms"])
    assert e["backward_ms"] > 0 and 0 < e["mfu"] < 1
    assert model["totals"]["train"]["optimizer"]["implementation"] == "foreach"  # a GPU spec: torch's default


def test_measured_step_leaves_the_model_as_it_was():
    net = Net()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    a = archlint.analyze(net, torch.randn(2, 3, 8, 8), train=True, latency=True, warmup=1, repeat=2)
    m = a.model.totals.train.measured
    assert m["runs"] == 2 and all(m[k] > 0 for k in ("forward_ms", "backward_ms", "optimizer_ms", "step_ms"))
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    assert all(p.grad is None for p in net.parameters())


def test_cli_train_text_and_options():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "archlint",
            "examples/nets.py:TinyNet",
            "--input-shape",
            "2,3,32,32",
            "--train",
            "--optimizer",
            "sgd-momentum-foreach",
            "--loss",
            "sum",
            "--top",
            "0",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert "training step: optimizer sgd-momentum-foreach, loss sum" in proc.stdout
    assert "mode train" in proc.stdout and "backward" in proc.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "archlint", "examples/nets.py:TinyNet", "--train", "--optimizer", "adamx"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert bad.returncode == 2 and "adamx" in bad.stderr


def test_json_of_the_cli_train_run():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "archlint",
            "examples/nets.py:TinyNet",
            "--input-shape",
            "2,3,32,32",
            "--train",
            "--output-format",
            "json",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    model = json.loads(proc.stdout)["models"][0]
    assert model["phase"] == "train" and model["totals"]["train"]["backward_flops"] > 0


def test_memory_budget_sizes():
    from archlint.train_names import parse_size

    assert parse_size("24GB") == 24 * 10**9 and parse_size("16GiB") == 16 * 2**30
    assert parse_size("8000MB") == 8 * 10**9 and parse_size("1.5 GB") == 1_500_000_000 and parse_size("512B") == 512
    with pytest.raises(UsageError, match="has no unit; did you mean 512GB or 512GiB"):  # issue 38: was 512 bytes
        parse_size(512)
    for bad in ("", "24 parsecs", "-1GB", "0"):
        with pytest.raises(UsageError, match="give a size like 24GB"):
            parse_size(bad)
    settings = archlint.api.settings_for(memory_budget="2GB")
    assert settings.train and settings.mode == "train" and settings.memory_budget == 2 * 10**9


class _ReturnsItsLoss(nn.Module):
    """Returns its own loss beside the logits, as a Hugging Face model given labels does."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(8, 5)

    def forward(self, x, y):
        logits = self.head(x)
        return {"loss": nn.functional.cross_entropy(logits, y), "logits": logits}


def test_a_model_s_own_loss_is_said_as_such_in_text_html_and_notes():
    # The step takes the model's own loss alone (out.loss.backward()); the training table's header
    # and the step's note said "loss mean of the outputs" beside a note saying the opposite.
    import io

    from rich.console import Console

    from archlint.report.train_html import train_section
    from archlint.report.train_table import print_step

    model = archlint.analyze(
        _ReturnsItsLoss(), (torch.randn(4, 8), torch.randint(0, 5, (4,))), train=True, loss="sum", quiet=True
    ).model
    assert model.totals.train.loss["name"] == "own"
    out = io.StringIO()
    print_step(model, Console(file=out, width=200))
    header = out.getvalue().splitlines()[0]
    assert "loss the model's own" in header and "of the outputs" not in header
    assert "loss the model&#x27;s own" in train_section(model) and "of the outputs" not in train_section(model)
    (said,) = [n for n in model.notes if n.startswith("training step (--train)")]
    assert "loss the model's own" in said and "(--loss sum does not apply)" in said and "of the outputs" not in said


class _DetachedLoss(nn.Module):
    """Returns a `loss` without a gradient (kept for logging, `loss.detach()`) beside its logits:
    `out.loss.backward()` would fail, so the step trains on the mean of the outputs that carry one."""

    def __init__(self, detached: bool):
        super().__init__()
        self.head, self.detached = nn.Linear(8, 5), detached

    def forward(self, x, y):
        logits = self.head(x)
        loss = nn.functional.cross_entropy(logits, y)
        return {"loss": loss.detach() if self.detached else loss, "logits": logits}


@pytest.mark.parametrize("detached", [False, True])
def test_the_flops_the_memory_model_and_the_timed_step_take_the_same_loss(detached):
    # --train --latency: the timed step's method said "the model's own loss" whenever the output had
    # a floating-point `loss`, and so did the memory model's label, while the memory model's step
    # (and the FLOPs) backpropagated the outputs that carry a gradient where the loss carries none
    analysis = archlint.analyze(
        _DetachedLoss(detached),
        (torch.randn(4, 8), torch.randint(0, 5, (4,))),
        train=True,
        latency=True,
        warmup=1,
        repeat=1,
        quiet=True,
    )
    train = analysis.model.totals.train
    assert (train.loss["name"] == "own") is not detached
    (said,) = [n for n in analysis.notes if n.startswith("training step (--train)")]
    assert ("loss the model's own" in said) is not detached
    assert ("the model's own" in train.measured["method"]) is not detached
    assert ("mean of the outputs" in train.measured["method"]) is detached
    label = analysis.model.memory.loss  # the memory model's: what its step backpropagated
    assert label.startswith("the loss the model returns itself") is not detached
