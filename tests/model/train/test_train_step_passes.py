"""The step's costs read the graph in whole passes (each node's attributes and edges read once,
not through networkx's per-node views): the same flags, sources and backward terms as the
definitions say, on graphs with the cases the passes must keep (an edge index past the op's
listed inputs, outputs whose edges are not in index order, the model's own loss, an op with no
backward formula, an op that runs no backward)."""

from __future__ import annotations

import networkx as nx
import torch
import torchvision
from torch import nn

from archlint.model.train import backward, grad
from tests.model.train.flopcheck import step_graph


def _op(kind: str, key: str, shape=(2, 4), ins: int = 1, **extra) -> dict:
    return {
        "kind": kind,
        "key": key,
        "op": key,
        "dtype": "torch.float32",
        "in_shapes": [shape] * ins,
        "out_shapes": [shape],
        "out_bytes": 32,
        "in_bytes": 32 * ins,
        "itemsize": 4,
        "attrs": {},
        **extra,
    }


def _graph() -> nx.DiGraph:
    g = nx.DiGraph(mode="train")
    g.add_node("x", kind="input", dtype="torch.float32", out_shapes=[(2, 4)])
    g.add_node("w", **_op("elementwise", "mul", ins=1, param_shapes={"weight": (2, 4)}, module="scale"))
    g.add_node("relu", **_op("activation", "relu"))
    # three inputs listed, an edge at index 3: the flags grow to cover it
    g.add_node("odd", **_op("elementwise", "add", ins=2))
    g.add_node("ext", **_op("mystery", "mystery"))  # a kind with no backward formula
    g.add_node("idx", **_op("elementwise", "argmax", dtype="torch.int64"))  # no gradient out
    g.add_node("out", kind="output", attrs={}, in_shapes=[], out_shapes=[])
    g.add_edge("x", "w", index=0)
    g.add_edge("w", "relu", index=0)
    g.add_edge("x", "odd", index=3)
    g.add_edge("relu", "odd", index=0)
    g.add_edge("odd", "ext", index=0)
    g.add_edge("relu", "idx", index=0)
    # the output's edges added against their index order: the loss reads them by index
    g.add_edge("ext", "out", index=1)
    g.add_edge("odd", "out", index=0)
    g.add_edge("idx", "out", index=2)
    return g


def test_flags_and_sources_follow_the_edges_by_index():
    g = _graph()
    params = {"scale.weight": True}
    sources = grad.propagate(g, nn.Module(), params=params)
    assert sources == ["odd", "ext"]  # by edge index; the integer output carries no gradient
    assert sources == grad.loss_sources(g)
    nodes = g.nodes
    assert nodes["w"]["grad_params"] == {"weight": True} and nodes["w"]["grad_out"] is True
    assert nodes["odd"]["grad_inputs"] == [True, False, False, False]  # index 3: the input x, no gradient
    assert nodes["idx"]["grad_out"] is False and nodes["idx"]["backward"] is False
    for name, d in nodes.items():  # each flag as the edges define it
        if d["kind"] == "input":
            continue
        for producer, _, index in g.in_edges(name, data="index", default=0):
            assert d["grad_inputs"][index] == bool(nodes[producer]["grad_out"])
    assert nodes["relu"]["grad_fanout"] == 1  # odd sends one back, idx none
    assert nodes["odd"]["grad_fanout"] == 2  # ext's and the loss's own


def test_own_loss_is_the_one_source():
    g = _graph()
    g.nodes["out"]["attrs"] = {"loss": "relu"}
    assert grad.propagate(g, nn.Module(), params={"scale.weight": True}) == ["relu"]
    g.nodes["w"]["param_shapes"] = {}  # nothing needs a gradient: the own loss has none, the outputs' none
    assert grad.propagate(g, nn.Module(), params={}) == []


def test_backward_terms_per_op_and_the_unknown_left_out():
    g = _graph()
    grad.propagate(g, nn.Module(), params={"scale.weight": True})
    unknown = backward.cost_backward(g)
    nodes = g.nodes
    assert unknown == ["ext"]
    assert nodes["ext"]["backward_unknown_reason"] == "ValueError: no backward formula for kind 'mystery'"
    assert nodes["idx"]["backward_terms"] == {} and nodes["idx"]["flops_backward"] == 0
    assert nodes["odd"]["backward_terms"] == {"grad_sum": {"flops": 8, "mac_bytes": 96}}  # add: passed through
    assert nodes["relu"]["backward_terms"] == {"grad_input": {"flops": 8, "mac_bytes": 96}}
    assert all("mode" not in d for _, d in nodes.items())  # the formulas' mode, set for them and taken away
    for _, d in nodes.items():
        if d["kind"] not in ("input", "output"):
            assert d["flops_backward"] == sum(t["flops"] for t in d["backward_terms"].values())
            assert d["mac_bytes_backward"] == sum(t["mac_bytes"] for t in d["backward_terms"].values())


def test_a_captured_model_gets_the_terms_each_formula_gives():
    model = torchvision.models.mobilenet_v3_small()
    graph, _ = step_graph(model, (torch.randn(2, 3, 64, 64),))
    grad.propagate(graph, model)
    backward.cost_backward(graph)
    mode = graph.graph.get("mode", "train")
    for _, d in graph.nodes(data=True):
        if d["kind"] in ("input", "output") or not d["backward"]:
            continue
        expected = backward.backward_terms(d, mode)  # the one-op function, called alone
        fanout = d["grad_fanout"]
        if fanout > 1:
            out = sum(backward.numel(s) for s in d["out_shapes"])
            expected["grad_sum"] = ((fanout - 1) * out, (fanout - 1) * 3 * int(d["out_bytes"]))
        assert d["backward_terms"] == {k: {"flops": f, "mac_bytes": m} for k, (f, m) in expected.items()}


def test_the_totals_summed_in_the_pass_are_the_ops_figures():
    model = torchvision.models.mobilenet_v3_small()
    graph, totals = step_graph(model, (torch.randn(2, 3, 64, 64),))
    conv = next(n for n, d in graph.nodes(data=True) if d["kind"] == "conv")
    graph.nodes[conv]["known"] = False
    summed = backward.cost_backward_totals(graph)
    ops = [d for _, d in graph.nodes(data=True) if d["kind"] not in ("input", "output")]
    assert summed.forward_flops == sum(int(d.get("flops", 0)) for d in ops if d.get("known", True))
    assert summed.forward_mac_bytes == sum(int(d.get("mac_bytes", 0)) for d in ops if d.get("known", True))
    assert summed.backward_flops == sum(d["flops_backward"] for d in ops) < totals.backward_flops  # one left out
    assert summed.backward_mac_bytes == sum(d["mac_bytes_backward"] for d in ops)
    assert summed.unknown == [conv]
