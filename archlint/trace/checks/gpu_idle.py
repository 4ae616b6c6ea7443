"""AL509: the GPU is idle for more than half of the step (or of the GPU span, as HTA's temporal
breakdown measures it); says why (input, sync, launch, host)."""

from __future__ import annotations

from archlint.diagnostics import Diagnostic
from archlint.trace.analyze import CAUSES, TraceAnalysis
from archlint.trace.findings import finding, ms, per_step, share

CODE = "AL509"
OPTIONS = {"threshold": 0.5}  # idle share of the step that makes this a warning

_WHY = {
    "input": ("the host waits for the DataLoader", "AL501", "dataloader"),
    "sync": ("synchronisations drain the queue", "AL503", "sync"),
    "launch": ("the host launches kernels slower than the GPU runs them", "AL505", None),
    "host": ("the host is busy with other work between GPU launches (Python, CPU ops, the optimizer on the CPU)",
             None, None),
}
_FIX = {
    "input": "a prefetching DataLoader (num_workers, pin_memory; `archlint loader`)",
    "sync": "no host syncs in the step (AL401)",
    "launch": "CUDA graphs / torch.compile",
    "host": "moving the host work off the step's critical path (or onto the GPU)",
}


def check(t: TraceAnalysis, options: dict) -> list[Diagnostic]:
    idle = per_step(t, lambda s: s.idle_us)
    step = t.mean_step_us()
    b = t.temporal_breakdown
    span_share = b["idle_us"] / b["span_us"] if b["span_us"] else 0.0  # HTA's idle share, over the GPU span
    if not step or max(idle / step, span_share) <= options["threshold"]:
        return []
    causes = {c: per_step(t, lambda s, c=c: s.idle_causes[c]) for c in CAUSES}
    top = max(causes, key=causes.get)
    reason, code, where = _WHY[top]
    split = ", ".join(f"{c} {ms(v)}" for c, v in sorted(causes.items(), key=lambda kv: -kv[1]) if v > 0)
    if top == "host":  # what the host was doing: the named ranges the idle time fell in
        during: dict[str, float] = {}
        for s in t.windows:
            for name, us in s.host_idle_in.items():
                during[name] = during.get(name, 0.0) + us / len(t.windows)
        named = sorted(during.items(), key=lambda kv: -kv[1])[:3]
        if named:
            reason += " — meanwhile the host was in " + ", ".join(f"{n} ({ms(us)})" for n, us in named)
    return [finding(
        t, CODE,
        f"GPU idle {share(idle, step)} of the {t.unit} ({ms(idle)} of {ms(step)}): mostly because {reason}"
        f"{f' ({code})' if code else ''}; idle by cause: {split}; temporal breakdown: idle {span_share:.0%} of the GPU span",
        saving_us=idle,
        alternative=_FIX[top],
        evidence={"idle_us": round(idle, 3), "idle_share_of_span": round(span_share, 4), "causes_us": {c: round(v, 3) for c, v in causes.items()}, "cause": top},
        where=where,
    )]
