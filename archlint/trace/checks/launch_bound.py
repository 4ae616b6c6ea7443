"""AL505: stretches of tiny kernels launched one by one: the GPU waits for the host to issue work."""

from __future__ import annotations

from archlint.diagnostics import Diagnostic, Severity
from archlint.trace.analyze import TraceAnalysis
from archlint.trace.findings import bucket_us, claimed, finding, ms, per_step, share

CODE = "AL505"
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ("estimated",)  # a share of the step estimated from the trace's measured times
FIX = "none"
OPTIONS = {"min_share": 0.05, "max_kernel_us": 20.0}  # launch-gap idle share; median kernel time


def check(t: TraceAnalysis, options: dict) -> list[Diagnostic]:
    idle = bucket_us(t, "idle_launch")
    step = t.mean_step_us()
    medians = [s.median_kernel_us for s in t.windows if s.median_kernel_us is not None]
    if not step or not medians or idle / step < options["min_share"]:
        return []
    median = sorted(medians)[len(medians) // 2]
    if median > options["max_kernel_us"]:
        return []
    kernels = per_step(t, lambda s: s.kernels)
    busy = per_step(t, lambda s: s.gpu_busy_us)
    ev = t.evidence
    if ev is not None and ev.graph_launches:
        alternative = (
            "the code already replays CUDA graphs: capture more of the step in them (fewer graph breaks, "
            "static shapes), so fewer eager kernels run between replays"
        )
    elif ev is not None and ev.compiled:
        alternative = (
            "the code is already compiled (Triton kernels / compiled regions): mode='reduce-overhead' "
            "(CUDA graphs) and fewer graph breaks (torch._dynamo.explain) leave fewer eager launches"
        )
    else:
        alternative = (
            "fewer, larger launches: CUDA graphs (torch.compile(mode='reduce-overhead'), torch.cuda.graphs) "
            "or fused kernels (torch.compile)"
        )
    if busy / step < 0.2:
        alternative += (
            "; with the GPU busy only " + share(busy, step) + " of the time, a larger batch also amortises each launch"
        )
    saving, how = claimed(t, CODE)
    return [
        finding(
            t,
            CODE,
            f"launch-bound: {kernels:.0f} kernels per {t.unit} with a median of {median:.3g} µs; the GPU waits for the host "
            f"to launch the next one {ms(idle)} per {t.unit} ({share(idle, step)} of the {t.unit})",
            saving_us=saving,
            alternative=alternative,
            evidence={
                "launch_idle_us": round(idle, 3),
                "median_kernel_us": median,
                "kernels_per_step": round(kernels, 1),
                "launch_host_us": round(per_step(t, lambda s: s.launch_us), 3),
                "compiled": ev is not None and ev.compiled,
                **how,
            },
        )
    ]
