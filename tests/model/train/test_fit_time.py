"""The time each way to fit adds on the device spec (AL610's rule, archlint.model.checks.batch_does_not_fit)."""

from __future__ import annotations

import networkx as nx
import pytest

from archlint.devices import resolve
from archlint.diagnostics import Diagnostic, Price, Severity
from archlint.model.checks.batch_does_not_fit import kernels_in_step, price_ways_to_fit, recompute_ms
from archlint.result import Estimate


def graph():
    g = nx.DiGraph()
    g.add_node("x", kind="input")
    ops = [
        ("a", "stem", 1.0, {}),
        ("b", "layer1.0.conv", 2.0, {"grad_input": {}, "grad_weight": {}}),
        ("c", "layer1.0.relu", 0.5, {"grad_input": {}}),
        ("d", "layer1.1.conv", 3.0, {"grad_input": {}, "recompute": {}}),
        ("e", "layer10.conv", 7.0, {}),
    ]
    for name, module, ms, terms in ops:
        g.add_node(name, kind="conv", module=module, estimated_ms=ms, mac_bytes=10, backward_terms=terms)
    return g


def finding(share, way, **evidence):
    return Diagnostic(
        "AL610",
        "training step needs more",
        evidence={"way": way, **evidence},
        price=Price("static", share, "an alternative", whole="step peak memory"),
    )


def test_recompute_is_the_blocks_forward_only():
    g = graph()
    assert recompute_ms(g, ["layer1.0"]) == pytest.approx(2.5)
    assert recompute_ms(g, ["layer1"]) == pytest.approx(5.5)  # a prefix of a path is not a parent: layer10 stays out
    assert kernels_in_step(g) == 5 + 2 + 1 + 1


def test_each_way_priced_in_time_and_the_immaterial_dropped():
    spec = resolve("rtx4090")
    estimate = Estimate("rtx4090", 10.0, "static", [], {}, train={"step_ms": 40.0, "autocast": {"step_ms": 25.0}})
    ways = [
        finding(0.3, "checkpoint", blocks=["layer1.0"]),
        finding(0.002, "fused-optimizer"),  # 0.2%: under the floor
        finding(0.4, "accumulation", micro_batch=16, accumulation_steps=3),
        finding(0.35, "autocast"),
    ]
    ckpt, fused, accumulate, autocast = price_ways_to_fit(ways, graph(), estimate, spec)
    assert [d.severity for d in (ckpt, fused, accumulate, autocast)] == [
        Severity.WARNING,
        Severity.INFO,
        Severity.WARNING,
        Severity.WARNING,
    ]
    assert "under the 1% floor" in fused.evidence["verdict"] and "time_added_ms" not in fused.evidence
    assert ckpt.evidence["time_added_ms"] == pytest.approx(2.5) and "adds ≈ 2.50 ms a step" in ckpt.message
    assert accumulate.evidence["time_added_ms"] == pytest.approx(2 * 9 * 5e-3)
    assert autocast.evidence["time_added_ms"] == pytest.approx(-15.0) and "saves ≈ 15.00 ms" in autocast.message


def test_without_a_spec_only_the_floor_applies():
    ckpt, fused = price_ways_to_fit(
        [finding(0.3, "checkpoint", blocks=["layer1.0"]), finding(0.001, "fused-optimizer")], graph(), None, None
    )
    assert ckpt.severity is Severity.WARNING and fused.severity is Severity.INFO
    assert "time_added_ms" not in ckpt.evidence
