"""AL507: collective communication (NCCL/RCCL kernels, or a CPU job's gloo runs) that no computation
overlaps, named by collective."""

from __future__ import annotations

import re

from archlint.diagnostics import Diagnostic, Severity
from archlint.trace.analyze import TraceAnalysis
from archlint.trace.findings import bucket_us, claimed, finding, ms, share

CODE = "AL507"
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ("estimated",)  # a share of the step estimated from the trace's measured times
FIX = "none"
OPTIONS = {"min_share": 0.05}  # exposed communication, as a share of step time

# What to do depends on which collective is exposed: DDP's gradient all-reduce is a bucketing
# problem; an all_to_all is the embedding exchange of a sharded model (TorchRec); all_gather /
# reduce_scatter are FSDP's parameter and gradient traffic.
_ADVICE = (
    (
        re.compile(r"all_?to_?all|alltoall|sendrecv", re.I),
        "overlap the embedding all_to_all with dense compute (TorchRec's TrainPipelineSparseDist pipelines the next "
        "batch's exchange), and shrink it (fp16/fp8 quantized comms, fewer or smaller embedding outputs)",
    ),
    (
        re.compile(r"all_?gather|reduce_?scatter|_base", re.I),
        "FSDP prefetch (forward_prefetch=True, backward_prefetch=BACKWARD_PRE, limit_all_gathers) and a larger "
        "wrapping unit so each gather overlaps the previous layer",
    ),
    (
        re.compile(r"all_?reduce", re.I),
        "overlap the gradient all-reduce with backward: DDP buckets (bucket_cap_mb, gradient_as_bucket_view=True), "
        "no_sync() under accumulation (AL409)",
    ),
    (re.compile(r"broadcast", re.I), "broadcast once before the loop, not every step"),
)
_KERNEL = re.compile(r"nccl\w*?_(AllReduce|AllGather|ReduceScatter|SendRecv|Broadcast|Reduce|AllToAll)", re.I)


def check(t: TraceAnalysis, options: dict) -> list[Diagnostic]:
    if not t.communication_us:
        return []
    exposed = bucket_us(t, "exposed_communication")
    step = t.mean_step_us()
    if not step or exposed / step < options["min_share"]:
        return []
    collectives = t.evidence.collectives if t.evidence is not None else []
    kernels = [k for k in t.kernels if k["group"] == "communication"]
    top_kernel = _KERNEL.search(kernels[0]["name"]).group(1) if kernels and _KERNEL.search(kernels[0]["name"]) else None
    # the collective the most communication time goes to: by kernel when the trace names it, else by calls
    main = next(
        (c for c in collectives if top_kernel and _same(c.name, top_kernel)), collectives[0] if collectives else None
    )
    named = main.name if main else (top_kernel or "collectives")
    advice = next((a for pattern, a in _ADVICE if pattern.search(named)), _ADVICE[2][1])
    detail = ""
    if main:
        detail = f"; {main.name}: {main.calls_per_step:g} calls per {t.unit}"
        if main.median_bytes:
            detail += f", median {main.median_bytes / 2**20:,.0f} MiB"
    others = ", ".join(f"{c.name} ×{c.calls_per_step:g}" for c in collectives if c is not main)
    saving, how = claimed(t, CODE)
    # a rank that waits for a straggler: that wait is carved out of its exposed communication and
    # priced once, by AL512 on the straggler's trace (archlint/trace/command.py _across_ranks)
    waited = bucket_us(t, "peer_wait")
    if waited:
        how["peer_wait_us"] = round(waited, 3)
        detail += f"; besides it {ms(waited)} waiting for a slower rank, priced by AL512"
    return [
        finding(
            t,
            CODE,
            f"{'collectives (gloo, on the host) run' if t.cpu_only else 'communication kernels run'} {ms(exposed)} "
            f"per {t.unit} with no computation beside them "
            f"({share(exposed, step)} of the {t.unit}){detail}{f' (also {others})' if others else ''}",
            saving_us=saving,
            alternative=advice,
            evidence={
                "communication_us": round(t.communication_us / max(1, len(t.per_step)), 3),
                "exposed_us": round(exposed, 3),
                "collective": named,
                "collectives": [vars(c).copy() for c in collectives],
                **how,
            },
        )
    ]


def _same(collective: str, kernel: str) -> bool:
    c, k = collective.replace("_", "").lower(), kernel.lower()
    return k in c or (k == "sendrecv" and "alltoall" in c)
