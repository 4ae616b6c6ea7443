"""AL107 mask-in-forward: a square mask (causal or padding, T×T) built from constants inside
`forward` on every call: `torch.tril(torch.ones(T, T))`, `arange(T)[:, None] >= arange(T)`.

An op is "constant" when it reads no model input, no parameter or buffer, and only other constant
ops (creation ops such as ones/arange start it). A square constant tensor of at least two
dimensions consumed by a non-constant op is a mask rebuilt every call: its ops' traffic (and
launches) is the price; built once (`register_buffer(..., persistent=False)`, sliced to T) or
replaced by `is_causal=True` it costs nothing per call.
"""

from __future__ import annotations

import math

import networkx as nx

from archlint.diagnostics import Severity
from archlint.model.checks import _locate as locate, _pricing as pricing, _query as query

CODE = "AL107"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRICE = ("static", "measured", "estimated")  # the bases its findings' prices may have, as its page says
FIX = "none"  # no autofix: its page's fix: none
PRIORITY = 70  # where findings overlap, the lowest claims the ops first
FIX_IN_CLASS = True  # the finding is the module's own forward: one fix in its class
EAGER_RECHECK = True  # libraries build masks only while exported/traced: judged on the eager forward
OPTIONS = {
    "min_size": 2,  # the mask's last two dims must be at least this (T×T with T ≥ min_size)
}


def constant_ops(graph: nx.DiGraph) -> set[str]:
    """Ops computed from constants alone (see the module docstring), in topological order."""
    constant: set[str] = set()
    for name in nx.topological_sort(graph):
        data = graph.nodes[name]
        if data["kind"] in ("input", "output") or data.get("param_shapes"):
            continue
        preds = list(graph.predecessors(name))
        if preds and all(p in constant for p in preds):
            constant.add(name)
        elif not preds and not data.get("in_shapes") and data["kind"] == "creation":
            constant.add(name)
    return constant


def _is_mask(data: dict, min_size: int) -> bool:
    shape = (data.get("out_shapes") or [()])[0]
    return len(shape) >= 2 and shape[-1] == shape[-2] >= min_size


def _materialized(graph: nx.DiGraph, built: set[str], mask: dict) -> bool:
    """Some op writes a tensor of the mask's T×T size (a scalar expanded to T×T is a view)."""
    square = math.prod(mask["out_shapes"][0][-2:])
    return any(
        graph.nodes[n]["kind"] not in ("reshape", "split") and math.prod((graph.nodes[n].get("out_shapes") or [()])[0]) >= square
        for n in built
    )


_COMPARE = ("ge", "gt", "le", "lt")


def _causal(graph: nx.DiGraph, ops: list[str]) -> bool:
    """The mask can be a causal triangle: built by tril/triu, or by one position comparison
    (`arange(T)[:, None] >= arange(T)`). Two comparisons, or a distance (abs), make a window or
    band (ModernBERT's local attention, Longformer-style): is_causal=True would compute another model."""
    names = [query.op_name(graph.nodes[n]).lower() for n in ops]
    if any(n in ("tril", "triu") for n in names):
        return True
    return sum(n in _COMPARE for n in names) == 1 and "abs" not in names


def check(graph, options, ctx):
    constant = constant_ops(graph)
    seen: set[str] = set()
    for name in nx.topological_sort(graph):
        if name not in constant or not _is_mask(graph.nodes[name], int(options["min_size"])):
            continue
        if all(s in constant for s in graph.successors(name)):
            continue  # still being built: report where it leaves the constant part
        built = (nx.ancestors(graph, name) & constant) | {name}
        if built <= seen or not _materialized(graph, built, graph.nodes[name]):
            continue
        seen |= built
        order = {n: i for i, n in enumerate(graph)}  # ties in capture order: the same list on every run
        ops = list(nx.lexicographical_topological_sort(graph.subgraph(built), key=order.__getitem__))
        mac = sum(int(graph.nodes[n].get("mac_bytes", 0)) for n in ops)
        causal = _causal(graph, ops)
        price = pricing.price(
            graph, ctx,
            alternative="the mask built once in __init__ (register_buffer(..., persistent=False)) and sliced to the "
            "sequence length" + (", or is_causal=True in F.scaled_dot_product_attention" if causal else ""),
            mac_bytes_saved=mac, removed=ops,
        )
        module = locate.common_module(graph, ops + [s for s in graph.successors(name)])
        shape = "×".join(str(d) for d in graph.nodes[name]["out_shapes"][0])
        names = ", ".join(dict.fromkeys(query.op_name(graph.nodes[n]) for n in ops))
        yield locate.finding(
            graph,
            CODE,
            (
                f"a {shape} mask (or position table) is built from constants inside forward on every call in "
                f"{module or 'the model'} "
                f"({len(ops)} ops: {names}); build it once in __init__ as a buffer"
                + (", or pass is_causal=True" if causal else
                   " (not a causal triangle — a window or band: is_causal=True would change the model)")
            ),
            node=name,
            module=module,
            price=price,
            evidence={"mask_shape": list(graph.nodes[name]["out_shapes"][0]), "ops": ops, "mac_bytes": mac,
                      "causal": causal},
        )
