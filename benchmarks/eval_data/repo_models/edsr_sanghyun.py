"""sanghyun-son/EDSR-PyTorch: EDSR baseline (16 ResBlocks, 64 features, res_scale 1, ×2). Our own
code after reading model/common.py and model/edsr.py: MeanShift (a fixed 1×1 conv) at both ends,
ResBlock (conv-ReLU-conv, scaled residual), Upsampler (conv + PixelShuffle)."""

import math

import torch
from torch import nn

INPUT_SHAPE = (1, 3, 96, 96)


def default_conv(in_channels, out_channels, kernel_size, bias=True):
    return nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=bias)


class MeanShift(nn.Conv2d):
    def __init__(self, rgb_range, rgb_mean=(0.4488, 0.4371, 0.4040), rgb_std=(1.0, 1.0, 1.0), sign=-1):
        super().__init__(3, 3, kernel_size=1)
        std = torch.Tensor(rgb_std)
        self.weight.data = torch.eye(3).view(3, 3, 1, 1) / std.view(3, 1, 1, 1)
        self.bias.data = sign * rgb_range * torch.Tensor(rgb_mean) / std
        for p in self.parameters():
            p.requires_grad = False


class ResBlock(nn.Module):
    def __init__(self, conv, n_feats, kernel_size, bias=True, act=nn.ReLU(True), res_scale=1):
        super().__init__()
        self.body = nn.Sequential(conv(n_feats, n_feats, kernel_size, bias=bias), act,
                                  conv(n_feats, n_feats, kernel_size, bias=bias))
        self.res_scale = res_scale

    def forward(self, x):
        res = self.body(x).mul(self.res_scale)
        res += x
        return res


class Upsampler(nn.Sequential):
    def __init__(self, conv, scale, n_feats):
        m = []
        for _ in range(int(math.log(scale, 2))):
            m.append(conv(n_feats, 4 * n_feats, 3))
            m.append(nn.PixelShuffle(2))
        super().__init__(*m)


class EDSR(nn.Module):
    def __init__(self, n_resblocks=16, n_feats=64, scale=2, rgb_range=255, n_colors=3, conv=default_conv):
        super().__init__()
        self.sub_mean = MeanShift(rgb_range)
        self.add_mean = MeanShift(rgb_range, sign=1)
        self.head = nn.Sequential(conv(n_colors, n_feats, 3))
        self.body = nn.Sequential(*[ResBlock(conv, n_feats, 3, act=nn.ReLU(True)) for _ in range(n_resblocks)],
                                  conv(n_feats, n_feats, 3))
        self.tail = nn.Sequential(Upsampler(conv, scale, n_feats), conv(n_feats, n_colors, 3))

    def forward(self, x):
        x = self.sub_mean(x)
        x = self.head(x)
        res = self.body(x)
        res += x
        x = self.tail(res)
        return self.add_mean(x)


MODEL = EDSR
