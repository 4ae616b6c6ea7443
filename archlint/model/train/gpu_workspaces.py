"""Device memory that CUDA libraries take through PyTorch's caching allocator inside an op.

The memory model (memory.py) sees the storages ops return; on a GPU, cuBLAS and cuDNN also
allocate through the caching allocator, so `torch.cuda.max_memory_allocated` counts their
workspaces too:

- cuBLAS: PyTorch gives each (cuBLAS handle, stream) a workspace the first time a GEMM runs
  there and keeps it (aten/src/ATen/cuda/CublasHandlePool.cpp, setWorkspaceForHandle). Handles
  are per thread, and autograd runs a CUDA backward on its own device thread: a training step
  whose forward and backward both run GEMMs holds two. cuBLASLt (addmm with a bias vector, the
  gemm_and_bias path of nn.Linear) keeps its own, smaller, workspace per handle and stream.
  Sizes: torch's defaults, or CUBLAS_WORKSPACE_CONFIG / CUBLASLT_WORKSPACE_SIZE when set here.
  Confirmed on an H200 (benchmarks/eval_data/measured/h200-workspace-2026-11-26.json): +32 MiB at
  the first GEMM on the forward thread and again on autograd's, +1 MiB for addmm with a bias;
  bf16 GEMMs share them.
- cuDNN: a convolution's workspace, allocated and freed inside the op (below).
"""

from __future__ import annotations

import math
import os
import re

import torch

from archlint.model.train.prim_layout import insertion_sort

aten = torch.ops.aten

# Ops that run on cuBLAS on CUDA (GEMM and GEMV); matmul, linear and einsum reach these.
CUBLAS_OPS = frozenset(
    {
        aten.mm,
        aten.addmm,
        aten.bmm,
        aten.baddbmm,
        aten.addbmm,
        aten.mv,
        aten.addmv,
        aten.dot,
        aten.vdot,
        aten._addmm_activation,
    }
)
# torch's defaults (CublasHandlePool.cpp, parseChosenWorkspaceSize): ":4096:8" (32 MiB) on sm90,
# ":4096:2:16:8" (8 MiB + 128 KiB) on every other GPU; cuBLASLt: CUBLASLT_WORKSPACE_SIZE, 1024 KiB,
# capped at the cuBLAS size (parseCUDABlasLtWorkspaceSize, getCUDABlasLtWorkspaceSize).
CUBLAS_SM90_BYTES = 4096 * 8 * 1024
CUBLAS_OTHER_BYTES = 4096 * 2 * 1024 + 16 * 8 * 1024
CUBLASLT_BYTES = 1024 * 1024
# sm90 chips (compute capability 9.0), as named in a device spec's description.
SM90_CHIPS = ("GH100", "GH200")
SOURCE = "PyTorch's CublasHandlePool.cpp (getChosenWorkspaceSize, getCUDABlasLtWorkspaceSize)"


def _config_bytes(value: str) -> int | None:
    """CUBLAS_WORKSPACE_CONFIG as torch parses it: the sum of every ':SIZE_KiB:COUNT'."""
    pairs = re.findall(r":([0-9]+):([0-9]+)", value)
    return sum(int(size) * 1024 * int(count) for size, count in pairs) if pairs else None


def cublas_sizes(spec) -> tuple[int, int, str]:
    """(cuBLAS workspace bytes, cuBLASLt workspace bytes, where the sizes come from) on `spec`'s GPU."""
    sm90 = any(chip in getattr(spec, "description", "") for chip in SM90_CHIPS)
    size = CUBLAS_SM90_BYTES if sm90 else CUBLAS_OTHER_BYTES
    basis = (
        f"torch's default for {'sm90 (the spec names a Hopper ' + '/'.join(SM90_CHIPS) + ')' if sm90 else 'GPUs other than sm90'}: "
        f"{size / 2**20:g} MiB"
    )
    config = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    if config and (configured := _config_bytes(config)) is not None:
        size = configured
        basis = f"CUBLAS_WORKSPACE_CONFIG={config} (set here): {size / 2**20:g} MiB"
    lt, lt_basis = CUBLASLT_BYTES, "cuBLASLt 1 MiB (torch's default CUBLASLT_WORKSPACE_SIZE)"
    if os.environ.get("CUBLASLT_WORKSPACE_SIZE", "").isdigit():
        lt = int(os.environ["CUBLASLT_WORKSPACE_SIZE"]) * 1024
        lt_basis = f"cuBLASLt CUBLASLT_WORKSPACE_SIZE={os.environ['CUBLASLT_WORKSPACE_SIZE']} KiB (set here)"
    if lt > size:
        lt, lt_basis = size, lt_basis + ", capped at the cuBLAS size"
    return size, lt, f"{basis}; {lt_basis}; {SOURCE}"


def cublas_workspaces(func, args, thread: str) -> list[str]:
    """The workspaces (names) an op needs on `thread` ("forward" or "autograd"): none unless it
    is a cuBLAS op; cuBLASLt's too for addmm with a bias vector (nn.Linear's gemm_and_bias)."""
    packet = getattr(func, "overloadpacket", None)
    if packet not in CUBLAS_OPS:
        return []
    names = [f"cublas {thread} thread"]
    lt = packet is aten._addmm_activation or (
        packet is aten.addmm and args and isinstance(args[0], torch.Tensor) and args[0].dim() == 1
    )
    if lt:
        names.append(f"cublasLt {thread} thread")
    return names


# ---- cuDNN: a convolution's workspace, allocated and freed inside the op ----------------------
#
# Measured on an H200 (benchmarks/gpu_checks.py section workspace, kept in benchmarks/eval_data/
# measured/h200-workspace-2026-11-26.json: 18 convolution shapes of the memory section's models at
# batch 32, float32 and bfloat16, cudnn.benchmark off, torch 2.11, cuDNN 9.19): max_memory_allocated
# during the op beyond its outputs. Convolutions over feature maps (more than 4 input channels)
# with a kernel larger than 1×1 or a stride, not depthwise, take about their input + grad-output +
# weight in backward (measured 1.00-1.14× of that at 28² and 56², 1.35-1.52× at 7² and 14² in
# float32) and about their input + output in forward (0.50-2.61× in float32; bf16 once 4.5×).
# 1×1 stride-1 and depthwise convolutions take ≤ 2 MiB (one 24→144 1×1 fp32 backward: 66 MiB).
# Image stems and patchify convolutions (3 input channels, or kernel = stride) follow no such rule
# (0 to 2.8× of it): counted as none; they run first in forward and last in backward, away from
# the peak.
# PyTorch runs a convolution's backward as two cuDNN calls, backward-data then backward-filter
# (aten/src/ATen/native/cudnn/ConvShared.cpp), each with its own workspace from the caching allocator,
# freed when the call returns: the allocator sees grad_input, its workspace, grad_weight, its workspace
# (caching allocator's record of resnet18, convnext_atto, regnetx_002 and resnet50 training steps on the
# H200, benchmarks/gpu_checks.py section alloc_trace). Each call is given the same estimate, as the
# measured backward figure above is the larger of the two (resnet18's 3x3 64-64 @56: 49.1 and 51.1 MiB).
CUDNN_SOURCE = (
    "estimated from measurements on an H200 (benchmarks/eval_data/measured/h200-workspace-2026-11-26.json, "
    "cuDNN 9.19, cudnn.benchmark off): a convolution over feature maps with a kernel larger than 1x1 "
    "or a stride, not depthwise, takes its input + output bytes as workspace in forward (measured "
    "0.5-2.6x), input + grad-output + weight in each of backward's two calls, backward-data and "
    "backward-filter (measured 1.0-1.5x); 1x1 stride-1, depthwise, "
    "image-stem and patchify convolutions are counted as none"
)


def cudnn_workspaces(func, args) -> list[tuple[int, int]]:
    """The workspaces a convolution op allocates and frees on cuDNN, in order, each as (how many
    of the op's outputs are made before it, bytes): forward's after its output; backward's after
    grad_input (backward-data) and after grad_weight (backward-filter), for the grads it computes."""
    packet = getattr(func, "overloadpacket", None)
    if packet is aten.convolution:
        x, w, stride, groups, out = args[0], args[1], args[3], args[8], None
    elif packet is aten.convolution_backward:
        out, x, w, stride, groups = args[0], args[1], args[2], args[4], args[9]
    else:
        return []
    if not isinstance(x, torch.Tensor) or x.dim() != 4:  # 2-D convolutions only: what was measured
        return []
    depthwise = groups > 1 and w.shape[1] == 1
    pointwise = tuple(w.shape[2:]) == (1, 1) and all(s == 1 for s in stride)
    image = x.shape[1] <= 4 or list(w.shape[2:]) == list(stride)  # a stem or a patchify: no rule held
    if depthwise or pointwise or image:
        return []
    nbytes = x.numel() * x.element_size()
    if out is None:  # forward: the output's size from the shapes
        return [(1, nbytes + _conv_out_bytes(x, w, args))]
    nbytes += out.numel() * out.element_size() + w.numel() * w.element_size()
    mask = args[10] if len(args) > 10 else (True, True)
    return [(made, nbytes) for made, wanted in ((1, mask[0]), (2, mask[1])) if wanted]


def _conv_out_bytes(x, w, args) -> int:
    stride, padding, dilation = args[3], args[4], args[5]
    size = x.shape[0] * w.shape[0] * x.element_size()
    for i, n in enumerate(x.shape[2:]):
        k = dilation[i] * (w.shape[2 + i] - 1) + 1
        size *= (n + 2 * padding[i] - k) // stride[i] + 1
    return size


# ---- TensorIterator reductions: the cross-block buffer, allocated and freed inside the op ----------
#
# PyTorch's CUDA reductions (gpu_reduce_kernel, aten/src/ATen/native/cuda/Reduce.cuh) split a long
# reduction across thread blocks when each output has many inputs and few outputs fill the GPU; the
# blocks then combine partial results through a buffer and a semaphore array that the kernel takes from
# the caching allocator after the op's output and frees when it returns. Their sizes follow from the
# launch configuration (setReduceConfig), which depends on the tensor's layout, the SM count and the
# resident threads per SM: ReduceConfig::global_memory_size and semaphore_size. Checked on an H200
# against the caching allocator's record (benchmarks/gpu_checks.py section alloc_trace, torch 2.11):
# every sum in the steady steps of vit_small_patch16_224, vit_b_16 and convnext_atto, byte for byte
# (a linear layer's bias gradient over 6,304 rows: 4 x outputs x 12,672 bytes, twice its input).
REDUCE_OPS = frozenset({aten.sum, aten.mean})
REDUCE_MAX_THREADS = 512  # mnt_wrapper<T>::MAX_NUM_THREADS for real types
# Resident threads per SM by compute capability (CUDA C++ Programming Guide, "Technical
# Specifications per Compute Capability"), by the chip the device spec names.
THREADS_PER_SM = (
    ("TU1", 1024),
    ("GA100", 2048),
    ("GA10", 1536),
    ("AD10", 1536),
    ("GH100", 2048),
    ("GB100", 2048),
    ("GB20", 1536),
)
THREADS_PER_SM_DEFAULT = 2048
REDUCE_SOURCE = (
    "PyTorch's CUDA reductions (Reduce.cuh, setReduceConfig): sum and mean split a long reduction "
    "across thread blocks through a buffer of 4 bytes x outputs x blocks per output x block width x "
    "vector width, and a semaphore array, allocated after the output and freed inside the op; "
    "float32 and float64 only, and inputs within 32-bit indexing (larger ones are split into pieces, "
    "not modelled)"
)


def threads_per_sm(spec) -> tuple[int, str]:
    """Resident threads per SM on `spec`'s GPU, by the chip its description names, and the basis."""
    description = getattr(spec, "description", "")
    for chip, threads in THREADS_PER_SM:
        if chip in description:
            return threads, f"{threads} threads per SM ({chip})"
    return THREADS_PER_SM_DEFAULT, (
        f"{THREADS_PER_SM_DEFAULT} threads per SM assumed (the spec names no chip "
        f"archlint knows: {', '.join(c for c, _ in THREADS_PER_SM)})"
    )


def reduction_workspace(func, args, sms: int, threads: int) -> int:
    """The bytes a CUDA sum or mean allocates and frees inside the op (its cross-block buffer and
    semaphores, each rounded to the caching allocator's 512 bytes): 0 when it runs in one block per
    output. `sms`, `threads`: the GPU's SM count and resident threads per SM."""
    if getattr(func, "overloadpacket", None) not in REDUCE_OPS or not args or not isinstance(args[0], torch.Tensor):
        return 0
    x = args[0]
    if x.dtype not in (torch.float32, torch.float64) or x.numel() == 0:
        return 0
    if x.numel() * x.element_size() > 2**31 - 1:  # split into 32-bit-indexable pieces: not modelled
        return 0
    dims = args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else None
    ndim = max(x.dim(), 1)
    reduced = set(range(ndim)) if not dims else {d % ndim for d in dims}
    buffer, semaphores = _reduce_buffers(
        list(x.shape) or [1], list(x.stride()) or [1], reduced, x.element_size(), sms, threads
    )
    rounded = (-(-buffer // 512) * 512) + (-(-semaphores // 512) * 512)
    return rounded if buffer else 0


def _reduce_buffers(shape, strides, reduced, elem: int, sms: int, threads: int) -> tuple[int, int]:
    """(global buffer bytes, semaphore bytes) of gpu_reduce_kernel for an input of `shape`/`strides`
    (elements) reduced over the dims in `reduced`, accumulating in its own type (`elem` bytes)."""
    # The TensorIterator's layout: output strides 0 on reduced dims (the output is contiguous in the kept
    # ones); reduced dims first, then by the input's strides ascending (reorder_dimensions), adjacent dims
    # merged (coalesce_dimensions).
    out_strides, step = [0] * len(shape), 1
    for d in reversed(range(len(shape))):
        if d not in reduced:
            out_strides[d] = step
            step *= shape[d]
    ops = [out_strides, list(strides)]
    perm = list(reversed(range(len(shape))))

    def should_swap(d0, d1):
        for i, s in enumerate(ops):
            s0, s1 = s[d0], s[d1]
            if i == 0 and (s0 == 0) != (s1 == 0):
                return 1 if s1 == 0 else -1
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return -1 if s0 < s1 else 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    insertion_sort(perm, should_swap)
    sizes = [shape[p] for p in perm]
    ops = [[s[p] for p in perm] for s in ops]
    prev = 0
    for d in range(1, len(sizes)):
        if sizes[prev] == 1 or sizes[d] == 1 or all(sizes[prev] * s[prev] == s[d] for s in ops):
            if sizes[prev] == 1:
                for s in ops:
                    s[prev] = s[d]
            sizes[prev] *= sizes[d]
        else:
            prev += 1
            if prev != d:
                for s in ops:
                    s[prev] = s[d]
                sizes[prev] = sizes[d]
    sizes, (out_s, in_s) = sizes[: prev + 1], [s[: prev + 1] for s in ops]
    n_reduce = sum(1 for s in out_s if s == 0)
    numel = math.prod(sizes)
    outputs = math.prod(n for n, s in zip(sizes, out_s) if s != 0)
    inputs = numel // outputs
    on_fastest = n_reduce == len(sizes) or in_s[0] < in_s[n_reduce]
    dim0, dim1 = (inputs, outputs) if on_fastest else (outputs, inputs)
    fastest = in_s[0] if on_fastest else in_s[n_reduce]
    vec = 1
    if fastest == 1:
        if on_fastest and dim0 > 128 and n_reduce == 1:
            dim0 //= 4  # vectorized along the input (input_vec_size 4)
        elif not on_fastest:  # vectorized along the output: 4, halved until it divides the output's extent
            vec = 4  # and the input's other strides (the base address: allocations are 512-byte aligned)
            for n in [sizes[n_reduce]] + [s for j, s in enumerate(in_s) if j != n_reduce]:
                while n % vec:
                    vec //= 2
            dim0 //= vec
    max_threads = REDUCE_MAX_THREADS // vec
    pow2 = [max_threads if d >= max_threads else 1 << (max(d, 1).bit_length() - 1) for d in (dim0, dim1)]
    width = min(pow2[0], 32)
    height = min(pow2[1], max_threads // width)
    width = min(pow2[0], max_threads // height)
    step_in = step_out = 1
    if on_fastest:
        step_in *= width
    else:
        step_out *= width
    per_thread = -(-inputs // step_in)
    split_warps = per_thread >= height * 16 or per_thread >= 256
    if split_warps:
        step_in *= height
    else:
        step_out *= height
    per_thread = -(-inputs // step_in)
    grid = -(-(outputs // vec) // step_out)
    target = sms * (threads // (width * height))
    if not (split_warps and per_thread >= 256 and grid <= target):
        return 0, 0
    ctas = max(min(-(-target // grid), -(-per_thread // 16)), -(-per_thread // 256))
    if ctas <= 1:
        return 0, 0
    size = elem * outputs * ctas
    if not on_fastest:  # no block-x reduction: each lane keeps its own partials
        size *= width * vec
    return size, 4 * grid
