"""Small example models for archlint (`archlint examples/nets.py:TinyNet --input-shape 1,3,56,56`).

Each is deliberately plain PyTorch; some carry the inefficiencies archlint's rules look for.
`example_inputs()` gives inputs for targets run without --input-shape.
"""

import torch
from torch import nn
import torch.nn.functional as F


class TinyNet(nn.Module):
    """A small CNN: conv-bn-relu stem, two residual blocks, a classifier."""

    def __init__(self, num_classes: int = 10, width: int = 32):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True)
        )
        self.block1 = Block(width)
        self.block2 = Block(width)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(width, num_classes)

    def forward(self, x):
        x = self.block2(self.block1(self.stem(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


class Block(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(y)))


class TinyTransformer(nn.Module):
    """A two-layer pre-norm transformer encoder over a token sequence (batch, seq, dim)."""

    def __init__(self, dim: int = 64, heads: int = 4, depth: int = 2, vocab: int = 100):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(EncoderLayer(dim, heads) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))

    @staticmethod
    def example_inputs():
        return (torch.randint(0, 100, (2, 16)),)


class EncoderLayer(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.heads = heads

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        b, n, d = x.shape
        q = x.view(b, n, self.heads, d // self.heads).transpose(1, 2)
        x = x + F.scaled_dot_product_attention(q, q, q).transpose(1, 2).reshape(b, n, d)
        return x + self.mlp(self.norm2(x))


class Unused(nn.Module):
    """Holds a submodule that forward never calls (what AL201 reports)."""

    def __init__(self):
        super().__init__()
        self.used = nn.Linear(8, 8)
        self.spare = nn.Linear(8, 8)

    def forward(self, x):
        return self.used(x)


def tiny_net(num_classes: int = 10) -> nn.Module:
    """A factory function: `archlint examples/nets.py:tiny_net --init num_classes=5`."""
    return TinyNet(num_classes=num_classes)


tiny_instance = TinyNet()  # a module-level instance is a valid target too


def example_inputs():
    return (torch.randn(1, 3, 56, 56),)
