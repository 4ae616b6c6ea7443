"""AL504: GEMMs and convolutions in fp32 (SIMT) kernels on a GPU with tensor cores."""

from __future__ import annotations

from archlint.diagnostics import Diagnostic
from archlint.trace.analyze import TraceAnalysis
from archlint.trace.findings import finding, ms, share

CODE = "AL504"
OPTIONS = {"min_share": 0.05}  # GEMM/conv time in non-tensor-core kernels, as a share of step time


def tensor_core_device(t: TraceAnalysis) -> bool:
    """NVIDIA from Volta (compute capability 7.0) on; AMD CDNA (gfx9xx with MFMA, reported as 9.x)."""
    if not t.compute_capability:
        return False
    major = int(t.compute_capability.split(".")[0]) if t.compute_capability.split(".")[0].isdigit() else 0
    return major >= (9 if t.vendor == "amd" else 7)


def check(t: TraceAnalysis, options: dict) -> list[Diagnostic]:
    if not tensor_core_device(t) or not t.fp32_gemm_us:
        return []
    windows = max(1, len(t.per_step))
    fp32 = t.fp32_gemm_us / windows
    step = t.mean_step_us()
    if not step or fp32 / step < options["min_share"]:
        return []
    return [finding(
        t, CODE,
        f"GEMM/convolution kernels without tensor cores take {ms(fp32)} per {t.unit} ({share(fp32, step)} of the {t.unit}) "
        f"on {t.device} (compute capability {t.compute_capability}), e.g. {', '.join(t.fp32_gemm_kernels[:2])}; "
        f"tensor-core share of GEMM time {t.gemm_tensor_core_share:.0%}",
        saving_us=fp32,
        alternative="tensor-core kernels: torch.autocast(bfloat16/float16) or TF32 "
        "(torch.backends.cuda.matmul.allow_tf32 = True; AL403) — saves at most this time",
        evidence={"fp32_gemm_us": round(fp32, 3), "tensor_core_share": t.gemm_tensor_core_share,
                  "kernels": t.fp32_gemm_kernels, "saving_is_upper_bound": True},
    )]
