"""Cost formulas, op by op: FLOPs are multiply-adds, MAC is bytes read + written (ShuffleNetV2)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from archlint.model.analyze import analyze_model


class Call(nn.Module):
    def __init__(self, fn, **modules):
        super().__init__()
        self.fn = fn
        for name, m in modules.items():
            setattr(self, name, m)

    def forward(self, *xs):
        return self.fn(self, *xs)


def layers(model, *inputs):
    _, result = analyze_model(model.eval(), inputs)
    return result.layers, result


def only(model, *inputs):
    found, _ = layers(model, *inputs)
    (layer,) = [x for x in found if x.kind != "reshape"]
    return layer


def test_conv_variants():
    cases = [
        (nn.Conv2d(8, 16, 3, padding=1), (1, 8, 10, 10), 16 * 8 * 9 * 100),
        (nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=4), (2, 8, 10, 10), 2 * 16 * 2 * 9 * 25),
        (nn.Conv2d(8, 8, 3, dilation=2, groups=8), (1, 8, 10, 10), 8 * 9 * 36),
        (nn.Conv1d(4, 6, 5), (1, 4, 20), 6 * 4 * 5 * 16),
        (nn.Conv3d(2, 4, 3, padding=1), (1, 2, 4, 6, 6), 4 * 2 * 27 * 144),
        (nn.ConvTranspose2d(8, 4, 2, stride=2), (1, 8, 5, 5), 8 * 4 * 4 * 25),  # per input pixel
    ]
    for conv, shape, flops in cases:
        layer = only(conv, torch.randn(shape))
        assert layer.kind == "conv" and layer.flops == flops, (conv, layer.flops, flops)


def test_pointwise_conv_mac_is_shufflenet_formula():
    h = w = 14
    c1, c2 = 32, 64
    layer = only(nn.Conv2d(c1, c2, 1, bias=False), torch.randn(1, c1, h, w))
    assert layer.mac_bytes == 4 * (h * w * (c1 + c2) + c1 * c2)
    assert layer.flops == h * w * c1 * c2 and layer.params == c1 * c2


def test_linear_matmul_bmm_einsum():
    assert only(nn.Linear(10, 20), torch.randn(3, 7, 10)).flops == 3 * 7 * 10 * 20
    a, b = torch.randn(4, 5, 6), torch.randn(4, 6, 7)
    for fn in (
        lambda s, x, y: x @ y,
        lambda s, x, y: torch.bmm(x, y),
        lambda s, x, y: torch.matmul(x, y),
        lambda s, x, y: torch.einsum("bij,bjk->bik", x, y),
    ):
        layer = only(Call(fn), a, b)
        assert layer.kind == "matmul" and layer.flops == 4 * 5 * 6 * 7


def test_sdpa_and_multihead_attention():
    q = torch.randn(2, 3, 10, 8)
    k = torch.randn(2, 3, 12, 8)
    layer = only(Call(lambda s, q, k: F.scaled_dot_product_attention(q, k, k)), q, k)
    assert layer.kind == "attention" and layer.flops == 2 * 3 * 10 * 12 * (8 + 8)
    mha = nn.MultiheadAttention(16, 4)  # (L, N, E), separate key/value length
    x, kv = torch.randn(5, 2, 16), torch.randn(7, 2, 16)
    found, _ = layers(Call(lambda s, x, kv: s.attn(x, kv, kv, need_weights=False)[0], attn=mha), x, kv)
    (attn,) = [layer for layer in found if layer.kind == "attention"]
    n, lq, ls, e = 2, 5, 7, 16
    assert attn.flops == n * (lq * e * e + 2 * ls * e * e + lq * e * e) + 2 * n * lq * ls * e
    assert attn.params == 4 * e * e + 4 * e


def test_norms_pooling_elementwise_views_copies():
    x = torch.randn(2, 8, 6, 6)
    n = x.numel()
    assert only(nn.BatchNorm2d(8), x).flops == 2 * n
    assert only(nn.GroupNorm(2, 8), x).flops == 5 * n
    assert only(nn.MaxPool2d(2), x).flops == (n // 4) * 4
    assert only(nn.AdaptiveAvgPool2d(1), x).flops == n
    relu = only(nn.ReLU(), x)
    assert relu.kind == "activation" and relu.flops == n and relu.mac_bytes == 2 * 4 * n
    add = only(Call(lambda s, a, b: a + b), x, x.clone())
    assert add.kind == "elementwise" and add.mac_bytes == 3 * 4 * n
    square = only(Call(lambda s, a: a * a), x)
    assert square.mac_bytes == 2 * 4 * n  # a tensor passed twice is read once
    cat = only(Call(lambda s, a, b: torch.cat([a, b], 1)), x, x.clone())
    assert cat.kind == "concat" and cat.flops == 0 and cat.mac_bytes == 4 * 4 * n
    found, _ = layers(Call(lambda s, a: a.view(2, -1).transpose(0, 1).contiguous()), x)
    view, transpose, contiguous = found
    assert (view.kind, transpose.kind, contiguous.kind) == ("reshape", "reshape", "copy")
    assert view.mac_bytes == transpose.mac_bytes == 0 and contiguous.mac_bytes == 2 * 4 * n


def test_half_precision_bytes():
    layer = only(nn.ReLU(), torch.randn(4, 4, dtype=torch.float16))
    assert layer.dtype == "float16" and layer.mac_bytes == 2 * 2 * 16


def test_unknown_op_is_listed_not_zero():
    found, result = layers(Call(lambda s, a: torch.fft.fft(a).real), torch.randn(4, 8))
    unknown = [layer for layer in found if not layer.known]
    assert len(unknown) == 1 and unknown[0].kind == "other" and "fft" in unknown[0].op
    assert any("no cost formula" in note and "fft" in note for note in result.notes)
    assert result.totals.unknown_ops == 1


def test_a_formula_registered_twice_is_an_error():
    """Two formulas for one op cannot both be the one that counts (as torch.utils.flop_counter)."""
    import pytest

    from archlint.model.cost import formula

    with pytest.raises(ValueError, match="cost formula for 'conv' registered twice"):
        formula("conv")(lambda op: 0)
