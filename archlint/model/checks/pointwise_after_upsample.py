"""AL111 pointwise-after-upsample: a 1×1 conv (stride 1) applied right after an upsample. The two
commute (interpolation is linear per channel and its weights sum to one; a 1×1 conv mixes channels
per pixel), so the conv can run at the lower resolution first: s² fewer multiply-adds for an
upsampling factor s, and the upsample then moves c_out channels instead of c_in.
"""

from __future__ import annotations

import math

from archlint.model.checks import _graph as g

CODE = "AL111"
OPTIONS: dict = {}


def check(graph, options, ctx):
    for name, data in g.ops(graph):
        if data["kind"] != "upsample" or "grid" in str(data["key"]).lower():
            continue
        consumers = list(graph.successors(name))
        if len(consumers) != 1:
            continue
        conv_name = consumers[0]
        c = g.conv(graph.nodes[conv_name])
        stride = g.pair(g.attr(graph.nodes[conv_name], "stride", 1))
        if c is None or c.k != 1 or set(stride) != {1} or c.hw_out != c.hw_in:
            continue
        low = math.prod(data["in_shapes"][0][2:]) if data.get("in_shapes") else 0
        if not low or c.hw_in <= low:
            continue
        scale = c.hw_in / low
        up, conv = data, graph.nodes[conv_name]
        before = int(up.get("mac_bytes", 0)) + int(conv.get("mac_bytes", 0))
        item = c.itemsize
        # the alternative: the conv at low resolution, then the upsample of c2 channels
        after = item * (c.n * low * (c.c1 + c.c2) + c.weights) + item * c.n * c.c2 * (low + c.hw_in)
        after += int(conv.get("param_bytes", 0)) - item * c.weights  # a bias, read either way
        saved = before - after
        flops_saved = int(conv.get("flops", 0)) - int(round(int(conv.get("flops", 0)) / scale))
        if saved <= 0 and flops_saved <= 0:
            continue
        price = g.price(
            graph, ctx, alternative=f"the 1×1 conv applied before the upsample ({c.c1}→{c.c2} channels at the low resolution)",
            mac_bytes_saved=max(saved, 0), flops_saved=flops_saved, claims=[f"{conv_name}#resolution", f"{name}#resolution"],
        )
        module = conv.get("module") or ""
        yield g.finding(
            graph,
            CODE,
            (
                f"1×1 conv {module or conv_name} runs after an upsample to {scale:g}× the pixels: they commute, so "
                f"applied before it the conv does {scale:g}× fewer multiply-adds ({g.fmt_bytes(max(saved, 0))} less traffic)"
            ),
            node=conv_name,
            module=module,
            price=price,
            evidence={"upsample": name, "scale": scale, "flops_saved": flops_saved, "in_channels": c.c1, "out_channels": c.c2},
        )
