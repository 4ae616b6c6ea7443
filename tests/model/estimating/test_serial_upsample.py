"""Interpolating upsamples on a GPU: PyTorch's NCHW kernels loop over batch × channels per output position."""

from __future__ import annotations

import pytest

from archlint.devices import resolve
from archlint.model.estimating.estimate import ROOFLINE_ONLY, estimate_op
from archlint.model.estimating.torch_kernels import UPSAMPLE_ITERATION_S, serial_upsample_s


def upsample(n, c, hw, scale=2, mode="bilinear", key="Upsample"):
    out = [n, c, hw * scale, hw * scale]
    nbytes = 2 * (n * c * hw * hw + n * c * hw * hw * scale * scale)
    return {
        "kind": "upsample",
        "key": key,
        "attrs": {"mode": mode, "scale_factor": float(scale)},
        "in_shapes": [[n, c, hw, hw]],
        "out_shapes": [out],
        "flops": 4 * n * c * hw * hw * scale * scale,
        "mac_bytes": nbytes,
        "in_bytes": nbytes // 5,
        "out_bytes": 4 * nbytes // 5,
        "itemsize": 2,
    }


def test_small_outputs_with_many_channels_are_serial():
    h200 = resolve("h200")
    op = upsample(256, 1024, 7)  # EfficientFormerV2's attention upsample at batch 256: 196 positions
    assert serial_upsample_s(op, h200) == pytest.approx(256 * 1024 * UPSAMPLE_ITERATION_S)
    est = estimate_op(op, h200, "float16")
    assert est.ms == pytest.approx(256 * 1024 * UPSAMPLE_ITERATION_S * 1e3)  # ~91 ms, not the bytes' ~0.03 ms
    assert estimate_op(op, h200, "float16", terms=ROOFLINE_ONLY).ms < 1.0


def test_nearest_and_large_outputs():
    h200 = resolve("h200")
    assert serial_upsample_s(upsample(256, 1024, 7, mode="nearest"), h200) == 0.0  # one thread per element
    assert serial_upsample_s(upsample(8, 64, 7, key="upsample_bilinear2d", mode=None), h200) > 0
    # 2 waves of positions: 132 SMs × 2048 threads = 270,336 at once; 1024² = 1,048,576 positions → 4 waves
    big = upsample(1, 3, 512)
    assert serial_upsample_s(big, h200) == pytest.approx(3 * UPSAMPLE_ITERATION_S * 4)
    assert (
        serial_upsample_s(upsample(256, 1024, 7), resolve("cpu-example")) > 0
    )  # the term itself; the estimate applies it on GPUs only


def test_an_input_reordered_by_a_view_may_be_channels_last():
    """CoaT upsamples tokens transposed back to (B, C, H, W): channels_last in memory, which PyTorch
    upsamples with a parallel NHWC kernel; the serial term is for plain NCHW inputs only."""
    import networkx as nx

    from archlint.model.estimating.estimate import estimate_graph
    from archlint.model.estimating.torch_kernels import permuted_input

    h200 = resolve("h200")
    for reorder in (False, True):
        g = nx.DiGraph(dtype="float16")
        g.add_node("x", kind="input")
        g.add_node("t", kind="reshape", key="transpose" if reorder else "view", mac_bytes=0, flops=0)
        g.add_node("up", **upsample(256, 1024, 7))
        g.add_edges_from([("x", "t"), ("t", "up")])
        assert permuted_input(g, "up") is reorder
        ms = estimate_graph(g, h200)["latency_ms"]
        assert (ms > 50) is not reorder
        g.graph["memory_format"] = "channels_last"  # the model's layout is not this activation's: its view decides
        assert (estimate_graph(g, h200)["latency_ms"] > 50) is not reorder
