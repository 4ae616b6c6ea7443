"""Small models and an OpGraph built from their fx trace, for testing measure() on its own.

`fx_opgraph` is a minimal stand-in for capture + cost (only what measure() reads: node names,
kind, flops, mac_bytes, and a replayable GraphModule on the real model); the CLI tests in
test_cli.py go through the real capture.
"""

from __future__ import annotations

from types import SimpleNamespace

import networkx as nx
import pytest
import torch
import torch.fx as fx
from torch import nn
from torch.fx.passes.shape_prop import ShapeProp

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]


class Small(nn.Module):
    """conv → bn → relu → (add) → pool → flatten → linear: compute, element-wise and view ops."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 16, 1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = y + self.conv2(y)
        return self.fc(torch.flatten(self.pool(y), 1))


_KINDS = {nn.Conv2d: "conv", nn.Linear: "linear", nn.BatchNorm2d: "norm", nn.AdaptiveAvgPool2d: "pool"}
_FUNCS = {torch.relu: "activation", torch.flatten: "reshape"}


def fx_opgraph(model: nn.Module, inputs: tuple) -> nx.DiGraph:
    gm = fx.symbolic_trace(model)
    ShapeProp(gm).propagate(*inputs)
    g = nx.DiGraph(target="tests:Small", strategy="fx", replay=SimpleNamespace(graph_module=gm), notes=[])
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            kind = "input"
        elif n.op == "output":
            kind = "output"
        elif n.op == "call_module":
            kind = _KINDS.get(type(gm.get_submodule(n.target)), "other")
        else:
            kind = _FUNCS.get(n.target, "elementwise")
        meta = n.meta.get("tensor_meta")
        out_bytes = meta.shape.numel() * 4 if meta is not None else 0
        in_bytes = sum(a.meta["tensor_meta"].shape.numel() * 4 for a in n.all_input_nodes)
        params = sum(p.numel() for p in gm.get_submodule(n.target).parameters()) if n.op == "call_module" else 0
        flops = params * (meta.shape.numel() // meta.shape[1]) if kind in ("conv", "linear") else 0
        g.add_node(
            n.name,
            kind=kind,
            op=str(n.target),
            module=n.target if n.op == "call_module" else "",
            flops=flops,
            mac_bytes=0 if kind == "reshape" else in_bytes + out_bytes + 4 * params,
            known=kind != "other",
        )
        for i, a in enumerate(n.all_input_nodes):
            g.add_edge(a.name, n.name, index=i)
    return g
