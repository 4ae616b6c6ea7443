"""The radiance-field MLP with positional encoding."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def positional_encoding(x, n_freqs):
    out = [x]
    for k in range(n_freqs):
        out += [torch.sin((2.0 ** k) * x), torch.cos((2.0 ** k) * x)]
    return torch.cat(out, -1)


class NeRF(nn.Module):
    def __init__(self, D=8, W=256, pos_freqs=10, dir_freqs=4, skips=(4,)):
        super().__init__()
        self.pos_freqs, self.dir_freqs, self.skips = pos_freqs, dir_freqs, skips
        in_ch, in_dir = 3 + 6 * pos_freqs, 3 + 6 * dir_freqs
        self.pts_linears = nn.ModuleList(
            [nn.Linear(in_ch, W)] + [nn.Linear(W + in_ch if i in skips else W, W) for i in range(1, D)])
        self.feature = nn.Linear(W, W)
        self.alpha = nn.Linear(W, 1)
        self.views = nn.Linear(W + in_dir, W // 2)
        self.rgb = nn.Linear(W // 2, 3)

    def forward(self, pts, viewdirs):
        x = positional_encoding(pts, self.pos_freqs)
        h = x
        for i, layer in enumerate(self.pts_linears):
            if i in self.skips:
                h = torch.cat([x, h], -1)
            h = F.relu(layer(h))
        alpha = self.alpha(h)
        h = torch.cat([self.feature(h), positional_encoding(viewdirs, self.dir_freqs)], -1)
        return torch.cat([torch.sigmoid(self.rgb(F.relu(self.views(h)))), alpha], -1)
