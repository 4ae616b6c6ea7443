"""AL115 log-of-softmax: `log(softmax(x))` or `log(sigmoid(x))` in two passes, where
`F.log_softmax` and `F.logsigmoid` make one (and stay finite where the two-step form underflows
to log(0) = -inf).

The pattern is a softmax (over any dim) or sigmoid whose only consumer is a log, possibly through
an added constant (`log(p + 1e-8)`, the usual guard against that -inf, which the fused op does not
need). The log op (and the constant add) are the pass the fused op does away with.
"""

from __future__ import annotations

from archlint.diagnostics import Severity
from archlint.model.checks import _locate as locate
from archlint.model.checks import _pricing as pricing
from archlint.model.checks import _query as query

CODE = "AL115"
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ("static", "measured", "estimated")  # the bases its findings' prices may have, as its page says
FIX = "none"  # no autofix: its page's fix: none
PRIORITY = 35  # where findings overlap, the lowest claims the ops first
OPTIONS: dict = {}

FUSED = {"softmax": "F.log_softmax(x, dim)", "sigmoid": "F.logsigmoid(x)"}
_GUARDS = frozenset({"add", "radd", "clamp", "clip", "clampmin"})  # p + eps, p.clamp(min=eps) before the log


def check(graph, options, ctx):
    for normalizer, extra, log in _chains(graph):
        data = graph.nodes[normalizer]
        kind = query.op_name(data)
        removed = [*extra, log]
        mac_saved = sum(int(graph.nodes[n].get("mac_bytes", 0)) for n in removed)
        dim = query.attr(data, "dim")  # None where the capture kept it positional: said as `dim`
        fused = FUSED[kind].replace("dim", f"dim={dim}") if kind == "softmax" and dim is not None else FUSED[kind]
        guard = " and the epsilon it adds" if extra else ""
        alternative = f"{fused}: one pass, finite where log({kind}) underflows to -inf"
        price = pricing.price(graph, ctx, alternative=alternative, mac_bytes_saved=mac_saved, removed=removed)
        yield locate.finding(
            graph,
            CODE,
            f"log of {locate.describe(graph, normalizer)} is a second pass over its output{guard} "
            f"({len(removed)} more op{'s' if len(removed) > 1 else ''}): use {fused}, one kernel that is also "
            "exact where the probabilities underflow",
            node=log,
            module=data.get("module") or "",
            price=price,
            evidence={
                "normalizer": kind,
                "ops": [query.op_name(graph.nodes[n]) for n in (normalizer, *removed)],
                "mac_bytes_saved": mac_saved,
                "fused": fused,
            },
        )


def _chains(graph):
    """(softmax or sigmoid, the constant guards between it and the log, the log) for each."""
    for name, data in query.ops(graph):
        if query.op_name(data) not in FUSED or (query.op_name(data) == "softmax" and query.attr(data, "dtype")):
            continue  # softmax(x, dtype=...) casts: log_softmax takes the same dtype, but keep to the plain form
        extra, node = [], query.sole_consumer(graph, name)
        while (
            node is not None
            and query.op_name(graph.nodes[node]) in _GUARDS
            and len(query.tensor_inputs(graph, node)) == 1
        ):
            extra.append(node)  # one tensor input: the other operand is a constant
            node = query.sole_consumer(graph, node)
        if node is not None and query.op_name(graph.nodes[node]) == "log" and len(extra) <= 1:
            yield name, extra, node
