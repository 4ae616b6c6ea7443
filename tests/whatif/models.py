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


class HandAttention(nn.Module):
    """Self-attention written by hand three times, the common ways (timm's older one, the
    textbook's, q scaled first), and a fourth one with an additive mask (not replaced: SDPA
    without the mask would differ)."""

    def __init__(self, dim: int = 32, heads: int = 4):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.scale = self.head_dim**-0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.drop = nn.Dropout(0.1)
        self.proj = nn.Linear(dim, dim)

    def _qkv(self, x):
        b, n, d = x.shape
        return self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)

    def _merge(self, x):
        b, h, n, hd = x.shape
        return self.proj(x.transpose(1, 2).reshape(b, n, h * hd))

    def forward(self, x):
        q, k, v = self._qkv(x)
        attn = (q @ k.transpose(-2, -1)) * self.scale  # timm's Attention (fused_attn=False)
        x = x + self._merge(self.drop(attn.softmax(dim=-1)) @ v)
        q, k, v = self._qkv(x)
        scores = torch.matmul(q, k.transpose(2, 3)) / (self.head_dim**0.5)  # the textbook's
        x = x + self._merge(torch.matmul(torch.nn.functional.softmax(scores, dim=-1), v))
        q, k, v = self._qkv(x)
        x = x + self._merge(((q * self.scale) @ k.transpose(-2, -1)).softmax(-1) @ v)  # q scaled first
        q, k, v = self._qkv(x)
        scores = q @ k.transpose(-2, -1) * self.scale + torch.triu(torch.full((x.shape[1],) * 2, -1e4), 1)
        return x + self._merge(scores.softmax(-1) @ v)


class OneAttention(nn.Module):
    """One self-attention written by hand (matmul → scale → softmax → matmul): AL106's shape."""

    def __init__(self, dim: int = 64, heads: int = 4):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        attn = (q @ k.transpose(-2, -1)) * self.head_dim**-0.5
        out = attn.softmax(dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(b, n, d))
