"""The --train pipeline's glue, made cheaper, still computing what it computed: which ops run a
backward (the loss's ancestors, found in one pass against the graph's order), and model.train()'s
flag set on each module of the meta copy as nn.Module.__setattr__ sets it."""

from __future__ import annotations

import networkx as nx
import pytest
import torch
import torchvision
from torch import nn

from archlint.model.train import grad
from archlint.model.train.memory import _meta_copy, _walk
from tests.model.train.flopcheck import step_graph


class _DeadBranch(nn.Module):
    """An op chain the loss never reads (computed, not returned), a detached output, and a
    tensor read twice (its gradients summed)."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        h = self.a(x)
        self.unused = self.b(h).relu()  # kept on the module: the capture keeps the ops
        return self.c(h) + h, h.detach() * 2


def _expected(graph: nx.DiGraph, sources: list[str]) -> tuple[dict[str, bool], dict[str, int]]:
    """backward and grad_fanout by their definition (grad's docstring): the ops that need a
    gradient and lead to the loss (nx.ancestors), and the consumers that send one back."""
    reaches = set(sources)
    for s in sources:
        reaches |= nx.ancestors(graph, s)
    nodes = graph.nodes
    backward = {
        n: bool(d.get("grad_out")) and n in reaches and d["kind"] not in ("input", "output") for n, d in nodes.items()
    }
    fanout = {
        n: sum(
            1 for _, c, e in graph.out_edges(n, data=True) if backward[c] and nodes[c]["grad_inputs"][e.get("index", 0)]
        )
        + (1 if n in sources else 0)
        for n in nodes
    }
    return backward, fanout


@pytest.mark.parametrize(
    "build",
    [
        lambda: (_DeadBranch(), (torch.randn(4, 8),)),
        lambda: (torchvision.models.mobilenet_v3_small(), (torch.randn(2, 3, 64, 64),)),
    ],
    ids=["dead-branch", "mobilenet_v3_small"],
)
def test_backward_runs_for_the_ops_that_need_a_gradient_and_reach_the_loss(build):
    model, args = build()
    graph, _ = step_graph(model, args)
    sources = grad.propagate(graph, model)
    backward, fanout = _expected(graph, sources)
    assert {n: d["backward"] for n, d in graph.nodes.items()} == backward
    assert {n: d["grad_fanout"] for n, d in graph.nodes.items()} == fanout
    if isinstance(model, _DeadBranch):  # the case the pass must tell apart: a gradient that reaches no loss
        assert any(d.get("grad_out") and not d["backward"] for _, d in graph.nodes.items())
        assert any(f > 1 for f in fanout.values())  # `h`, read by c and by the add


class _Counting(nn.Linear):
    """A module with a __setattr__ of its own: it sees each attribute set."""

    seen: list = []

    def __setattr__(self, name, value):
        if name == "training":
            type(self).seen.append(value)
        super().__setattr__(name, value)


def test_the_step_s_walk_sets_training_as_model_train_does():
    model = nn.Sequential(nn.Linear(4, 4), _Counting(4, 4), nn.Sequential(nn.ReLU(), nn.BatchNorm1d(4)))
    model.eval()
    meta, _ = _meta_copy(model)
    _Counting.seen = []
    walk = _walk(meta, train=True)
    assert all(m.training for m in meta.modules())
    assert _Counting.seen == [True]  # its own __setattr__ ran, as model.train() runs it
    assert [p.shape for p in walk.params] == [p.shape for p in model.parameters()]
    assert not any(m.training for m in model.modules())  # the copy's flags, not the model's
