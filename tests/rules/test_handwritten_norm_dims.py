"""AL110 flags a hand-written LayerNorm/RMSNorm only over trailing dims, where F.layer_norm and
F.rms_norm are the one-op equivalent; a channels-first norm (dim 1 of NCHW, timm's LayerNorm2d
fallback, ConvNeXt's `channels_first` LayerNorm) has none that keeps its layout."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ._graphs import findings, opgraph


class HandLayerNorm(nn.Module):
    def __init__(self, c, dim):
        super().__init__()
        self.dim = dim
        shape = (c,) if dim == -1 else (c, 1, 1)
        self.weight, self.bias = nn.Parameter(torch.ones(shape)), nn.Parameter(torch.zeros(shape))

    def forward(self, x):
        u = x.mean(self.dim, keepdim=True)
        s = (x - u).pow(2).mean(self.dim, keepdim=True)
        return self.weight * ((x - u) / torch.sqrt(s + 1e-6)) + self.bias


class HandRMSNorm(nn.Module):
    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1).unsqueeze(-1) + 1e-6)


@pytest.mark.parametrize(("dim", "shape", "fires"), [(-1, (2, 16, 16, 32), True), (1, (2, 32, 16, 16), False)])
def test_layer_norm_by_hand_only_over_trailing_dims(dim, shape, fires):
    found = [d for d in findings(opgraph(HandLayerNorm(32, dim), shape)) if d.code == "AL110"]
    assert bool(found) == fires
    if fires:
        assert "LayerNorm" in found[0].message


def test_rms_norm_without_keepdim_is_trailing():
    assert [d.code for d in findings(opgraph(HandRMSNorm(), (2, 8, 64))) if d.code == "AL110"] == ["AL110"]
