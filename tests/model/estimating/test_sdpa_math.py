"""SDPA calls no fused kernel takes (archlint.model.sdpa_math): the math path, kernel by kernel."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import profile

from archlint.devices import resolve
from archlint.model import sdpa_math
from archlint.model.estimating.estimate import ROOFLINE_ONLY, estimate_op


def attention_op(shape, itemsize=2):
    n = math.prod(shape)
    return {
        "kind": "attention",
        "key": "scaled_dot_product_attention",
        "in_shapes": [list(shape)] * 3,
        "out_shapes": [list(shape)],
        "flops": math.prod(shape[:-2]) * shape[-2] ** 2 * 2 * shape[-1],
        "mac_bytes": 4 * n * itemsize,
        "in_bytes": 3 * n * itemsize,
        "out_bytes": n * itemsize,
        "itemsize": itemsize,
    }


def test_only_non_4d_calls_run_the_math_path():
    assert sdpa_math.runs_math(attention_op((8, 3, 16, 196, 32)))  # NesT's windows: 5-D
    assert not sdpa_math.runs_math(attention_op((8, 12, 197, 64)))
    assert not sdpa_math.runs_math({**attention_op((8, 3, 16, 196, 32)), "key": "MultiheadAttention"})


def test_versions():
    assert sdpa_math.upcasts("2.9.1") and sdpa_math.upcasts("2.14.1+cpu") and sdpa_math.upcasts("2.5.0")
    assert not sdpa_math.upcasts("2.4.0") and not sdpa_math.upcasts("1.13.1") and not sdpa_math.upcasts("")


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_kernels_are_what_the_installed_torch_runs(dtype):
    """The kernel list against torch.profiler on this torch (a 5-D call on the CPU runs the same
    math path as on a GPU): names in order, matmul sizes."""
    shape = (2, 3, 4, 16, 8)
    q = torch.randn(shape, dtype=dtype)
    with profile(record_shapes=True) as prof:
        F.scaled_dot_product_attention(q, q, q)
    names = {k.name for k in sdpa_math.kernels(attention_op(shape), 2, "0")} | {"aten::_to_copy"}
    seen = [
        e.name
        for e in prof.events()
        if e.name in names | {"aten::isneginf", "aten::all", "aten::where"} and e.input_shapes and e.input_shapes[0]
    ]  # not the scale's scalar conversions
    ours = sdpa_math.kernels(attention_op(shape, q.element_size()), q.element_size(), torch.__version__)
    assert seen == [k.name for k in ours]
    bmms = [k for k in ours if k.name == "aten::bmm"]
    assert [k.macs for k in bmms] == [2 * 3 * 4 * 16 * 16 * 8] * 2
    assert all(k.float32 for k in bmms)  # 16-bit inputs computed in float32 since torch 2.5


def test_before_2_5_the_path_stays_in_16_bits():
    ks = sdpa_math.kernels(attention_op((2, 3, 4, 16, 8)), 2, "2.4.0")
    assert [k.name for k in ks] == ["aten::mul", "aten::mul", "aten::bmm", "aten::_softmax", "aten::bmm"]
    assert not any(k.float32 for k in ks)
    scores, n = 2 * 3 * 4 * 16 * 16, 2 * 3 * 4 * 16 * 8
    # query/key/value/output traffic 16 bytes an element; the scores: written, softmax read + write, read
    assert sum(k.bytes for k in ks) == 16 * n + 8 * scores


def test_a_5d_call_costs_its_score_matrix():
    """NesT-tiny's first level on an RTX 4090, batch 1024: the same attention as one 4-D call is
    fused (no score matrix in memory); the 5-D call writes and reads B·H·windows·196² scores."""
    spec = resolve("rtx4090")
    five = attention_op((1024, 3, 16, 196, 32))
    four = attention_op((1024, 48, 196, 32))
    fused = estimate_op(four, spec, "float16")
    old = estimate_op(five, spec, "float16", torch_version="2.4.0")
    new = estimate_op(five, spec, "float16", torch_version="2.9.1")
    scores = 1024 * 48 * 196 * 196
    assert old.memory_ms > 8 * scores / spec.bandwidth * 1e3  # at least 8 bytes a score (fp16: write, softmax, read)
    assert fused.ms < old.ms < new.ms  # float32 and _safe_softmax cost more again
    assert new.memory_ms > 30 * scores / spec.bandwidth * 1e3
    # the term is named: off, the call is costed as the fused kernel
    assert estimate_op(
        five, spec, "float16", terms=frozenset({"achieved-share", "layout-kernels"})
    ).ms == pytest.approx(fused.ms)
    assert estimate_op(five, spec, "float16", terms=ROOFLINE_ONLY).ms < old.ms
