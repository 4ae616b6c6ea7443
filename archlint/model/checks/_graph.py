"""Shared helpers for the model checks: reading op attributes, finding blocks, pricing findings.

Everything here is a pure function of the OpGraph (see archlint/model/opgraph.py). Blocks come
in two forms: fork/join regions (a tensor used by several consumers, up to the op where all its
paths meet again: residual blocks, Inception branches) and module blocks (the children of a
container module — ResNet's layer1.0, a Sequential's items — the units a model repeats).
"""

from __future__ import annotations

import math
import weakref
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx
from torch import nn

from archlint.diagnostics import Diagnostic, Price, Severity
from archlint.model.opgraph import COMPUTE_KINDS, ops
from archlint.model.paired import WithinNoise

# Ops that keep a tensor's values as they are (only move or select them).
PASSTHROUGH_KINDS = frozenset({"reshape", "copy", "split", "dropout"})
_TORCH = Path(nn.__file__).resolve().parents[1]  # torch's own classes are never the user's code
CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict"})
_SINK = "__archlint_sink__"


# ---- reading one op -------------------------------------------------------------------------


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


def is_depthwise(data: dict) -> bool:
    c = conv(data)
    return c is not None and c.depthwise


# ---- walking the graph ----------------------------------------------------------------------


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


def module_mac(graph: nx.DiGraph) -> int:
    """The model's total MAC in bytes (ops with a known formula)."""
    return sum(int(d.get("mac_bytes", 0)) for _, d in ops(graph) if d.get("known", True))


def module_type(graph: nx.DiGraph, path: str) -> str | None:
    info = graph.graph.get("modules", {}).get(path)
    return info.get("type") if info else None


# ---- blocks ---------------------------------------------------------------------------------


@dataclass
class Block:
    name: str  # module path of the block, or the fork → join node names
    nodes: list[str]  # ops in the block, topological order
    fork: str | None = None
    join: str | None = None
    branches: list[list[str]] = field(default_factory=list)  # ops exclusive to each branch


def _in_module(module: str, path: str) -> bool:
    return path == "" or module == path or module.startswith(path + ".")


def module_blocks(graph: nx.DiGraph) -> list[Block]:
    """The units a model repeats: the innermost modules that hold at least two fragments and
    share their class with a sibling (ResNet's layer1.0 … layer1.2, EfficientNet's MBConvs,
    DenseNet's dense layers, an nn.Sequential's identical items — plain nn.Sequential items
    included, when a sibling Sequential holds the same layer classes)."""
    modules = graph.graph.get("modules", {})
    order = [name for name, _ in ops(graph)]
    fragments: dict[str, int] = {}
    members: dict[str, list[str]] = {}
    for name in order:
        module = graph.nodes[name].get("module") or ""
        for prefix in _prefixes(module):
            members.setdefault(prefix, []).append(name)
            if is_fragment(graph.nodes[name]):
                fragments[prefix] = fragments.get(prefix, 0) + 1
    # A container's kind is its children's classes: two nn.Sequential items of a Sequential with
    # the same layers are repeats of one block; a Sequential of different stages is not.
    children: dict[str, list] = {}
    for path, info in modules.items():
        if path:
            children.setdefault(path.rpartition(".")[0], []).append(info.get("type"))
    kind = {
        path: (info.get("type"), tuple(children.get(path, ())) if info.get("type") == "Sequential" else ())
        for path, info in modules.items()
    }
    siblings: dict[tuple, int] = {}
    for path in modules:
        if path:
            key = (path.rpartition(".")[0], kind[path])
            siblings[key] = siblings.get(key, 0) + 1
    units = {
        path
        for path, info in modules.items()
        if path
        and info.get("type") not in ("ModuleList", "ModuleDict")  # they hold blocks; they do not run as one
        and fragments.get(path, 0) >= 2
        and siblings[(path.rpartition(".")[0], kind[path])] >= 2
    }
    innermost = [p for p in units if not any(q != p and _in_module(q, p) for q in units)]
    return [Block(name=p, nodes=members[p]) for p in sorted(innermost, key=lambda p: order.index(members[p][0]))]


def _prefixes(path: str) -> list[str]:
    """"", "a", "a.b" for "a.b": the module path and every module holding it."""
    parts = path.split(".") if path else []
    return [""] + [".".join(parts[: i + 1]) for i in range(len(parts))]


_blocks_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def fork_join_blocks(graph: nx.DiGraph) -> list[Block]:
    """Regions between an op whose output several ops consume and the op where those paths
    meet again (its immediate post-dominator); forks whose paths only meet at the model's
    outputs are not blocks. Computed once per graph (AL103 and AL203 both use them)."""
    key = (graph.number_of_nodes(), graph.number_of_edges())
    cached = _blocks_cache.get(graph)
    if cached is not None and cached[0] == key:
        return cached[1]
    rev = nx.DiGraph()  # the edges reversed, without copying node data or graph attributes
    rev.add_nodes_from(graph)
    rev.add_edges_from((v, u) for u, v in graph.edges)
    rev.add_node(_SINK)
    rev.add_edges_from((_SINK, n) for n in graph if graph.out_degree(n) == 0)
    ipdom = nx.immediate_dominators(rev, _SINK)
    order = {n: i for i, n in enumerate(nx.topological_sort(graph))}
    blocks = []
    for fork in graph:
        succ = list(graph.successors(fork))
        join = ipdom.get(fork)
        if len(succ) < 2 or join in (None, _SINK) or "output" in (graph.nodes[fork]["kind"], graph.nodes[join]["kind"]):
            continue
        inside = _region(graph, fork, join)
        blocks.append(
            Block(
                name=f"{fork} → {join}",
                nodes=sorted(inside, key=order.__getitem__),
                fork=fork,
                join=join,
                branches=_branches(graph, succ, join, sorted(inside, key=order.__getitem__)),
            )
        )
    _blocks_cache[graph] = (key, blocks)
    return blocks


def _region(graph: nx.DiGraph, fork: str, join: str) -> set[str]:
    """Ops reachable from the fork without passing its join: all of them lie before the join."""
    inside: set[str] = set()
    stack = [s for s in graph.successors(fork) if s != join]
    while stack:
        n = stack.pop()
        if n not in inside:
            inside.add(n)
            stack.extend(s for s in graph.successors(n) if s != join)
    return inside


def _branches(graph: nx.DiGraph, succ: list[str], join: str, region: list[str]) -> list[list[str]]:
    """The ops only one of the fork's consumers leads to, per consumer (one pass in topological
    order: each op takes its inputs' branch, or none when two branches meet in it)."""
    heads = {s for s in succ if s != join}
    inside = set(region)
    label: dict[str, str | None] = {}
    for n in region:
        labels = {label[p] for p in graph.predecessors(n) if p in inside}
        if n in heads:
            labels.add(n)
        label[n] = labels.pop() if len(labels) == 1 else None
    branches = [[n for n in region if label[n] == s] for s in succ if s != join]
    if join in succ:
        branches.append([])  # a direct edge: the identity branch of a residual block
    return branches


def common_module(graph: nx.DiGraph, nodes: Iterable[str]) -> str:
    """The deepest module path containing all the given ops ("" for the root)."""
    paths = [(graph.nodes[n].get("module") or "").split(".") for n in nodes]
    paths = [p for p in paths if p != [""]]
    if not paths:
        return ""
    common = []
    for parts in zip(*paths):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    return ".".join(common)


def is_fragment(data: dict) -> bool:
    """An op that counts as a fragment in ShuffleNetV2's sense (G3): a conv, matmul or pool."""
    return data["kind"] in COMPUTE_KINDS or data["kind"] == "pool"


def longest_chain(graph: nx.DiGraph, nodes: list[str]) -> list[str]:
    """The longest path of fragments through the given ops (in topological order)."""
    inside = set(nodes)
    best: dict[str, list[str]] = {}
    for n in nodes:
        prev = max((best[p] for p in graph.predecessors(n) if p in inside), key=len, default=[])
        best[n] = prev + [n] if is_fragment(graph.nodes[n]) else prev
    return max(best.values(), key=len, default=[])


# ---- findings -------------------------------------------------------------------------------

def latency(graph: nx.DiGraph, nodes: Iterable[str]) -> float | None:
    values = [graph.nodes[n].get("latency_ms") for n in nodes]
    values = [v for v in values if v is not None]
    return sum(values) if values else None


def model_latency(graph: nx.DiGraph, ctx) -> float | None:
    """The model's end-to-end latency (measured), else the sum of the op latencies."""
    pricer = getattr(ctx, "pricer", None)
    end_to_end = getattr(pricer, "end_to_end_ms", None) if pricer is not None else None
    if end_to_end:
        return float(end_to_end)
    return latency(graph, (n for n, _ in ops(graph)))


def price(
    graph: nx.DiGraph,
    ctx,
    *,
    alternative: str,
    mac_bytes_saved: int | None = None,
    flops_saved: int | None = None,
    saving_ms: float | None = None,
    removed: Iterable[str] = (),
    claims: Iterable[str] | None = None,
    estimated: bool = False,
) -> Price:
    """A finding's price: what `alternative` saves. With --latency the basis is measured — the
    rule's what-if `saving_ms` when it timed one, else the measured time of the `removed` ops
    (those the alternative does away with entirely) — as a share of the model's measured latency.
    Without, with --device-spec and ops to remove, it is estimated: their estimated time as a
    share of the model's estimate. Otherwise, or when nothing could be timed, it is static: the
    MAC saved as a share of the model's MAC. `claims` (default: the removed ops) are the ops the saving is made of;
    `estimated` labels a saving_ms derived from measured times by a model (a proportion)."""
    removed = list(removed)
    claims = tuple(removed if claims is None else claims)
    pricer = getattr(ctx, "pricer", None)
    if pricer is not None:
        if saving_ms is None and removed:
            saving_ms = latency(graph, removed)
        whole = model_latency(graph, ctx)
        if saving_ms is not None and whole:
            device = getattr(pricer, "device", None)
            return Price.timed(
                alternative, saving_ms=saving_ms, model_ms=whole, basis="estimated" if estimated else "measured",
                mac_bytes_saved=mac_bytes_saved,
                flops_saved=flops_saved, device=str(device) if device is not None else None, claims=claims,
            )
    estimate = getattr(ctx, "estimate", None)
    if pricer is None and estimate and removed:  # no measurement: the device-spec estimate of the removed ops
        saving = sum(graph.nodes[n].get("estimated_ms") or 0.0 for n in removed)
        return Price.timed(
            alternative, saving_ms=saving, model_ms=estimate["latency_ms"], basis="estimated",
            mac_bytes_saved=mac_bytes_saved, flops_saved=flops_saved, device=estimate["device_spec"], claims=claims,
        )
    return Price.static(
        alternative, mac_bytes_saved=mac_bytes_saved, model_mac_bytes=module_mac(graph), flops_saved=flops_saved,
        claims=claims,
    )


def finding(graph: nx.DiGraph, code: str, message: str, *, node: str | None, module: str | None, **kw) -> Diagnostic:
    """A Diagnostic located at a model node, its module path and the user's source: the line that
    created the module (`self.conv2 = nn.Conv2d(...)`, or the builder call that made a library
    model), else the innermost module on the path whose class is the user's (a finding on
    `backbone.0.conv2` points at the user's block class, not at torch's Conv2d)."""
    d = Diagnostic(code=code, message=message, node=node, module=module, **kw)
    if module is None:
        return d
    modules = graph.graph.get("modules", {})
    created = next((modules[p]["created"] for p in reversed(_prefixes(module)) if modules.get(p, {}).get("created")), None)
    if created:  # where the user's code created the module (recorded at build): the best place
        d.file, d.line = created
        return d
    path = [modules[p] for p in reversed(_prefixes(module)) if p in modules and modules[p].get("file")]
    info = next((i for i in path if not _library(i["file"])), path[0] if path else None)
    if info:
        d.file, d.line = info.get("file"), info.get("line")
    return d


_LIBRARIES = ("transformers", "diffusers", "timm", "torchvision")


def library_module(graph: nx.DiGraph, module: str | None) -> str | None:
    """The library a module's class comes from (transformers, diffusers, timm, torchvision): the
    user switches it with the library's own settings rather than rewriting it; None for the user's."""
    if module is None:
        return None
    modules = graph.graph.get("modules", {})
    for p in reversed(_prefixes(module)):
        file = (modules.get(p) or {}).get("file")
        if file:
            parts = Path(file).parts
            return next((lib for lib in _LIBRARIES if lib in parts and _library(file)), None)
    return None


def _library(file: str) -> bool:
    parts = Path(file).parts
    return "site-packages" in parts or "dist-packages" in parts or Path(file).is_relative_to(_TORCH)


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def iter_convs(graph: nx.DiGraph) -> Iterator[tuple[str, dict, Conv]]:
    for name, data in ops(graph):
        c = conv(data)
        if c is not None:
            yield name, data, c


def whatif(ctx, name: str, *args) -> float | None:
    """A what-if's relative saving from archlint.model.whatif ((original − alternative) /
    original, measured with ctx.pricer); None without --latency or when it cannot be built.
    Only 2-D convs have alternatives built (callers check the input is 4-D)."""
    if getattr(ctx, "pricer", None) is None:
        return None
    from archlint.model import whatif as alternatives

    return getattr(alternatives, name)(ctx.pricer, *args)


def whatif_ms(graph: nx.DiGraph, ctx, nodes: Iterable[str], name: str, *args) -> float | None:
    """A what-if saving in ms: its relative saving times the measured in-model time of the ops
    it replaces (so it never exceeds what they cost in this model)."""
    fraction = whatif(ctx, name, *args)
    spent = latency(graph, nodes) if fraction is not None else None
    if spent is None:
        return None
    if isinstance(fraction, WithinNoise):  # inside the noise: 0 ms, the noise in ms of these ops
        return WithinNoise(fraction.noise * spent)
    return fraction * spent


def fixed_ms(graph, ctx, fix: str, nodes: Iterable) -> float | None:
    """What the whole model saves, measured end to end, with archlint.model.fixed's `fix`
    ("fold_norms" on (layer, norm) pairs, "drop_bias" on convs) applied to its modules; None
    without --latency, or where a node's module cannot be edited for that op alone (the graph
    shows it running more than one op, or the op is functional inside a bigger module)."""
    if getattr(ctx, "pricer", None) is None:
        return None
    from archlint.model import fixed

    ran = Counter(d.get("module") for _, d in ops(graph))

    def path(node: str) -> str | None:
        module = graph.nodes[node].get("module")
        return module if module and ran[module] == 1 else None

    paths = tuple(tuple(path(n) for n in item) if isinstance(item, tuple) else path(item) for item in nodes)
    if any(p is None or (isinstance(p, tuple) and None in p) for p in paths):
        return None
    return fixed.saving_ms(ctx.pricer, fix, getattr(fixed, fix)(paths), paths)


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


def is_batchnorm(data: dict) -> bool:
    """BatchNorm or InstanceNorm: both subtract a per-channel mean, so a bias before them cancels."""
    name = op_name(data) + (data.get("module_type") or "").lower()
    return data["kind"] == "norm" and ("batchnorm" in name or "instancenorm" in name)


def producer_then_norm(graph: nx.DiGraph) -> Iterator[tuple[str, str]]:
    """(conv or linear, norm) pairs where a BatchNorm is the producer's only consumer: in eval
    the norm folds into the producer's weights and bias (Conv+BatchNorm2d, Linear+BatchNorm1d)."""
    for name, data in ops(graph):
        if data["kind"] in ("conv", "linear"):
            nxt = sole_consumer(graph, name)
            if nxt is not None and is_batchnorm(graph.nodes[nxt]) and "instancenorm" not in _norm_name(graph.nodes[nxt]):
                yield name, nxt


def _norm_name(data: dict) -> str:
    return op_name(data) + (data.get("module_type") or "").lower()


# Who owns an op's saving when several findings name it: the most specific rule first.
PRIORITY = ("AL205", "AL204", "AL202", "AL203", "AL201", "AL106", "AL107", "AL108", "AL109", "AL110", "AL111", "AL113", "AL105", "AL101", "AL102", "AL103", "AL104")


def settle(found: list[Diagnostic]) -> list[Diagnostic]:
    """One op's saving is claimed by one finding: walking the findings from the most specific
    rule, an additive price (AL104) drops the parts others own (its severity is judged after);
    any other finding that names an owned op becomes info and says which findings own it."""
    owner: dict[str, str] = {}
    rank = {code: i for i, code in enumerate(PRIORITY)}
    for d in sorted(found, key=lambda d: rank.get(d.code, len(PRIORITY))):
        p = d.price
        if p is None or not p.claims:
            continue
        taken = {c for c in p.claims if c in owner}
        if taken and p.parts is not None:
            p.without(taken)
            d.evidence["counted_by"] = sorted({owner[c] for c in taken})
            d.message += f" ({', '.join(d.evidence['counted_by'])} own part of these ops: the price counts the rest)"
        elif taken:
            d.severity = Severity.INFO
            d.evidence["overlaps"] = sorted({owner[c] for c in taken})
            continue
        for c in p.claims:
            owner.setdefault(c, d.code)
    return found


def conv_then_norm(graph: nx.DiGraph) -> Iterator[tuple[str, str]]:
    """(conv, norm) pairs where a BatchNorm/InstanceNorm is the conv's only consumer."""
    for name, data in ops(graph):
        if data["kind"] == "conv":
            nxt = sole_consumer(graph, name)
            if nxt is not None and is_batchnorm(graph.nodes[nxt]):
                yield name, nxt
