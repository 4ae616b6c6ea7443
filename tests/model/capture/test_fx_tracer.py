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
from archlint.model.capture.fx import _trace, _trace_through_wrapped


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


class _Arguments(nn.Module):
    """Every kind of argument a node takes: keywords, slices, dicts, named tuples, tensor constants,
    buffers, dtypes, None, nested lists and tuples of proxies (the tracer's create_arg and
    create_node shortcuts, issue 45)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("offset", torch.ones(4))
        self.constant = torch.arange(4.0)  # a plain tensor attribute: fx's _tensor_constant
        self.fc = nn.Linear(4, 4)

    def forward(self, x, mask=None):
        y = self.fc(x)[:, 1:3]
        z = torch.cat([y, y[..., ::-1] if False else y], dim=-1)
        z = torch.nn.functional.pad(z, (0, 0), mode="constant", value=0.5)
        w = torch.where(z > 0, z, torch.zeros_like(z, dtype=torch.float32))
        parts = {"a": w, "b": (w, [x, self.offset])}
        s = torch.stack((parts["a"], parts["b"][0]), 0).sum(dim=(0,), keepdim=False)
        return torch.add(s, self.constant, alpha=2) + x.new_zeros(x.shape, dtype=None) + x.size(-1), mask


def _users(graph: fx.Graph) -> list[list[str]]:
    return [[u.name for u in n.users] for n in graph.nodes]


@pytest.mark.parametrize("make", ["arguments", "resnet18", "efficientnet_b0", "vit_b_16"])
def test_the_graph_with_its_users_is_torchs_for_every_kind_of_argument(make):
    if make == "arguments":
        model, concrete = _Arguments().eval(), {"mask": None}
    else:
        import torchvision

        model, concrete = getattr(torchvision.models, make)().eval(), None
    ours = _trace(model, concrete)
    with _trace_through_wrapped():  # (as _trace: stochastic_depth kept, others traced through)
        theirs = _TorchTracer().trace(model, concrete_args=concrete)
    assert _nodes(ours.graph) == _nodes(theirs)
    assert _users(ours.graph) == _users(theirs)
    assert [type(n.kwargs) for n in ours.graph.nodes] == [type(n.kwargs) for n in theirs.nodes]


def test_the_arguments_are_not_walked_for_symbolic_ints_at_every_node():
    """Graph.create_node walks each node's arguments to warn of a raw SymInt, which a symbolic trace
    never holds; the tracer skips that walk (a tenth of the trace, issue 45), the graph the same."""
    from torch.utils import _pytree as pytree

    walks = []
    tree_iter = pytree.tree_iter

    def counted(*args, **kwargs):
        walks.append(1)
        return tree_iter(*args, **kwargs)

    with mock.patch.object(pytree, "tree_iter", counted):
        graph = _trace(_Net().eval()).graph
    assert len(graph.nodes) > 20 and walks == []
