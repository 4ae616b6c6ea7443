"""--tree with --train: each module's row shows the activations it keeps alive for backward (the
memory model's per_module_activations), summed into its ancestors like every other column."""

from __future__ import annotations

import io

import torch
from rich.console import Console
from torch import nn

import archlint
from archlint.report.tree import build, print_tree


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(64, 256), nn.Linear(256, 64)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(3))
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def _model(**options):
    return archlint.analyze(Net(), torch.randn(32, 64), **options).result.models[0]


def test_each_module_sums_the_activations_its_ops_keep():
    m = _model(train=True)
    kept = m.memory.per_module_activations
    root = build(m, depth=3)
    assert root.activation_bytes == sum(kept.values()) == m.memory.activations_bytes
    block = root.children["blocks"].children["0"]
    # relu's output (fc2's saved input, 32×256 fp32) and the residual sum (the next fc1's input)
    assert block.activation_bytes == sum(b for p, b in kept.items() if p == "blocks.0" or p.startswith("blocks.0."))
    assert block.activation_bytes == 32 * 256 * 4 + 32 * 64 * 4
    assert root.children["blocks"].activation_bytes == 3 * block.activation_bytes
    folded = build(m, depth=1)  # below --depth: folded into the ancestor
    assert folded.children["blocks"].activation_bytes == 3 * block.activation_bytes


def _printed(m) -> str:
    out = io.StringIO()
    print_tree(m, Console(file=out, width=200), depth=2)
    return out.getvalue()


def test_the_column_shows_with_train_only():
    trained = _printed(_model(train=True))
    assert "activations" in trained and "kept alive for backward" in trained and "41 KB" in trained
    assert "activations" not in _printed(_model())
