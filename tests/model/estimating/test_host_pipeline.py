"""host-pipeline: with a measured host cost per op (eager-op-us), short kernels wait for the host."""

from __future__ import annotations

import dataclasses

import networkx as nx
import pytest

from archlint.devices import resolve
from archlint.model.estimating.estimate import estimate_graph
from tests.model.estimating.test_terms import GPU


def chain(n_ops: int, numel: int):
    g = nx.DiGraph(dtype="float16")
    g.add_node("x", kind="input")
    prev = "x"
    for i in range(n_ops):
        name = f"relu{i}"
        g.add_node(
            name,
            kind="activation",
            key="relu",
            in_shapes=[[numel]],
            out_shapes=[[numel]],
            flops=numel,
            mac_bytes=4 * numel,
            in_bytes=2 * numel,
            out_bytes=2 * numel,
            itemsize=2,
        )
        g.add_edge(prev, name)
        prev = name
    return g


def test_tiny_kernels_wait_for_the_host():
    host = dataclasses.replace(GPU, eager_op_s=50e-6)
    tiny = estimate_graph(chain(100, 1024), host)
    assert tiny["latency_ms"] == pytest.approx(100 * 50e-3, rel=0.02)  # 100 ops × 50 µs on the host
    assert tiny["host_wait_ms"] > 4.0
    assert estimate_graph(chain(100, 1024), GPU)["latency_ms"] == pytest.approx(
        100 * 5e-3, rel=0.05
    )  # no measured host: launches only


def test_long_kernels_hide_the_host():
    host = dataclasses.replace(GPU, eager_op_s=50e-6)
    big = estimate_graph(chain(20, 64 * 2**20), host)  # 512 MB a relu: 0.5 ms at 1 TB/s, far above 50 µs
    assert big["host_wait_ms"] == pytest.approx(0.05, rel=0.05)  # only the first op's issue
    assert big["latency_ms"] == pytest.approx(estimate_graph(chain(20, 64 * 2**20), GPU)["latency_ms"] + 0.05, rel=0.01)


def test_the_h200_spec_carries_its_measured_host_cost():
    spec = resolve("h200")
    assert spec.eager_op_s == pytest.approx(52.5e-6) and "ResNet-50" in spec.sources["eager-op-us"]
