"""AL114 conv-not-channels-last: a conv net analyzed in float16/bfloat16 whose 2-D convolutions
read NCHW (contiguous) activations. Tensor-core conv kernels work in NHWC: on NCHW, cuDNN
transposes each conv's input in and its output back (one more read and write of each), which
`model.to(memory_format=torch.channels_last)` and a channels_last input remove for every conv.

One finding per model (the alternative is model-wide). It pays only on a device: a warning only
with a positive time saving at least `min_saving_share` of the model —
  measured   `--what-if channels-last` (the whole model timed both ways: archlint.model.speedups;
             repriced by model/links.py), or with `--latency` each distinct conv timed on the
             device with NCHW and with channels_last input and weights (alternatives.channels_last_conv),
             applied to the convs' measured in-model time;
  estimated  `--device-spec` naming a GPU: the estimate's layout term (estimate.layout_bytes, the
             transposes' DRAM bytes) taken out of each tensor-core conv, less one conversion of the
             model's input;
otherwise info: the MAC and FLOPs hold no layout cost, so there is no static saving to claim.
A forward that converts its activations itself (`x.contiguous(memory_format=torch.channels_last)`
upstream of the convs) is not reported.
"""

from __future__ import annotations

import math

from archlint.diagnostics import Price, Severity
from archlint.model.checks import _locate as locate
from archlint.model.checks import _pricing as pricing
from archlint.model.checks import _query as query
from archlint.model.speedups.alternatives import channels_last_conv

CODE = "AL114"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRICE = ("static", "measured", "estimated")  # the bases its findings' prices may have, as its page says
FIX = "none"  # no autofix: its page's fix: none
PRIORITY = 180  # where findings overlap, the lowest claims the ops first
FIXED_BY = "channels-last"  # the --what-if that applies its fix: its measured result prices the finding
JUDGED_BY_WHAT_IF = True  # no static saving: the what-if's measured saving decides warning or info
OPTIONS = {
    "min_convs": 1,  # report models with at least this many NCHW 2-D convs
}

_HALF = ("float16", "bfloat16")
ALTERNATIVE = (
    "the model and its input in channels_last memory format (model.to(memory_format=torch.channels_last), "
    "x.contiguous(memory_format=torch.channels_last)): the same convs without the NCHW↔NHWC transposes"
)


def _nchw_convs(graph) -> list[str]:
    return [
        name
        for name, data, c in query.iter_convs(graph)
        if len((data.get("in_shapes") or [()])[0]) == 4
        and data.get("dtype") in _HALF
        and not query.converted_to_channels_last(graph, name)
    ]


def _estimated_ms(graph, ctx, convs: list[str]) -> float | None:
    """The estimate without its layout term on these convs (a GPU spec only), less one conversion of the input."""
    estimate = ctx.estimate
    bandwidth = estimate.roofs.get("bandwidth_bytes_per_s") if estimate is not None else None
    if not estimate or not bandwidth:
        return None
    saved = 0.0
    for n in convs:
        d = graph.nodes[n]
        terms = d.get("estimate_terms") or {}
        extra = int(terms.get("layout_bytes", 0))
        if not extra or d.get("estimated_ms") is None:
            continue
        memory = terms["memory_ms"] - extra / bandwidth * 1e3
        saved += d["estimated_ms"] - max(terms["compute_ms"], memory, terms["overhead_ms"])
    if saved <= 0:
        return None  # no tensor-core conv on this spec (a CPU spec, fp32): the estimate has no layout cost
    inputs = sum(
        math.prod(d["out_shapes"][0]) * int(d.get("itemsize", 2))
        for _, d in graph.nodes(data=True)
        if d["kind"] == "input" and len(d["out_shapes"][0]) == 4
    )
    return saved - 2 * inputs / bandwidth * 1e3


def check(graph, options, ctx):
    convs = _nchw_convs(graph)
    if len(convs) < max(1, int(options["min_convs"])):
        return
    claims = [f"{n}#layout" for n in convs]
    saving_ms = None
    if ctx.pricer is not None:  # measured: each conv timed both ways on the device
        parts = [
            pricing.alternative_ms(graph, ctx, [n], channels_last_conv, *args)
            for n in convs
            if (args := query.conv_args(graph.nodes[n])) is not None
        ]
        saving_ms = sum(p for p in parts if p is not None) if any(p is not None for p in parts) else None
        price = pricing.price(graph, ctx, alternative=ALTERNATIVE, saving_ms=saving_ms, claims=claims)
    elif (saving_ms := _estimated_ms(graph, ctx, convs)) is not None:
        price = Price.timed(
            ALTERNATIVE,
            saving_ms=saving_ms,
            model_ms=ctx.estimate.latency_ms,
            basis="estimated",
            device=ctx.estimate.device_spec,
            claims=claims,
        )
    else:
        price = pricing.price(graph, ctx, alternative=ALTERNATIVE, claims=())
    dtype = graph.nodes[convs[0]]["dtype"]
    message = (
        f"{len(convs)} 2-D convolution{'s' if len(convs) > 1 else ''} in {dtype} read NCHW activations: tensor-core "
        "kernels work in NHWC, so each conv's input and output are transposed on the way (one more read and write "
        f"of each); channels_last memory format removes that for every conv"
    )
    if price.basis == "static":
        message += " (no time basis: --what-if channels-last, --latency or a GPU --device-spec prices it)"
    d = locate.finding(
        graph,
        CODE,
        message,
        node=convs[0],
        module=locate.common_module(graph, convs),
        price=price,
        evidence={"convs": len(convs), "dtype": dtype, "first": convs[0], "ops": convs},
    )
    d.severity = Severity.WARNING if price.saving_ms is not None else Severity.INFO  # only a time prices it
    yield d
