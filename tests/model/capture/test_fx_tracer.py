"""The fx capture's tracer does less work per node than torch's (issue 45) and gives its graph: a
parameter's name from a table (fx searched every parameter at each access), an unpacked proxy's
function disassembled once per trace (fx did at every unpack), its scope and module stack copied
directly."""

from __future__ import annotations

import dis
from unittest import mock

import pytest
import torch
import torch.fx as fx
from torch import nn

from archlint.model.capture import capture, is_leaf
from archlint.model.capture.fx import _trace


class _Scaled(nn.Module):
    """Reads its parameters in its forward (a layer scale, a norm's weight), one of them shared."""

    def __init__(self, shared: nn.Parameter):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(8))
        self.shared = shared

    def forward(self, x):
        b, n, c = x.shape  # an Attribute unpacked
        q, k = x.unbind(0)[:2]  # a proxy unpacked
        y = (q + k) * self.gamma * self.gamma  # the same parameter read twice
        return torch.stack([y, y]).reshape(2, n, c) * self.shared + b


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = nn.Parameter(torch.full((8,), 2.0))
        self.blocks = nn.Sequential(*[_Scaled(self.shared) for _ in range(3)])
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        x = self.fc(self.blocks(x))
        for t in [x, x]:  # a plain list: no proxy iterated
            x = x + t
        return x


class _TorchTracer(fx.Tracer):
    def is_leaf_module(self, m, qualname):
        return is_leaf(m)


def _nodes(graph: fx.Graph) -> list[tuple]:
    return [
        (n.op, n.name, str(n.target), str(n.args), str(n.kwargs), n.meta.get("nn_module_stack"))
        + (type(n.meta.get("nn_module_stack")),)
        for n in graph.nodes
    ]


def test_the_graph_is_torchs():
    model = _Net().eval()
    ours = _trace(model)
    theirs = _TorchTracer().trace(model)
    assert _nodes(ours.graph) == _nodes(theirs)
    # fx's names: the shared parameter by its first name (read in every block: one node), each read once
    assert [n.target for n in ours.graph.nodes if n.op == "get_attr"] == [
        "blocks.0.gamma",
        "shared",
        "blocks.1.gamma",
        "blocks.2.gamma",
    ]
    x = torch.randn(2, 4, 8)
    assert torch.equal(ours(x), model(x))  # the lazy GraphModule runs as fx's does


def test_each_parameter_is_not_searched_for_at_every_access():
    model = _Net().eval()
    walks = []
    named = nn.Module.named_parameters

    def counted(self, *args, **kwargs):
        walks.append(1)
        return named(self, *args, **kwargs)

    with mock.patch.object(nn.Module, "named_parameters", counted):
        _trace(model)
    assert len(walks) <= 1  # was one walk of every parameter per access (7 here)


def test_a_function_is_disassembled_once_per_trace():
    model = _Net().eval()
    seen = []
    real = dis.get_instructions

    def counted(x, *args, **kwargs):
        seen.append(x)
        return real(x, *args, **kwargs)

    with mock.patch.object(dis, "get_instructions", counted):
        _trace(model)
    assert seen and len(seen) == len(set(seen))  # was: at each of the 6 unpacks


def test_iterating_a_proxy_fails_as_in_fx():
    class Loops(nn.Module):
        def forward(self, x):
            return sum(t for t in x)

    with pytest.raises(fx.proxy.TraceError, match="cannot be iterated"):
        _trace(Loops())
    with pytest.raises(fx.proxy.TraceError, match="cannot be iterated"):
        _TorchTracer().trace(Loops())


def test_the_capture_counts_the_same():
    model = _Net().eval()
    graph, _ = capture(model, (torch.randn(2, 4, 8),), "fx")
    assert graph.graph["strategy"] == "fx" and sum(1 for _, d in graph.nodes(data=True) if d.get("op")) > 10
