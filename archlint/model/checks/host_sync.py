"""AL112 host-sync-in-forward: `forward` makes the host wait for the device: a tensor's value read
in Python (`.item()`, `.tolist()`, `.numpy()`, `int(t)`, `if t:` / `while t:`), a copy to the host
(`.cpu()`, `.to("cpu")`), or an op whose output size depends on values (`nonzero`,
`torch.where(cond)` with one argument, `masked_select`, boolean-mask indexing `x[mask]` and
assignment `x[mask] = v`, `unique`, `bincount`, `repeat_interleave` with tensor repeats).

Capture marks these ops (describe.HOST_READS and host_sync: a "sync" op for a value read, a
`host_sync` attribute on the others; export leaves such a forward to the dispatch recording, which
sees them all). One finding per module, listing its syncs.

No static price: what a sync costs is the time the host waits for the work queued before it, and
the overlap and graph capture it prevents; that is not in the MAC or FLOPs, so without a GPU spec
the price says what it blocks (one host sync per call each, CUDA graphs, a whole torch.compile
graph) with no saving counted. On a GPU `--device-spec` (and no --latency) it is estimated
(`stall_ms`): eagerly, the host runs ahead of the device while the device is busy with long
kernels, so the short kernels that follow run back to back from the queue; a sync drains the
queue, and after it the device waits on each launch: the loss is the least of the host's lead
before the sync (the ops' estimated kernel time beyond the host's per-op cost, eager-op-us or else
launch-overhead-us) and what the device waits on launches after it (the host's per-op cost beyond
each kernel's time, up to the next sync), plus the round trip itself (the value's copy to the
host, taken as one launch overhead of the spec, and the first launch after it). The shared
materiality rule then decides whether it is a warning. It is a warning only where it is clearly a sync on the device: a tensor computed
in forward from the model's inputs or weights, in a module whose class is the user's. A read of
a raw model input (a sync only when the caller put it on the GPU; `lengths` for
pack_padded_sequence live on the CPU), of a tensor built from constants, or inside a library's
module (torchvision's detection post-processing, which the user cannot change) is info.
"""

from __future__ import annotations

from collections import defaultdict

from archlint.diagnostics import Price, Severity
from archlint.model.capture.describe import SYNC_REASONS
from archlint.model.checks import _locate as locate
from archlint.model.checks import _pricing as pricing
from archlint.model.checks import _query as query
from archlint.model.checks.mask_in_forward import constant_ops
from archlint.model.opgraph import ops

CODE = "AL112"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRICE = ("static", "measured", "estimated")  # the bases its findings' prices may have, as its page says
FIX = "none"  # no autofix: its page's fix: none
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
                " (in library code)"
                if library and on_device
                else " (on a model input or a constant: a sync only when that tensor lives on the GPU)"
            )
        alternative = "; ".join(_INSTEAD[r] for r in reasons)
        evidence = {
            "ops": nodes,
            "calls": [d["op"] for d in reads],
            "reasons": reasons,
            "lines": lines,
            "blocks": ["one host sync per call each", "CUDA graph capture", "a single torch.compile graph"],
        }
        spec, estimate = ctx.device_spec, ctx.estimate
        if ctx.pricer is None and estimate and spec is not None and spec.kind == "gpu":
            stall = stall_ms(graph, nodes, spec)
            price = Price.timed(
                alternative,
                saving_ms=stall,
                model_ms=float(estimate.latency_ms) + stall,
                basis="estimated",
                device=spec.name,
            )
            evidence.update(stall_ms=stall, stall_basis=STALL_BASIS)
            message += f"; on {spec.name} ≈ {stall * 1e3:.0f} µs a forward lost to the drained launch queue (estimated)"
        else:
            price = pricing.price(graph, ctx, alternative=alternative, claims=())
        d = locate.finding(graph, CODE, message, node=nodes[0], module=module, price=price, evidence=evidence)
        d.severity = Severity.WARNING if clear else Severity.INFO
        if sources:  # the line in forward that makes the first of them (recorded by the dispatch capture)
            d.file, d.line = sources[0]
        yield d


STALL_BASIS = (
    "estimated from the device spec: the least of the host's lead before each sync (kernel time beyond the host's "
    "per-op cost, eager-op-us or else launch-overhead-us) and the device's wait on launches after it (the host's per-op "
    "cost beyond each kernel, up to the next sync), plus one launch overhead for the value's copy to the host and one "
    "host op for the first launch after it"
)


def stall_ms(graph, syncs: list[str], spec) -> float:
    """What the syncs `syncs` cost a forward on the GPU `spec`, in ms (STALL_BASIS)."""
    host = (spec.eager_op_s or spec.overhead_s) * 1e3  # the host's cost of one eager op
    marks = set(syncs)
    order = [(n, d) for n, d in ops(graph) if n in marks or int(d.get("mac_bytes", 0)) > 0]
    at = [i for i, (n, _) in enumerate(order) if n in marks]
    total = 0.0
    for j, i in enumerate(at):
        start, end = (at[j - 1] + 1 if j else 0), (at[j + 1] if j + 1 < len(at) else len(order))
        lead = sum(max(0.0, _kernel_ms(d) - host) for n, d in order[start:i] if n not in marks)
        wait = sum(max(0.0, host - _kernel_ms(d)) for n, d in order[i + 1 : end] if n not in marks)
        total += min(lead, wait) + spec.overhead_s * 1e3 + host
    return total


def _kernel_ms(op: dict) -> float:
    """The op's estimated kernel time, without the launch it may wait for."""
    if op.get("estimate_bound") != "overhead":
        return float(op.get("estimated_ms") or 0.0)
    terms = op.get("estimate_terms") or {}
    return max(float(terms.get("compute_ms") or 0.0), float(terms.get("memory_ms") or 0.0))


def _reads_raw_input(graph, name: str) -> bool:
    """Every tensor the op reads is a model input as given (through views only)."""
    preds = query.tensor_inputs(graph, name)
    return bool(preds) and all(
        graph.nodes[p]["kind"] == "input" or (graph.nodes[p]["kind"] == "reshape" and _reads_raw_input(graph, p))
        for p in preds
    )
