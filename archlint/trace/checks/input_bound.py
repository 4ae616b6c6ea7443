"""AL501: the GPU idles while the host waits for the next batch in DataLoader.__next__."""

from __future__ import annotations

import math

from archlint.diagnostics import Diagnostic, Severity
from archlint.trace.analyze import TraceAnalysis
from archlint.trace.findings import bucket_us, claimed, finding, ms, per_step, share

CODE = "AL501"
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ("estimated",)  # a share of the step estimated from the trace's measured times
FIX = "none"
OPTIONS = {"min_share": 0.05}  # GPU idle waiting for input, as a share of step time


def check(t: TraceAnalysis, options: dict) -> list[Diagnostic]:
    idle = bucket_us(t, "idle_input")
    step = t.mean_step_us()
    if not step or idle / step < options["min_share"]:
        return []
    loader = per_step(t, lambda s: s.dataloader_us)
    saving, how = claimed(t, CODE)
    # workers load batches in parallel: enough of them keep pace when each batch's load time,
    # divided among them, fits in the rest of the step (the saving assumes that many)
    rest = max(step - idle, 1.0)
    workers = min(64, max(1, math.ceil(loader / rest)))
    how["workers_to_keep_pace"] = workers
    pace = (
        f"; about {workers} worker{'s' if workers > 1 else ''} keep{'' if workers > 1 else 's'} pace (a batch takes {ms(loader)} to load, the rest of the {t.unit} {ms(rest)}; "
        "CPU-bound decoding needs that many free cores)"
    )
    alternative = (
        "DataLoader(num_workers > 0, persistent_workers=True, prefetch_factor=2): workers load the next "
        "batches while the step runs (AL304; measure it with `archlint loader`)"
    )
    waits = "the batches are loaded on the training process, not ahead of it" + pace
    has_workers = t.evidence is not None and t.evidence.loader_workers
    if has_workers:  # _MultiProcessingDataLoaderIter: workers there, and not keeping up
        waits = "the loader's workers do not keep up (the wait includes handing each batch over from them)"
        alternative = (
            "more DataLoader workers, a cheaper __getitem__ (pre-decoded or smaller data, decoding on the GPU), "
            "a lighter collate_fn, larger batches per hand-over (measure it with `archlint loader`)"
        )
    if t.cpu_only:
        return [
            finding(
                t,
                CODE,
                f"the training loop waits in DataLoader.__next__ {ms(loader)} per {t.unit} ({share(loader, step)} of the "
                f"{t.unit}; a CPU-only trace): {waits}",
                saving_us=saving,
                alternative=alternative,
                evidence={"input_idle_us": round(idle, 3), "dataloader_us": round(loader, 3), "cpu_only": True, **how},
                where="dataloader",
            )
        ]
    return [
        finding(
            t,
            CODE,
            f"GPU idle {ms(idle)} per {t.unit} ({share(idle, step)} of the {t.unit}) while the host waits in "
            f"DataLoader.__next__ ({ms(loader)} per {t.unit}) and no GPU work was queued: {waits}",
            saving_us=saving,
            alternative=alternative
            if has_workers
            else "a DataLoader that prefetches (num_workers > 0, "
            "pin_memory=True, persistent_workers=True; AL301/AL304; measure it with `archlint loader`)",
            evidence={"input_idle_us": round(idle, 3), "dataloader_us": round(loader, 3), **how},
            where="dataloader",
        )
    ]
