"""AL102 excessive-groups (ShuffleNetV2 G2): a grouped conv whose group count raises its memory
access cost against a g=1 conv of equal FLOPs on the same input.

With input c1 channels on hw_in, B = n·hw_out·k·c1·c2/g, the paper's
MAC = hw·c1 + B·g/c1 + B/hw: at fixed input and FLOPs, an ungrouped conv writes c2/g channels,
so the group count adds n·hw_out·c2·(1 − 1/g) elements of output traffic. Depthwise convs
(g = c1) are judged under G4 (AL104), not here.
"""

from __future__ import annotations

from archlint.model.checks import _graph as g

CODE = "AL102"
OPTIONS = {
    "threshold": 0.5,  # report when MAC exceeds the g=1 conv's by more than this fraction
    "min_share": 0.0,  # and the excess is at least this fraction of the model's MAC
}


def check(graph, options, ctx):
    total = g.module_mac(graph)
    for name, data, c in g.iter_convs(graph):
        if c.g <= 1 or c.depthwise:
            continue
        ungrouped = c.n * (c.hw_in * c.c1 + c.hw_out * c.c2 / c.g) + c.weights
        excess = (c.mac - ungrouped) / ungrouped
        excess_bytes = round((c.mac - ungrouped) * c.itemsize)
        if excess <= options["threshold"] or (total and excess_bytes / total < options["min_share"]):
            continue
        args = g.conv_args(data)
        saving = g.whatif(ctx, "ungrouped_conv", *args) if args else None
        price = g.price(graph, ctx, alternative=f"ungrouped conv {c.c1}→{c.c2 // c.g} (equal FLOPs)", mac_bytes_saved=excess_bytes, saving_ms=saving, claims=[name])
        module = data.get("module") or ""
        yield g.finding(
            graph,
            CODE,
            (
                f"conv {module or name} uses {c.g} groups ({c.c1}→{c.c2} channels): its MAC is "
                f"{excess:.0%} above an ungrouped conv of equal FLOPs ({c.c1}→{c.c2 // c.g})"
            ),
            node=name,
            module=module,
            price=price,
            evidence={
                "groups": c.g,
                "in_channels": c.c1,
                "out_channels": c.c2,
                "mac_bytes": c.mac * c.itemsize,
                "ungrouped_mac_bytes": round(ungrouped * c.itemsize),
                "excess_bytes": excess_bytes,
                "excess": round(excess, 4),
                "model_mac_share": round(excess_bytes / total, 6) if total else None,
                "flops": c.flops,
                "whatif": "g=1 conv with c_out/g outputs at equal FLOPs" if saving is not None else None,
            },
        )
