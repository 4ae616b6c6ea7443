"""Capture: every strategy gives the same OpGraph content; the model is left exactly as it was."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest
import torch
import torchvision
from torch import nn

from archlint.config import Settings
from archlint.model.analyze import analyze_model
from archlint.model.capture import Replay

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
from nets import TinyNet, TinyTransformer, Unused  # noqa: E402

STRATEGIES = ("fx", "export", "dispatch")


def _settings(strategy=None, mode="eval") -> Settings:
    s = Settings()
    s.strategy, s.mode = strategy, mode
    return s


def _summary(graph, result):
    ops = [(layer.kind, layer.module) for layer in result.layers]
    return Counter(ops), result.totals.flops, result.totals.mac_bytes, result.totals.params


MODELS = {
    "resnet18": (lambda: torchvision.models.resnet18(), (1, 3, 64, 64)),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(), (1, 3, 64, 64)),
    "tiny_transformer": (lambda: TinyTransformer(), None),
}


@pytest.mark.parametrize("name", MODELS)
def test_strategies_agree(name):
    build, shape = MODELS[name]
    torch.manual_seed(0)
    model = build().eval()
    inputs = (torch.randn(shape),) if shape else TinyTransformer.example_inputs()
    summaries = {}
    for strategy in STRATEGIES:
        graph, result = analyze_model(model, inputs, _settings(strategy))
        assert result.strategy == strategy
        summaries[strategy] = _summary(graph, result)
        assert result.totals.unknown_ops == 0
        replay = graph.graph["replay"]
        if strategy == "dispatch":
            assert replay is None
        else:  # the latency engineer times each OpGraph node by its fx node in the replay graph
            names = {n.name for n in replay.graph_module.graph.nodes}
            assert {layer.name for layer in result.layers} <= names
            with torch.no_grad():
                assert torch.allclose(replay.graph_module(*inputs), model(*inputs), atol=1e-5)
    assert summaries["fx"] == summaries["export"] == summaries["dispatch"]


def test_transformer_counts_attention_and_sdpa():
    graph, result = analyze_model(TinyTransformer().eval(), TinyTransformer.example_inputs())
    attention = [layer for layer in result.layers if layer.kind == "attention"]
    # 2 layers × (nn.MultiheadAttention + F.scaled_dot_product_attention)
    assert (
        sorted(layer.op for layer in attention)
        == ["F.scaled_dot_product_attention"] * 2 + ["nn.MultiheadAttention"] * 2
    )
    b, n, d, h = 2, 16, 64, 4
    mha = next(layer for layer in attention if layer.op == "nn.MultiheadAttention")
    assert mha.flops == 4 * b * n * d * d + 2 * b * n * n * d
    sdpa = next(layer for layer in attention if layer.op != "nn.MultiheadAttention")
    assert sdpa.flops == 2 * b * h * n * n * (d // h)


def test_graph_attributes_for_other_engineers():
    model = Unused().eval()
    graph, _ = analyze_model(model, (torch.randn(2, 8),))
    g = graph.graph
    assert g["strategy"] == "fx" and isinstance(g["replay"], Replay)
    names = {n.name for n in g["replay"].graph_module.graph.nodes}
    assert set(graph.nodes) <= names  # OpGraph node names are fx node names: replay can time each
    assert g["modules"]["spare"]["type"] == "Linear" and g["modules"]["spare"]["params"] == 72
    assert g["modules"][""]["file"].endswith("nets.py") and isinstance(g["modules"][""]["line"], int)
    assert "used" in g["reached_modules"] and "spare" not in g["reached_modules"]
    assert sorted(g["unused_params"]) == ["spare.bias", "spare.weight"]
    replayed = g["replay"].graph_module(torch.ones(2, 8))  # runs on the real modules
    assert torch.equal(replayed, model(torch.ones(2, 8)))


class _Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) * torch.tensor([1.0, 2.0, 3.0, 4.0])  # fx: a get_attr of _tensor_constant0


def test_replay_of_a_tensor_made_in_forward_leaves_the_model_alone():
    # The replay is built after the capture, when sandbox.preserved has taken the tracer's
    # _tensor_constant0 off the model again: the build failed on it (--latency fell back to hooks).
    model = _Scaled().eval()
    attributes = dict(model.__dict__)
    graph, _ = analyze_model(model, (torch.randn(2, 4),))
    assert model.__dict__ == attributes
    gm = graph.graph["replay"].graph_module
    assert any(n.op == "get_attr" and n.target == "_tensor_constant0" for n in gm.graph.nodes)
    assert gm.lin is model.lin and gm.training is False
    x = torch.randn(2, 4)
    with torch.no_grad():
        assert torch.equal(gm(x), model(x))
    assert model.__dict__ == attributes


class _ScaledAttribute(nn.Module):
    """A leaf called (`lin`, call_module) whose own attribute the forward also reads (`lin.extra`,
    get_attr), and a tensor made in forward: the replay's build then assigned `lin.extra` onto the
    user's `lin` (fx's dict form), raising a KeyError on a plain attribute (a buffer, re-registered)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.lin.extra = torch.full((4,), 3.0)

    def forward(self, x):
        return (self.lin(x) + self.lin.extra) * torch.tensor(2.0)


def test_replay_of_a_module_and_its_attribute_leaves_the_model_alone():
    model = _ScaledAttribute().eval()
    attributes, own = dict(model.__dict__), dict(vars(model.lin))
    graph, _ = analyze_model(model, (torch.randn(2, 4),))
    gm = graph.graph["replay"].graph_module
    assert gm.lin is model.lin and model.__dict__ == attributes and vars(model.lin) == own
    x = torch.randn(2, 4)
    with torch.no_grad():
        assert torch.equal(gm(x), model(x))


def test_dispatch_has_no_replay_and_names_modules():
    graph, result = analyze_model(TinyNet().eval(), (torch.randn(1, 3, 32, 32),), _settings("dispatch"))
    assert graph.graph["replay"] is None
    assert {layer.module for layer in result.layers if layer.kind == "conv"} == {
        "stem.0",
        "block1.conv1",
        "block1.conv2",
        "block2.conv1",
        "block2.conv2",
    }


def _state(model: nn.Module):
    return (
        {k: v.clone() for k, v in model.state_dict(keep_vars=True).items()},
        {n: m.training for n, m in model.named_modules()},
        {n: p.requires_grad for n, p in model.named_parameters()},
        {n: id(p) for n, p in model.named_parameters()},
    )


def _assert_same(before, after):
    state0, training0, grad0, ids0 = before
    state1, training1, grad1, ids1 = after
    assert state0.keys() == state1.keys()
    for key in state0:
        assert torch.equal(state0[key], state1[key]), key
        assert state1[key].device.type == "cpu", key
    assert training0 == training1 and grad0 == grad1 and ids0 == ids1


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("mode", ["eval", "train"])
def test_model_left_untouched(strategy, mode):
    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v2()
    model.train()
    model.features[0].eval()  # mixed flags must come back exactly
    model.classifier[1].weight.requires_grad_(False)
    model.features[1].conv[2].running_mean.add_(0.5)  # BatchNorm running stats not at their init
    before = _state(model)
    analyze_model(model, (torch.randn(2, 3, 32, 32),), _settings(strategy, mode))
    _assert_same(before, _state(model))
    assert model.features[1].conv[2].num_batches_tracked.item() == 0


def test_train_mode_counts_batchnorm_as_training():
    model = TinyNet()
    _, eval_result = analyze_model(model, (torch.randn(1, 3, 32, 32),), _settings(mode="eval"))
    _, train_result = analyze_model(model, (torch.randn(1, 3, 32, 32),), _settings(mode="train"))
    norms = lambda r: sum(layer.flops for layer in r.layers if layer.kind == "norm")  # noqa: E731
    assert norms(train_result) == norms(eval_result) * 5 // 2  # fvcore: 5 vs 2 per element
