"""The measured terms of the device-spec estimate, each on its own: achieved shares per kernel
family, cuDNN's input-only layout transposes, torch.autocast's dtype flow, and the range."""

from __future__ import annotations

import math

import networkx as nx
import pytest

from archlint.devices.achieved import SHARES
from archlint.model.estimating.estimate import (
    ALL_TERMS,
    ROOFLINE_ONLY,
    autocast_flow,
    broadcasts,
    estimate_graph,
    estimate_op,
    layout_bytes,
    share_names,
)
from tests.model.estimating.test_terms import GPU, conv_op


def ew(key, shape, params=None, kind="elementwise"):
    n = math.prod(shape)
    return {
        "kind": kind,
        "key": key,
        "in_shapes": [shape],
        "out_shapes": [shape],
        "param_shapes": params or {},
        "attrs": {},
        "flops": n,
        "mac_bytes": 4 * n,
        "in_bytes": 2 * n,
        "out_bytes": 2 * n,
        "itemsize": 2,
    }


def test_shares_are_within_their_measured_spread_and_sourced():
    for s in SHARES.values():
        assert 0 < s.low <= s.value <= s.high <= 1 and s.source


def test_tensor_gemm_reaches_its_measured_share_of_the_tile_roof():
    op = conv_op(n=64, cin=512, cout=512, hw=14, k=3)
    roof = estimate_op(op, GPU, "float16", terms=ROOFLINE_ONLY)
    est = estimate_op(op, GPU, "float16", terms=frozenset({"achieved-share"}))
    assert est.compute_ms == pytest.approx(roof.compute_ms / SHARES["tensor-gemm"].value)
    assert est.share == "tensor-gemm" and est.bound == "compute"


def test_memory_bound_ops_by_family():
    big = [64, 256, 56, 56]
    relu = ew("relu", big, kind="activation")
    bias = ew("add", big, params={"bias": [256, 1, 1]})
    assert share_names(relu, False) == ("cuda-core", "stream")
    assert broadcasts(bias) and share_names(bias, False)[1] == "broadcast"
    assert share_names(conv_op(8, 64, 64, 56, 3, groups=64), False)[1] == "window"  # depthwise: a weighted pool
    assert share_names({"kind": "pool", "in_shapes": [big], "out_shapes": [big]}, False)[1] == "window"
    for op, name in ((relu, "stream"), (bias, "broadcast")):
        roof = estimate_op(op, GPU, "float16", terms=ROOFLINE_ONLY)
        est = estimate_op(op, GPU, "float16", terms=frozenset({"achieved-share"}))
        assert est.memory_ms == pytest.approx(roof.memory_ms / SHARES[name].value) and est.share == name


def test_layout_kernels_transpose_input_and_weight_before_the_conv():
    op = conv_op(n=64, cin=512, cout=256, hw=14, k=3)
    both = layout_bytes(op, True, GPU)
    inp = layout_bytes(op, True, GPU, input_only=True)
    assert both == 2 * (64 * 512 * 14 * 14 + 64 * 256 * 14 * 14) * 2
    assert inp == 2 * (64 * 512 * 14 * 14 + 256 * 512 * 9) * 2
    assert layout_bytes(op, False, GPU, input_only=True) == 0  # CUDA-core convs read NCHW as it is
    # compute-bound conv: the transposes do not hide under its compute, they run before it
    est = estimate_op(op, GPU, "float16", terms=frozenset({"layout-kernels"}))
    assert est.bound == "compute"
    assert est.ms == pytest.approx(est.compute_ms + inp / 1e12 * 1e3)
    roof = estimate_op(op, GPU, "float16", terms=ROOFLINE_ONLY)
    assert roof.ms == pytest.approx(roof.compute_ms)  # before: hidden under the compute


def _chain(*ops):
    g = nx.DiGraph(dtype="float16")
    g.add_node("x", kind="input", out_shapes=[ops[0][1]["in_shapes"][0]])
    prev = "x"
    for name, op in ops:
        g.add_node(name, **op)
        g.add_edge(prev, name)
        prev = name
    return g


def test_autocast_flow():
    """input (float32) → linear: cast the input and the weight; → layer_norm: cast up, run in float32;
    → add of a float32 parameter: float32; → linear: casts its float32 input again."""
    d = 256
    x = [64, 512, d]  # large enough that no op is bound to the launch overhead
    n = math.prod(x)
    lin = {
        "kind": "linear",
        "key": "Linear",
        "in_shapes": [x],
        "out_shapes": [x],
        "param_shapes": {"weight": [d, d]},
        "attrs": {},
        "flops": n * d,
        "mac_bytes": 4 * n + 2 * d * d,
        "in_bytes": 2 * n,
        "out_bytes": 2 * n,
    }
    g = _chain(
        ("fc1", lin),
        ("ln", ew("layer_norm", x, {"weight": [d]}, kind="norm")),
        ("pos", ew("add", x, {"pos_embed": [1, 512, d]})),
        ("fc2", dict(lin)),
    )
    flow = autocast_flow(g)
    assert flow["fc1"] == (1.0, 6 * (n + d * d))  # float32 input and weight cast to 16 bits
    factor, cast = flow["ln"]
    assert cast == 6 * n and factor == pytest.approx(2.0)  # cast up, read and write float32
    assert flow["pos"][1] == 0 and flow["pos"][0] == pytest.approx(2.0)  # float32 stays float32
    assert flow["fc2"] == (1.0, 6 * (n + d * d))
    plain = estimate_graph(g, GPU)["latency_ms"]
    assert estimate_graph(g, GPU, autocast=True)["latency_ms"] > plain


def test_range_brackets_the_estimate_and_names_its_terms():
    op = conv_op(n=256, cin=256, cout=256, hw=28, k=3)
    g = _chain(("conv", op), ("relu", ew("relu", op["out_shapes"][0], kind="activation")))
    e = estimate_graph(g, GPU)
    fast, slow = e["range_ms"]
    assert fast < e["latency_ms"] < slow
    terms = [t["term"] for t in e["range_terms"]]
    assert terms[0] == "tensor-gemm" and "stream" in terms  # the conv's spread is the widest
    assert sum(t["ms"] for t in e["range_terms"]) == pytest.approx(slow - fast)
    assert any("measured share" in a for a in e["assumptions"])


def test_roofline_only_is_the_estimate_before_the_terms():
    op = conv_op(n=64, cin=512, cout=512, hw=14, k=3)
    g = _chain(("conv", op))
    before = estimate_graph(g, GPU, terms=ROOFLINE_ONLY)
    assert "range_ms" not in before and "range_terms" not in before
    assert before["latency_ms"] == pytest.approx(estimate_op(op, GPU, "float16", terms=ROOFLINE_ONLY).ms)
    assert ALL_TERMS == {
        "achieved-share",
        "layout-kernels",
        "sdpa-math",
        "serial-upsample",
        "conv-bias",
        "strided-copy",
        "host-pipeline",
    }
