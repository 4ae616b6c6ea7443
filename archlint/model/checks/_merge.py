"""When a fragmented block's fragments merge into one op exactly (AL103): the merged op as it
would run, so it can be priced on a device spec, and whether the merge keeps the model.

Exact merges (same outputs, weights computed from the old ones, no retraining):
- product: pointwise convs (1×1, stride 1, no padding, one group) or linears in series with
  nothing between them: W = Wn···W1 (biases carried through), one op in → out;
- concat: pointwise convs or linears reading one input, their outputs concatenated on the
  channel (feature) dim: one op with the weights stacked;
- grouped: pointwise convs each reading one equal chunk of a split, concatenated: one grouped
  conv (groups = branches), block-diagonal weights — exact when branch i reads chunk i, which
  the graph does not record (the finding says so).
Anything else (a nonlinearity between, a 3×3 conv, a pool) merges only into a new design.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx

from archlint.model.estimating.torch_kernels import VIEW_KINDS


@dataclass(frozen=True)
class Merge:
    how: str  # "product" | "concat" | "grouped"
    op: dict  # the merged op, in the OpGraph's op form (for archlint.model.estimating.estimate.estimate_op)
    removed: tuple[str, ...]  # the ops it replaces: fragments, and the split/concat it makes unnecessary
    text: str  # the alternative in words


def _pointwise(d: dict) -> bool:
    if d["kind"] == "linear":
        return True
    a = d.get("attrs") or {}
    if d["kind"] != "conv" or a.get("transposed") or int(a.get("groups", 1) or 1) != 1:
        return False
    return (
        all(int(k) == 1 for k in a.get("kernel_size") or [0])
        and all(int(s) == 1 for s in a.get("stride") or [1])
        and all(int(p) == 0 for p in a.get("padding") or [0])
    )


def _channels(d: dict, which: str) -> int:
    shape = (d.get("in_shapes") if which == "in" else d.get("out_shapes") or [()])[0]
    return int(shape[-1] if d["kind"] == "linear" else shape[1])


def _merged_op(first: dict, last: dict, c_in: int, c_out: int, groups: int, flops: int, bias: bool) -> dict:
    """The merged op in the OpGraph's form: first's input, last's output shape and c_out channels."""
    item = int(first.get("itemsize") or 4)
    out = list(last["out_shapes"][0])
    if first["kind"] == "linear":
        out[-1] = c_out
        weight = (c_out, c_in)
    else:
        out[1] = c_out
        weight = (c_out, c_in // groups, *([1] * (len(out) - 2)))
    params = c_out * (c_in // groups) + (c_out if bias else 0)
    out_bytes = item * int(math.prod(out))
    in_bytes = int(first.get("in_bytes", 0))
    attrs = {**(first.get("attrs") or {}), "groups": groups, "in_channels": c_in, "out_channels": c_out}
    return {
        **first,
        "out_shapes": [tuple(out)],
        "param_shapes": {"weight": weight},
        "attrs": attrs,
        "flops": flops,
        "params": params,
        "param_bytes": item * params,
        "out_bytes": out_bytes,
        "mac_bytes": in_bytes + out_bytes + item * params,
    }


def _through_views(graph: nx.DiGraph, node: str) -> list[str]:
    """The producers of a node's inputs, looking through reshapes (a split is a producer here:
    the grouped form reads its pieces)."""
    out = []
    for p in graph.predecessors(node):
        d = graph.nodes[p]
        out.extend(_through_views(graph, p) if d["kind"] == "reshape" else [p])
    return out


def _bias(d: dict) -> bool:
    return "bias" in (d.get("param_shapes") or {})


def series(graph: nx.DiGraph, nodes: list[str], chain: list[str]) -> Merge | None:
    """The block's ops are its chain of pointwise fragments and views only, each fed by the one
    before: one op computes the same (a product of weight matrices)."""
    kernels = [n for n in nodes if graph.nodes[n]["kind"] not in VIEW_KINDS]
    if len(chain) < 2 or kernels != chain or not all(_pointwise(graph.nodes[n]) for n in chain):
        return None
    if len({graph.nodes[n]["kind"] for n in chain}) != 1:
        return None
    if any(_through_views(graph, b) != [a] for a, b in zip(chain, chain[1:])):
        return None
    first, last = graph.nodes[chain[0]], graph.nodes[chain[-1]]
    c_in, c_out = _channels(first, "in"), _channels(last, "out")
    flops = int(first.get("flops", 0)) * c_out // max(1, _channels(first, "out"))
    op = _merged_op(first, last, c_in, c_out, 1, flops, any(_bias(graph.nodes[n]) for n in chain))
    return Merge(
        "product",
        op,
        tuple(chain),
        f"the {len(chain)} pointwise layers in series folded into one {c_in}→{c_out} layer "
        "(their weight matrices multiplied: the same outputs, no retraining)",
    )


def parallel(graph: nx.DiGraph, fork: str, join: str, branches: list[list[str]]) -> Merge | None:
    """Each branch is one pointwise fragment (views around it allowed) reading the fork or one
    piece of a split, and the join concatenates their outputs on the channel dim."""
    heads = []
    for branch in branches:
        kernels = [n for n in branch if graph.nodes[n]["kind"] not in VIEW_KINDS]
        if len(kernels) != 1 or not _pointwise(graph.nodes[kernels[0]]):
            return None
        heads.append(kernels[0])
    jd, fd = graph.nodes[join], graph.nodes[fork]
    if jd["kind"] != "concat" or len(heads) < 2 or len({graph.nodes[h]["kind"] for h in heads}) != 1:
        return None
    if set(_through_views(graph, join)) != set(heads) or len(list(graph.predecessors(join))) != len(heads):
        return None
    ds = [graph.nodes[h] for h in heads]
    linear = ds[0]["kind"] == "linear"
    out = jd["out_shapes"][0]
    cat_dim = len(out) - 1 if linear else 1
    if any(len(d["out_shapes"][0]) != len(out) for d in ds) or any(
        a != b for i, (a, b) in enumerate(zip(out, ds[0]["out_shapes"][0])) if i != cat_dim
    ):
        return None  # not a concat on the channel (feature) dim
    c_out = sum(_channels(d, "out") for d in ds)
    flops = sum(int(d.get("flops", 0)) for d in ds)
    bias = any(_bias(d) for d in ds)
    feeds = [set(_through_views(graph, h)) for h in heads]
    if all(f == {fork} for f in feeds) and fd["kind"] == "split":
        pieces = [_channels(d, "in") for d in ds]
        if len(set(pieces)) != 1 or linear:
            return None
        c_in = sum(pieces)
        op = _merged_op(ds[0], jd, c_in, c_out, len(heads), flops, bias)
        op["in_shapes"] = [tuple(list(ds[0]["in_shapes"][0][:1]) + [c_in] + list(ds[0]["in_shapes"][0][2:]))]
        op["in_bytes"] = sum(int(d.get("in_bytes", 0)) for d in ds)
        op["mac_bytes"] = op["in_bytes"] + op["out_bytes"] + op["param_bytes"]
        return Merge(
            "grouped",
            op,
            (*heads, join, fork),
            f"the {len(heads)} branches as one grouped conv (groups={len(heads)}, {c_in}→{c_out}; "
            "block-diagonal weights: the same outputs when branch i reads chunk i)",
        )
    sources = {p for f in feeds for p in f}
    if len(sources) != 1 or len({_channels(d, "in") for d in ds}) != 1:
        return None
    c_in = _channels(ds[0], "in")
    op = _merged_op(ds[0], jd, c_in, c_out, 1, flops, bias)
    return Merge(
        "concat",
        op,
        (*heads, join),
        f"the {len(heads)} branches as one {c_in}→{c_out} layer (their weights stacked: the same "
        "outputs, no retraining; the concat goes away)",
    )
