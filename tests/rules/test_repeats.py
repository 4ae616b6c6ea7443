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
    assert "the same in 5 more repeats" in d.message and "layers.1.norm" in d.message
    assert d.price.mac_bytes_saved == 6 * one[0].price.mac_bytes_saved
    assert len(d.price.claims) == 6 * len(one[0].price.claims)


def _finding(module: str, share: float, message: str | None = None) -> Diagnostic:
    return Diagnostic("AL101", message or f"conv at {module} is unbalanced", Severity.INFO, module=module,
                      price=Price.static("balanced", mac_bytes_saved=int(share * 1000), model_mac_bytes=1000,
                                         claims=(module,)))


def test_only_index_differences_make_repeats():
    found = [_finding("stage.0.conv", 0.004), _finding("stage.1.conv", 0.004), _finding("head.conv", 0.004),
             _finding("stage.2.conv", 0.004, "conv at stage.2.conv is unbalanced 1.5×")]
    grouped = _repeats.group(found)
    assert [d.module for d in grouped] == ["stage.0.conv", "head.conv", "stage.2.conv"]
    assert grouped[0].price.saving_share == pytest.approx(0.008)
    assert _repeats.pattern("layers.12.mlp at 0.8% of torch 2.4") == "layers.#.mlp at 0.8% of torch 2.4"
