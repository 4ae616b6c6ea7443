"""Op queries for the model checks: reading one op's attributes, a conv's geometry, walking the
graph (producers, consumers, a layer and the norm after it) and module paths.

Everything here is a pure function of the OpGraph (see archlint/model/opgraph.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import networkx as nx

from archlint.model.opgraph import ops

# Ops that keep a tensor's values as they are (only move or select them).
PASSTHROUGH_KINDS = frozenset({"reshape", "copy", "split", "dropout"})


def op_name(data: dict) -> str:
    """The op's bare name, lower case, no namespace, overload or in-place suffix:
    "nn.ReLU" → "relu", "aten.relu_.default" → "relu", "F.leaky_relu" → "leakyrelu"."""
    text = str(data.get("op", ""))
    parts = [p for p in text.split(".") if p not in ("default", "Tensor", "Scalar", "int", "dim", "self")]
    name = parts[-1] if parts else text
    return name.lower().rstrip("_").replace("_", "")


def attr(data: dict, key: str, default=None):
    return (data.get("attrs") or {}).get(key, default)


def pair(value, default: int = 1) -> tuple[int, ...]:
    if value is None:
        return (default,)
    if isinstance(value, (list, tuple)):
        return tuple(int(v) for v in value) or (default,)
    return (int(value),)


@dataclass(frozen=True)
class Conv:
    """A conv's geometry in elements: batch n, channels c1→c2, kernel area k, groups g,
    spatial sizes (elements per channel per sample) of its input and output."""

    n: int
    c1: int
    c2: int
    k: int
    g: int
    hw_in: int
    hw_out: int
    itemsize: int

    @property
    def depthwise(self) -> bool:
        return self.g > 1 and self.g == self.c1

    @property
    def weights(self) -> int:
        return self.k * self.c1 * self.c2 // self.g

    @property
    def flops(self) -> int:
        return self.n * self.hw_out * self.weights

    @property
    def mac(self) -> int:
        """ShuffleNetV2's MAC in elements: input read, output written, weights read once."""
        return self.n * (self.hw_in * self.c1 + self.hw_out * self.c2) + self.weights


def conv(data: dict) -> Conv | None:
    """The geometry of a conv node, or None when its shapes are not known."""
    if data.get("kind") != "conv" or attr(data, "transposed", False):
        return None
    ins, outs = data.get("in_shapes") or [], data.get("out_shapes") or []
    if not ins or not outs or len(ins[0]) < 3 or len(outs[0]) < 3:
        return None
    x, y = ins[0], outs[0]
    c1 = int(attr(data, "in_channels", x[1]))
    c2 = int(attr(data, "out_channels", y[1]))
    return Conv(
        n=int(x[0]),
        c1=c1,
        c2=c2,
        k=math.prod(pair(attr(data, "kernel_size"))),
        g=int(attr(data, "groups", 1) or 1),
        hw_in=math.prod(x[2:]),
        hw_out=math.prod(y[2:]),
        itemsize=int(data.get("itemsize", 4)),
    )


def iter_convs(graph: nx.DiGraph) -> Iterator[tuple[str, dict, Conv]]:
    for name, data in ops(graph):
        c = conv(data)
        if c is not None:
            yield name, data, c


def conv_args(data: dict) -> tuple | None:
    """(input shape, c_out, kernel, stride, padding, groups, dilation) to rebuild a 2-D conv, else None."""
    ins = data.get("in_shapes") or []
    if not ins or len(ins[0]) != 4 or attr(data, "transposed", False):
        return None
    padding = attr(data, "padding", 0)  # "same" / "valid" pass through to nn.Conv2d
    return (
        tuple(ins[0]),
        int(attr(data, "out_channels", (data.get("out_shapes") or [[0, 0]])[0][1])),
        _two(pair(attr(data, "kernel_size"))),
        _two(pair(attr(data, "stride"))),
        padding if isinstance(padding, str) else _two(pair(padding, 0)),
        int(attr(data, "groups", 1) or 1),
        _two(pair(attr(data, "dilation"))),
    )


def _two(t: tuple[int, ...]) -> tuple[int, int]:
    return (t[0], t[0]) if len(t) == 1 else (t[0], t[1])


def tensor_inputs(graph: nx.DiGraph, name: str) -> list[str]:
    """Producers of a node's tensor inputs, in argument order."""
    preds = list(graph.predecessors(name))
    return sorted(preds, key=lambda p: graph.edges[p, name].get("index", 0))


def source(graph: nx.DiGraph, name: str) -> str | None:
    """The producer of a node's first tensor input, looking through views and copies."""
    preds = tensor_inputs(graph, name)
    while preds:
        p = preds[0]
        if graph.nodes[p]["kind"] not in ("reshape", "copy"):
            return p
        preds = tensor_inputs(graph, p)
    return None


def sole_consumer(graph: nx.DiGraph, name: str) -> str | None:
    succ = list(graph.successors(name))
    return succ[0] if len(succ) == 1 else None


def reads_model_input(graph: nx.DiGraph, name: str) -> bool:
    """True for ops fed (through views) by a model input: a stem conv's channels are the data's."""
    src = source(graph, name)
    return src is not None and graph.nodes[src]["kind"] == "input"


def converted_to_channels_last(graph: nx.DiGraph, name: str) -> bool:
    """An op before it converts to channels_last (`x.contiguous(memory_format=torch.channels_last)`,
    `.to(memory_format=...)`): convolutions and most ops keep that format, in which the permute is a
    free view. (Capture runs on meta tensors, whose strides do not follow it.)"""
    return any("channels_last" in str(attr(graph.nodes[a], "memory_format", "")) for a in nx.ancestors(graph, name))


def _norm_name(data: dict) -> str:
    """The norm's op and module class names, lower case: where "batchnorm" or "instancenorm" shows."""
    return op_name(data) + (data.get("module_type") or "").lower() if data["kind"] == "norm" else ""


def _then_norm(graph: nx.DiGraph, kinds: tuple[str, ...], norm) -> Iterator[tuple[str, str]]:
    """(layer, norm) pairs: an op of one of `kinds` whose only consumer is a norm `norm` accepts (by name)."""
    for name, data in ops(graph):
        if data["kind"] in kinds:
            nxt = sole_consumer(graph, name)
            if nxt is not None and norm(_norm_name(graph.nodes[nxt])):
                yield name, nxt


def producer_then_norm(graph: nx.DiGraph) -> Iterator[tuple[str, str]]:
    """(conv or linear, norm) pairs where a BatchNorm is the producer's only consumer: in eval
    the norm folds into the producer's weights and bias (Conv+BatchNorm2d, Linear+BatchNorm1d)."""
    return _then_norm(graph, ("conv", "linear"), lambda name: "batchnorm" in name and "instancenorm" not in name)


def conv_then_norm(graph: nx.DiGraph) -> Iterator[tuple[str, str]]:
    """(conv, norm) pairs where a BatchNorm/InstanceNorm is the conv's only consumer: both subtract
    a per-channel mean, so a bias before them cancels."""
    return _then_norm(graph, ("conv",), lambda name: "batchnorm" in name or "instancenorm" in name)


def module_mac(graph: nx.DiGraph) -> int:
    """The model's total MAC in bytes (ops with a known formula)."""
    return sum(int(d.get("mac_bytes", 0)) for _, d in ops(graph) if d.get("known", True))


def module_type(graph: nx.DiGraph, path: str) -> str | None:
    info = graph.graph.get("modules", {}).get(path)
    return info.get("type") if info else None


def enclosing_modules(path: str) -> list[str]:
    """ "", "a", "a.b" for "a.b": the module path and every module holding it."""
    parts = path.split(".") if path else []
    return [""] + [".".join(parts[: i + 1]) for i in range(len(parts))]
