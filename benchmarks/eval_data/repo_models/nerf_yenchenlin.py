"""yenchenlin/nerf-pytorch: NeRF (D=8, W=256, skips=[4], use_viewdirs) on embedded inputs (63
position + 27 direction channels, as get_embedder gives for multires 10 / 4). Our own code after
reading run_nerf_helpers.py; one chunk of 16384 samples."""

import torch
import torch.nn.functional as F
from torch import nn

INPUT_SHAPE = (16384, 90)


class NeRF(nn.Module):
    def __init__(self, D=8, W=256, input_ch=63, input_ch_views=27, output_ch=4, skips=(4,), use_viewdirs=True):
        super().__init__()
        self.input_ch, self.input_ch_views, self.skips, self.use_viewdirs = input_ch, input_ch_views, skips, use_viewdirs
        self.pts_linears = nn.ModuleList(
            [nn.Linear(input_ch, W)] + [nn.Linear(W, W) if i not in skips else nn.Linear(W + input_ch, W) for i in range(D - 1)])
        self.views_linears = nn.ModuleList([nn.Linear(input_ch_views + W, W // 2)])
        if use_viewdirs:
            self.feature_linear = nn.Linear(W, W)
            self.alpha_linear = nn.Linear(W, 1)
            self.rgb_linear = nn.Linear(W // 2, 3)
        else:
            self.output_linear = nn.Linear(W, output_ch)

    def forward(self, x):
        input_pts, input_views = torch.split(x, [self.input_ch, self.input_ch_views], dim=-1)
        h = input_pts
        for i, _ in enumerate(self.pts_linears):
            h = F.relu(self.pts_linears[i](h))
            if i in self.skips:
                h = torch.cat([input_pts, h], -1)
        if self.use_viewdirs:
            alpha = self.alpha_linear(h)
            feature = self.feature_linear(h)
            h = torch.cat([feature, input_views], -1)
            for i, _ in enumerate(self.views_linears):
                h = F.relu(self.views_linears[i](h))
            rgb = self.rgb_linear(h)
            return torch.cat([rgb, alpha], -1)
        return self.output_linear(h)


MODEL = NeRF
