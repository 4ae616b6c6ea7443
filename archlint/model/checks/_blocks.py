"""Blocks for the model checks, in two forms: fork/join regions (a tensor used by several
consumers, up to the op where all its paths meet again: residual blocks, Inception branches) and
module blocks (the children of a container module — ResNet's layer1.0, a Sequential's items —
the units a model repeats). Pure functions of the OpGraph.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import networkx as nx

from archlint.model.checks._query import enclosing_modules
from archlint.model.opgraph import COMPUTE_KINDS, ops

_SINK = "__archlint_sink__"


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
    included, when a sibling Sequential holds the same layer classes). Computed once per graph
    (AL103 asks on every model, AL104 again where it finds element-wise ops to place: under
    --train, whose BatchNorms it counts, about as long again as the rest of the rule)."""
    key = (graph.number_of_nodes(), graph.number_of_edges())
    cached = _module_blocks_cache.get(graph)
    if cached is not None and cached[0] == key:
        return cached[1]
    blocks = _module_blocks(graph)
    _module_blocks_cache[graph] = (key, blocks)
    return blocks


_module_blocks_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _module_blocks(graph: nx.DiGraph) -> list[Block]:
    modules = graph.graph.get("modules", {})
    order = [name for name, _ in ops(graph)]
    fragments: dict[str, int] = {}
    members: dict[str, list[str]] = {}
    for name in order:
        module = graph.nodes[name].get("module") or ""
        for prefix in enclosing_modules(module):
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
