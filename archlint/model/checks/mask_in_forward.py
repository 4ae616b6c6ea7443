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
from archlint.model.checks import _locate as locate
from archlint.model.checks import _pricing as pricing
from archlint.model.checks import _query as query
from archlint.model.checks._reference_path import implementation_branch

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
    """Ops computed from constants alone (see the module docstring), in topological order. A
    tensor created from constants and then written in place with values the forward computed
    (`canvas = zeros(H, W); canvas[y0:y1, x0:x1] = mask`: torchvision's paste_masks_in_image and
    RoIAlign's result buffer, an unpadding model's repad `output[indices] = x`) is a canvas the
    forward fills, not a constant: it, and what is computed from it, is left out."""
    filled: set[str] = set()
    while True:
        constant = _constants(graph, filled)
        more = _filled(graph, constant) - filled
        if not more:
            return constant
        filled |= more


def _constants(graph: nx.DiGraph, filled: set[str]) -> set[str]:
    constant: set[str] = set()
    for name in nx.topological_sort(graph):
        data = graph.nodes[name]
        if data["kind"] in ("input", "output") or data.get("param_shapes") or name in filled:
            continue
        preds = list(graph.predecessors(name))
        if preds and all(p in constant for p in preds):
            constant.add(name)
        elif not preds and not data.get("in_shapes") and data["kind"] == "creation":
            constant.add(name)
    return constant


def _in_place(data: dict) -> bool:
    """An op that writes its first argument (`aten.copy_`, `index_put_`, `masked_fill_`, `__iand__`)."""
    if data.get("key") in ("setitem", "index_put"):  # `x[i] = v` recorded by the dispatch capture
        return True
    parts = str(data.get("op", "")).split(".")
    return any(
        (p.endswith("_") and not p.endswith("__")) or (p.startswith("__i") and p.endswith("__"))
        for p in parts[1:] or parts
    )


def _filled(graph: nx.DiGraph, constant: set[str]) -> set[str]:
    """Constant tensors (with their views) an in-place op writes with a value that is not constant."""
    out: set[str] = set()
    for name, data in graph.nodes(data=True):
        if data["kind"] in ("input", "output") or not _in_place(data):
            continue
        inputs = query.tensor_inputs(graph, name)
        if not inputs or inputs[0] not in constant or all(p in constant for p in inputs[1:]):
            continue
        base = inputs[0]  # the written view, back to the tensor it views
        while graph.nodes[base]["kind"] in ("reshape", "split") and query.tensor_inputs(graph, base):
            base = query.tensor_inputs(graph, base)[0]
        out |= {base, name} | {n for n in nx.descendants(graph, base) if n in constant}
    return out


def _is_mask(data: dict, min_size: int) -> bool:
    shape = (data.get("out_shapes") or [()])[0]
    return len(shape) >= 2 and shape[-1] == shape[-2] >= min_size


def _materialized(graph: nx.DiGraph, built: set[str], mask: dict) -> bool:
    """Some op writes a tensor of the mask's T×T size (a scalar expanded to T×T is a view)."""
    square = math.prod(mask["out_shapes"][0][-2:])
    return any(
        graph.nodes[n]["kind"] not in ("reshape", "split")
        and math.prod((graph.nodes[n].get("out_shapes") or [()])[0]) >= square
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
            graph,
            ctx,
            alternative="the mask built once in __init__ (register_buffer(..., persistent=False)) and sliced to the "
            "sequence length" + (", or is_causal=True in F.scaled_dot_product_attention" if causal else ""),
            mac_bytes_saved=mac,
            removed=ops,
        )
        module = locate.common_module(graph, ops + [s for s in graph.successors(name)])
        shape = "×".join(str(d) for d in graph.nodes[name]["out_shapes"][0])
        names = ", ".join(dict.fromkeys(query.op_name(graph.nodes[n]) for n in ops))
        branch = _one_implementation(graph, name)
        default = _default_padding(graph, ops)
        d = locate.finding(
            graph,
            CODE,
            (
                f"a {shape} mask (or position table) is built from constants inside forward on every call in "
                f"{module or 'the model'} "
                f"({len(ops)} ops: {names}); build it once in __init__ as a buffer"
                + (
                    ", or pass is_causal=True"
                    if causal
                    else " (not a causal triangle — a window or band: is_causal=True would change the model)"
                )
            ),
            node=name,
            module=module,
            price=price,
            evidence={
                "mask_shape": list(graph.nodes[name]["out_shapes"][0]),
                "ops": ops,
                "mac_bytes": mac,
                "causal": causal,
            },
        )
        if default:  # no constant: the caller's padding mask, made up because none was passed
            d.severity = Severity.INFO
            d.evidence["default_padding_mask"] = default
            d.evidence["verdict"] = "built from a default padding mask the forward makes when none is passed"
            d.message += (
                f"; but it is built from {default[0]} (all ones, the shape of the model's input "
                f"{'×'.join(map(str, graph.nodes[default[0]]['out_shapes'][0]))}): the padding mask the forward makes up "
                "when the caller passes none — with a real batch's mask passed it depends on the batch, nothing to cache"
            )
        if branch is not None:  # the premise (built on every call) holds on the captured path only
            d.severity = Severity.INFO
            d.evidence["implementation_branch"] = {
                "function": branch.function,
                "file": branch.file,
                "line": branch.line,
                "test": branch.test,
            }
            d.evidence["verdict"] = "built on one attention implementation's path only (the one captured)"
            d.message += (
                f"; built only on one side of `if {branch.test}` ({branch.file.rsplit('/', 1)[-1]}:{branch.line}, "
                f"in {branch.function}): the other attention implementation (a flash/varlen kernel: unpadded "
                "tokens, the window passed to the kernel) builds no mask — choose it on the GPU rather than "
                "caching this one"
            )
        yield d


_FILLS = ("ones", "newones", "oneslike", "full", "newfull", "fulllike")


def _default_padding(graph: nx.DiGraph, ops: list[str]) -> list[str]:
    """The mask's creation ops when every one is an all-ones tensor of a model input's shape (batch ×
    sequence): `if attention_mask is None: attention_mask = torch.ones(input_shape)` — a stand-in
    for an input the caller did not give, not a constant of the model. Empty otherwise (a tril of
    ones(T, T), an arange: real constants)."""
    inputs = {tuple(s) for _, d in graph.nodes(data=True) if d["kind"] == "input" for s in d.get("out_shapes") or []}
    roots = [n for n in ops if graph.nodes[n]["kind"] == "creation"]
    shaped = [
        n
        for n in roots
        if query.op_name(graph.nodes[n]) in _FILLS
        and len((graph.nodes[n].get("out_shapes") or [()])[0]) >= 2
        and tuple(graph.nodes[n]["out_shapes"][0]) in inputs
    ]
    return shaped if roots and shaped == roots else []


def _one_implementation(graph: nx.DiGraph, mask: str):
    """The `if` picking the attention implementation that the op making the mask runs under, found
    from the source line it was called from (_reference_path.implementation_branch); ops before it
    may be shared (a default padding mask built above the branch)."""
    source = graph.nodes[mask].get("source")
    return implementation_branch(source[0], int(source[1])) if source else None
