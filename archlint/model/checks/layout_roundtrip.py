"""AL113 layout-roundtrip: a 4-D tensor permuted, run through one op, and permuted back — a
channels-first LayerNorm written as `x.permute(0, 2, 3, 1)` → `F.layer_norm` → `.permute(0, 3, 1, 2)`
(torchvision's and timm's LayerNorm2d), a Linear applied to NHWC and turned back to NCHW — where the
permuted view is copied on the way: by an explicit `.contiguous()`, or inside the op (a LayerNorm,
Linear, matmul or softmax reads a non-contiguous input through a copy; element-wise ops do not).

Only one op between the permutes: a block that runs several ops in the permuted layout (ConvNeXt's
LayerNorm → Linear → GELU → Linear) chose that layout on purpose. The alternative keeps the
interface: the tensor in channels_last memory format (`model.to(memory_format=torch.channels_last)`
and the input likewise), where `permute(0, 2, 3, 1)` is a free view the op reads in place and the
permute back is one too. The price is the copies: their MAC (an explicit copy's own, read + write
of the op's input for a copy inside it), or with --latency the explicit copies' measured time plus
the in-op copy's share of the op's time by bytes (estimated). A warning only when that is at least
`min_saving_share` of the model (as AL101–AL104); otherwise info.
"""

from __future__ import annotations

import math

import networkx as nx

from archlint.diagnostics import Severity
from archlint.model.checks import _locate as locate
from archlint.model.checks import _pricing as pricing
from archlint.model.checks import _query as query

CODE = "AL113"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRICE = ("static", "measured", "estimated")  # the bases its findings' prices may have, as its page says
FIX = "none"  # no autofix: its page's fix: none
PRIORITY = 120  # where findings overlap, the lowest claims the ops first
FIX_IN_CLASS = True  # the finding is the module's own forward: one fix in its class
OPTIONS = {}

_PERMUTES = ("permute", "transpose", "swapaxes", "swapdims")
_COPIES = ("contiguous", "clone")
# Ops whose kernels read a non-contiguous input through a contiguous copy (the normalized,
# contracted or softmax dim must be dense); element-wise kernels take any strides.
_COPY_INSIDE_KINDS = ("norm", "linear", "matmul")
_COPY_INSIDE_KEYS = ("softmax", "log_softmax", "_softmax", "_log_softmax", "Softmax", "LogSoftmax")


def _dims(data: dict) -> list[int] | None:
    dims = query.attr(data, "dims")
    return list(dims) if data.get("key") in _PERMUTES and dims and len(dims) == 4 else None


def _copies_after(graph: nx.DiGraph, name: str) -> tuple[list[str], str | None]:
    """Explicit copies that are each the sole consumer in a chain from `name`, and the first op after them."""
    copies = []
    nxt = query.sole_consumer(graph, name)
    while nxt is not None and graph.nodes[nxt].get("key") in _COPIES:
        copies.append(nxt)
        nxt = query.sole_consumer(graph, nxt)
    return copies, nxt


def _fmt(dims: list[int]) -> str:
    return f"permute({', '.join(map(str, dims))})"


def roundtrips(graph: nx.DiGraph):
    """(first permute, copies before the op, the op, copies after it, permute back, copies after that)."""
    for p1, data in graph.nodes(data=True):
        first = _dims(data)
        if first is None or first == sorted(first):
            continue
        before, core = _copies_after(graph, p1)
        if core is None or graph.nodes[core]["kind"] in ("reshape", "copy", "input", "output"):
            continue
        if query.tensor_inputs(graph, core) != [before[-1] if before else p1]:
            continue  # the op reads something else too (a residual add): not one op in another layout
        after, p2 = _copies_after(graph, core)
        back = _dims(graph.nodes[p2]) if p2 is not None else None
        if back is None or any(first[back[i]] != i for i in range(4)):
            continue
        tail, _ = _copies_after(graph, p2)
        yield p1, before, core, after, p2, tail


def _moves_data(shape, dims: list[int]) -> bool:
    """A permute of a contiguous tensor of this shape is not contiguous (its non-size-1 dims change order)."""
    if not shape or len(shape) != len(dims):
        return True
    order = [d for d in dims if shape[d] != 1]
    return order != sorted(order)


def check(graph, options, ctx):
    for p1, before, core, after, p2, tail in roundtrips(graph):
        op = graph.nodes[core]
        if not _moves_data((graph.nodes[p1].get("in_shapes") or [()])[0], query.attr(graph.nodes[p1], "dims")):
            continue  # the moved dims have size 1 (a 1×1 map): the permuted view is already contiguous
        if query.converted_to_channels_last(graph, p1):
            continue
        back = query.attr(graph.nodes[p2], "dims")
        after = after if _moves_data((op.get("out_shapes") or [()])[0], back) else []
        tail = tail if _moves_data((op.get("out_shapes") or [()])[0], back) else []
        explicit = before + after + tail
        copied = int(sum(int(graph.nodes[n].get("mac_bytes", 0)) for n in explicit))
        inside = 0
        if not before and (op["kind"] in _COPY_INSIDE_KINDS or op.get("key") in _COPY_INSIDE_KEYS):
            x = (op.get("in_shapes") or [()])[0]
            inside = 2 * math.prod(x) * int(op.get("itemsize", 4))  # the permuted view read, a dense copy written
        saved = copied + inside
        if saved <= 0:
            continue  # an element-wise op on a view: nothing is copied
        spent = pricing.latency(graph, explicit)
        op_ms = op.get("latency_ms")
        saving_ms = None
        if spent is not None or (inside and op_ms is not None):
            share = inside / (int(op.get("mac_bytes", 0)) + inside) if inside else 0.0
            saving_ms = (spent or 0.0) + (op_ms or 0.0) * share
        first = query.attr(graph.nodes[p1], "dims")
        channels_last = first == [0, 2, 3, 1]
        name = op["op"]
        alternative = (
            "the activations in channels_last memory format (x = x.contiguous(memory_format=torch.channels_last) "
            f"at the top of forward, or the model and its input so): {_fmt(first)} is then a free view the {name} "
            "reads in place, and the permute back is one too"
            if channels_last
            else f"the tensor kept in the layout the {name} reads (no {_fmt(first)} round trip), e.g. by the block before it"
        )
        price = pricing.price(
            graph,
            ctx,
            alternative=alternative,
            mac_bytes_saved=saved,
            saving_ms=saving_ms,
            removed=explicit,
            claims=explicit + ([f"{core}#input-copy"] if inside else []),
            estimated=bool(inside),
        )
        module = locate.common_module(graph, [p1, core, p2])
        shape = "×".join(map(str, (op.get("in_shapes") or [()])[0]))
        copies = len(explicit) + (1 if inside else 0)
        how = " and ".join(
            part
            for part in (
                f"{len(explicit)} .contiguous()" if explicit else "",
                f"one inside {name}, which reads the permuted view through a copy" if inside else "",
            )
            if part
        )
        message = (
            f"layout round trip in {module or 'the model'}: {_fmt(first)} → {name} → "
            f"{_fmt(query.attr(graph.nodes[p2], 'dims'))} copies the {shape} activation {copies}× ({how})"
        )
        if channels_last:
            message += "; in channels_last memory format both permutes are free views"
        d = locate.finding(
            graph,
            CODE,
            message,
            node=core,
            module=module,
            price=price,
            evidence={
                "permutes": [p1, p2],
                "op": core,
                "copies": explicit,
                "copy_inside_op": bool(inside),
                "mac_bytes_copied": saved,
            },
        )
        yield d
