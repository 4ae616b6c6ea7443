"""AL114 conv-not-channels-last: fp16/bf16 2-D convs on NCHW activations. Info without a time
basis; a warning only with a positive time saving: estimated for a GPU --device-spec (the
estimate's layout term), measured with --latency (each conv timed both ways) or with --what-if
channels-last (the whole model, repriced by model/links.py). Silent in float32 and when the
forward converts to channels_last itself."""

from __future__ import annotations

import json

import pytest
import torch

from archlint.cli import main
from archlint.config import Settings
from archlint.diagnostics import Diagnostic, Price, Severity
from archlint.model.analyze import analyze_model
from archlint.model.links import link
from archlint.result import WhatIf

from ._graphs import findings

NET = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, convert=False):
        super().__init__()
        self.convert = convert
        self.body = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 64, 3, padding=1),
        )

    def forward(self, x):
        if self.convert:
            x = x.contiguous(memory_format=torch.channels_last)
        return self.body(x)
"""


@pytest.fixture
def net(tmp_path):
    namespace: dict = {}
    exec(compile(NET, "net", "exec"), namespace)
    (tmp_path / "net.py").write_text(NET)
    return namespace["Net"], tmp_path / "net.py"


def al114(model, dtype, shape=(2, 3, 32, 32)):
    model = model.to(dtype).eval()
    graph, _ = analyze_model(model, (torch.randn(*shape, dtype=dtype),), Settings())
    return [d for d in findings(graph) if d.code == "AL114"]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_nchw_convs_are_info_without_a_time_basis(net, dtype):
    (d,) = al114(net[0](), dtype)
    assert d.severity is Severity.INFO and d.evidence["convs"] == 3
    assert d.price.basis == "static" and not d.price.pays and "--device-spec" in d.message


def test_silent_in_float32_and_when_forward_converts(net):
    assert al114(net[0](), torch.float32) == []
    assert al114(net[0](convert=True), torch.float16) == []


def _cli(capsys, path, *flags, shape="32,3,128,128", dtype="float16"):
    argv = [
        f"{path}:Net",
        "--input-shape",
        shape,
        "--dtype",
        dtype,
        "--select",
        "AL114",
        "--show-info",
        "--output-format",
        "json",
        "--exit-zero",
        *flags,
    ]
    assert main(argv) == 0, capsys.readouterr().err
    (d,) = json.loads(capsys.readouterr().out)["diagnostics"]
    return d


def test_gpu_spec_estimates_the_transposes(net, capsys):
    d = _cli(capsys, net[1], "--device-spec", "t4")
    # memory-bound 64-channel convs at 128×128: the transposes are a large share on a T4
    assert d["price"]["basis"] == "estimated" and d["price"]["saving_ms"] > 0 and d["severity"] == "warning"
    assert 0.01 < d["price"]["saving_share"] < 1
    d = _cli(capsys, net[1], "--device-spec", "cpu-example")  # a CPU spec has no layout term
    assert d["price"]["basis"] == "static" and d["severity"] == "info"


def test_latency_measures_each_conv_both_ways(net, capsys):
    d = _cli(capsys, net[1], "--latency", "--warmup", "1", "--repeat", "3", shape="1,3,16,16", dtype="bfloat16")
    p = d["price"]
    assert p["basis"] == "measured" and p["saving_ms"] is not None
    # a warning exactly when the measured saving is positive and at least 1% of the model
    assert (d["severity"] == "warning") == (p["saving_ms"] > 0 and p["saving_share"] >= 0.01)


@pytest.mark.parametrize("speedup, severity", [(1.25, Severity.WARNING), (0.95, Severity.INFO)])
def test_what_if_channels_last_reprices_and_judges(speedup, severity):
    d = Diagnostic(
        "AL114",
        "convs on NCHW",
        severity=Severity.INFO,
        price=Price.static("channels_last", mac_bytes_saved=None, model_mac_bytes=1000),
    )
    w = WhatIf(
        "channels-last",
        True,
        "model and 4-D inputs in torch.channels_last",
        baseline_ms=10.0,
        transformed_ms=10.0 / speedup,
        spread=[speedup, speedup],
        speedup=speedup,
    )
    link([d], [w], "cuda")
    assert d.price.basis == "measured" and d.price.saving_ms == pytest.approx(10.0 * (1 - 1 / speedup))
    assert d.severity is severity and d.evidence["what_if"]["name"] == "channels-last"
