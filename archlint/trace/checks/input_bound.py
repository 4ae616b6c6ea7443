"""AL501: the GPU idles while the host waits for the next batch in DataLoader.__next__."""

from __future__ import annotations

from archlint.diagnostics import Diagnostic
from archlint.trace.analyze import TraceAnalysis
from archlint.trace.findings import bucket_us, claimed, finding, ms, per_step, share

CODE = "AL501"
OPTIONS = {"min_share": 0.05}  # GPU idle waiting for input, as a share of step time


def check(t: TraceAnalysis, options: dict) -> list[Diagnostic]:
    idle = bucket_us(t, "idle_input")
    step = t.mean_step_us()
    if not step or idle / step < options["min_share"]:
        return []
    loader = per_step(t, lambda s: s.dataloader_us)
    saving, how = claimed(t, CODE)
    return [finding(
        t, CODE,
        f"GPU idle {ms(idle)} per {t.unit} ({share(idle, step)} of the {t.unit}) while the host waits in "
        f"DataLoader.__next__ ({ms(loader)} per {t.unit}) and no GPU work was queued: the input pipeline does not keep up",
        saving_us=saving,
        alternative="a DataLoader that prefetches (num_workers > 0, pin_memory=True, persistent_workers=True; "
        "AL301/AL304; measure it with `archlint loader`)",
        evidence={"input_idle_us": round(idle, 3), "dataloader_us": round(loader, 3), **how},
        where="dataloader",
    )]
