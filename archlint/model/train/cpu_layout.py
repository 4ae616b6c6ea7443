"""The memory format a CPU convolution's outputs take, given to the meta step's outputs.

The meta kernel of `aten.convolution` returns a contiguous (NCHW) output whatever its input's
layout (torch/_meta_registrations.py `meta_conv`: a meta tensor has no device, so aten's backend,
and with it the layout, cannot be chosen there). On the CPU, aten's Convolution.cpp picks the
layout with `_determine_backend_memory_format`: both CPU backends of a 2-D convolution, oneDNN
(`mkldnn_conv_use_channels_last`) and aten's own kernels (`thnn_conv_use_channels_last`, taken
with oneDNN off, in float64, or where `use_mkldnn` declines), run channels_last (NHWC) when the
input's or the weight's `suggest_memory_format()` is channels_last, and return the output, and
in backward grad-input and grad-weight, in it (measured, torch 2.14.1: forward and backward, batch
1-2, 1x1, 3x3 and depthwise 7x7, oneDNN on and off, float32 and float64). So a model whose
activations become NHWC (timm's convnext after its first residual add) stays NHWC on the real CPU
from there on, and its later convolutions take oneDNN's NHWC scratch (cpu_scratch.py); on meta
they would fall back to NCHW after the first convolution. torch's FakeTensor mode mends the same
gap the same way (torch/_subclasses/fake_impls.py `conv`).

Left as the meta kernel makes them: 1-D and 3-D convolutions (the CPU's slow 3-D kernel stays
contiguous; oneDNN's takes channels_last_3d) and unbatched inputs (aten's slow kernels, contiguous).
"""

from __future__ import annotations

import torch

aten = torch.ops.aten


def suggests_channels_last(t: torch.Tensor) -> bool:
    """aten's `is_channels_last_strides_2d` for a 4-D strided tensor, which `suggest_memory_format()`
    reads: strides that grow in the order C, W, H, N (size-1 dimensions skipped as aten skips
    them), an N111 tensor left NCHW as aten leaves it."""
    if t.dim() != 4 or t.layout != torch.strided:
        return False
    # aten's loop over the dimensions C, W, H, N, unrolled (a check for every convolution of the step)
    n, c, h, w = t.shape
    sn, sc, sh, sw = t.stride()
    if sc == 0:  # a broadcast channel: aten defaults to NCHW
        return False
    if sc < 0:
        return False
    low = sc * c if c > 1 else sc
    if sw < low:
        return False
    low = sw * w if w > 1 else sw
    if sh < low:
        return False
    low = sh * h if h > 1 else sh
    if sn < low:
        return False
    if low == sc:  # ambiguous N111: NCHW, as aten falls back
        return False
    return True


def cpu_conv_layout(func, args, out):
    """`out` of a convolution op run on meta, its 4-D results restrided to channels_last where the
    CPU kernel returns them so (module docstring); any other op's `out` unchanged."""
    packet = getattr(func, "overloadpacket", None)
    if packet is aten.convolution:
        x, w = args[0], args[1]
    elif packet is aten.convolution_backward:
        x, w = args[1], args[2]
    else:
        return out
    if not isinstance(x, torch.Tensor) or not isinstance(w, torch.Tensor) or x.dim() != 4 or w.dim() != 4:
        return out
    if not (suggests_channels_last(x) or suggests_channels_last(w)):
        return out

    def nhwc(t):
        if isinstance(t, torch.Tensor) and t.dim() == 4 and not t.is_contiguous(memory_format=torch.channels_last):
            return t.to(memory_format=torch.channels_last)
        return t

    if packet is aten.convolution:
        return nhwc(out)
    grad_input, grad_weight, grad_bias = out  # grad-bias is 1-D
    return nhwc(grad_input), nhwc(grad_weight), grad_bias
