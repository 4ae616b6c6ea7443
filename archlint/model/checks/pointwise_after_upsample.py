"""AL111 pointwise-after-upsample: a 1×1 conv (stride 1) applied right after an upsample. The two
commute (interpolation is linear per channel and its weights sum to one; a 1×1 conv mixes channels
per pixel), so the conv can run at the lower resolution first: s² fewer multiply-adds for an
upsampling factor s, and the upsample then moves c_out channels instead of c_in.

A k×k head conv (to fewer channels, nothing learned after it) after a ≥4× upsample gets an info
note: classifying at the low resolution and upsampling the logits, as FCN/DeepLab heads do, costs
s² fewer multiply-adds but is not the same function (retrain).
"""

from __future__ import annotations

import math

from archlint.diagnostics import Severity
from archlint.model.checks import _locate as locate
from archlint.model.checks import _pricing as pricing
from archlint.model.checks import _query as query
from archlint.units import human_bytes

CODE = "AL111"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRICE = ("static", "measured", "estimated")  # the bases its findings' prices may have, as its page says
FIX = "none"  # no autofix: its page's fix: none
PRIORITY = 110  # where findings overlap, the lowest claims the ops first
OPTIONS: dict = {}


def check(graph, options, ctx):
    for name, data in query.ops(graph):
        if data["kind"] != "upsample" or "grid" in str(data["key"]).lower():
            continue
        consumers = list(graph.successors(name))
        if len(consumers) != 1:
            continue
        conv_name = consumers[0]
        c = query.conv(graph.nodes[conv_name])
        stride = query.pair(query.attr(graph.nodes[conv_name], "stride", 1))
        if c is not None and c.k > 1 and set(stride) == {1} and c.hw_out == c.hw_in:
            head = _head_after_upsample(graph, ctx, name, data, conv_name, c)
            if head is not None:
                yield head
            continue
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
        price = pricing.price(
            graph,
            ctx,
            alternative=f"the 1×1 conv applied before the upsample ({c.c1}→{c.c2} channels at the low resolution)",
            mac_bytes_saved=max(saved, 0),
            flops_saved=flops_saved,
            claims=[f"{conv_name}#resolution", f"{name}#resolution"],
        )
        module = conv.get("module") or ""
        yield locate.finding(
            graph,
            CODE,
            (
                f"1×1 conv {module or conv_name} runs after an upsample to {scale:g}× the pixels: they commute, so "
                f"applied before it the conv does {scale:g}× fewer multiply-adds ({human_bytes(max(saved, 0))} less traffic)"
            ),
            node=conv_name,
            module=module,
            price=price,
            evidence={
                "upsample": name,
                "scale": scale,
                "flops_saved": flops_saved,
                "in_channels": c.c1,
                "out_channels": c.c2,
            },
        )


HEAD_SCALE = 16  # a 4× upsample in each direction


def _head_after_upsample(graph, ctx, name: str, up: dict, conv_name: str, c):
    """A k×k head conv (to few channels) after a ≥4× upsample: FCN/DeepLab-style heads classify at
    low resolution and upsample the logits. Not the same function (the conv sees other pixels):
    a design note, info, never a fix."""
    low = math.prod(up["in_shapes"][0][2:]) if up.get("in_shapes") else 0
    if not low or c.hw_in < HEAD_SCALE * low or c.c2 >= c.c1 or not _last_conv(graph, conv_name):
        return None
    scale = c.hw_in / low
    conv = graph.nodes[conv_name]
    flops_saved = int(conv.get("flops", 0)) - int(round(int(conv.get("flops", 0)) / scale))
    item = c.itemsize
    # the alternative: the conv at low resolution, then the upsample of its c2 output channels
    before = int(up.get("mac_bytes", 0)) + int(conv.get("mac_bytes", 0))
    after = item * (c.n * low * (c.c1 + c.c2) + c.weights) + item * c.n * c.c2 * (low + c.hw_in)
    price = pricing.price(
        graph,
        ctx,
        alternative=f"the head conv at the low resolution, its {c.c2}-channel output upsampled (as FCN/DeepLab heads do): "
        "not the same function, retrain",
        mac_bytes_saved=max(before - after, 0),
        flops_saved=flops_saved,
        claims=(),
    )
    module = conv.get("module") or ""
    return locate.finding(
        graph,
        CODE,
        (
            f"head conv {module or conv_name} ({int(math.isqrt(c.k))}×{int(math.isqrt(c.k))}, {c.c1}→{c.c2}) runs after an "
            f"upsample to {scale:g}× the pixels: classifying at the low resolution and upsampling the {c.c2}-channel logits "
            f"does {scale:g}× fewer multiply-adds — an approximation FCN/DeepLab heads take on purpose (not exact: retrain)"
        ),
        node=conv_name,
        module=module,
        price=price,
        evidence={
            "form": "head-after-upsample",
            "upsample": name,
            "scale": scale,
            "flops_saved": flops_saved,
            "changes_model": True,
        },
    )


def _last_conv(graph, conv_name: str) -> bool:
    """No conv or linear follows: the conv is the model's head."""
    seen, stack = set(), list(graph.successors(conv_name))
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if graph.nodes[n]["kind"] in ("conv", "linear"):
            return False
        stack.extend(graph.successors(n))
    return True
