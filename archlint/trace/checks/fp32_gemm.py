"""AL504: GEMMs and convolutions in fp32 (SIMT) kernels on a GPU with tensor cores."""

from __future__ import annotations

from archlint.diagnostics import Diagnostic, Severity
from archlint.trace.analyze import TraceAnalysis
from archlint.trace.findings import bucket_us, claimed, finding, ms, share

CODE = "AL504"
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ("estimated",)  # a share of the step estimated from the trace's measured times
FIX = "none"
OPTIONS = {"min_share": 0.05}  # GEMM/conv time in non-tensor-core kernels, as a share of step time


def tensor_core_device(t: TraceAnalysis) -> bool:
    """NVIDIA from Volta (compute capability 7.0) on; AMD CDNA (gfx9xx with MFMA, reported as 9.x)."""
    return _major(t) >= (9 if t.vendor == "amd" else 7)


def _major(t: TraceAnalysis) -> int:
    head = (t.compute_capability or "").split(".")[0]
    return int(head) if head.isdigit() else 0


def precision_advice(t: TraceAnalysis) -> str:
    """The precision path the device has: 7.x (Volta/Turing) fp16 only, 8.0+ bf16 and TF32, AMD CDNA bf16."""
    if t.vendor == "amd":
        return "bf16 autocast (torch.autocast('cuda', dtype=torch.bfloat16)): CDNA matrix cores (MI200/MI300) run bf16"
    if _major(t) == 7:
        return (
            "fp16 autocast with a GradScaler (torch.autocast('cuda', dtype=torch.float16), torch.amp.GradScaler): "
            f"compute capability {t.compute_capability} has fp16 tensor cores only, no bf16 or TF32"
        )
    return (
        "TF32 for fp32 matmuls and convolutions (torch.backends.cuda.matmul.allow_tf32 = True, "
        "torch.backends.cudnn.allow_tf32 = True) or bf16 autocast (AL403)"
    )


def check(t: TraceAnalysis, options: dict) -> list[Diagnostic]:
    if not tensor_core_device(t) or not t.fp32_gemm_us:
        return []
    fp32 = bucket_us(t, "fp32_gemm")
    step = t.mean_step_us()
    if not step or fp32 / step < options["min_share"]:
        return []
    saving, how = claimed(t, CODE)
    return [
        finding(
            t,
            CODE,
            f"GEMM/convolution kernels without tensor cores take {ms(fp32)} per {t.unit} ({share(fp32, step)} of the {t.unit}) "
            f"on {t.device} (compute capability {t.compute_capability}), e.g. {', '.join(t.fp32_gemm_kernels[:2])}; "
            f"tensor-core share of GEMM time {t.gemm_tensor_core_share:.0%}",
            saving_us=saving,
            alternative=precision_advice(t),
            evidence={
                "fp32_gemm_us": round(fp32, 3),
                "tensor_core_share": t.gemm_tensor_core_share,
                "kernels": t.fp32_gemm_kernels,
                **how,
            },
        )
    ]
