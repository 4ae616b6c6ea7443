"""AL101 unbalanced-channels (ShuffleNetV2 G1): a chain of convs whose interior widths are
unbalanced, so it moves more memory than the same chain at balanced widths and equal FLOPs.

G1 says a conv's MAC is lowest at equal FLOPs when its input and output widths match. A conv is
never judged alone: its input and output widths are usually someone else's interface (a
residual add, a concat, the model's input channels, the classes), and changing one conv's width
changes its partner's. So the unit is a chain: convs where each one's output goes, through
per-channel ops only (norm, activation, pool, depthwise conv), to the next conv and nowhere
else. The chain's input and output widths are its interface and stay; its interior widths are
free. The alternative sets every interior width to one value x chosen so the chain keeps its
FLOPs, and the finding's price is the MAC it saves (static) or, with --latency, the measured
time saved by that chain rebuilt at width x (convs and depthwise convs, timed interleaved).

A chain of two convs (an inverted residual's expand/project, a bottleneck's reduce/expand, an
Inception 1×1 reduction and its 3×3) has one interior width, fixed by its FLOPs: it is already
the only chain of that FLOPs and interface, and AL101 stays silent on it. ResNet's 1×1-3×3-1×1
bottleneck is balanced in its interior. Identical chains (a repeated block) are one finding.
"""

from __future__ import annotations

import math

from archlint.diagnostics import Severity
from archlint.model.checks import _locate as locate
from archlint.model.checks import _pricing as pricing
from archlint.model.checks import _query as query
from archlint.model.speedups.alternatives import chain_widths

CODE = "AL101"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRICE = ("static", "measured", "estimated")  # the bases its findings' prices may have, as its page says
FIX = "none"  # no autofix: its page's fix: none
PRIORITY = 140  # where findings overlap, the lowest claims the ops first
CHANGES_MODEL = True  # a new channel split: other weights, a model to retrain
OPTIONS = {
    "threshold": 0.1,  # report when the chain's MAC exceeds the balanced chain's by more than this fraction
    "min_share": 0.0,  # and the MAC saved is at least this fraction of the model's MAC
}
RIDER_KINDS = frozenset({"norm", "activation", "dropout", "pool", "elementwise"})


def _next_conv(graph, name):
    """(the next conv, the depthwise convs on the way) when `name`'s output reaches exactly one
    conv through per-channel single-input ops and is used nowhere else; else None."""
    riders, cur = [], name
    while True:
        nxt = query.sole_consumer(graph, cur)
        if nxt is None or len(query.tensor_inputs(graph, nxt)) != 1:
            return None
        data = graph.nodes[nxt]
        c = query.conv(data)
        if c is not None and not c.depthwise:
            return nxt, riders
        if c is not None:
            riders.append(nxt)
        elif data["kind"] not in RIDER_KINDS:
            return None
        cur = nxt


def chains(graph):
    """Maximal conv chains, each a list of (conv node, depthwise riders after it)."""
    convs = {name: c for name, _, c in query.iter_convs(graph) if not c.depthwise}
    nxt = {}
    for name in convs:
        found = _next_conv(graph, name)
        if found is not None and found[0] in convs:
            nxt[name] = found
    targets = {n for n, _ in nxt.values()}
    out = []
    for start in convs:
        if start in targets or start not in nxt:
            continue
        chain, cur = [], start
        while cur is not None:
            riders = nxt[cur][1] if cur in nxt else []
            chain.append((cur, riders))
            cur = nxt[cur][0] if cur in nxt else None
        out.append(chain)
    return out


def _cost(graph, chain, widths) -> tuple[float, float]:
    """(FLOPs, MAC in elements) of the chain's convs and depthwise riders at these widths."""
    flops = mac = 0.0
    for i, (name, riders) in enumerate(chain):
        c = query.conv(graph.nodes[name])
        a, b = widths[i], widths[i + 1]
        flops += c.n * c.hw_out * c.k * a * b / c.g
        mac += c.n * (c.hw_in * a + c.hw_out * b) + c.k * a * b / c.g
        for r in riders:
            d = query.conv(graph.nodes[r])
            flops += d.n * d.hw_out * d.k * b
            mac += d.n * (d.hw_in + d.hw_out) * b + d.k * b
    return flops, mac


def balanced(graph, chain, widths) -> list[int]:
    """The chain's widths with every interior one set to the x that keeps its FLOPs (rounded to
    a multiple of the groups it meets, or of 8 when all interior widths were)."""

    def with_x(x):
        return [widths[0]] + [x] * (len(widths) - 2) + [widths[-1]]

    f0, f1, f2 = (_cost(graph, chain, with_x(x))[0] for x in (0.0, 1.0, 2.0))
    a = (f2 - 2 * f1 + f0) / 2
    b = f1 - f0 - a
    target = _cost(graph, chain, widths)[0] - f0
    x = (-b + math.sqrt(b * b + 4 * a * target)) / (2 * a) if a > 0 else target / b
    groups = [query.conv(graph.nodes[n]).g for n, _ in chain]
    step = math.lcm(*groups)
    if step == 1 and all(w % 8 == 0 for w in widths[1:-1]):
        step = 8
    return with_x(max(step, round(x / step) * step))


def check(graph, options, ctx):
    total = query.module_mac(graph)
    found: dict[tuple, list] = {}
    for chain in chains(graph):
        if len(chain) < 3:  # one interior width: fixed by the FLOPs, nothing to balance
            continue
        convs = [query.conv(graph.nodes[n]) for n, _ in chain]
        widths = [convs[0].c1] + [c.c2 for c in convs]
        alt = balanced(graph, chain, widths)
        flops, mac = _cost(graph, chain, widths)
        alt_flops, alt_mac = _cost(graph, chain, alt)
        excess = (mac - alt_mac) / alt_mac
        saved = round((mac - alt_mac) * convs[0].itemsize)
        if excess <= options["threshold"] or (total and saved / total < options["min_share"]):
            continue
        # Repeats of one block (siblings under one parent) are one finding; module-ignores still
        # reach each subtree.
        parent = locate.common_module(graph, [n for n, r in chain for n in (n, *r)]).rpartition(".")[0]
        key = (parent, tuple(_signature(graph, n, r) for n, r in chain), tuple(widths))
        found.setdefault(key, []).append((chain, widths, alt, flops, alt_flops, mac, alt_mac, excess, saved))
    for instances in found.values():
        yield _finding(graph, ctx, options, instances)


def _signature(graph, name, riders):
    data = graph.nodes[name]
    riding = tuple(query.conv_args(graph.nodes[r]) for r in riders)
    return (query.conv_args(data) or tuple(data["in_shapes"][0]), riding)


def _finding(graph, ctx, options, instances):
    chain, widths, alt, flops, alt_flops, mac, alt_mac, excess, saved = instances[0]
    itemsize = query.conv(graph.nodes[chain[0][0]]).itemsize
    nodes = [n for inst in instances for name, riders in inst[0] for n in (name, *riders)]
    modules = [locate.common_module(graph, [n for name, r in inst[0] for n in (name, *r)]) for inst in instances]
    saving = pricing.relative_saving(ctx, chain_widths, *_layers(graph, chain), widths, alt)  # relative, per chain
    if saving is not None:
        saving = saving * (pricing.latency(graph, nodes) or 0.0)  # × the chains' measured time in the model
    count = len(instances)
    drift = (alt_flops - flops) / flops if flops else 0.0
    alternative = (
        f"the same chain with interior widths {_widths(widths[1:-1])} → {alt[1]} "
        f"(in {widths[0]}, out {widths[-1]} kept; FLOPs {drift:+.1%})"
    )
    price = pricing.price(
        graph,
        ctx,
        alternative=alternative + (f", in each of {count} chains" if count > 1 else ""),
        mac_bytes_saved=saved * count,
        flops_saved=round(flops - alt_flops) * count,
        saving_ms=saving,
        claims=nodes,
    )
    where = modules[0] or "the model"
    more = f" and {count - 1} more like it" if count > 1 else ""
    first = chain[0][0]
    return locate.finding(
        graph,
        CODE,
        (
            f"conv chain in {where}{more} runs {len(chain)} convs at widths {_widths(widths)}: "
            f"{excess:.0%} more MAC than the same chain balanced at {alt[1]} with equal FLOPs"
        ),
        node=first,
        module=graph.nodes[first].get("module") if count == 1 and not modules[0] else modules[0],
        price=price,
        evidence={
            "convs": [name for name, _ in chain],
            "widths": widths,
            "balanced_widths": alt,
            "mac_bytes": round(mac * itemsize),
            "balanced_mac_bytes": round(alt_mac * itemsize),
            "excess_bytes": saved,
            "excess": round(excess, 4),
            "flops": round(flops),
            "balanced_flops": round(alt_flops),
            "instances": modules,
            "whatif": "chain rebuilt at the balanced widths, timed interleaved" if saving is not None else None,
        },
    )


def _widths(ws) -> str:
    text = "→".join(str(w) for w in ws[:8])
    return text + ("→…" if len(ws) > 8 else "")


def _layers(graph, chain):
    """(input shape, layers) to rebuild the chain as 2-D convs for the what-if, or (None, None)."""
    layers = []
    for name, riders in chain:
        args = query.conv_args(graph.nodes[name])
        if args is None:
            return None, None
        layers.append(("conv", *args[2:]))
        for r in riders:
            ra = query.conv_args(graph.nodes[r])
            if ra is None:
                return None, None
            layers.append(("dw", *ra[2:]))
    return tuple(graph.nodes[chain[0][0]]["in_shapes"][0]), tuple(layers)
