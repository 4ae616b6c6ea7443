"""What a GPU event is, from its name and category alone: the pattern tables of the trace reader.

Three classifications, each a pure function of the name (cached per distinct name):

- `hta_kind`: Holistic Trace Analysis's split for the temporal breakdown (hta/utils/utils.py):
  communication (`^nccl.*Kernel`), memory (`^Memcpy`, `^Memset`, `^dma`), else computation unless
  the name matches `(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)` (then "other": a sync wait,
  non-compute like memory and communication).
- `group`: how users think of kernels: gemm (GEMM and convolution), attention, elementwise,
  reduction, copy (memcpy, memset, copy/cast kernels), communication (NCCL/RCCL), other.
- `tensor_core`: for a gemm-group kernel, whether it runs on tensor cores (NVIDIA) or matrix
  cores (AMD MFMA), by the markers libraries put in kernel names (documented in rules/AL504).
"""

from __future__ import annotations

import functools
import re

COMPUTE, MEMORY, COMMUNICATION, OTHER = "compute", "memory", "communication", "other"

_HTA_COMM = re.compile(r"^nccl.*Kernel")
_HTA_MEMORY = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_HTA_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")

_COMM = re.compile(r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|alltoall|all_to_all|sendrecv", re.I)
_ATTENTION = re.compile(r"flash|fmha|attention|attn|sdpa|xformers|mem_eff", re.I)
_GEMM = re.compile(
    r"gemm|gemv|matmul|\bmm\b|bmm|conv|cudnn|xmma|cutlass|cublas|winograd|implicit_?convolve|fprop|dgrad|wgrad"
    r"|Cijk_|hipblaslt|rocblas|MIOpen|igemm|sm\d\d_|ampere_|volta_|turing_|hopper_|_nhwc|nchwToNhwc|nhwcToNchw",
    re.I,
)
# cuDNN also ships kernels that are not convolutions: batch norm (bn_fw_inf/bn_fw_tr/bn_bw, seen in
# an H200 trace of torchvision's ResNet-50), pooling, softmax, activations, scaling. A cudnn:: name
# that names no convolution or GEMM is classified by what it does, not as a GEMM.
# (Tested after the last "cudnn::" only: a lookahead `cudnn::(?!.*(conv|...))` rescans the rest of the
# name at each "cudnn::" in it, quadratic in a long name; the last one decides whether any does.)
_CUDNN_GEMM_AFTER = re.compile(r"conv|gemm|xmma|fprop|dgrad|wgrad|winograd|sm\d\d_", re.I)
_LAYOUT = re.compile(r"nchwToNhwc|nhwcToNchw|transpose|permute", re.I)
# A convolution or GEMM by its own name, whatever layout words its template arguments carry (cuDNN's
# implicit-GEMM kernels name a `Permute` epilogue); cuDNN's FFT convolutions (fft2d_r2c/c2r) too.
_CONV_OR_GEMM = re.compile(
    r"implicit_?gemm|implicit_?convolve|fprop|dgrad|wgrad|xmma|[sdhc]gemm|gemm_|_gemm|conv2d|conv3d"
    r"|convolution|winograd|^fft\dd_(r2c|c2r)",
    re.I,
)
_REDUCTION = re.compile(
    r"reduce|norm|\bbn_(fw|bw)|softmax|sum|mean|argmax|topk|sort|scan|cumsum|max_pool|avg_pool|pool", re.I
)
_COPY = re.compile(r"^Memcpy|^Memset|^dma|copy|cast|fill|CatArray|index|gather|scatter", re.I)
_ELEMENTWISE = re.compile(
    r"elementwise|vectorized|unrolled|pointwise|triton_poi|activation|relu|gelu|silu|dropout", re.I
)
# Tensor/matrix-core markers in GEMM and convolution kernel names: cuBLAS/cuDNN/CUTLASS name the MMA
# shape (h884, s1688, 16816), the instruction family (tensorop, hmma, imma, gmma/wgmma for Hopper)
# or a reduced input type (tf32, f16, bf16, fp8/e4m3/e5m2, int8); rocBLAS and hipBLASLt (AMD) name
# matrix-core instructions MI<m>x<n>x<k> (MFMA); flash/fused attention kernels use tensor cores.
_TENSOR_CORE = re.compile(
    r"tensorop|hmma|imma|wgmma|gmma|tf32|bf16|fp16|f16|half|fp8|e4m3|e5m2|int8|i8i8"
    r"|s1688|s16816|h884|h1688|h16816|_MI\d+x\d+|mfma|flash|fmha",
    re.I,
)
# fp32 (SIMT) markers: `sgemm`/`dgemm`/`gemv`, CUTLASS `simt`, cuBLAS `f32f32` XMMA kernels without
# tf32, cuDNN's fp32 convolution algorithms.
_FP32_SIMT = re.compile(r"simt|sgemm|dgemm|gemv|gemmSN|f32f32|implicit_convolve_sgemm|winograd|fft|direct_conv", re.I)


@functools.lru_cache(maxsize=65536)
def hta_kind(name: str) -> str:
    if _HTA_COMM.match(name):
        return COMMUNICATION
    if _HTA_MEMORY.match(name):
        return MEMORY
    if not _HTA_NOT_COMPUTE.match(name):
        return COMPUTE
    return OTHER


def signature(name: str) -> str:
    """The name without its argument lists (kept: template arguments, which name the GEMM
    variant in `cutlass::Kernel<cutlass_80_tensorop_s1688gemm_...>`); argument types such as
    `GenericPackedTensorAccessor` would otherwise match the patterns."""
    depth, out = 0, []
    for ch in name:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


@functools.lru_cache(maxsize=65536)
def group(name: str, category: str = "kernel") -> str:
    name = signature(name).replace("fbgemm_gpu::", "")  # a library namespace, not a GEMM
    if category in ("gpu_memcpy", "gpu_memset") or _HTA_MEMORY.match(name):
        return "copy"
    if category == "cuda_sync":
        return "other"
    if _COMM.search(name):
        return "communication"
    if _ATTENTION.search(name) or _after(name, "softmax", "gemm"):  # softmax.*gemm, without the backtracking
        return "attention"
    # what the kernel is, by its own qualified name: template arguments name traits, tiles and
    # epilogues (`Permute`, `cudnn::Ampere_hmma_fp32_traits`), not what the kernel does
    head = name.split("<", 1)[0]
    if _GEMM.search(name) and not _LAYOUT.search(head) and not _cudnn_not_gemm(head):
        return "gemm"
    if _CONV_OR_GEMM.search(head) and not _cudnn_not_gemm(head):
        return "gemm"
    if _REDUCTION.search(name):
        return "reduction"
    if _ELEMENTWISE.search(name):
        return "elementwise"
    if _COPY.search(name) or _LAYOUT.search(name):
        return "copy"
    return "other"


def _after(name: str, first: str, then: str) -> bool:
    """Whether `then` occurs after an occurrence of `first` (case-insensitive), in linear time."""
    lower = name.lower()
    i = lower.find(first)
    return i >= 0 and lower.find(then, i + len(first)) >= 0


def _cudnn_not_gemm(name: str) -> bool:
    i = name.lower().rfind("cudnn::")
    return i >= 0 and not _CUDNN_GEMM_AFTER.search(name, i + 7)


@functools.lru_cache(maxsize=65536)
def tensor_core(name: str) -> bool:
    """A gemm-group kernel that runs on tensor (matrix) cores; False for fp32 SIMT kernels."""
    name = signature(name)
    if _TENSOR_CORE.search(name):
        return True
    if _FP32_SIMT.search(name):
        return False
    return bool(re.search(r"xmma", name, re.I))  # XMMA without a type marker: the tensor-core library


def short_name(name: str, limit: int = 90) -> str:
    """A kernel name without template and argument lists: `void at::native::foo<...>(...)` → `at::native::foo`
    (memcpy/memset names stay whole: their parentheses say what kind of copy it is)."""
    if _HTA_MEMORY.match(name):
        return name
    text = name.removeprefix("void ")
    depth, out = 0, []
    for ch in text:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    short = "".join(out).strip() or text
    if short.split("::")[-1] in ("Kernel", "Kernel2", "kernel") and "<" in text:  # cutlass::Kernel<gemm name>
        inner = re.split(r"[<>,( ]", text[text.index("<") + 1 :], maxsplit=1)[0]
        short = f"{short}<{inner}>"
    return short if len(short) <= limit else short[: limit - 1] + "…"
