"""AL503: host-device synchronisations in the step drain the GPU's queue."""

from __future__ import annotations

from archlint.diagnostics import Diagnostic
from archlint.trace.analyze import TraceAnalysis
from archlint.trace.findings import finding, ms, per_step, share

CODE = "AL503"
OPTIONS = {"min_share": 0.02}  # GPU idle after synchronisations, as a share of step time


def check(t: TraceAnalysis, options: dict) -> list[Diagnostic]:
    idle = per_step(t, lambda s: s.idle_causes["sync"])
    step = t.mean_step_us()
    syncs = per_step(t, lambda s: s.syncs)
    if not step or not syncs or idle / step < options["min_share"]:
        return []
    return [finding(
        t, CODE,
        f"{syncs:.3g} synchronisations per {t.unit} (cudaStreamSynchronize, cudaDeviceSynchronize, blocking "
        f"cudaMemcpy, .item()) drain the GPU queue: GPU idle {ms(idle)} per {t.unit} after them "
        f"({share(idle, step)} of the {t.unit})",
        saving_us=idle,
        alternative="keep values on the GPU (no .item()/.cpu()/print of tensors in the step; log every N steps; "
        "non_blocking copies) — AL401",
        evidence={"syncs_per_step": round(syncs, 3), "sync_idle_us": round(idle, 3),
                  "sync_host_us": round(per_step(t, lambda s: s.sync_us), 3)},
        where="sync",
    )]
