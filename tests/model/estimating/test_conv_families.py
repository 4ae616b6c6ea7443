"""Grouped and depthwise convs as the H200 microbenchmarks showed them (benchmarks/conv_families.py)."""

from __future__ import annotations

import pytest

from archlint.devices import resolve
from archlint.devices.achieved import SHARES, shares_for
from archlint.model.estimating.estimate import Gemm, estimate_op, gemm_of, grouped_tile, share_names, tile_efficiency
from archlint.model.estimating.torch_kernels import wide_depthwise
from tests.model.estimating.test_terms import conv_op


def test_a_narrow_grouped_conv_gets_a_narrow_tile():
    op = conv_op(n=256, cin=256, cout=256, hw=56, k=3, groups=32)  # 8 channels a group
    g = gemm_of(op)
    assert (g.n, g.k, g.batch) == (8, 72, 32)
    assert grouped_tile(g, (128, 128, 32)) == (128, 8, 32)
    # padded 8 → 128 wide, a 128-wide tile wasted 15/16 of its work: now only k's padding (72 → 96)
    assert tile_efficiency(g, (128, 128, 32), 132) < 0.06
    assert tile_efficiency(g, grouped_tile(g, (128, 128, 32)), 132) == pytest.approx(0.75, abs=0.01)
    assert grouped_tile(Gemm(m=64, n=200, k=9, batch=2), (128, 128, 32)) == (
        128,
        128,
        32,
    )  # never wider than the spec's


def test_grouped_convs_stream_at_the_window_share():
    for groups in (32, 256):
        _, memory = share_names(conv_op(n=8, cin=256, cout=256, hw=28, k=3, groups=groups), tensor=groups == 32)
        assert memory == "window"
    assert share_names(conv_op(n=8, cin=256, cout=256, hw=28, k=3), tensor=True) == ("tensor-gemm", "stream")


def test_wide_depthwise_is_bound_by_the_generic_kernel():
    k3, k7 = (conv_op(n=256, cin=96, cout=96, hw=56, k=k, groups=96) for k in (3, 7))
    assert not wide_depthwise(k3) and wide_depthwise(k7)
    assert not wide_depthwise(conv_op(n=8, cin=96, cout=96, hw=56, k=7, groups=12))  # grouped, not depthwise
    h200 = resolve("h200")
    est = estimate_op(k7, h200, "float16")
    assert est.share == "depthwise-wide" and est.bound == "compute"
    share = SHARES["depthwise-wide"].value
    assert est.compute_ms == pytest.approx(2 * k7["flops"] / (h200.peaks["cuda-fp32"] * share) * 1e3)
    # measured on the H200: 2.684 ms (benchmarks/eval_data/measured/h200-conv-families-2026-11-26.json)
    assert est.ms == pytest.approx(2.684, rel=0.1)
    # the 3×3 stays bound by its bytes, and a 7×7 costs more than 5× a 3×3 of the same tensor
    assert estimate_op(k3, h200, "float16").bound == "memory"
    assert est.ms > 5 * estimate_op(k3, h200, "float16").ms


def band(n, c, hw, kh, kw, itemsize=2):
    op = conv_op(n=n, cin=c, cout=c, hw=hw, k=3, groups=c, itemsize=itemsize)
    op["param_shapes"] = {"weight": [c, 1, kh, kw]}
    return op


def test_which_depthwise_convs_run_pytorchs_own_kernels():
    from archlint.model.estimating.torch_kernels import native_depthwise

    assert not native_depthwise(band(8, 96, 56, 3, 3))  # 16-bit 3×3, ≥ 32 channels: cuDNN
    assert not native_depthwise(band(8, 96, 56, 5, 5))
    assert native_depthwise(band(8, 16, 56, 3, 3))  # under 32 channels
    assert native_depthwise(band(8, 96, 56, 3, 3, itemsize=4))  # float32: never cuDNN's depthwise
    assert native_depthwise(band(8, 96, 56, 1, 11)) and wide_depthwise(band(8, 96, 56, 1, 11))  # InceptionNeXt's bands
    assert not wide_depthwise(band(8, 96, 56, 3, 3, itemsize=4))  # the native 3×3 kernel is not the generic one
    assert wide_depthwise(band(8, 96, 56, 5, 5, itemsize=4))


def test_a_biased_conv_pays_an_add_after_cudnn():
    from archlint.model.estimating.estimate import ROOFLINE_ONLY
    from archlint.model.estimating.torch_kernels import conv_bias_bytes

    dense = conv_op(n=8, cin=64, cout=64, hw=56, k=3)
    biased = {**dense, "param_shapes": {**dense["param_shapes"], "bias": [64]}}
    assert conv_bias_bytes(dense) == 0
    assert conv_bias_bytes(biased) == 2 * dense["out_bytes"] + 64 * 2
    native = band(8, 96, 56, 7, 7)
    native["param_shapes"]["bias"] = [96]
    assert conv_bias_bytes(native) == 0  # the native depthwise kernel adds its bias itself
    spec = resolve("h200")
    added = estimate_op(biased, spec, "float16").ms - estimate_op(dense, spec, "float16").ms
    broadcast = shares_for(spec)["broadcast"].value  # the h200 spec's own measured share
    assert added == pytest.approx(conv_bias_bytes(biased) / (spec.bandwidth * broadcast) * 1e3)
    assert (
        estimate_op(biased, spec, "float16", terms=ROOFLINE_ONLY).ms
        == estimate_op(dense, spec, "float16", terms=ROOFLINE_ONLY).ms
    )


def test_a_channels_last_model_runs_its_convs_in_nhwc():
    import networkx as nx
    import torch

    from archlint.model.costed import memory_format
    from archlint.model.estimating.estimate import estimate_graph
    from archlint.model.estimating.torch_kernels import native_depthwise

    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.Conv2d(8, 8, 3, groups=8))
    assert memory_format(net) == "contiguous"
    assert memory_format(net.to(memory_format=torch.channels_last)) == "channels_last"
    assert not native_depthwise({**band(8, 96, 56, 7, 7), "channels_last": True})  # cuDNN takes them all in NHWC
    spec = resolve("h200")
    times, layout = {}, {}
    for fmt in ("contiguous", "channels_last"):
        g = nx.DiGraph(dtype="float16", memory_format=fmt)
        g.add_node("x", kind="input")
        g.add_node("conv", **conv_op(n=64, cin=256, cout=256, hw=28, k=3))
        g.add_edge("x", "conv")
        times[fmt] = estimate_graph(g, spec)["latency_ms"]
        layout[fmt] = g.nodes["conv"]["estimate_terms"]["layout_bytes"]
    assert layout["contiguous"] > 0 and layout["channels_last"] == 0  # no NCHW → NHWC transposes
    assert times["channels_last"] < times["contiguous"]
