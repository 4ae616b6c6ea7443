"""AL503: host-device synchronisations in the step drain the GPU's queue and the host falls behind."""

from __future__ import annotations

from archlint.diagnostics import Diagnostic, Severity
from archlint.trace.analyze import TraceAnalysis
from archlint.trace.findings import bucket_us, claimed, finding, ms, per_step, share

CODE = "AL503"
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ("estimated",)  # a share of the step estimated from the trace's measured times
FIX = "none"
OPTIONS = {"min_share": 0.02}  # GPU idle charged to synchronisations, as a share of step time


def check(t: TraceAnalysis, options: dict) -> list[Diagnostic]:
    idle = bucket_us(t, "idle_sync")
    step = t.mean_step_us()
    syncs = per_step(t, lambda s: s.syncs)
    if not step or not syncs or idle / step < options["min_share"]:
        return []
    by_call = t.evidence.sync_idle_by_call if t.evidence is not None else {}
    items = t.evidence.item_calls if t.evidence is not None else None
    main = max(by_call, key=by_call.__getitem__) if by_call else "synchronize"
    if main == "blocking copy HtoD":  # a synchronous upload of the batch: a copy, not a .item()
        what = "blocking host-to-device copies (cudaMemcpy of the input batch)"
        alternative = (
            "pinned memory + asynchronous copies: DataLoader(pin_memory=True), then "
            "x.to(device, non_blocking=True) (AL301/AL302)"
        )
    elif main == "blocking copy DtoH":
        what = "device-to-host copies the host waits for (.item(), .cpu(), .tolist(), printing a tensor)"
        alternative = "keep values on the GPU: accumulate metrics as tensors and read them every N steps (AL401)"
    else:
        what = "synchronisations (torch.cuda.synchronize, stream/event synchronize)"
        alternative = "no synchronize in the step: time with CUDA events read after the loop, sync only to log every N steps (AL401)"
    saving, how = claimed(t, CODE)
    return [
        finding(
            t,
            CODE,
            f"{syncs:.3g} blocking calls per {t.unit}, mostly {what}: after them the host falls behind and the GPU idles "
            f"{ms(idle)} per {t.unit} ({share(idle, step)} of the {t.unit}; charged at most the time the host was blocked)",
            saving_us=saving,
            alternative=alternative,
            evidence={
                "syncs_per_step": round(syncs, 3),
                "sync_idle_us": round(idle, 3),
                "sync_idle_by_call": by_call,
                "sync_host_us": round(per_step(t, lambda s: s.sync_us), 3),
                "item_calls": items,
                **how,
            },
            where="sync",
        )
    ]
