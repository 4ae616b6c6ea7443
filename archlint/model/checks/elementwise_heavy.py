"""AL104 elementwise-heavy (ShuffleNetV2 G4): element-wise ops (ReLU, add, bias-add, BatchNorm
that cannot be folded, …) and pure data movement (permute + .contiguous(), channel shuffle,
concat) holding a large share of the model's memory traffic — and, with --latency, of its
measured latency.

These ops do little arithmetic per byte: each is one pass over a whole activation. The paper
removed ReLU and the shortcut from a ResNet bottleneck and gained about 20% (Table 4). The
alternative is each op fused into the op that produces its input (torch.compile, a fused
kernel, writing a concat's parts in place): the op's own read and write of its main input go,
while extra operands (a residual's other side) are still read. That is the saving, static in
bytes or, with --latency, each op's measured time in proportion (an estimate from measurements).

BatchNorms that AL205 folds into a conv or linear are AL205's, not counted here; findings of
more specific rules (AL202's redundant activations, AL203's shortcut adds) are taken out of this
price by the claims pass. One finding per model; the costliest blocks are listed in evidence.
"""

from __future__ import annotations

from collections import Counter

from archlint.model.checks import _graph as g
from archlint.model.opgraph import ELEMENTWISE_KINDS

CODE = "AL104"
JUDGED_BY_PRICE = True  # warning only when the saving pays (_graph.severity)
OPTIONS = {
    "threshold": 0.5,  # report when these ops' saving is above this share of the model's MAC (or latency)
    "block_threshold": 0.5,  # list a block in evidence when the share within it is above this
    "max_blocks": 3,  # list at most this many blocks, the costliest first
    "min_saving_share": 0.01,  # a warning only when the saving is at least this share of the model
}
MOVEMENT_KINDS = frozenset({"copy", "concat"})


def _label(data: dict) -> str:
    return g.op_name(data) if data["kind"] not in MOVEMENT_KINDS else f"{data['kind']} ({g.op_name(data)})"


def folded_norms(graph) -> set[str]:
    """The BatchNorms AL205 would fold (eval mode): not element-wise work once deployed."""
    if graph.graph.get("mode", "eval") != "eval":
        return set()
    return {n for _, n in g.producer_then_norm(graph)}


def _saved_bytes(graph, name: str) -> int:
    """What fusing the op into its producer saves: its MAC less the extra operands it still reads."""
    data = graph.nodes[name]
    mac = int(data.get("mac_bytes", 0))
    if data["kind"] in MOVEMENT_KINDS:
        return mac
    itemsize = int(data.get("itemsize", 4))
    extra = sum(_numel(s) for s in (data.get("in_shapes") or [])[1:]) * itemsize
    return max(0, mac - extra)


def _numel(shape) -> int:
    n = 1
    for v in shape or ():
        n *= int(v)
    return n


def check(graph, options, ctx):
    skip = folded_norms(graph) if ctx.settings.enabled("AL205") else set()
    light = [
        n for n, d in g.ops(graph)
        if (d["kind"] in ELEMENTWISE_KINDS or d["kind"] in MOVEMENT_KINDS) and d.get("known", True) and n not in skip
    ]
    saved = {n: _saved_bytes(graph, n) for n in light}
    light = [n for n in light if saved[n] > 0]
    if not light:
        return
    total = g.module_mac(graph)
    mac = sum(saved.values())
    share = mac / total if total else 0.0
    parts_ms = _measured_parts(graph, light, saved)
    whole_ms = g.model_latency(graph, ctx) if parts_ms is not None else None
    lat_share = sum(parts_ms.values()) / whole_ms if parts_ms and whole_ms else None
    if share <= options["threshold"] and (lat_share or 0.0) <= options["threshold"]:
        return
    yield _finding(graph, ctx, options, light, saved, parts_ms, share, lat_share)


def _measured_parts(graph, light, saved) -> dict[str, float] | None:
    """Each op's measured time × the share of its bytes fusion saves; None without latency."""
    out = {}
    for n in light:
        d = graph.nodes[n]
        if d.get("latency_ms") is None:
            return None
        mac = int(d.get("mac_bytes", 0))
        out[n] = d["latency_ms"] * (saved[n] / mac if mac else 1.0)
    return out


def _blocks(graph, saved, options):
    rows = []
    for block in g.module_blocks(graph):
        inside = sum(saved.get(n, 0) for n in block.nodes)
        whole = sum(int(graph.nodes[n].get("mac_bytes", 0)) for n in block.nodes)
        if whole and inside / whole > options["block_threshold"]:
            rows.append((inside, block.name, round(inside / whole, 4)))
    rows.sort(reverse=True)
    return [{"block": name, "mac_bytes_saved": b, "share": s} for b, name, s in rows[: options["max_blocks"]]]


def _finding(graph, ctx, options, light, saved, parts_ms, share, lat_share):
    by_op = Counter()
    for n in light:
        by_op[_label(graph.nodes[n])] += saved[n]
    mac = sum(saved.values())
    top = ", ".join(f"{op} {b / mac:.0%}" for op, b in by_op.most_common(4))
    price = g.price(
        graph, ctx, alternative="each element-wise or data-movement op fused into the op producing its input",
        mac_bytes_saved=mac, saving_ms=sum(parts_ms.values()) if parts_ms else None, estimated=True, claims=light,
    )
    price.parts = {n: (saved[n], parts_ms[n] if parts_ms else None) for n in light}
    measured = f" and {lat_share:.0%} of its measured latency" if lat_share is not None else ""
    untimed = (
        "; the saving is estimated from the ops' measured times, fusion itself was not timed "
        "(`--what-if compile` measures what it buys)" if price.basis == "estimated" and ctx.pricer is not None else ""
    )
    costliest = max(light, key=lambda n: saved[n])
    return g.finding(
        graph,
        CODE,
        (
            f"element-wise and data-movement ops that fusion would remove hold {share:.0%} of the model's MAC"
            f"{measured} ({top}): each is a full pass over an activation with little arithmetic{untimed}"
        ),
        node=costliest,
        module="",
        price=price,
        severity=g.severity(price, options, ctx),
        evidence={
            "mac_bytes_saved": mac,
            "mac_share": round(share, 4),
            "latency_share": round(lat_share, 4) if lat_share is not None else None,
            "ops": len(light),
            "mac_bytes_by_op": dict(by_op.most_common()),
            "blocks": _blocks(graph, saved, options),
        },
    )
