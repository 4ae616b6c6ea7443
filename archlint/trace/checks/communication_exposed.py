"""AL507: collective communication (NCCL/RCCL) that no computation overlaps."""

from __future__ import annotations

from archlint.diagnostics import Diagnostic
from archlint.trace.analyze import TraceAnalysis
from archlint.trace.findings import finding, ms, share

CODE = "AL507"
OPTIONS = {"min_share": 0.05}  # exposed communication, as a share of step time


def check(t: TraceAnalysis, options: dict) -> list[Diagnostic]:
    if not t.communication_us:
        return []
    windows = max(1, len(t.per_step))
    exposed = t.exposed_communication_us / windows
    step = t.mean_step_us()
    if not step or exposed / step < options["min_share"]:
        return []
    return [finding(
        t, CODE,
        f"communication kernels run {ms(exposed)} per {t.unit} with no computation beside them "
        f"({share(exposed, step)} of the {t.unit}; {share(t.exposed_communication_us, t.communication_us)} of all "
        "communication is exposed)",
        saving_us=exposed,
        alternative="overlap communication with backward: DDP gradient bucketing (bucket_cap_mb, "
        "gradient_as_bucket_view=True), no_sync() under accumulation (AL409), FSDP prefetch",
        evidence={"communication_us": round(t.communication_us / windows, 3), "exposed_us": round(exposed, 3)},
    )]
