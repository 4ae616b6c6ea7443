"""Ops computed from the model's parameters and buffers alone, found from the graph's dataflow.

An op is parameter-only when it reads no model input: it is a root that reads only parameters or
buffers (param_shapes, no tensor input), or every tensor it reads is another parameter-only op's
output. Weight standardisation (timm's StdConv2d/ScaledStdConv2d: mean, var, sub, mul over the
conv weight every forward), a per-call weight cast or a learned scale's exp are such chains: their
size is the weights', not the activations', and in inference their result is the same on every
call — it can be computed once. Ops rooted in a tensor the forward creates (arange, ones) are left
out: a created tensor may be a canvas the forward fills (AL107's constant_ops says why).
"""

from __future__ import annotations

import networkx as nx


def parameter_only(graph: nx.DiGraph) -> set[str]:
    """The ops whose every input derives from parameters and buffers only (see the module docstring)."""
    out: set[str] = set()
    for name in nx.topological_sort(graph):
        data = graph.nodes[name]
        if data["kind"] in ("input", "output"):
            continue
        preds = list(graph.predecessors(name))
        if preds:
            if all(p in out for p in preds):
                out.add(name)
        elif data.get("param_shapes") and not data.get("in_shapes"):
            out.add(name)
    return out
