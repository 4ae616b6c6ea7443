"""OpGraph: the one intermediate form of a captured model (see docs/design.md).

A `networkx.DiGraph` whose nodes are ops and whose edges are tensors (producer → consumer).
Every capture strategy produces the same form, so no check knows which tracer ran.

Node key: a stable, unique name (the fx node name where fx ran, e.g. "layer1_0_conv1"); it is
also `layers[].name` in the JSON and the range name in the profiler trace.

Node attributes (set by capture):
    kind          normalized op kind, one of KINDS
    op            what ran, readable: "nn.Conv2d", "F.relu", "aten.add.Tensor", "Tensor.view"
    key           normalized op name the cost table is keyed by ("Conv2d", "relu", "add")
    module        dotted path of the module the op belongs to ("layer1.0.conv1"), "" for the root
    module_type   class name of that module ("Conv2d"), None at the root
    in_shapes     list of tuples: the tensor inputs, in argument order (weights not included)
    out_shapes    list of tuples: the tensor outputs
    dtype         str, the output dtype ("float32")
    itemsize      bytes per element of that dtype
    param_shapes  {"weight": (..), "bias": (..)}: parameters and buffers this op reads
    param_bytes   bytes of those parameters and buffers
    in_bytes      bytes of the distinct input tensors (a tensor passed twice is read once)
    params        number of parameter elements this op owns (each parameter counted once
                  model-wide, at the first op that reads it)
    attrs         op attributes (host_sync: why the op makes the host wait for the device, set
                  by capture on value reads and data-dependent shapes), kernel_size, stride, padding, dilation, groups, transposed,
                  in_channels, out_channels, bias (bool), inplace, num_heads, ... as they apply
Node attributes (set by cost):
    flops         multiply-adds (int); 0 for ops without arithmetic
    mac_bytes     memory access cost in bytes (ShuffleNetV2: inputs + weights read + outputs written)
    out_bytes     bytes of the output activation(s)
    known         False where no cost formula exists (flops/mac not counted, op listed as unknown)
Node attributes (set by measure, only with --latency):
    latency_ms, latency_spread_ms ([q1, q3]), roofline {intensity, bound, attainable_ms, efficiency}

Edge attributes: `index` (the consumer's input position of this tensor).

Graph attributes (G.graph):
    target, strategy ("fx" | "export" | "dispatch"), mode ("eval" | "train"), build, dtype,
    input_shapes, notes (list of str: fallbacks taken, caveats), replay (an object that can run
    the graph op by op for timing, or None when the strategy cannot replay: archlint.model.capture.
    Replay with `graph_module`, an fx GraphModule on the real model's modules for strategy "fx";
    for "export", the exported program on the model's parameter tensors with each leaf-module call
    fused into one submodule call; None for "dispatch" or when a note says it could not be built),
    modules
    ({path: {"type": cls name, "params": direct parameter count, "file": str|None,
    "line": int|None}} for every submodule, reached or not), reached_modules (set of paths of
    modules whose forward ran), unused_params (names of parameters no op read), param_count
    (torch's count of the model's parameters), unused_param_count (those no op read) and
    unused_modules ([(path, elements)]: the outermost modules no op read a parameter of)

Nodes of kind "input" (model inputs) and "output" carry no cost and are not layers.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator

import networkx as nx

from archlint.result import KIND_FAMILIES, Layer, Totals

KINDS = (
    "input",
    "output",
    "conv",
    "linear",
    "matmul",
    "attention",
    "recurrent",  # nn.LSTM / GRU / RNN and their cells, one op each
    "norm",
    "activation",
    "elementwise",
    "pool",
    "concat",
    "split",
    "reshape",  # views: cost nothing
    "copy",  # materializing copies: contiguous, clone, permute+contiguous, to(dtype)
    "reduction",
    "embedding",
    "dropout",
    "upsample",
    "creation",  # zeros/ones/arange: writes only
    "sync",  # the host reads a tensor's value (.item(), .tolist(), `if t:`): out_shapes = the tensor read
    "other",  # recognized but without a formula: known=False
)
COMPUTE_KINDS = frozenset(KIND_FAMILIES["compute"])
ELEMENTWISE_KINDS = frozenset(KIND_FAMILIES["element-wise"])


def ops(graph: nx.DiGraph) -> Iterator[tuple[str, dict]]:
    """(name, attributes) of every op that is a layer, in topological order."""
    nodes = graph.nodes
    for name in _order(graph):
        data = nodes[name]
        if data["kind"] not in ("input", "output"):
            yield name, data


# The topological order of each graph, sorted once: the checks, costs and outputs ask for it ~35
# times an analysis (a sort each was a third of the checks' time on a DenseNet). An OpGraph is not
# changed after its capture; the node and edge counts guard against one that is.
_ORDERS: weakref.WeakKeyDictionary[nx.DiGraph, tuple[int, int, list[str]]] = weakref.WeakKeyDictionary()


def topological_order(graph: nx.DiGraph) -> list[str]:
    """Every node of the graph (inputs and outputs too) in nx.topological_sort's order, sorted
    once per graph (the list is shared: read it, do not change it)."""
    return _order(graph)


def _order(graph: nx.DiGraph) -> list[str]:
    size = (graph.number_of_nodes(), graph.number_of_edges())
    cached = _ORDERS.get(graph)
    if cached is None or cached[:2] != size:
        cached = _ORDERS[graph] = (*size, list(nx.topological_sort(graph)))
    return cached[2]


def display_names(graph: nx.DiGraph) -> dict[str, str]:
    """One readable, unique name per op, used by every output: the module path when the module
    holds that one op ("block1.conv1"), else the module path and the op ("block1:relu",
    "block1:relu_1", top level: "flatten"). The OpGraph node name stays the op's id."""
    per_module: dict[str, list[tuple[str, str]]] = {}
    for name, d in ops(graph):
        per_module.setdefault(d.get("module") or "", []).append((name, d.get("key") or d.get("kind") or "op"))
    names: dict[str, str] = {}
    for module, members in per_module.items():
        if module and len(members) == 1:
            names[members[0][0]] = module
            continue
        seen: dict[str, int] = {}
        for name, key in members:
            n = seen.get(key, 0)
            seen[key] = n + 1
            op = key if n == 0 else f"{key}_{n}"
            names[name] = f"{module}:{op}" if module else op
    return names


def to_layers(graph: nx.DiGraph) -> list[Layer]:
    display = display_names(graph)
    return [
        Layer(
            name=name,
            kind=d["kind"],
            op=d["op"],
            module=d.get("module") or None,
            flops=int(d.get("flops", 0)),
            mac_bytes=int(d.get("mac_bytes", 0)),
            params=int(d.get("params", 0)),
            out_bytes=int(d.get("out_bytes", 0)),
            in_shapes=[list(s) for s in d.get("in_shapes", [])],
            out_shapes=[list(s) for s in d.get("out_shapes", [])],
            dtype=d.get("dtype"),
            known=bool(d.get("known", True)),
            attrs=_jsonable(d.get("attrs", {})),
            latency_ms=d.get("latency_ms"),
            latency_spread_ms=d.get("latency_spread_ms"),
            roofline=d.get("roofline"),
            inputs=list(graph.predecessors(name)),
            estimated_ms=d.get("estimated_ms"),
            bound=d.get("estimate_bound"),
            estimate_terms=d.get("estimate_terms"),
            display=display[name],
            flops_backward=d.get("flops_backward"),
            mac_bytes_backward=d.get("mac_bytes_backward"),
            backward_terms=d.get("backward_terms"),
        )
        for name, d in ops(graph)
    ]


def totals(graph: nx.DiGraph) -> Totals:
    t = Totals()
    for _, d in ops(graph):
        if d.get("known", True):
            t.flops += int(d.get("flops", 0))
            t.mac_bytes += int(d.get("mac_bytes", 0))
        else:
            t.unknown_ops += 1
        t.params += int(d.get("params", 0))
        t.activation_bytes += int(d.get("out_bytes", 0))
    # params: torch's count of the model's parameters, those the forward never reads among them
    # (the ops' own count leaves them out: an auxiliary head, an unused layer)
    if "param_count" in graph.graph:
        t.params = int(graph.graph["param_count"])
        t.unused_params = int(graph.graph.get("unused_param_count", 0))
    return t


_PLAIN = frozenset({bool, int, float, str, type(None)})


def _jsonable(value):
    kind = type(value)
    if kind in _PLAIN:  # most values (by exact type: an enum that is an int keeps the checks below)
        return value
    if kind is dict:
        return {k if type(k) is str else str(k): _jsonable(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return str(value)
