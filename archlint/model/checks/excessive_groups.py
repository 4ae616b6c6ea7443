"""AL102 excessive-groups (ShuffleNetV2 G2): a grouped conv whose group count raises its memory
access cost against a g=1 conv of equal FLOPs on the same input.

With input c1 channels on hw_in, B = n·hw_out·k·c1·c2/g, the paper's
MAC = hw·c1 + B·g/c1 + B/hw: at fixed input and FLOPs, an ungrouped conv writes c2/g channels,
so the group count adds n·hw_out·c2·(1 − 1/g) elements of output traffic. That is how a conv is
selected (the `threshold`). The alternative a user can write keeps the conv's interface — the same
c1 → c2 channels — and lowers the group count (or picks the group width the device is fast at):
it does more arithmetic and reads more weights, so statically it saves nothing and the finding is
info. With --latency each lower group count (g/2, g/4, …, 1) is timed against the conv as it is,
interleaved; the finding names the fastest and is a warning only when that one measured faster by
at least `min_saving_share` of the model. Identical convs are one finding listing them all.
Depthwise convs (g = c1) are judged under G4 (AL104), not here.
"""

from __future__ import annotations

from archlint.diagnostics import Severity
from archlint.model.checks import _locate as locate
from archlint.model.checks import _pricing as pricing
from archlint.model.checks import _query as query
from archlint.model.speedups.alternatives import fewer_groups
from archlint.units import human_bytes

CODE = "AL102"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRICE = ("static", "measured", "estimated")  # the bases its findings' prices may have, as its page says
FIX = "none"  # no autofix: its page's fix: none
PRIORITY = 150  # where findings overlap, the lowest claims the ops first
CHANGES_MODEL = True  # other group counts: other weights, a model to retrain
OPTIONS = {
    # judge a conv when its MAC exceeds the g=1 conv's of equal FLOPs by more than this: a c→c conv
    # with g groups is (g−1)/(g+1) above it, 33% at g=2, which the paper measured 12% (ARM) and 30%
    # (GPU) slower than g=1 (Table 2)
    "threshold": 0.3,
    "min_share": 0.0,  # and that excess is at least this fraction of the model's MAC
}


def check(graph, options, ctx):
    total = query.module_mac(graph)
    found: dict[tuple, list] = {}
    for name, data, c in query.iter_convs(graph):
        if c.g <= 1 or c.depthwise:
            continue
        ungrouped = c.n * (c.hw_in * c.c1 + c.hw_out * c.c2 / c.g) + c.weights
        excess = (c.mac - ungrouped) / ungrouped
        excess_bytes = round((c.mac - ungrouped) * c.itemsize)
        if excess <= options["threshold"] or (total and excess_bytes / total < options["min_share"]):
            continue
        key = (query.conv_args(data) or (c.n, c.c1, c.c2, c.k, c.g, c.hw_in, c.hw_out),)
        found.setdefault(key, []).append((name, data, c, excess, excess_bytes))
    for instances in found.values():
        yield _finding(graph, ctx, options, instances)


def _fewer(c) -> list[int]:
    """Lower group counts that keep c1 → c2 valid: g/2, g/4, … down to 1."""
    out, g_ = [], c.g
    while g_ % 2 == 0 and g_ > 1:
        g_ //= 2
        out.append(g_)
    return out or [1]


def _finding(graph, ctx, options, instances):
    name, data, c, excess, excess_bytes = instances[0]
    count = len(instances)
    args = query.conv_args(data)
    best, saving = None, None
    if args and ctx.pricer is not None:
        timed = {gp: pricing.relative_saving(ctx, fewer_groups, *args, gp) for gp in _fewer(c)}  # relative savings
        best = max(timed, key=timed.get)
        saving = timed[best] * (pricing.latency(graph, [n for n, *_ in instances]) or 0.0)
    groups = best or _fewer(c)[0]
    extra_weights = c.k * c.c1 * c.c2 // groups - c.weights  # more weights read: no static saving
    extra_flops = c.n * c.hw_out * extra_weights
    measured = saving
    saving = max(0.0, saving) if saving is not None else None  # never a negative price: no faster is 0
    alternative = (
        f"the same conv {c.c1}→{c.c2} with groups={groups} (group width {c.c1 // groups} instead of {c.c1 // c.g})"
        + (f", in each of {count} convs" if count > 1 else "")
    )
    price = pricing.price(
        graph,
        ctx,
        alternative=alternative,
        mac_bytes_saved=0,
        flops_saved=0,
        saving_ms=saving,
        claims=[n for n, *_ in instances],
    )
    modules = [d.get("module") or n for n, d, *_ in instances]
    more = f" and {count - 1} more like it" if count > 1 else ""
    return locate.finding(
        graph,
        CODE,
        (
            f"conv {modules[0]}{more} uses {c.g} groups ({c.c1}→{c.c2} channels, group width {c.c1 // c.g}): "
            f"its MAC is {excess:.0%} above an ungrouped conv of equal FLOPs"
            + (f"; groups={best} measured fastest on this device" if best is not None and measured > 0 else "")
            + (
                "; no lower group count measured faster on this device"
                if measured is not None and measured <= 0
                else ""
            )
            + (
                ""
                if measured is not None
                else f"; statically fewer groups saves nothing (it reads {human_bytes(extra_weights * c.itemsize * count)} "
                "more weights): --latency times it"
            )
        ),
        node=name,
        module=data.get("module") or "",
        price=price,
        evidence={
            "groups": c.g,
            "in_channels": c.c1,
            "out_channels": c.c2,
            "group_width": c.c1 // c.g,
            "mac_bytes": c.mac * c.itemsize,
            "excess_bytes": excess_bytes,
            "excess": round(excess, 4),
            "flops": c.flops,
            "instances": modules,
            "fastest_groups": best,
            "extra_weight_bytes": extra_weights * c.itemsize * count,
            "extra_flops": extra_flops * count,
            "measured_saving_ms": measured,
            "whatif": "same conv with fewer groups, each count timed interleaved" if best is not None else None,
        },
    )
