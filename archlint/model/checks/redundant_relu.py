"""AL202 redundant-relu: an activation that cannot change its input.

ReLU (and LeakyReLU, ELU, CELU, which are the identity on x ≥ 0) applied to a tensor that is
already non-negative: the output of ReLU, ReLU6, sigmoid, softmax, abs, hardsigmoid or exp,
possibly through max/avg pooling, dropout, views, splits or a concat of such tensors. Also a
ReLU whose only consumer is ReLU6: the later one clamps at 0 already.
Each is a full read and write of the activation for nothing.
"""

from __future__ import annotations

from archlint.model.checks import _graph as g

CODE = "AL202"
OPTIONS: dict = {}

NON_NEGATIVE = frozenset({"relu", "relu6", "sigmoid", "softmax", "abs", "hardsigmoid", "exp"})
IDENTITY_ON_NON_NEGATIVE = frozenset({"relu", "leakyrelu", "elu", "celu"})
CLAMPS_AT_ZERO = frozenset({"relu6"})  # ReLU → ReLU is reported once, on the second
KEEPS_SIGN = frozenset({"maxpool1d", "maxpool2d", "maxpool3d", "avgpool1d", "avgpool2d", "avgpool3d",
                        "adaptiveavgpool1d", "adaptiveavgpool2d", "adaptiveavgpool3d",
                        "adaptivemaxpool1d", "adaptivemaxpool2d", "adaptivemaxpool3d", "identity"})


def _non_negative(graph, name: str, seen: set[str] | None = None) -> str | None:
    """The op that makes `name`'s output non-negative (itself or upstream), or None."""
    seen = seen if seen is not None else set()
    if name in seen:
        return None
    seen.add(name)
    data = graph.nodes[name]
    op = g.op_name(data)
    if data["kind"] == "activation" and op in NON_NEGATIVE:
        return name
    if data["kind"] == "activation" and op == "hardtanh" and (g.attr(data, "min_val", -1.0) or 0) >= 0:
        return name
    passes = data["kind"] in g.PASSTHROUGH_KINDS or op in KEEPS_SIGN or (data["kind"] == "pool" and "lp" not in op)
    inputs = g.tensor_inputs(graph, name)
    if data["kind"] == "concat" and inputs:
        found = [_non_negative(graph, p, seen) for p in inputs]
        return found[0] if all(found) else None
    if passes and inputs:
        return _non_negative(graph, inputs[0], seen)
    return None


def check(graph, options, ctx):
    for name, data in g.ops(graph):
        if data["kind"] != "activation":
            continue
        op = g.op_name(data)
        inputs = g.tensor_inputs(graph, name)
        cause = _non_negative(graph, inputs[0]) if inputs and op in IDENTITY_ON_NON_NEGATIVE else None
        if cause is not None:
            why = f"its input is already non-negative ({g.op_name(graph.nodes[cause])} at {cause})"
            redundant = name
        elif op == "relu" and (nxt := g.sole_consumer(graph, name)) is not None and (
            graph.nodes[nxt]["kind"] == "activation" and g.op_name(graph.nodes[nxt]) in CLAMPS_AT_ZERO
        ):
            why = f"the {g.op_name(graph.nodes[nxt])} right after it ({nxt}) clamps at 0 already"
            redundant = name
        else:
            continue
        rd = graph.nodes[redundant]
        # The alternative is no op at all: the saving is the op's whole measured time in the model.
        price = g.price(graph, ctx, alternative=f"the {g.op_name(rd)} removed", mac_bytes_saved=int(rd.get("mac_bytes", 0)), removed=[redundant])
        module = rd.get("module") or ""
        yield g.finding(
            graph,
            CODE,
            f"{g.op_name(rd)} at {module or redundant} changes nothing: {why}",
            node=redundant,
            module=module,
            price=price,
            evidence={
                "activation": g.op_name(rd),
                "cause": cause or g.sole_consumer(graph, name),
                "mac_bytes": int(rd.get("mac_bytes", 0)),
            },
        )
