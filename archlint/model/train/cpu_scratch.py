"""The scratch oneDNN takes inside a CPU convolution, allocated and freed within the op.

On the CPU, PyTorch runs a float32 convolution on oneDNN when `use_mkldnn` in aten's
Convolution.cpp says so (`uses_onednn` below). For an NCHW (contiguous) tensor, PyTorch's
mkldnn_convolution hands oneDNN plain memory and lets it pick the layout: the kernel's own copies
(the input, weight and grad-output reordered to a blocked layout, the result computed in that
layout and then copied into the dense tensor PyTorch returns) and oneDNN's scratchpad are all
allocated through PyTorch's CPU allocator and freed inside the op. The profiler sees them; no
tensor of the step holds them, so the meta device does not. Per op, beyond its outputs, with X, W,
Y the bytes of input, weight and output (grad-output in backward):

- jit kernels (blocked layouts; the ones oneDNN picks unless their conditions fail):
  forward max(X + W, Y): the input and weight reordered and the result in the blocked layout,
  or, later, that result and the dense copy. Grad-input max(Y + W, X) (+ X when strided and not
  depthwise: the strided kernels' unit-stride buffer or their reorders). Grad-weight max(X + Y, W).
  An image stem (3 input channels) reads its input as it is: no X.
- gemm (im2col) fallback: grouped convolutions whose groups' channels are not a multiple of 8, and
  for the weight gradient also a kernel taller or wider than its input (jit:avx2 needs kh <= ih,
  [bwd_w:r2]), a 14-wide kernel or a dilation. Its weight-gradient scratchpad books
  `nthr * weights_size` floats for the per-thread reduction, with `weights_size` already in bytes
  (oneDNN's gemm_convolution_utils.cpp, key_conv_wei_reduction): 4 W per thread, booked even with
  one thread, plus the im2col buffer (C/g * kh * kw * OH * OW floats per thread). nthr is the
  number of threads when the problem is small enough to thread over the batch (os / threads <
  256, batch > 1 or groups > 2), else 1. Forward and grad-input: the im2col buffer per thread,
  or the dense copy of the result, the larger.
- AVX-512 (oneDNN's avx512_core kernels, tried before the avx2 ones, which stay as fallbacks):
  the weight gradient's jit kernel has no kh <= ih condition (jit_avx512_common_conv_bwd_weights
  init_conf: kw <= 14, padding at most half the kernel, a dilation only when the dilated kernel fits
  the input) but wants 16-channel blocks: dense, or groups of a multiple of 16 channels; a
  convolution it refuses still takes the avx2 kernel when that one's conditions hold, else gemm
  (depthwise: as on AVX2). Forward and grad-input take the blocked-layout formulas whatever the
  grouping (measured at 4 channels a group, where AVX2 goes to gemm), and a grouped strided
  grad-input adds no unit-stride buffer.
- convolution_backward computes grad-input first, then grad-weight: the op's scratch is the larger
  of the two, the grad-input's less the weight gradient not yet allocated.

Measured on this CPU (torch 2.14.1, oneDNN 3.12, AVX2, 1 and 2 threads; benchmarks/
cpu_conv_scratch.py: 35 shapes x 4 ops, channels 3-2048, kernels 1-7, stride 1-2, dense, grouped
and depthwise, batch 1-8, spatial 2-56): see that script's table and the module's tests. The
number of threads is torch.get_num_threads() of the process that analyzes, standing for the target
CPU. The AVX-512 rule was measured the same way on an AMD EPYC with AVX-512 (torch 2.14.1, 49
shapes x 4 ops, 1 and 2 threads); the ISA is torch.backends.cpu.get_cpu_capability() of the
process that analyzes (capped by ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA when set), like the threads.
Not measured: the image stem's grad-input on AVX-512 (up to 2x the rule; a training step does not
ask for it) and a depthwise forward whose kernel is wider than its padded input (0.14 of the rule).
convnext_atto (timm, batch 2 at 64x64, 1 thread, AVX-512; its step 0.743 of the real peak with SGD, 0.852
with Adam, 1.000 with oneDNN off): its activations are channels_last (NHWC) after the first block's
residual add, and a channels_last depthwise convolution's weight gradient books 257 W (measured,
profiler, AVX-512: 2_014_880 B at 40 channels 7x7, 4_029_760 at 80, 8_059_520 at 160, 16_119_040 at
320, 1_644_800 at 64 channels 5x5; the same at batch 1-8, 1 and 2 threads, stride 1 and 2, 2-16 px;
at 3x3 only W plus its 16-channel padded copy, 3_168 at 40 channels); forward and grad-input the
weight padded to 16 channels (9_408 at 40, 62_720 at 320). depthwise_nhwc_scratch_bytes is that rule
(AVX-512 only; not measured on AVX2, 0 there). The NCHW rule at the same shapes is within 82 KB of
the profiler per op. The meta kernel returns NCHW from a convolution of NHWC activations where the
CPU's keep NHWC; the meta step gives its convolutions the CPU's layout (cpu_layout.py), so the rule
reaches every block: the row went from 0.743 (SGD) / 0.852 (Adam) to 1.000 / 1.000 (issue 46).
Not modelled (0): channels_last tensors (oneDNN's NHWC path), transposed, 1-D and 3-D convolutions,
and dtypes other than float32.
"""

from __future__ import annotations

import math
import os

import torch

aten = torch.ops.aten

FLOAT = 4  # oneDNN's gemm scratchpads are float (f32 convolutions)
GEMM_WEI_REDUCTION_PER_THREAD = 4  # floats booked per weight *byte*: 4 W per thread
SCRATCHPAD_LIMIT = 1 << 30  # gemm_convolution_utils: scratchpad_limit_by_absolute_value

BASIS = (
    "oneDNN's scratch inside CPU convolutions (archlint.model.train.cpu_scratch): the input, weight and "
    "grad-output reordered to blocked layouts and the result's dense copy (jit kernels), or the gemm "
    "fallback's per-thread weight-reduction buffers (4x the weight per thread) and im2col buffer; rule read "
    "from PyTorch's mkldnn_convolution and oneDNN's gemm_convolution_utils, checked against the profiler on "
    "AVX2 and AVX-512 CPUs (torch 2.14.1, oneDNN 3.12; benchmarks/cpu_conv_scratch.py); ISA: {isa} "
    "(torch.backends.cpu.get_cpu_capability() of this process); threads: torch.get_num_threads() of this "
    "process ({threads}); both standing for the target CPU"
)

AVX2, AVX512 = "AVX2", "AVX512"


def cpu_isa() -> str:
    """The rule's ISA for this process: AVX512 when ATen reports that capability (its check needs
    avx512 f/bw/vl/dq, what oneDNN's avx512_core needs too) and oneDNN is not capped below it, else
    AVX2, the rule measured first (the fallback for older ISAs too: not measured)."""
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or ""
    capped = cap.strip().upper() in ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2")
    return AVX512 if torch.backends.cpu.get_cpu_capability() == AVX512 and not capped else AVX2


def uses_onednn(input_shape, weight_shape, stride, dilation, groups: int, threads: int) -> bool:
    """Whether aten's `use_mkldnn` (Convolution.cpp) sends a float32 CPU convolution to oneDNN,
    given that oneDNN is built in and enabled: for a 1x1 kernel with stride and dilation 1 a
    batch under 16 stays on aten's own kernel single-threaded; a batch of 1 does too unless the
    convolution is grouped, has a kernel over 3x3, or an input over 20480 elements."""
    kh, kw = weight_shape[-2], weight_shape[-1]
    n = input_shape[0]
    # (counts, not any(...) over generators, and read last: a check for every convolution of the step)
    first = (
        threads > 1
        or kw != 1
        or kh != 1
        or n >= 16
        or stride.count(1) != len(stride)  # strided
        or dilation.count(1) != len(dilation)  # dilated
    )
    second = groups > 1 or (kw > 3 and kh > 3) or n > 1 or math.prod(input_shape) > 20480
    return first and second


def _out(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def conv_scratch_bytes(
    input_shape,
    weight_shape,
    stride,
    padding,
    dilation,
    groups: int,
    itemsize: int,
    output_mask,
    threads: int,
    isa: str,
) -> int:
    """The bytes oneDNN allocates and frees inside one 2-D convolution op beyond its outputs
    (module docstring): the forward when `output_mask` is None, else convolution_backward with
    that mask (grad-input, grad-weight, grad-bias); `isa` AVX2 or AVX512 (cpu_isa())."""
    n, c, h, w = input_shape
    o, cg, kh, kw = weight_shape
    og = o // groups
    oh, ow = _out(h, kh, stride[0], padding[0], dilation[0]), _out(w, kw, stride[1], padding[1], dilation[1])
    x, wt, y = n * c * h * w * itemsize, o * cg * kh * kw * itemsize, n * o * oh * ow * itemsize
    depthwise = groups > 1 and cg == 1 and og == 1
    blocked = groups == 1 or depthwise or (cg % 8 == 0 and og % 8 == 0)
    avx512 = isa == AVX512
    # AVX-512: forward and grad-input reorder to blocked layouts whatever the grouping (measured)
    blocked_data = blocked or avx512
    flat = groups == 1 and cg == 3  # an image stem: oneDNN reads its NCHW input as it is
    if output_mask is None:
        if blocked_data:
            return max((0 if flat else x) + wt, y)
        return max(threads * _im2col_bytes(cg, kh, kw, oh, ow, stride, padding), y)
    dilated = dilation.count(1) != len(dilation)
    strided = stride.count(1) != len(stride)
    grad_input = grad_weight = 0
    if output_mask[0]:
        unit_buffer = strided and not depthwise and not (avx512 and groups > 1)
        if blocked_data:
            grad_input = max(y + wt, x) + (x if unit_buffer else 0)
        else:
            grad_input = max(threads * _im2col_bytes(cg, kh, kw, oh, ow, stride, padding), x)
    if output_mask[1] or output_mask[2]:
        jit = blocked and kh <= h and kw <= w and kw < 14 and not dilated  # jit:avx2 [bwd_w:r2]
        if avx512 and not jit and not depthwise and (groups == 1 or (cg % 16 == 0 and og % 16 == 0)):
            # jit_avx512_common_conv_bwd_weights: no kh <= ih; kw <= 14; padding within half the
            # kernel; a dilation with stride 1 and the dilated kernel no taller than the input
            span_h = (kh - 1) * dilation[0] + 1
            max_pad = span_h // 2
            b_pad = max(0, (oh - 1) * stride[0] + span_h - (h + padding[0]))
            jit = (
                kw <= 14
                and padding[0] <= max_pad
                and b_pad <= max_pad
                and (not dilated or (not strided and span_h <= h))
            )
        if jit:
            grad_weight = max((0 if flat else x) + y, wt)
        else:
            os_ = oh * ow
            mem = GEMM_WEI_REDUCTION_PER_THREAD * threads * wt + FLOAT * threads * cg * kh * kw * 8
            outer = (
                mem < min(SCRATCHPAD_LIMIT, 15 * threads * (x + wt + y))
                and os_ // threads < 256
                and (n != 1 or groups > 2)
            )
            nthr = threads if outer else 1
            col = _im2col_bytes(cg, kh, kw, oh, ow, stride, padding)
            grad_weight = max(GEMM_WEI_REDUCTION_PER_THREAD * nthr * wt + nthr * col, wt)
    if output_mask[0] and output_mask[1]:
        return max(grad_input - wt, grad_weight)
    return max(grad_input, grad_weight)


def _im2col_bytes(cg: int, kh: int, kw: int, oh: int, ow: int, stride, padding) -> int:
    """One thread's im2col buffer on the gemm path: none for a 1x1 kernel with stride 1 and no padding.
    (Computed where a gemm path asks for it: the jit kernels, most convolutions, never do.)"""
    if kh == kw == 1 and stride.count(1) == len(stride) and padding.count(0) == len(padding):
        return 0
    return cg * kh * kw * oh * ow * FLOAT


NHWC_DW_WEI_REDUCTION = 256  # weights booked by a channels_last depthwise weight gradient, kernel over 3x3


def depthwise_nhwc_scratch_bytes(weight_shape, itemsize: int, output_mask) -> int:
    """A channels_last (NHWC) depthwise convolution on AVX-512 (measured, module docstring: batch
    1-8, 1 and 2 threads, stride 1-2, 2-16 px, 40-320 channels): forward and grad-input reorder the
    weight to 16-channel blocks (W padded); the weight gradient books 256 W beside the weight's own
    copy (257 W) for a kernel over 3x3, whatever the batch, threads and size, and W plus the padded
    copy at 3x3."""
    o, _, kh, kw = weight_shape
    w = o * kh * kw * itemsize
    padded = -(-o // 16) * 16 * kh * kw * itemsize
    if output_mask is None or not (output_mask[1] or output_mask[2]):
        return padded
    return (NHWC_DW_WEI_REDUCTION + 1) * w if kh * kw > 9 else w + padded


_ONEDNN_BUILT = torch.backends.mkldnn.is_available()  # how this torch was built: fixed for the process


def onednn_enabled() -> bool:
    """oneDNN built into this torch and not switched off (torch.backends.mkldnn.flags)."""
    return _ONEDNN_BUILT and torch.backends.mkldnn.enabled


def cpu_conv_scratch(func, args, threads: int, isa: str) -> int:
    """The scratch (bytes) a CPU convolution op takes on oneDNN, 0 for any other op or a
    convolution that PyTorch does not send to oneDNN or that the rule does not cover."""
    packet = getattr(func, "overloadpacket", None)
    # convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
    # convolution_backward(grad_output, input, weight, bias_sizes, ..., groups, output_mask)
    if packet is aten.convolution:
        x, w, stride, padding, dilation, transposed, groups, mask = *args[0:2], *args[3:7], args[8], None
    elif packet is aten.convolution_backward:
        x, w, stride, padding, dilation, transposed, groups, mask = *args[1:3], *args[4:8], args[9], args[10]
    else:
        return 0
    if (
        transposed
        or not isinstance(x, torch.Tensor)
        or x.dim() != 4
        or x.dtype != torch.float32
        or not onednn_enabled()
    ):
        return 0
    if (
        isa == AVX512
        and not x.is_contiguous()
        and x.is_contiguous(memory_format=torch.channels_last)
        and groups > 1
        and w.shape[0] == groups
        and w.shape[1] == 1
        and uses_onednn(x.shape, w.shape, stride, dilation, groups, threads)
    ):
        return depthwise_nhwc_scratch_bytes(tuple(w.shape), x.element_size(), mask)
    if not x.is_contiguous() or not w.is_contiguous():
        return 0
    shape, kernel = x.shape, w.shape  # (a torch.Size is a tuple: no copy)
    if not uses_onednn(shape, kernel, stride, dilation, groups, threads):
        return 0
    return conv_scratch_bytes(shape, kernel, stride, padding, dilation, groups, x.element_size(), mask, threads, isa)
