"""Each refinement term of the device-spec estimate on a hand-computed case."""

from __future__ import annotations

import dataclasses
import math

import pytest

from archlint.devices import DeviceSpec, resolve
from archlint.model.estimating.estimate import (
    ROOFLINE_ONLY,
    Gemm,
    cache_resident,
    combine,
    estimate_op,
    gemm_of,
    layout_bytes,
    tile_efficiency,
    unit_for,
)

# A made-up GPU with round numbers, so every expected value below is worked out by hand.
GPU = DeviceSpec(
    name="toy",
    kind="gpu",
    description="toy GPU",
    peaks={
        "tensor-fp16": 100e12,
        "tensor-bf16": 100e12,
        "tensor-tf32": 50e12,
        "tensor-fp8": 0,
        "tensor-int8": 0,
        "cuda-fp32": 10e12,
        "cuda-fp16": 20e12,
        "cuda-fp64": 1e12,
    },
    bandwidth=1e12,
    cache_bytes=64 * 2**20,
    overhead_s=5e-6,
    sms=10,
    tile=(128, 128, 32),
)
CPU = DeviceSpec(
    name="toycpu",
    kind="cpu",
    description="toy CPU",
    peaks={"vector-fp32": 100e9, "vector-fp64": 50e9},
    bandwidth=10e9,
    cache_bytes=32 * 2**20,
    overhead_s=3e-6,
    sms=2,
)


def conv_op(n, cin, cout, hw, k, groups=1, itemsize=2, dtype="float16"):
    out = [n, cout, hw, hw]
    x = [n, cin, hw, hw]
    flops = n * cout * hw * hw * (cin // groups) * k * k
    weight = [cout, cin // groups, k, k]
    mac = (math.prod(x) + math.prod(out) + math.prod(weight)) * itemsize
    return {
        "kind": "conv",
        "key": "Conv2d",
        "in_shapes": [x],
        "out_shapes": [out],
        "param_shapes": {"weight": weight},
        "attrs": {"groups": groups},
        "flops": flops,
        "mac_bytes": mac,
        "itemsize": itemsize,
        "in_bytes": math.prod(x) * itemsize,
        "out_bytes": math.prod(out) * itemsize,
    }


def test_wave_quantization_1_1_waves_cost_2():
    # 11 full 128×128 tiles on 10 SMs: 1.1 waves run as 2, so 11 of 20 tile slots do work.
    g = Gemm(m=128 * 11, n=128, k=32)
    assert tile_efficiency(g, (128, 128, 32), sms=10) == pytest.approx(11 / 20)
    # exactly one full wave: nothing lost
    assert tile_efficiency(Gemm(m=128 * 10, n=128, k=64), (128, 128, 32), sms=10) == pytest.approx(1.0)


def test_tile_padding():
    # n = 64 fills half of a 128-wide tile; m = 1280 is 10 tiles = one wave; k = 48 pads to 64.
    g = Gemm(m=1280, n=64, k=48)
    assert tile_efficiency(g, (128, 128, 32), sms=10) == pytest.approx((64 / 128) * (48 / 64))


def test_attention_tiles_fit_the_head_dimension():
    from archlint.model.estimating.estimate import attention_tile

    # ViT-B: 197 tokens, head dim 64, 256·12 (batch·heads): rows pad to 256, keys to 256, head exact
    g = Gemm(m=197, n=64, k=197, batch=256 * 12)
    tile = attention_tile(g, (128, 128, 32))
    assert tile == (128, 64, 128)
    tiles = 256 * 12 * 2
    waves = math.ceil(tiles / 10)
    assert tile_efficiency(g, tile, sms=10) == pytest.approx((197 / 256) * (197 / 256) * tiles / (waves * 10))


def test_gemm_of_conv_is_implicit_gemm_per_group():
    op = conv_op(n=2, cin=64, cout=128, hw=8, k=3, groups=2)
    assert gemm_of(op) == Gemm(m=2 * 8 * 8, n=64, k=32 * 9, batch=2)


def test_units():
    dense = conv_op(8, 64, 64, 14, 3)
    assert unit_for(dense, "float16", GPU) == ("tensor-fp16", True)
    assert unit_for(dense, "float32", GPU) == ("tensor-tf32", True)  # cuDNN allows TF32 by default
    linear = {"kind": "linear", "attrs": {}}
    assert unit_for(linear, "float32", GPU) == ("cuda-fp32", False)  # torch matmuls do not
    assert unit_for(linear, "bfloat16", GPU) == ("tensor-bf16", True)
    depthwise = conv_op(8, 64, 64, 14, 3, groups=64)
    assert unit_for(depthwise, "float16", GPU) == ("cuda-fp16", False)
    narrow = conv_op(8, 64, 64, 14, 3, groups=16)  # 4 channels per group
    assert unit_for(narrow, "float16", GPU) == ("cuda-fp16", False)
    assert unit_for({"kind": "norm", "attrs": {}}, "float16", GPU) == ("cuda-fp16", False)
    assert unit_for(dense, "float32", CPU) == ("vector-fp32", True)


def test_depthwise_conv_is_bound_to_bandwidth():
    op = conv_op(n=32, cin=256, cout=256, hw=28, k=3, groups=256)
    est = estimate_op(op, GPU, "float16", terms=ROOFLINE_ONLY)
    # 2 · 32·256·28²·9 = 115.6 MFLOP at 20 TFLOP/s = 5.78 µs; bytes 2·(2·32·256·28² + 256·9) = 25.7 MB at 1 TB/s
    assert est.compute_ms == pytest.approx(2 * op["flops"] / 20e12 * 1e3)
    assert est.memory_ms == pytest.approx(op["mac_bytes"] / 1e12 * 1e3)
    assert est.bound == "memory" and est.ms == pytest.approx(est.memory_ms)
    assert est.layout_bytes == 0  # CUDA-core kernels read NCHW as it is


def test_dense_conv_pays_layout_transposes_and_reaches_compute():
    op = conv_op(n=64, cin=512, cout=512, hw=14, k=3)
    extra = layout_bytes(op, True, GPU)
    assert extra == 2 * (64 * 512 * 14 * 14 * 2) * 2  # input and output, read + write once more
    est = estimate_op(op, GPU, "float16", terms=ROOFLINE_ONLY)
    g = gemm_of(op)
    eff = tile_efficiency(g, GPU.tile, GPU.sms)
    assert est.compute_ms == pytest.approx(2 * op["flops"] / (100e12 * eff) * 1e3)
    assert est.memory_ms == pytest.approx((op["mac_bytes"] + extra) / 1e12 * 1e3)
    assert est.bound == "compute"


def test_tiny_op_is_bound_to_launch_overhead():
    op = {
        "kind": "activation",
        "key": "relu",
        "in_shapes": [[1, 16]],
        "out_shapes": [[1, 16]],
        "attrs": {},
        "flops": 16,
        "mac_bytes": 64,
    }
    est = estimate_op(op, GPU, "float16")
    assert est.bound == "overhead" and est.ms == pytest.approx(5e-3)  # 5 µs


def test_overhead_hides_on_gpu_adds_on_cpu():
    assert combine(10e-6, 5e-6, asynchronous=True) == pytest.approx(10e-6)
    assert combine(2e-6, 5e-6, asynchronous=True) == pytest.approx(5e-6)
    assert combine(10e-6, 3e-6, asynchronous=False) == pytest.approx(13e-6)


def test_cache_residency():
    mb = 2**20
    assert cache_resident(10 * mb, 8 * mb, 64 * mb) == 8 * mb  # what the op before wrote, read from L2
    assert cache_resident(10 * mb, 40 * mb, 64 * mb) == 0  # more than half the cache: from DRAM
    assert cache_resident(10 * mb, None, 64 * mb) == 0  # not written by the op just before


def test_cache_residency_in_a_graph():
    """relu after a conv reads the conv's output from L2 when it fits, from DRAM when not."""
    import torch
    from torch import nn

    from archlint.model.analyze import analyze_model
    from archlint.model.estimating.estimate import estimate_graph

    model = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
    small_l2 = dataclasses.replace(GPU, cache_bytes=2**20)  # 1 MiB: half of it holds 512 KiB
    for side, resident in ((16, True), (256, False)):  # the conv writes 8 KiB, then 2 MiB
        graph, _ = analyze_model(model, (torch.randn(1, 8, side, side),))
        estimate_graph(graph, small_l2, terms=ROOFLINE_ONLY)
        relu = next(d for _, d in graph.nodes(data=True) if d["kind"] == "activation")
        saved = relu["estimate_terms"]["cache_bytes_saved"]
        assert (saved == relu["in_bytes"]) if resident else saved == 0


def test_builtin_specs_give_plausible_gemm_time():
    """A large fp16 GEMM on rtx4090 sits on the 165 TFLOP/s tensor roof, and its tiles fill the SMs."""
    spec = resolve("rtx4090")
    m = n = k = 8192
    op = {
        "kind": "matmul",
        "key": "mm",
        "in_shapes": [[m, k], [k, n]],
        "out_shapes": [[m, n]],
        "attrs": {},
        "flops": m * n * k,
        "mac_bytes": (m * k + k * n + m * n) * 2,
    }
    est = estimate_op(op, spec, "float16", terms=ROOFLINE_ONLY)
    assert est.bound == "compute" and est.unit == "tensor-fp16"
    # 64·64 = 4096 tiles over 128 SMs: exactly 32 waves
    assert est.tile_efficiency == pytest.approx(1.0)
    assert est.ms == pytest.approx(2 * m * n * k / 165.2e12 * 1e3)
