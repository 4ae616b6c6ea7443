"""AL115 log-of-softmax: fires on log(softmax) and log(sigmoid) (directly or through one epsilon
guard) whose probabilities are used only by the log; silent where they are used elsewhere, on the
fused ops, and on a log of something else. Checked against the declaration (price bases)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from archlint.config import Settings
from archlint.declarations import disagreements
from archlint.model.analyze import analyze_model
from archlint.model.checks import rules

from ._graphs import findings, opgraph


class Forward(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.head = nn.Linear(64, 1000)
        self.fn = fn

    def forward(self, x):
        return self.fn(self.head(x))


def _entropy(p):
    return -(p * p.log()).sum(-1)


def _kept(p):
    return p, torch.log(p)


FIRES = {
    "log(softmax)": lambda z: torch.log(F.softmax(z, dim=-1)),
    "softmax.log": lambda z: z.softmax(-1).log(),
    "log(softmax + eps)": lambda z: torch.log(torch.softmax(z, dim=1) + 1e-8),
    "log(clamp(softmax))": lambda z: F.softmax(z, dim=-1).clamp(min=1e-6).log(),
    "log(sigmoid)": lambda z: torch.log(torch.sigmoid(z)),
    "nn.Softmax then log": lambda z: torch.log(nn.Softmax(dim=-1)(z)),
}
SILENT = {
    "log_softmax": lambda z: F.log_softmax(z, dim=-1),
    "logsigmoid": lambda z: F.logsigmoid(z),
    "entropy (p used twice)": lambda z: _entropy(F.softmax(z, -1)),
    "probabilities kept": lambda z: _kept(F.softmax(z, -1)),
    "log of something else": lambda z: torch.log(z.abs() + 1),
    "two guards": lambda z: torch.log(F.softmax(z, -1) * 0.5 + 1e-8),
}


def _codes(fn):
    found = findings(opgraph(Forward(fn), (8, 64)))
    assert disagreements(found, rules()) == []
    return [d for d in found if d.code == "AL115"]


@pytest.mark.parametrize("name", sorted(FIRES))
def test_fires(name):
    found = _codes(FIRES[name])
    assert len(found) == 1, name
    d = found[0]
    assert d.evidence["normalizer"] in ("softmax", "sigmoid")
    assert d.price.basis == "static" and d.price.mac_bytes_saved == d.evidence["mac_bytes_saved"] > 0
    assert ("F.log_softmax" if d.evidence["normalizer"] == "softmax" else "F.logsigmoid") in d.message


@pytest.mark.parametrize("name", sorted(SILENT))
def test_silent(name):
    assert _codes(SILENT[name]) == [], name


def test_the_saving_is_the_log_and_its_guard():
    """1000 classes, batch 8, float32: the log reads and writes 8·1000·4 bytes each way; the guard as much."""
    one = _codes(FIRES["log(softmax)"])[0]
    two = _codes(FIRES["log(softmax + eps)"])[0]
    assert one.price.mac_bytes_saved == 2 * 8 * 1000 * 4
    assert two.price.mac_bytes_saved == 2 * one.price.mac_bytes_saved
    assert "dim=-1" in one.message and "epsilon" in two.message


class SeqGanGenerator(nn.Module):
    """A SeqGAN-style generator as real repositories write it (read, not copied): the policy's
    log-probabilities over the vocabulary as torch.log(F.softmax(...)) in the forward."""

    def __init__(self, vocab=5000):
        super().__init__()
        self.emb = nn.Embedding(vocab, 32)
        self.lstm = nn.LSTM(32, 32, batch_first=True)
        self.out = nn.Linear(32, vocab)

    def forward(self, tokens):
        h, _ = self.lstm(self.emb(tokens))
        return torch.log(F.softmax(self.out(h).view(-1, self.out.out_features), dim=-1))


def test_a_generator_head_over_the_vocabulary_is_a_warning_al104_defers_to():
    model = SeqGanGenerator()
    graph, _ = analyze_model(model, (torch.randint(0, 5000, (16, 40)),), Settings())
    found = findings(graph)
    mine = [d for d in found if d.code == "AL115"]
    assert len(mine) == 1 and mine[0].severity.value == "warning"
    assert mine[0].price.mac_bytes_saved == 2 * 640 * 5000 * 4  # the log over 640 tokens × 5000 words
    heavy = [d for d in found if d.code == "AL104"]
    assert all("AL115" in d.message for d in heavy)  # AL104 leaves the log to AL115 (PRIORITY)
