"""AL502: host-to-device copies from pageable memory (the driver stages them through a bounce buffer)."""

from __future__ import annotations

from archlint.diagnostics import Diagnostic, Severity
from archlint.trace.analyze import TraceAnalysis
from archlint.trace.findings import bucket_us, claimed, finding, ms, share

CODE = "AL502"
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ("estimated",)  # a share of the step estimated from the trace's measured times
FIX = "none"
# min_share: pageable copies nothing overlaps, as a share of the steady step; min_gpu_share: the
# copies of the whole trace (model load included) as a share of its GPU time, for a one-time finding
OPTIONS = {"min_share": 0.01, "min_gpu_share": 0.2}


def check(t: TraceAnalysis, options: dict) -> list[Diagnostic]:
    p = t.pageable_h2d
    if not p.copies:
        return []
    step = t.mean_step_us()
    in_step = bucket_us(t, "pageable_copy")
    rate = f" at {p.bytes / p.sized_gpu_us / 1e3:.3g} GB/s" if p.bytes and p.sized_gpu_us else ""
    size = f" ({p.bytes / 2**20:,.0f} MiB)" if p.bytes else ""
    b = t.waterfall.bucket("pageable_copy") if t.waterfall else None
    returns = b.share if b else None
    alternative = (
        "pinned memory and asynchronous copies: DataLoader(pin_memory=True) or tensor.pin_memory(), then "
        ".to(device, non_blocking=True) (AL301/AL302)"
    )
    if step and in_step / step >= options["min_share"]:
        saving, how = claimed(t, CODE)
        return [
            finding(
                t,
                CODE,
                f"{p.copies} host-to-device copies from pageable memory{size}{rate}: {ms(in_step)} per {t.unit} "
                f"({share(in_step, step)} of the {t.unit}) that no computation overlaps",
                saving_us=saving,
                alternative=alternative,
                evidence={
                    "copies": p.copies,
                    "host_us": round(p.host_us, 3),
                    "gpu_us": round(p.gpu_us, 3),
                    "bytes": p.bytes,
                    **how,
                },
                where="memcpy",
            )
        ]
    # Copies outside the steady steps (loading a model, a first batch): no per-step price, but when
    # they are most of the GPU's work in the trace, they are what the trace shows (paid once per load).
    gpu_total = sum(t.groups.values())  # every GPU event's time, start-up and load included
    if not gpu_total or p.gpu_us / gpu_total < options["min_gpu_share"]:
        return []
    once = p.gpu_us * (returns if returns is not None else 0.5)
    return [
        finding(
            t,
            CODE,
            f"{p.copies} host-to-device copies from pageable memory{size}{rate} take {ms(p.gpu_us)}, "
            f"{share(p.gpu_us, gpu_total)} of the trace's GPU time, outside the steady-state steps (loading the model "
            "or data before the loop): paid once per load, not per step",
            saving_us=once,
            whole_us=gpu_total,
            whole="the trace's GPU time (once per load, not per step)",
            alternative=alternative + "; for weights, load them straight to the GPU (torch.load(map_location='cuda'), "
            "safetensors' load_file(device='cuda'))",
            evidence={
                "copies": p.copies,
                "gpu_us": round(p.gpu_us, 3),
                "bytes": p.bytes,
                "basis": b.basis if b else "pinned copies assumed twice as fast",
                "outside_steady_steps": True,
            },
            where="memcpy",
        )
    ]
