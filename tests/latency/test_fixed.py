"""Mechanical fixes measured end to end (archlint.model.fixed): the edits keep what the model
computes, leave the user's model alone, and a saving within the noise counts as none."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
import torch.fx as fx
from torch import nn

from archlint.model import fixed


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=True)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 4)
        self.bn1d = nn.BatchNorm1d(4)
        self.w, self.b = nn.Parameter(torch.randn(8, 8, 1, 1)), nn.Parameter(torch.randn(8))

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = nn.functional.conv2d(y, self.w, self.b)  # a functional conv with bias
        return self.bn1d(self.fc(y.mean((2, 3))))


def traced():
    torch.manual_seed(0)
    model = Net().eval()
    for bn in (model.bn, model.bn1d):  # statistics far from the identity, so a wrong fold shows
        bn.running_mean.uniform_(-1, 1), bn.running_var.uniform_(0.5, 2), bn.weight.data.uniform_(0.5, 2)
    return model, fx.symbolic_trace(model)


def edited(gm, edit):
    base = copy.deepcopy(gm)
    graph = copy.deepcopy(base.graph)
    out = fx.GraphModule(base, graph)
    ok = edit(out, {n.name: n for n in graph.nodes})
    graph.lint()
    out.recompile()
    return ok, out


def test_folding_keeps_the_outputs_and_removes_the_norms():
    model, gm = traced()
    ok, out = edited(gm, fixed.fold_norms([("conv", "bn"), ("fc", "bn1d")]))
    assert ok
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(out(x), model(x), rtol=1e-5, atol=1e-5)
    kinds = {type(out.get_submodule(n.target)) for n in out.graph.nodes if n.op == "call_module"}
    assert nn.BatchNorm2d not in kinds and nn.BatchNorm1d not in kinds
    assert isinstance(model.bn, nn.BatchNorm2d) and model.conv.bias is not None  # the user's model is as it was


def test_dropping_biases_module_and_functional():
    model, gm = traced()
    ok, out = edited(gm, fixed.drop_bias(["conv", "conv2d"]))
    assert ok
    calls = {n.name: n for n in out.graph.nodes}
    assert out.get_submodule(calls["conv"].target).bias is None
    assert calls["conv2d"].args[2] is None
    assert model.conv.bias is not None  # the user's conv keeps its bias
    assert torch.equal(out.get_submodule(calls["conv"].target).weight, model.conv.weight)


def test_an_edit_that_cannot_apply_says_so():
    _, gm = traced()
    assert edited(gm, fixed.fold_norms([("relu", "bn")]))[0] is False
    assert edited(gm, fixed.drop_bias(["nowhere"]))[0] is False
    pricer = SimpleNamespace(replay=None)
    assert fixed.saving_ms(pricer, "drop_bias", fixed.drop_bias(["conv"]), ("conv",)) is None


def test_paired_saving_counts_noise_as_none():
    assert fixed.paired_saving([10.0, 10.2, 9.9, 10.1, 10.0, 10.1], [10.1, 10.0, 10.0, 10.0, 10.1, 9.9]) == 0.0
    assert fixed.paired_saving([10.0, 10.2, 9.9, 10.1, 10.0, 10.1], [8.0, 8.1, 7.9, 8.0, 8.2, 8.0]) == pytest.approx(2.05, abs=0.1)


def test_the_fix_is_timed_once_per_pricer(monkeypatch):
    """The edited graph runs end to end (a float comes back: its size is benchmarks/price_honesty's
    business, not a timed test's) and is timed once per pricer and fix."""
    layers = []
    for _ in range(4):
        layers += [nn.Conv2d(8, 8, 1, bias=False), nn.BatchNorm2d(8)]
    gm = fx.symbolic_trace(nn.Sequential(*layers).eval())
    pairs = tuple((f"_{2 * i}", f"_{2 * i + 1}") for i in range(4))
    pricer = SimpleNamespace(replay=gm, device=torch.device("cpu"), args=(torch.randn(1, 8, 8, 8),), warmup=2, repeat=8)
    saving = fixed.saving_ms(pricer, "fold_norms", fixed.fold_norms(pairs), pairs)
    assert isinstance(saving, float)
    monkeypatch.setattr(fixed, "_measure", lambda *a: pytest.fail("timed twice"))
    assert fixed.saving_ms(pricer, "fold_norms", fixed.fold_norms(pairs), pairs) == saving
