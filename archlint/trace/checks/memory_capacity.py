"""AL508: the device's memory is nearly full: the caching allocator falls back to cudaMalloc/cudaFree."""

from __future__ import annotations

from archlint.diagnostics import Diagnostic, Severity
from archlint.trace.analyze import TraceAnalysis
from archlint.trace.findings import finding, ms, per_step

CODE = "AL508"
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ("estimated",)  # a share of the step estimated from the trace's measured times
FIX = "none"
OPTIONS = {"threshold": 0.9}  # peak reserved (or allocated) memory as a share of the device's


def check(t: TraceAnalysis, options: dict) -> list[Diagnostic]:
    m = t.memory
    if m is None or not m.capacity or (m.peak_share or 0) < options["threshold"]:
        return []
    alloc = per_step(t, lambda s: s.alloc_us)
    # the allocator's misses are host time: what they can return is inside the host idle no other
    # finding claims (so the findings' savings never add up to more than the step)
    host = t.waterfall.bucket("idle_host") if t.waterfall else None
    unclaimed = (host.us - host.returns_us) if host else 0.0
    peak = max(m.peak_allocated or 0, m.peak_reserved or 0)
    return [
        finding(
            t,
            CODE,
            f"memory peaks at {peak / 2**30:.3g} GiB of {m.capacity / 2**30:.3g} GiB on device {m.device} "
            f"({m.peak_share:.0%}); the host spends {ms(alloc)} per {t.unit} in cudaMalloc/cudaFree",
            saving_us=min(alloc, unclaimed),
            alternative="headroom: a smaller batch with gradient accumulation, activation checkpointing, bf16 "
            "activations, or PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            evidence={
                **m.to_dict(),
                "alloc_us": round(alloc, 3),
                "buckets": {
                    "idle_host": {
                        "us": round(host.us if host else 0.0, 3),
                        "returns_us": round(min(alloc, unclaimed), 3),
                        "basis": "the host's time in cudaMalloc/cudaFree, up to the host idle no other finding claims",
                    }
                },
            },
            severity=Severity.WARNING if alloc > 0 else Severity.INFO,
        )
    ]
