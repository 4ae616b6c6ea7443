"""A finding the model repeats block for block is one finding listing the repeats, priced as
their sum (one fix, in the block's class, removes them all)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from archlint.diagnostics import Diagnostic, Price, Severity
from archlint.model.checks import _repeats

from ._graphs import findings, opgraph


class HandNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm, self.fc = HandNorm(d), nn.Linear(d, d)

    def forward(self, x):
        return x + self.fc(self.norm(x))


class Stack(nn.Module):
    def __init__(self, n, d=64):
        super().__init__()
        self.layers = nn.ModuleList(Block(d) for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def test_repeated_blocks_give_one_finding_priced_as_their_sum():
    one = [d for d in findings(opgraph(Stack(1), (2, 16, 64))) if d.code == "AL110"]
    six = [d for d in findings(opgraph(Stack(6), (2, 16, 64))) if d.code == "AL110"]
    assert len(one) == 1 and len(six) == 1
    (d,) = six
    assert d.evidence["repeats"] == [f"layers.{i}.norm" for i in range(6)]
    assert "and 5 more like it" in d.message and "layers.1.norm" in d.message
    assert d.price.mac_bytes_saved == 6 * one[0].price.mac_bytes_saved
    assert len(d.price.claims) == 6 * len(one[0].price.claims)


class TwoNorms(nn.Module):
    """Llama's layout: a hand-written norm before attention, another before the MLP, one at the end."""

    def __init__(self, n=3, d=64):
        super().__init__()
        self.layers = nn.ModuleList(nn.ModuleDict({"pre": HandNorm(d), "post": HandNorm(d)}) for _ in range(n))
        self.norm = HandNorm(d)

    def forward(self, x):
        for layer in self.layers:
            x = x + layer["post"](x + layer["pre"](x))
        return self.norm(x)


def test_a_finding_in_the_class_own_forward_is_one_wherever_the_class_sits():
    (d,) = [d for d in findings(opgraph(TwoNorms(), (2, 16, 64))) if d.code == "AL110"]
    assert len(d.evidence["repeats"]) == 7 and "norm" in d.evidence["repeats"]
    # a rule whose fix is per place (a conv's widths) keeps places apart
    found = [_finding("a.0.conv", 0.01), _finding("b.conv", 0.01)]
    assert len(_repeats.group(found, {"a.0.conv": "Conv2d", "b.conv": "Conv2d"})) == 2
    assert len(_repeats.group(found, {"a.0.conv": "Conv2d", "b.conv": "Conv2d"}, by_class=True)) == 1


def _finding(module: str, share: float, message: str | None = None) -> Diagnostic:
    return Diagnostic(
        "AL101",
        message or f"conv at {module} is unbalanced",
        Severity.INFO,
        module=module,
        price=Price.static("balanced", mac_bytes_saved=int(share * 1000), model_mac_bytes=1000, claims=(module,)),
    )


def test_repeats_are_one_rule_on_one_class_at_one_place_of_the_block():
    found = [
        _finding("stage1.0.conv", 0.004),
        _finding("stage2.3.conv", 0.006),
        _finding("head.conv", 0.004),
        _finding("stage1.1.conv", 0.004),
        _finding("stage1.2.proj", 0.004),
    ]
    classes = {
        "stage1.0.conv": "Conv2d",
        "stage2.3.conv": "Conv2d",
        "stage1.1.conv": "Conv2d",
        "head.conv": "Conv2d",
        "stage1.2.proj": "Conv2d",
    }
    grouped = _repeats.group(found, classes)
    # the costliest repeat leads its group; head.conv and the proj are other places
    assert [d.module for d in grouped] == ["stage2.3.conv", "head.conv", "stage1.2.proj"]
    assert grouped[0].evidence["repeats"] == ["stage2.3.conv", "stage1.0.conv", "stage1.1.conv"]
    assert grouped[0].price.saving_share == pytest.approx(0.014)
    other = {**classes, "stage1.1.conv": "DeformConv2d"}  # another class at the same place: not a repeat
    assert len(_repeats.group(found, other)) == 4


def test_index_patterns():
    assert _repeats.pattern("layers.12.mlp at 0.8% of torch 2.4") == "layers.#.mlp at 0.8% of torch 2.4"
    assert _repeats.pattern("features.5.3.attn") == "features.#.#.attn"
    assert _repeats.path_pattern("features.denseblock3.denselayer12.conv1") == "features.denseblock#.denselayer#.conv#"
