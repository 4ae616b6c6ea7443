"""AL509: the GPU is idle for more than half of the step (or of the GPU span, as HTA's temporal
breakdown measures it); says why (input, sync, queued, launch, host). Its price is only the idle
no other finding claims: waiting with work queued and other host work (archlint.trace.waterfall)."""

from __future__ import annotations

import re

from archlint.diagnostics import Diagnostic, Severity
from archlint.trace.analyze import CAUSES, TraceAnalysis
from archlint.trace.findings import claimed, finding, ms, per_step, share

CODE = "AL509"
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ("estimated",)  # a share of the step estimated from the trace's measured times
FIX = "none"
# threshold: idle share of the step that makes this a finding; min_own_share: what it claims itself (queued and
# host idle, the rest being AL501/AL503/AL505's) below which it is info
OPTIONS = {"threshold": 0.5, "min_own_share": 0.02}

_WHY = {
    "input": ("the host waits for the DataLoader", "AL501", "dataloader"),
    "sync": ("synchronisations drain the queue and the host falls behind", "AL503", "sync"),
    "queued": (
        "the GPU had work queued (launched before it went idle) and waited on a dependency, so neither the "
        "host nor a sync is the cause",
        None,
        None,
    ),
    "launch": ("the host launches kernels slower than the GPU runs them", "AL505", None),
    "host": (
        "the host is busy with other work between GPU launches (Python, CPU ops, the optimizer on the CPU)",
        None,
        None,
    ),
}
_KINDS = {
    "collective": "a collective (its peers or its stream's dependency)",
    "graph": "a CUDA-graph replay",
    "event-wait": "an event on another stream (cudaStreamWaitEvent: a cross-stream dependency)",
}
_FIX = {
    "queued": "overlap or remove the dependency the queue waits on (the stream or collective it waits for; "
    "see the idle gaps' drill-down)",
    "host": "moving the host work off the step's critical path (or onto the GPU)",
    "allocator": "a warm caching allocator: no torch.cuda.empty_cache() (or cache-clearing) inside the loop, "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation; the host is in cudaMalloc/cudaFree",
}
_ALLOCATOR = re.compile(r"^(cuda|hip)(Malloc|Free)", re.I)


# What the host was in, when most of the host idle fell in it, and what to do about that.
_HOST_FIXES = (
    (_ALLOCATOR, "allocator"),
    (
        re.compile(r"^Optimizer\.(step|zero_grad)", re.I),
        "a lighter optimizer step on the host: fused or foreach kernels (torch.optim.AdamW(fused=True) / foreach=True), "
        "zero_grad(set_to_none=True), or the step under torch.compile",
    ),
    (
        re.compile(r"backward|autograd", re.I),
        "less host work in backward: no Python hooks doing host work per parameter, compiled autograd or CUDA graphs "
        "for the backward's many small launches",
    ),
)


def _host_fix(during: dict[str, float], host_us: float) -> str | None:
    """The fix for the host work most of the host idle fell in (a fifth of it or more)."""
    for pattern, key in _HOST_FIXES:
        us = sum(v for n, v in during.items() if pattern.search(n))
        if host_us and us >= 0.2 * host_us:
            return _FIX[key] if key in _FIX else key
    return None


def check(t: TraceAnalysis, options: dict) -> list[Diagnostic]:
    if t.cpu_only:  # no GPU to be idle: the host's time is AL501's (the DataLoader) and the report's
        return []
    idle = per_step(t, lambda s: s.idle_us)
    step = t.mean_step_us()
    b = t.temporal_breakdown
    all_steady = all(s.steady for s in t.per_step)
    # HTA's idle share over the GPU span, only when the span holds no start-up or warm-up
    span_share = b["idle_us"] / b["span_us"] if b["span_us"] and all_steady else 0.0
    if not step or max(idle / step, span_share) <= options["threshold"]:
        return []
    causes = {c: per_step(t, lambda s, c=c: s.idle_causes[c]) for c in CAUSES}
    fix = None
    top = max(causes, key=causes.get)
    reason, code, where = _WHY[top]
    split = ", ".join(f"{c} {ms(v)}" for c, v in sorted(causes.items(), key=lambda kv: -kv[1]) if v > 0)
    if top == "queued":
        kinds: dict[str, float] = {}
        for s in t.windows:
            for k, us in s.queued_kinds.items():
                kinds[k] = kinds.get(k, 0.0) + us / len(t.windows)
        if kinds:
            reason += " — " + ", ".join(
                f"{_KINDS.get(k, k)} {ms(us)}" for k, us in sorted(kinds.items(), key=lambda kv: -kv[1])
            )
    if top == "host":  # what the host was doing: the named ranges the idle time fell in
        during: dict[str, float] = {}
        for s in t.windows:
            for name, us in s.host_idle_in.items():
                during[name] = during.get(name, 0.0) + us / len(t.windows)
        named = sorted(during.items(), key=lambda kv: -kv[1])[:3]
        if named:
            reason += " — meanwhile the host was in " + ", ".join(f"{n} ({ms(us)})" for n, us in named)
        fix = _host_fix(during, causes["host"])
    own = "queued" if causes["queued"] > causes["host"] else "host"
    fix = fix if top == "host" and fix else _FIX[own]
    busy = per_step(t, lambda s: s.gpu_busy_us)
    if own == "host" and busy < 0.2 * step:  # the GPU rarely works: more work per step amortises the host's
        fix += f"; with the GPU busy only {share(busy, step)} of the {t.unit}, a larger batch amortises the host's per-step work"
    saving, how = claimed(t, CODE)
    gaps = [g.to_dict() for g in t.idle_gaps if g.steady][:3]
    # its own idle (queued, host) too small to act on: the other causes' findings say the rest
    severity = Severity.WARNING if saving / step >= options["min_own_share"] else Severity.INFO
    return [
        finding(
            t,
            CODE,
            f"GPU idle {share(idle, step)} of the {t.unit} ({ms(idle)} of {ms(step)}): mostly because {reason}"
            f"{f' ({code})' if code else ''}; idle by cause: {split}"
            f"{f'; temporal breakdown: idle {span_share:.0%} of the GPU span' if span_share else ''}",
            saving_us=saving,
            alternative=fix
            + (
                "; the other causes are priced by "
                + ", ".join(_WHY[c][1] for c in ("input", "sync", "launch") if causes[c] > 0)
                if any(causes[c] > 0 for c in ("input", "sync", "launch"))
                else ""
            ),
            evidence={
                "idle_us": round(idle, 3),
                "idle_share_of_span": round(span_share, 4),
                "causes_us": {c: round(v, 3) for c, v in causes.items()},
                "cause": top,
                "longest_gaps": gaps,
                **how,
            },
            where=where,
            severity=severity,
        )
    ]
