"""AL511: cuDNN converts NCHW tensors to NHWC and back around its convolutions (nchwToNhwc /
nhwcToNchw kernels) for a visible share of the step: the model runs in channels_first."""

from __future__ import annotations

from archlint.diagnostics import Diagnostic, Severity
from archlint.trace.analyze import TraceAnalysis
from archlint.trace.findings import bucket_us, claimed, finding, ms, share

CODE = "AL511"
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ("estimated",)  # a share of the step estimated from the trace's measured times
FIX = "none"
OPTIONS = {"min_share": 0.05}  # layout-conversion kernels, as a share of the GPU's busy time in the steady step


def check(t: TraceAnalysis, options: dict) -> list[Diagnostic]:
    layout = bucket_us(t, "layout_conversion")
    step = t.mean_step_us()
    busy = sum(s.gpu_busy_us for s in t.windows) / len(t.windows) if t.windows else 0.0
    # a share of the GPU's busy time: once idle is fixed, the conversions are what the GPU still pays
    if not step or not busy or layout / busy < options["min_share"]:
        return []
    saving, how = claimed(t, CODE)
    return [
        finding(
            t,
            CODE,
            f"layout-conversion kernels (nchwToNhwc/nhwcToNchw) take {ms(layout)} per {t.unit} ({share(layout, busy)} of the "
            f"GPU's busy time): cuDNN runs its convolutions in NHWC and converts the model's NCHW tensors around each",
            saving_us=saving,
            alternative="channels_last: model.to(memory_format=torch.channels_last) and inputs "
            "x.to(memory_format=torch.channels_last) (AL114)",
            evidence={
                "layout_us": round(layout, 3),
                "layout_share_of_gpu": t.evidence.layout_share if t.evidence is not None else None,
                **how,
            },
        )
    ]
