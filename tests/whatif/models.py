"""Small models for the --what-if tests (CLI targets too): BatchNorm layers carry non-trivial
running statistics and affine parameters, so that a wrong fold would show in the outputs."""

from __future__ import annotations

import torch
from torch import nn


def _stats(model: nn.Module) -> nn.Module:
    g = torch.Generator().manual_seed(0)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.running_mean.copy_(torch.rand(m.num_features, generator=g) * 2 - 1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) * 1.5 + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.bias.data.copy_(torch.rand(m.num_features, generator=g) - 0.5)
    return model


class ConvBN(nn.Module):
    """Conv+BN pairs (one conv with a bias), a Linear+BatchNorm1d on (N, C), and a head."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.conv = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 12)
        self.fc_bn = nn.BatchNorm1d(12)
        self.head = nn.Linear(12, 5)
        _stats(self)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(self.stem(x))))
        return self.head(torch.relu(self.fc_bn(self.fc(x.mean((2, 3))))))


class TokensBN(nn.Module):
    """A Linear on (N, L, C) then BatchNorm1d over dim 1 (L channels): NOT a foldable pair,
    though the sizes match (L == C)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.bn = nn.BatchNorm1d(6)
        _stats(self)

    def forward(self, x):
        return self.bn(self.fc(x))


class LSTMLM(nn.Module):
    """A tiny LSTM language model: embedding → LSTM → Linear over the vocabulary."""

    def __init__(self, vocab: int = 50, dim: int = 16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, dim, num_layers=2, batch_first=True)
        self.out = nn.Linear(dim, vocab)

    @staticmethod
    def example_inputs():
        return (torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(0)),)

    def forward(self, tokens):
        return self.out(self.lstm(self.embed(tokens))[0])


class FlattenByView(nn.Module):
    """Flattens a conv's output with .view(): fails on a channels_last tensor (a real pattern)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 8 * 8, 3)

    def forward(self, x):
        y = self.conv(x)
        return self.fc(y.view(y.size(0), -1))
