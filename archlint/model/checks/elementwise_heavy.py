"""AL104 elementwise-heavy (ShuffleNetV2 G4): element-wise ops (ReLU, add, bias-add, BatchNorm in
eval, …) and depthwise convs holding a large share of the model's memory access cost — and,
with --latency, of its measured latency — model-wide and per block.

These ops do little arithmetic per byte: each is one pass over a whole activation. The paper
removed ReLU and the shortcut from a ResNet bottleneck and gained about 20% (Table 4).
"""

from __future__ import annotations

from collections import Counter

from archlint.model.checks import _graph as g
from archlint.model.opgraph import ELEMENTWISE_KINDS

CODE = "AL104"
OPTIONS = {
    "threshold": 0.5,  # report the model when these ops' share of MAC (or latency) exceeds this
    "block_threshold": 0.5,  # report a block when their share of its MAC (or latency) exceeds this
    "max_blocks": 3,  # report at most this many blocks, the costliest first (0: model-wide only)
}


def _light(data: dict) -> bool:
    return data["kind"] in ELEMENTWISE_KINDS or g.is_depthwise(data)


def _label(data: dict) -> str:
    return "depthwise conv" if data["kind"] == "conv" else g.op_name(data)


def _shares(graph, ctx, nodes):
    """(light ops, their MAC, MAC share, latency share or None) over the given ops."""
    light = [n for n in nodes if _light(graph.nodes[n])]
    mac = sum(int(graph.nodes[n].get("mac_bytes", 0)) for n in light)
    total = sum(int(graph.nodes[n].get("mac_bytes", 0)) for n in nodes)
    lat_all = g.latency(graph, nodes)
    lat = g.latency(graph, light)
    lat_share = lat / lat_all if lat is not None and lat_all else None
    return light, mac, (mac / total if total else 0.0), lat_share


def check(graph, options, ctx):
    names = [n for n, _ in g.ops(graph)]
    light, mac, share, lat_share = _shares(graph, ctx, names)
    if share > options["threshold"] or (lat_share or 0) > options["threshold"]:
        yield _finding(graph, ctx, "the model", "", light, mac, share, lat_share)
    blocks = []
    for block in g.module_blocks(graph):
        b_light, b_mac, b_share, b_lat = _shares(graph, ctx, block.nodes)
        if b_light and (b_share > options["block_threshold"] or (b_lat or 0) > options["block_threshold"]):
            blocks.append((b_mac, block, b_light, b_share, b_lat))
    blocks.sort(key=lambda b: -b[0])
    for b_mac, block, b_light, b_share, b_lat in blocks[: options["max_blocks"]]:
        yield _finding(graph, ctx, f"block {block.name}", block.name, b_light, b_mac, b_share, b_lat, len(blocks))


def _finding(graph, ctx, where, module, light, mac, share, lat_share, of_blocks=None):
    by_op = Counter()
    for n in light:
        by_op[_label(graph.nodes[n])] += int(graph.nodes[n].get("mac_bytes", 0))
    top = ", ".join(f"{op} {b / mac:.0%}" for op, b in by_op.most_common(4)) if mac else ""
    price = g.price(graph, ctx, alternative="element-wise ops fused into their producers", mac_bytes_saved=mac, removed=light)
    measured = f" and {lat_share:.0%} of its measured latency" if lat_share is not None else ""
    costliest = max(light, key=lambda n: int(graph.nodes[n].get("mac_bytes", 0)))
    evidence = {
        "mac_bytes": mac,
        "mac_share": round(share, 4),
        "latency_share": round(lat_share, 4) if lat_share is not None else None,
        "ops": len(light),
        "mac_bytes_by_op": dict(by_op.most_common()),
    }
    if of_blocks is not None:
        evidence["blocks_above_threshold"] = of_blocks
    return g.finding(
        graph,
        CODE,
        (
            f"element-wise ops and depthwise convs hold {share:.0%} of the MAC of {where}{measured} "
            f"({top}): each is a full pass over an activation with little arithmetic"
        ),
        node=costliest,
        module=module,
        price=price,
        evidence=evidence,
    )
