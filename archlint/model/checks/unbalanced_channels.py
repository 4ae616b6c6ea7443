"""AL101 unbalanced-channels (ShuffleNetV2 G1): a conv whose c_in:c_out ratio puts its memory
access cost above the lower bound at equal FLOPs.

For a conv with c1→c2 channels, kernel area k, g groups, input and output maps of hw_in and
hw_out elements (batch n), MAC = n·(hw_in·c1 + hw_out·c2) + k·c1·c2/g. At fixed FLOPs
(c1·c2 fixed) the activation term is smallest when hw_in·c1 = hw_out·c2 (AM–GM), so
    MAC ≥ 2·n·√(hw_in·hw_out·c1·c2) + k·c1·c2/g,
the paper's bound 2·√(hw·B) + B/hw for a 1×1 conv (hw_in = hw_out, B = hw·c1·c2) and VoVNet's
form for any kernel. Depthwise convs (c1 = c2) meet it; stem convs that read the image are
skipped: their input channels are the data's, not a design choice.
"""

from __future__ import annotations

import math

from archlint.model.checks import _graph as g

CODE = "AL101"
OPTIONS = {
    "threshold": 0.3,  # report when MAC exceeds the bound by more than this fraction
    "min_share": 0.0,  # and the excess is at least this fraction of the model's MAC
}


def check(graph, options, ctx):
    total = g.module_mac(graph)
    for name, data, c in g.iter_convs(graph):
        if c.depthwise or g.reads_model_input(graph, name):
            continue
        bound = 2 * c.n * math.sqrt(c.hw_in * c.hw_out * c.c1 * c.c2) + c.weights
        excess = (c.mac - bound) / bound
        excess_bytes = round((c.mac - bound) * c.itemsize)
        if excess <= options["threshold"] or (total and excess_bytes / total < options["min_share"]):
            continue
        balanced = math.sqrt(c.c1 * c.c2 * c.hw_out / c.hw_in)
        args = g.conv_args(data)
        saving = g.whatif(ctx, "balanced_conv", *args) if args else None
        price = g.price(graph, ctx, alternative=f"conv {round(balanced)}→{round(balanced)} (balanced, equal FLOPs)", mac_bytes_saved=excess_bytes, saving_ms=saving, claims=[name])
        module = data.get("module") or ""
        yield g.finding(
            graph,
            CODE,
            (
                f"conv {module or name} maps {c.c1}→{c.c2} channels (1:{c.c2 / c.c1:.3g}): its MAC is "
                f"{excess:.0%} above the bound at equal FLOPs, reached near {balanced:.0f}→{balanced:.0f}"
            ),
            node=name,
            module=module,
            price=price,
            evidence={
                "in_channels": c.c1,
                "out_channels": c.c2,
                "ratio": round(c.c2 / c.c1, 4),
                "mac_bytes": c.mac * c.itemsize,
                "bound_bytes": round(bound * c.itemsize),
                "excess_bytes": excess_bytes,
                "excess": round(excess, 4),
                "model_mac_share": round(excess_bytes / total, 6) if total else None,
                "balanced_channels": round(balanced),
                "flops": c.flops,
                "whatif": "conv rebuilt with balanced channels at equal FLOPs" if saving is not None else None,
            },
        )
