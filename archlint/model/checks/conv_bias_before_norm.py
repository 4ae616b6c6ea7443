"""AL204 conv-bias-before-norm: a conv with bias=True whose output goes straight into BatchNorm
(or InstanceNorm). The norm subtracts the per-channel mean, so the bias cancels exactly: its
parameters are stored, read, updated and added for nothing (PyTorch performance tuning guide:
"disable bias for convolutions directly followed by a batch norm").

One finding per model, listing every such conv (a VGG-BN has 13: one fix, bias=False where the
conv is built, removes them all). The saving is the bias reads (static) or, with --latency, the
whole model timed with the biases dropped against it as it is (archlint.model.speedups.fix_timing); where a
conv module cannot be edited for its one op, each distinct conv timed alone with against
without its bias, applied to its measured time in the model and summed.
"""

from __future__ import annotations

from archlint.diagnostics import Severity
from archlint.model.checks import _locate as locate
from archlint.model.checks import _pricing as pricing
from archlint.model.checks import _query as query
from archlint.model.speedups.alternatives import conv_without_bias
from archlint.model.speedups.fix_timing import drop_bias

CODE = "AL204"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRICE = ("static", "measured", "estimated")  # the bases its findings' prices may have, as its page says
FIX = "none"  # no autofix: its page's fix: none
PRIORITY = 20  # where findings overlap, the lowest claims the ops first
OPTIONS: dict = {}


def check(graph, options, ctx):
    found = [(conv, norm) for conv, norm in query.conv_then_norm(graph) if query.attr(graph.nodes[conv], "bias", False)]
    if not found:
        return
    params = 0
    for conv, _ in found:
        data = graph.nodes[conv]
        c = query.conv(data)
        params += c.c2 if c else int(query.attr(data, "out_channels", 0))
    whole = pricing.fixed_ms(graph, ctx, drop_bias, [conv for conv, _ in found])
    saving_ms, timed = (whole, len(found)) if whole is not None else _per_conv(graph, ctx, found)
    itemsize = int(graph.nodes[found[0][0]].get("itemsize", 4))
    modules = [graph.nodes[conv].get("module") or conv for conv, _ in found]
    price = pricing.price(
        graph,
        ctx,
        alternative="the same convs with bias=False"
        + (" (timed end to end on the model)" if whole is not None else ""),
        mac_bytes_saved=params * itemsize,
        saving_ms=saving_ms if timed == len(found) else None,
        claims=[f"{conv}#bias" for conv, _ in found],
    )
    conv, norm = found[0]
    listed = ", ".join(modules[:4]) + (f" and {len(modules) - 4} more" if len(modules) > 4 else "")
    norm_name = query.op_name(graph.nodes[norm])
    yield locate.finding(
        graph,
        CODE,
        (
            f"{len(found)} conv{'s' if len(found) > 1 else ''} with a bias that the {norm_name} right after "
            f"cancels ({listed}): set bias=False ({params} wasted parameters)"
        ),
        node=conv,
        module=graph.nodes[conv].get("module") or "",
        price=price,
        evidence={
            "convs": modules,
            "norms": [n for _, n in found],
            "bias_parameters": params,
            "bias_bytes": params * itemsize,
            "whatif": (
                "the model without the biases, timed end to end against itself"
                if whole is not None
                else "each conv without bias, timed against itself with bias"
                if timed
                else None
            ),
        },
    )


def _per_conv(graph, ctx, found) -> tuple[float, int]:
    """(ms saved, convs timed): each conv alone with against without its bias, as a share of its
    time in the model."""
    saving_ms, timed = 0.0, 0
    for conv, _ in found:
        args = query.conv_args(graph.nodes[conv])
        saving = pricing.alternative_ms(graph, ctx, [conv], conv_without_bias, *args) if args else None
        if saving is not None:
            saving_ms, timed = saving_ms + saving, timed + 1
    return saving_ms, timed
