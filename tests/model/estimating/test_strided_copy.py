"""A contiguous reader (linear, softmax, layer_norm) given a view whose last dim moved pays a copy first."""

from __future__ import annotations

import math

import networkx as nx
import pytest

from archlint.devices import resolve
from archlint.model.estimating.estimate import estimate_graph
from archlint.model.estimating.torch_kernels import moved_last_dim, strided_copy_bytes


def talking_heads(dims):
    """CaiT's talking heads: attention weights (B, H, N, N) permuted to put the heads last, then a Linear(H, H)."""
    g = nx.DiGraph(dtype="float16")
    shape, out = [64, 4, 196, 196], [64, 196, 196, 4]
    n = math.prod(shape)
    g.add_node("x", kind="input")
    g.add_node(
        "p",
        kind="reshape",
        key="permute",
        attrs={"dims": dims},
        in_shapes=[shape],
        out_shapes=[out],
        flops=0,
        mac_bytes=0,
    )
    g.add_node(
        "proj",
        kind="linear",
        key="Linear",
        in_shapes=[out],
        out_shapes=[out],
        param_shapes={"weight": [4, 4]},
        flops=n * 4,
        mac_bytes=4 * n + 32,
        in_bytes=2 * n,
        out_bytes=2 * n,
        itemsize=2,
    )
    g.add_edges_from([("x", "p"), ("p", "proj")])
    return g, n


def test_a_moved_last_dim_is_copied_before_the_gemm():
    moved, n = talking_heads([0, 2, 3, 1])
    kept, _ = talking_heads([0, 2, 1, 3])  # the last dim stays innermost: the GEMM reads it as it is
    assert moved_last_dim(moved, "proj") and not moved_last_dim(kept, "proj")
    assert strided_copy_bytes(moved, "proj") == 2 * n * 2 and strided_copy_bytes(kept, "proj") == 0
    spec = resolve("h200")
    extra = estimate_graph(moved, spec)["latency_ms"] - estimate_graph(kept, spec)["latency_ms"]
    broadcast = spec.achieved["broadcast"][0]
    assert extra == pytest.approx(2 * n * 2 / (spec.bandwidth * broadcast) * 1e3, rel=1e-6)
