"""AL203 redundant-shortcut: a shortcut or dense concatenation that adds memory traffic without
adding function.

- a 1×1 projection shortcut (conv, maybe with its norm) where input and output shapes already
  match: an identity shortcut does the same job for free;
- an identity shortcut around a branch with no conv/linear/matmul: the add costs a full
  read of two activations and a write, around an op that needs no residual path;
- dense connectivity: the same tensors concatenated again and again as depth grows (DenseNet),
  so concat traffic grows quadratically; VoVNet's one-shot aggregation concatenates once. Only
  where the concats grow: a tensor joined to a new one at the same width on every iteration of an
  unrolled loop (RAFT's recurrent refinement) is not dense connectivity.
"""

from __future__ import annotations

import math

from archlint.diagnostics import Severity
from archlint.model.checks import _locate as locate
from archlint.model.checks import _pricing as pricing
from archlint.model.checks import _query as query
from archlint.model.checks._blocks import fork_join_blocks
from archlint.units import human_bytes

CODE = "AL203"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRICE = ("static", "measured", "estimated")  # the bases its findings' prices may have, as its page says
FIX = "none"  # no autofix: its page's fix: none
PRIORITY = 40  # where findings overlap, the lowest claims the ops first
OPTIONS = {
    "min_reuse": 3,  # a tensor concatenated into at least this many concats marks dense connectivity
}

ADDS = frozenset({"add", "iadd", "sum"})
CHEAP_KINDS = frozenset({"activation", "elementwise", "dropout", "reshape", "copy", "split"})


def _mac(graph, nodes) -> int:
    return sum(int(graph.nodes[n].get("mac_bytes", 0)) for n in nodes)


def check(graph, options, ctx):
    for block in fork_join_blocks(graph):
        join = graph.nodes[block.join]
        if join["kind"] != "elementwise" or query.op_name(join) not in ADDS:
            continue
        branches = [b for b in block.branches if b]
        identity = any(not b for b in block.branches)
        for branch in branches:
            convs = [n for n in branch if graph.nodes[n]["kind"] == "conv"]
            rest = [n for n in branch if graph.nodes[n]["kind"] not in ("conv", "norm")]
            if len(convs) == 1 and not rest and _is_square_1x1(graph.nodes[convs[0]]):
                yield _projection(graph, ctx, block, branch, convs[0])
        if identity and branches and all(_cheap_op(graph.nodes[n]) for b in branches for n in b):
            yield _cheap(graph, ctx, block, branches)
    yield from _dense(graph, ctx, options)


def _cheap_op(data) -> bool:
    """Element-wise work or data movement, with a cost formula: no learned or unknown computation."""
    return data["kind"] in CHEAP_KINDS and data.get("known", True)


def _is_square_1x1(data) -> bool:
    c = query.conv(data)
    return (
        c is not None
        and c.k == 1
        and c.g == 1
        and c.c1 == c.c2
        and list(data["in_shapes"][0]) == list(data["out_shapes"][0])
    )


def _projection(graph, ctx, block, branch, conv):
    mac = _mac(graph, branch)
    price = pricing.price(
        graph,
        ctx,
        alternative="identity shortcut (the projection removed)",
        mac_bytes_saved=mac,
        flops_saved=int(graph.nodes[conv].get("flops", 0)),
        removed=branch,
    )
    module = graph.nodes[conv].get("module") or ""
    shape = tuple(graph.nodes[conv]["in_shapes"][0])
    return locate.finding(
        graph,
        CODE,
        (f"1×1 projection shortcut {module or conv} maps {shape} to the same shape: an identity shortcut would do"),
        node=conv,
        module=module,
        price=price,
        evidence={
            "changes_model": True,
            "form": "projection",
            "shape": list(shape),
            "branch_ops": branch,
            "mac_bytes": mac,
            "join": block.join,
        },
    )


def _cheap(graph, ctx, block, branches):
    mac = int(graph.nodes[block.join].get("mac_bytes", 0))
    ops = [n for b in branches for n in b]
    price = pricing.price(
        graph, ctx, alternative="the branch without the shortcut add", mac_bytes_saved=mac, removed=[block.join]
    )
    module = graph.nodes[block.join].get("module") or ""
    return locate.finding(
        graph,
        CODE,
        (
            f"identity shortcut at {module or block.join} wraps only element-wise ops "
            f"({', '.join(sorted({query.op_name(graph.nodes[n]) for n in ops}))}): the add re-reads the input "
            f"for no function a residual path adds"
        ),
        node=block.join,
        module=module,
        price=price,
        evidence={
            "changes_model": True,
            "form": "cheap-branch",
            "branch_ops": ops,
            "mac_bytes": mac,
            "fork": block.fork,
        },
    )


def _growing(graph, members: list[str]) -> bool:
    """Dense connectivity concatenates more and more: its concats' outputs grow along the group
    (DenseNet). The same tensor joined to a new one at one width each time is an unrolled loop
    (RAFT's GRU iterations re-reading the context features), which one-shot aggregation does not
    describe."""
    sizes = [math.prod((graph.nodes[c].get("out_shapes") or [()])[0]) for c in members]
    return len(set(sizes)) > 1


def _dense(graph, ctx, options):
    concats = [n for n, d in query.ops(graph) if d["kind"] == "concat"]
    uses: dict[str, list[str]] = {}
    for c in concats:
        for p in dict.fromkeys(query.tensor_inputs(graph, c)):  # unique, in graph order (never hash order)
            uses.setdefault(p, []).append(c)
    # Group concats that re-read the same tensors; a group with a tensor read ≥ min_reuse times is dense.
    parent = {c: c for c in concats}

    def root(c):
        while parent[c] != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    for readers in uses.values():
        for other in readers[1:]:
            parent[root(other)] = root(readers[0])
    groups: dict[str, list[str]] = {}
    for c in concats:
        groups.setdefault(root(c), []).append(c)
    for members in groups.values():
        # default: concats of parameters only (BEiT's q/v bias) re-read no op's output
        reuse = max((len(uses[p]) for c in members for p in query.tensor_inputs(graph, c)), default=0)
        if reuse < options["min_reuse"] or not _growing(graph, members):
            continue
        total = _mac(graph, members)
        widest = max(members, key=lambda c: int(graph.nodes[c].get("mac_bytes", 0)))
        once = int(graph.nodes[widest].get("mac_bytes", 0))
        measured = pricing.latency(graph, members) if ctx.pricer is not None else None
        price = pricing.price(
            graph,
            ctx,
            alternative="one-shot aggregation (each tensor concatenated once)",
            mac_bytes_saved=total - once,
            # the concats' measured time in proportion to the bytes one-shot aggregation saves: an estimate
            saving_ms=measured * (total - once) / total if measured is not None and total else None,
            estimated=True,
            claims=members,
        )
        module = locate.common_module(graph, members)
        yield locate.finding(
            graph,
            CODE,
            (
                f"dense connections in {module or 'the model'}: {len(members)} concats re-read the same "
                f"tensors up to {reuse} times ({human_bytes(total)} of concat traffic, growing "
                f"quadratically with depth); one-shot aggregation concatenates once "
                f"({human_bytes(once)})"
            ),
            node=widest,
            module=module,
            price=price,
            evidence={
                "changes_model": True,
                "form": "dense",
                "concats": len(members),
                "max_reuse": reuse,
                "concat_mac_bytes": total,
                "one_shot_mac_bytes": once,
                "excess_bytes": total - once,
            },
        )
