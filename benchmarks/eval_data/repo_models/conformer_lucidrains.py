"""lucidrains/conformer: Conformer (2 blocks, dim 144, 4 heads, conv kernel 31). Our own code after
reading conformer.py: Scale(0.5, PreNorm(FeedForward)) on both sides, attention with a learned
relative position table gathered per call (rel_pos_emb, einsum), ConformerConvModule (LayerNorm,
1×1 conv, GLU, depthwise conv with padding, BatchNorm, Swish, 1×1 conv), post-norm."""

import torch
import torch.nn.functional as F
from torch import einsum, nn

INPUT_SHAPE = (2, 256, 144)


class Swish(nn.Module):
    def forward(self, x):
        return x * x.sigmoid()


class GLU(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        out, gate = x.chunk(2, dim=self.dim)
        return out * gate.sigmoid()


class DepthWiseConv1d(nn.Module):
    def __init__(self, chan_in, chan_out, kernel_size, padding):
        super().__init__()
        self.padding = padding
        self.conv = nn.Conv1d(chan_in, chan_out, kernel_size, groups=chan_in)

    def forward(self, x):
        return self.conv(F.pad(x, self.padding))


class Scale(nn.Module):
    def __init__(self, scale, fn):
        super().__init__()
        self.fn, self.scale = fn, scale

    def forward(self, x, **kwargs):
        return self.fn(x, **kwargs) * self.scale


class PreNorm(nn.Module):
    def __init__(self, dim, fn):
        super().__init__()
        self.fn, self.norm = fn, nn.LayerNorm(dim)

    def forward(self, x, **kwargs):
        return self.fn(self.norm(x), **kwargs)


class Attention(nn.Module):
    def __init__(self, dim, heads=4, dim_head=36, max_pos_emb=512):
        super().__init__()
        inner_dim = dim_head * heads
        self.heads, self.scale = heads, dim_head ** -0.5
        self.to_q = nn.Linear(dim, inner_dim, bias=False)
        self.to_kv = nn.Linear(dim, inner_dim * 2, bias=False)
        self.to_out = nn.Linear(inner_dim, dim)
        self.max_pos_emb = max_pos_emb
        self.rel_pos_emb = nn.Embedding(2 * max_pos_emb + 1, dim_head)

    def forward(self, x):
        n, h = x.shape[-2], self.heads
        q, k, v = (self.to_q(x), *self.to_kv(x).chunk(2, dim=-1))
        q, k, v = (t.view(t.shape[0], n, h, -1).transpose(1, 2) for t in (q, k, v))
        dots = einsum("b h i d, b h j d -> b h i j", q, k) * self.scale
        seq = torch.arange(n, device=x.device)
        dist = seq[:, None] - seq[None, :]
        dist = dist.clamp(-self.max_pos_emb, self.max_pos_emb) + self.max_pos_emb
        rel_pos_emb = self.rel_pos_emb(dist).to(q)
        pos_attn = einsum("b h n d, n r d -> b h n r", q, rel_pos_emb) * self.scale
        dots = dots + pos_attn
        attn = dots.softmax(dim=-1)
        out = einsum("b h i j, b h j d -> b h i d", attn, v)
        out = out.transpose(1, 2).reshape(x.shape[0], n, -1)
        return self.to_out(out)


class FeedForward(nn.Module):
    def __init__(self, dim, mult=4):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, dim * mult), Swish(), nn.Linear(dim * mult, dim))

    def forward(self, x):
        return self.net(x)


class ConformerConvModule(nn.Module):
    def __init__(self, dim, expansion_factor=2, kernel_size=31):
        super().__init__()
        inner_dim = dim * expansion_factor
        pad = kernel_size // 2
        self.net = nn.Sequential(
            nn.LayerNorm(dim),
        )
        self.pw1 = nn.Conv1d(dim, inner_dim * 2, 1)
        self.glu = GLU(dim=1)
        self.dw = DepthWiseConv1d(inner_dim, inner_dim, kernel_size, (pad, pad - (kernel_size + 1) % 2))
        self.bn = nn.BatchNorm1d(inner_dim)
        self.act = Swish()
        self.pw2 = nn.Conv1d(inner_dim, dim, 1)

    def forward(self, x):
        x = self.net(x).transpose(1, 2)
        x = self.act(self.bn(self.dw(self.glu(self.pw1(x)))))
        return self.pw2(x).transpose(1, 2)


class ConformerBlock(nn.Module):
    def __init__(self, dim=144, heads=4, dim_head=36):
        super().__init__()
        self.ff1 = Scale(0.5, PreNorm(dim, FeedForward(dim)))
        self.attn = PreNorm(dim, Attention(dim, heads, dim_head))
        self.conv = ConformerConvModule(dim)
        self.ff2 = Scale(0.5, PreNorm(dim, FeedForward(dim)))
        self.post_norm = nn.LayerNorm(dim)

    def forward(self, x):
        x = self.ff1(x) + x
        x = self.attn(x) + x
        x = self.conv(x) + x
        x = self.ff2(x) + x
        return self.post_norm(x)


class Conformer(nn.Module):
    def __init__(self, dim=144, depth=2):
        super().__init__()
        self.layers = nn.ModuleList(ConformerBlock(dim) for _ in range(depth))

    def forward(self, x):
        for block in self.layers:
            x = block(x)
        return x


MODEL = Conformer
