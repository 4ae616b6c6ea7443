"""AL202 redundant-relu: an activation that cannot change its input.

ReLU (and LeakyReLU, ELU, CELU, which are the identity on x ≥ 0) applied to a tensor that is
already non-negative: the output of ReLU, ReLU6, sigmoid, softmax, abs, hardsigmoid or exp,
possibly through max/avg pooling, dropout, views, splits or a concat of such tensors. Also a
ReLU whose only consumer is ReLU6: the later one clamps at 0 already.
Each is a full read and write of the activation for nothing.
"""

from __future__ import annotations

from archlint.diagnostics import Severity
from archlint.model.checks import _locate as locate
from archlint.model.checks import _pricing as pricing
from archlint.model.checks import _query as query
from archlint.model.speedups.fix_timing import to_identity

CODE = "AL202"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRICE = ("static", "measured", "estimated")  # the bases its findings' prices may have, as its page says
FIX = "none"  # no autofix: its page's fix: none
PRIORITY = 30  # where findings overlap, the lowest claims the ops first
OPTIONS: dict = {}

NON_NEGATIVE = frozenset({"relu", "relu6", "sigmoid", "softmax", "abs", "hardsigmoid", "exp"})
IDENTITY_ON_NON_NEGATIVE = frozenset({"relu", "leakyrelu", "elu", "celu"})
CLAMPS_AT_ZERO = frozenset({"relu6"})  # ReLU → ReLU is reported once, on the second
KEEPS_SIGN = frozenset(
    {
        "maxpool1d",
        "maxpool2d",
        "maxpool3d",
        "avgpool1d",
        "avgpool2d",
        "avgpool3d",
        "adaptiveavgpool1d",
        "adaptiveavgpool2d",
        "adaptiveavgpool3d",
        "adaptivemaxpool1d",
        "adaptivemaxpool2d",
        "adaptivemaxpool3d",
        "identity",
    }
)


def _non_negative(graph, name: str, seen: set[str] | None = None) -> str | None:
    """The op that makes `name`'s output non-negative (itself or upstream), or None."""
    seen = seen if seen is not None else set()
    if name in seen:
        return None
    seen.add(name)
    data = graph.nodes[name]
    op = query.op_name(data)
    if data["kind"] == "activation" and op in NON_NEGATIVE:
        return name
    if data["kind"] == "activation" and op == "hardtanh" and (query.attr(data, "min_val", -1.0) or 0) >= 0:
        return name
    passes = data["kind"] in query.PASSTHROUGH_KINDS or op in KEEPS_SIGN or (data["kind"] == "pool" and "lp" not in op)
    inputs = query.tensor_inputs(graph, name)
    if data["kind"] == "concat" and inputs:
        found = [_non_negative(graph, p, seen) for p in inputs]
        return found[0] if all(found) else None
    if passes and inputs:
        return _non_negative(graph, inputs[0], seen)
    return None


def check(graph, options, ctx):
    found = list(_redundant(graph))
    if not found:
        return
    # With --latency, all of them removed at once (each module replaced by nn.Identity) is timed
    # end to end on the model; with several, each finding's part of that saving is its share of
    # their op times (a proportion: estimated). Inside the noise (0), or where the model cannot be
    # edited (None), each op's own measured time is the evidence left, and the alternative says so.
    whole = pricing.fixed_ms(graph, ctx, to_identity, [name for name, *_ in found])
    op_ms = {name: graph.nodes[name].get("latency_ms") or 0.0 for name, *_ in found}
    total, split = sum(op_ms.values()), len(found) > 1
    for name, why, cause in found:
        rd = graph.nodes[name]
        alternative, saving = f"the {query.op_name(rd)} removed", None
        if whole:
            saving = whole * (op_ms[name] / total if total > 0 else 1 / len(found))
            alternative += (
                f" (all {len(found)} removed together timed end to end on the model, this one's part by its op time)"
                if split
                else " (timed end to end on the model)"
            )
        elif whole == 0:
            alternative += " (its own measured time: removing it end to end was inside the noise)"
        elif ctx.pricer is not None:
            alternative += " (its own measured time: the model could not be edited for it)"
        price = pricing.price(
            graph,
            ctx,
            alternative=alternative,
            mac_bytes_saved=int(rd.get("mac_bytes", 0)),
            saving_ms=saving,
            removed=[name],
            estimated=bool(whole) and split,
        )
        module = rd.get("module") or ""
        yield locate.finding(
            graph,
            CODE,
            f"{locate.describe(graph, name)} changes nothing: {why}",
            node=name,
            module=module,
            price=price,
            evidence={
                "activation": query.op_name(rd),
                "cause": cause,
                "mac_bytes": int(rd.get("mac_bytes", 0)),
            },
        )


def _redundant(graph):
    """(activation that changes nothing, why in words, the op that makes it so) for each."""
    for name, data in query.ops(graph):
        if data["kind"] != "activation":
            continue
        op = query.op_name(data)
        inputs = query.tensor_inputs(graph, name)
        cause = _non_negative(graph, inputs[0]) if inputs and op in IDENTITY_ON_NON_NEGATIVE else None
        if cause is not None:
            yield name, f"its input is already non-negative (the output of {locate.describe(graph, cause)})", cause
        elif (
            op == "relu"
            and (nxt := query.sole_consumer(graph, name)) is not None
            and (graph.nodes[nxt]["kind"] == "activation" and query.op_name(graph.nodes[nxt]) in CLAMPS_AT_ZERO)
        ):
            yield (
                name,
                f"the {query.op_name(graph.nodes[nxt])} right after it ({locate.describe(graph, nxt)}) clamps at 0 already",
                nxt,
            )
