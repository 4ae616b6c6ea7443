"""AL112 host-sync-in-forward: `forward` makes the host wait for the device: a tensor's value read
in Python (`.item()`, `.tolist()`, `.numpy()`, `int(t)`, `if t:` / `while t:`), a copy to the host
(`.cpu()`, `.to("cpu")`), or an op whose output size depends on values (`nonzero`,
`torch.where(cond)` with one argument, `masked_select`, boolean-mask indexing `x[mask]` and
assignment `x[mask] = v`, `unique`, `bincount`, `repeat_interleave` with tensor repeats).

Capture marks these ops (describe.HOST_READS and host_sync: a "sync" op for a value read, a
`host_sync` attribute on the others; export leaves such a forward to the dispatch recording, which
sees them all). One finding per module, listing its syncs.

No static price: what a sync costs is the time the host waits for the work queued before it, and
the overlap and graph capture it prevents; that is not in the MAC or FLOPs, so the price says
what it blocks (one host sync per call each, CUDA graphs, a whole torch.compile graph) with no
saving counted. It is a warning only where it is clearly a sync on the device: a tensor computed
in forward from the model's inputs or weights, in a module whose class is the user's. A read of
a raw model input (a sync only when the caller put it on the GPU; `lengths` for
pack_padded_sequence live on the CPU), of a tensor built from constants, or inside a library's
module (torchvision's detection post-processing, which the user cannot change) is info.
"""

from __future__ import annotations

from collections import defaultdict

from archlint.diagnostics import Severity
from archlint.model.capture.describe import SYNC_REASONS
from archlint.model.checks import _locate as locate, _pricing as pricing, _query as query
from archlint.model.checks.mask_in_forward import constant_ops

CODE = "AL112"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRIORITY = 190  # where findings overlap, the lowest claims the ops first
FIX_IN_CLASS = True  # the finding is the module's own forward: one fix in its class
OPTIONS = {
    "library_modules": False,  # also warn on syncs inside library modules (torchvision, transformers)
}

_INSTEAD = {
    SYNC_REASONS[0]: "keep the value on the device (tensor ops instead of Python numbers, torch.where instead of "
    "`if`, torch._assert_async for checks) and read it after forward",
    SYNC_REASONS[1]: "a fixed-size form (torch.where(cond, x, y), masked_fill, multiplying by the mask, "
    "nonzero_static(size=...), repeat_interleave(..., output_size=...))",
    SYNC_REASONS[2]: "torch.where(mask, x, 0) / x.masked_fill(~mask, v), or a reduction over x * mask",
    SYNC_REASONS[3]: "the tensor kept on the device inside forward, moved after it returns",
}


def _reason(data: dict) -> str | None:
    if data["kind"] == "sync":
        return SYNC_REASONS[0]
    return query.attr(data, "host_sync")


def _library_module(graph, module: str) -> bool:
    """The op runs in a module whose class comes from an installed library (or torch)."""
    info = graph.graph.get("modules", {}).get(module) or {}
    return bool(info.get("file")) and locate.is_library_file(info["file"])


def check(graph, options, ctx):
    syncs: dict[str, list[str]] = defaultdict(list)
    for name, data in graph.nodes(data=True):  # in the order the capture recorded them (the call order)
        if data["kind"] not in ("input", "output") and _reason(data) is not None:
            syncs[data.get("module") or ""].append(name)
    if not syncs:
        return
    constant = constant_ops(graph)
    for module, nodes in syncs.items():
        reads = [graph.nodes[n] for n in nodes]
        reasons = list(dict.fromkeys(_reason(d) for d in reads))
        calls = ", ".join(f"{op} ({why})" for op, why in dict.fromkeys((d["op"], _reason(d)) for d in reads))
        on_device = [n for n in nodes if n not in constant and not _reads_raw_input(graph, n)]
        library = _library_module(graph, module) and not options["library_modules"]
        clear = bool(on_device) and not library
        where = module or "the model's forward"
        sources = list(dict.fromkeys(tuple(query.attr(r, "source")) for r in reads if query.attr(r, "source")))
        lines = sorted({line for file, line in sources if file == sources[0][0]}) if sources else []
        at = f" (line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))})" if lines else ""
        message = (
            f"{where} makes the host wait for the device {len(nodes)}× per call{at}: {calls}; each stalls the host "
            "until the queued GPU work is done, keeps the step out of a CUDA graph and breaks a torch.compile "
            "graph (fullgraph=True fails)"
        )
        if not clear:
            message += (
                " (in library code)" if library and on_device else
                " (on a model input or a constant: a sync only when that tensor lives on the GPU)"
            )
        d = locate.finding(
            graph, CODE, message, node=nodes[0], module=module,
            price=pricing.price(graph, ctx, alternative="; ".join(_INSTEAD[r] for r in reasons), claims=()),
            evidence={
                "ops": nodes, "calls": [d["op"] for d in reads], "reasons": reasons, "lines": lines,
                "blocks": ["one host sync per call each", "CUDA graph capture", "a single torch.compile graph"],
            },
        )
        d.severity = Severity.WARNING if clear else Severity.INFO
        if sources:  # the line in forward that makes the first of them (recorded by the dispatch capture)
            d.file, d.line = sources[0]
        yield d


def _reads_raw_input(graph, name: str) -> bool:
    """Every tensor the op reads is a model input as given (through views only)."""
    preds = query.tensor_inputs(graph, name)
    return bool(preds) and all(
        graph.nodes[p]["kind"] == "input" or (graph.nodes[p]["kind"] == "reshape" and _reads_raw_input(graph, p))
        for p in preds
    )
