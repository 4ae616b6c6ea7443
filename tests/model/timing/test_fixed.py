"""Mechanical fixes measured end to end (archlint.model.speedups.fix_timing): the edits keep what the model
computes, leave the user's model alone, and a saving within the noise counts as none."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from archlint.model.speedups import fix_timing


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


def net():
    torch.manual_seed(0)
    model = Net().eval()
    for bn in (model.bn, model.bn1d):  # statistics far from the identity, so a wrong fold shows
        bn.running_mean.uniform_(-1, 1), bn.running_var.uniform_(0.5, 2), bn.weight.data.uniform_(0.5, 2)
    return model


def edited(model, edit):
    out = fix_timing.tree_copy(model)
    return edit(out) is not None, out


def test_folding_keeps_the_outputs_and_removes_the_norms():
    model = net()
    ok, out = edited(model, fix_timing.fold_norms([("conv", "bn"), ("fc", "bn1d")]))
    assert ok
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(out(x), model(x), rtol=1e-5, atol=1e-5)
    assert not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in out.modules())
    # the user's model is as it was
    assert isinstance(model.bn, nn.BatchNorm2d) and isinstance(model.bn1d, nn.BatchNorm1d)
    assert model.conv.bias is not None and model.conv.weight.shape == (8, 3, 3, 3)


def test_dropping_a_bias_shares_the_weight_and_leaves_the_user_conv():
    model = net()
    ok, out = edited(model, fix_timing.drop_bias(["conv"]))
    assert ok
    assert out.conv.bias is None and out.conv.weight is model.conv.weight
    assert model.conv.bias is not None  # the user's conv keeps its bias
    assert out.w is model.w  # what the edit does not replace is shared, not copied
    out.conv.register_forward_pre_hook(lambda *_: None)
    assert not model.conv._forward_pre_hooks  # a hook set on the copy stays on the copy


def test_an_activation_becomes_identity_and_containers_are_refused():
    model = nn.Sequential(nn.Conv2d(3, 4, 1), nn.ReLU(), nn.Sequential(nn.ReLU()))
    ok, out = edited(model, fix_timing.to_identity(["1"]))
    assert ok and isinstance(out[1], nn.Identity) and isinstance(model[1], nn.ReLU)
    assert edited(model, fix_timing.to_identity(["2"]))[0] is False  # a container, not one op


def test_an_edit_that_cannot_apply_says_so():
    model = net()
    assert edited(model, fix_timing.fold_norms([("fc", "bn")]))[0] is False  # 4 features, 8 channels
    assert edited(model, fix_timing.fold_norms([("nowhere", "bn")]))[0] is False
    assert edited(model, fix_timing.drop_bias(["bn"]))[0] is False
    assert fix_timing.saving_ms(SimpleNamespace(model=None), fix_timing.drop_bias, ("conv",)) is None


class Shared(nn.Module):
    """One BatchNorm called after two convs: folding it into either would change the other."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.bn = nn.Conv2d(3, 8, 1), nn.Conv2d(3, 8, 1), nn.BatchNorm2d(8)
        self.w = nn.Parameter(torch.randn(8, 3, 1, 1))

    def forward(self, x):
        return self.bn(self.a(x)) + self.bn(self.b(x)) + nn.functional.conv2d(x, self.w)


def test_modules_that_ran_more_than_one_op_are_not_edited():
    from archlint.config import Settings
    from archlint.model.analyze import analyze_model
    from archlint.model.checks import _pricing
    from archlint.model.opgraph import ops

    graph, _ = analyze_model(Shared().eval(), (torch.randn(1, 3, 4, 4),), Settings())
    convs = {d.get("module"): name for name, d in ops(graph) if d["kind"] == "conv"}
    ctx = SimpleNamespace(pricer=SimpleNamespace(model=None))
    by_kind = {d["kind"]: name for name, d in ops(graph) if d.get("module") == "bn"}
    assert _pricing.fixed_ms(graph, ctx, fix_timing.fold_norms, [(convs["a"], by_kind["norm"])]) is None  # bn ran twice
    functional = next(name for name, d in ops(graph) if d["kind"] == "conv" and not d.get("module"))
    assert _pricing.fixed_ms(graph, ctx, fix_timing.drop_bias, [functional]) is None


def test_paired_saving_counts_noise_as_none():
    from archlint.model.timing.paired import judge

    noise = judge([10.0, 10.2, 9.9, 10.1, 10.0, 10.1], [10.1, 10.0, 10.0, 10.0, 10.1, 9.9], 0.0, max_pairs=6)
    assert noise.saving_ms == 0.0
    saving = judge([10.0, 10.2, 9.9, 10.1, 10.0, 10.1], [8.0, 8.1, 7.9, 8.0, 8.2, 8.0], 0.0, max_pairs=6)
    assert saving.saving_ms == pytest.approx(2.05, abs=0.1)


class ThroughAList(nn.Module):
    """Calls its layers through a plain list: an edit in the module tree never runs."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4)
        self.order = [self.conv, self.bn]

    def forward(self, x):
        for layer in self.order:
            x = layer(x)
        return x


def test_a_fix_the_forward_never_reaches_is_no_measurement():
    model = ThroughAList().eval()
    pricer = SimpleNamespace(
        model=model, device=torch.device("cpu"), args=(torch.randn(1, 3, 4, 4),), warmup=2, repeat=8, end_to_end_ms=1.0
    )
    assert fix_timing.saving_ms(pricer, fix_timing.fold_norms, (("conv", "bn"),)) is None


def test_the_fix_is_timed_once_per_pricer(monkeypatch):
    """The edited model runs end to end (a float comes back: its size is benchmarks/price_honesty's
    business, not a timed test's) and is timed once per pricer and fix."""
    layers = []
    for _ in range(4):
        layers += [nn.Conv2d(8, 8, 1, bias=False), nn.BatchNorm2d(8)]
    model = nn.Sequential(*layers).eval()
    pairs = tuple((str(2 * i), str(2 * i + 1)) for i in range(4))
    pricer = SimpleNamespace(
        model=model, device=torch.device("cpu"), args=(torch.randn(1, 8, 8, 8),), warmup=2, repeat=8, end_to_end_ms=1.0
    )
    saving = fix_timing.saving_ms(pricer, fix_timing.fold_norms, pairs)
    assert isinstance(saving, float)
    assert all(isinstance(m, nn.BatchNorm2d) for m in model[1::2])  # timed on a copy
    monkeypatch.setattr(fix_timing, "_measure", lambda *a: pytest.fail("timed twice"))
    assert fix_timing.saving_ms(pricer, fix_timing.fold_norms, pairs) == saving
