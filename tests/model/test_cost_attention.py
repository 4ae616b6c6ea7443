"""Attention and GEMM costs are exact on every path, under every capture strategy: SDPA with one
tensor as query, key and value, keyword operands, parameters as operands, grouped-query attention,
causal masks, cross-attention; nn.MultiheadAttention's paths; addmm/baddbmm with parameters."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from archlint.config import Settings
from archlint.model.analyze import analyze_model

STRATEGIES = ("fx", "export", "dispatch")


class _Call(nn.Module):
    def __init__(self, fn, **children):
        super().__init__()
        self.fn = fn
        for name, child in children.items():
            setattr(self, name, child)


class _Call1(_Call):
    def forward(self, x):
        return self.fn(self, x)


class _Call2(_Call):
    def forward(self, x, y):
        return self.fn(self, x, y)


class _Call3(_Call):
    def forward(self, x, y, z):
        return self.fn(self, x, y, z)


def Call(fn, **children):
    """A module whose forward is `fn(self, *inputs)`, with a fixed arity (fx traces no *args)."""
    arity = fn.__code__.co_argcount - 1
    return {1: _Call1, 2: _Call2, 3: _Call3}[arity](fn, **children)


def costed(model, *inputs, strategy):
    settings = Settings()
    settings.strategy = strategy
    graph, result = analyze_model(model.eval(), inputs, settings)
    assert result.totals.unknown_ops == 0, [(layer.op, layer.known) for layer in result.layers]
    return result


def flops_of(result, kind):
    return sum(layer.flops for layer in result.layers if layer.kind == kind)


def sdpa_flops(b, h, lq, ls, e, ev=None):
    return b * h * lq * ls * (e + (ev or e))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_sdpa_one_tensor_as_query_key_and_value(strategy):
    x = torch.randn(2, 4, 8, 16)
    for fn in (
        lambda s, x: F.scaled_dot_product_attention(x, x, x),
        lambda s, x: F.scaled_dot_product_attention(query=x, key=x, value=x),
        lambda s, x: F.scaled_dot_product_attention(x, x, x, is_causal=True),
    ):
        result = costed(Call(fn), x, strategy=strategy)
        assert flops_of(result, "attention") == sdpa_flops(2, 4, 8, 8, 16)
        (att,) = [layer for layer in result.layers if layer.kind == "attention"]
        assert att.mac_bytes == 2 * x.numel() * 4  # x read once, output written once


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_sdpa_cross_attention_gqa_mask_and_parameter_query(strategy):
    q, kv = torch.randn(2, 8, 5, 16), torch.randn(2, 8, 11, 16)
    result = costed(Call(lambda s, q, kv: F.scaled_dot_product_attention(q, kv, kv)), q, kv, strategy=strategy)
    assert flops_of(result, "attention") == sdpa_flops(2, 8, 5, 11, 16)
    # grouped-query attention: 8 query heads share 2 key/value heads; cost is per query head
    k, v = torch.randn(2, 2, 11, 16), torch.randn(2, 2, 11, 32)
    gqa = Call(lambda s, q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
    result = costed(gqa, q, k, v, strategy=strategy)
    assert flops_of(result, "attention") == sdpa_flops(2, 8, 5, 11, 16, 32)
    mask = torch.ones(5, 11, dtype=torch.bool).tril()
    masked = Call(lambda s, q, kv, m: F.scaled_dot_product_attention(q, kv, kv, attn_mask=m))
    assert flops_of(costed(masked, q, kv, mask, strategy=strategy), "attention") == sdpa_flops(2, 8, 5, 11, 16)
    # a learned query (a parameter, as in attention pooling) is an operand like any other
    pool = Call(lambda s, kv: F.scaled_dot_product_attention(s.query, kv, kv))
    pool.query = nn.Parameter(torch.randn(2, 8, 1, 16))
    assert flops_of(costed(pool, kv, strategy=strategy), "attention") == sdpa_flops(2, 8, 1, 11, 16)


class Conv1D(nn.Module):
    """Hugging Face GPT-2's projection: addmm(bias, x, weight) with both parameters as operands."""

    def __init__(self, nx, nf):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.randn(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        out = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return out.view(x.size()[:-1] + (self.nf,))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_addmm_baddbmm_and_matmul_with_parameter_operands(strategy):
    result = costed(Conv1D(16, 48), torch.randn(2, 8, 16), strategy=strategy)
    assert flops_of(result, "linear") == 2 * 8 * 16 * 48
    (mm,) = [layer for layer in result.layers if layer.kind == "linear"]
    assert mm.params == 16 * 48 + 48
    bias, a, b = torch.randn(3, 5, 7), torch.randn(3, 5, 6), torch.randn(3, 6, 7)
    result = costed(Call(lambda s, i, x, y: torch.baddbmm(i, x, y)), bias, a, b, strategy=strategy)
    assert flops_of(result, "matmul") == 3 * 5 * 6 * 7
    left = Call(lambda s, x: s.w @ x)  # the parameter is the first operand: k is its last dim
    left.w = nn.Parameter(torch.randn(10, 6))
    assert flops_of(costed(left, torch.randn(6, 4), strategy=strategy), "matmul") == 10 * 6 * 4


def mha_flops(n, lq, ls, e, kdim=None, vdim=None):
    kdim, vdim = kdim or e, vdim or e
    return n * (lq * e * e + ls * kdim * e + ls * vdim * e + lq * e * e) + 2 * n * lq * ls * e


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_multihead_attention_paths(strategy):
    e, n, lq, ls = 16, 2, 5, 7
    x, kv = torch.randn(n, lq, e), torch.randn(n, ls, e)
    self_attn = nn.MultiheadAttention(e, 4, batch_first=True)
    cases = [
        # fast path (eval, batch_first, one tensor as q/k/v, no weights asked for)
        (lambda s, x, kv: s.m(x, x, x, need_weights=False)[0], self_attn, mha_flops(n, lq, lq, e)),
        # weights asked for (slow path), with a key padding mask
        (
            lambda s, x, kv: s.m(x, x, x, key_padding_mask=torch.zeros(n, lq, dtype=torch.bool))[0],
            self_attn,
            mha_flops(n, lq, lq, e),
        ),
        # cross-attention: key and value one tensor of another length, with a float attn_mask
        (lambda s, x, kv: s.m(x, kv, kv, attn_mask=torch.zeros(lq, ls))[0], self_attn, mha_flops(n, lq, ls, e)),
        # separate key/value widths (kdim, vdim: separate projection weights)
        (
            lambda s, x, kv: s.m(x, torch.cat([kv, kv[..., :4]], -1), kv[..., :8], need_weights=False)[0],
            nn.MultiheadAttention(e, 4, batch_first=True, kdim=20, vdim=8),
            mha_flops(n, lq, ls, e, 20, 8),
        ),
    ]
    for fn, module, expected in cases:
        result = costed(Call(fn, m=module), x, kv, strategy=strategy)
        assert flops_of(result, "attention") == expected, (strategy, expected)
    # sequence-first and unbatched inputs
    seq_first = Call(lambda s, x: s.m(x, x, x)[0], m=nn.MultiheadAttention(e, 2))
    assert flops_of(costed(seq_first, torch.randn(lq, n, e), strategy=strategy), "attention") == mha_flops(n, lq, lq, e)
    assert flops_of(costed(seq_first, torch.randn(lq, e), strategy=strategy), "attention") == mha_flops(1, lq, lq, e)


def test_a_formula_that_cannot_apply_makes_the_op_unknown():
    import networkx as nx

    from archlint.model.cost import cost_graph

    graph = nx.DiGraph()
    graph.add_node(
        "mm",
        kind="linear",
        op="torch.addmm",
        key="addmm",
        in_shapes=[(4, 8)],
        out_shapes=[(4, 3)],
        attrs={},
        itemsize=4,
        in_bytes=128,
        param_bytes=0,
    )
    assert cost_graph(graph) == ["mm"]
    assert graph.nodes["mm"]["known"] is False and "operands" in graph.nodes["mm"]["unknown_reason"]
