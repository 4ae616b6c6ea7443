"""AL505: stretches of tiny kernels launched one by one: the GPU waits for the host to issue work."""

from __future__ import annotations

from archlint.diagnostics import Diagnostic
from archlint.trace.analyze import TraceAnalysis
from archlint.trace.findings import finding, ms, per_step, share

CODE = "AL505"
OPTIONS = {"min_share": 0.05, "max_kernel_us": 20.0}  # launch-gap idle share; median kernel time


def check(t: TraceAnalysis, options: dict) -> list[Diagnostic]:
    idle = per_step(t, lambda s: s.idle_causes["launch"])
    step = t.mean_step_us()
    medians = [s.median_kernel_us for s in t.windows if s.median_kernel_us is not None]
    if not step or not medians or idle / step < options["min_share"]:
        return []
    median = sorted(medians)[len(medians) // 2]
    if median > options["max_kernel_us"]:
        return []
    kernels = per_step(t, lambda s: s.kernels)
    return [finding(
        t, CODE,
        f"launch-bound: {kernels:.0f} kernels per {t.unit} with a median of {median:.3g} µs; the GPU waits for the host "
        f"to launch the next one {ms(idle)} per {t.unit} ({share(idle, step)} of the {t.unit})",
        saving_us=idle,
        alternative="fewer, larger launches: CUDA graphs (torch.compile(mode='reduce-overhead'), torch.cuda.graphs) "
        "or fused kernels (torch.compile)",
        evidence={"launch_idle_us": round(idle, 3), "median_kernel_us": median, "kernels_per_step": round(kernels, 1),
                  "launch_host_us": round(per_step(t, lambda s: s.launch_us), 3)},
    )]
