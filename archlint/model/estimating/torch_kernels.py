"""What PyTorch itself runs for an op on a GPU, beyond the op's own arithmetic and bytes.

Facts read from PyTorch's source (each function names the file) and checked on an H200
(benchmarks/conv_families.py, kernel profiles): which depthwise convs run PyTorch's own kernels
instead of cuDNN's, the bias add after a cuDNN conv, the NCHW upsample's serial loop, and the
contiguous copy a linear, softmax or layer norm makes of a view whose last dim moved. Pure
functions of an op's record (and, for views, the graph): the estimate's terms use them.
"""

from __future__ import annotations

import math

import networkx as nx

from archlint.devices import DeviceSpec

VIEW_KINDS = frozenset({"reshape", "split"})  # kinds that launch no kernel: views (and eval-mode dropout)


def _prod(xs) -> int:
    return math.prod(int(x) for x in xs)


# PyTorch's CUDA kernels for linear/bilinear/bicubic/trilinear upsampling of NCHW tensors run one
# thread per output position, each looping over every (batch, channel) pair in turn
# (aten/src/ATen/native/cuda/UpSample{Linear1d,Bilinear2d,Bicubic2d,Trilinear3d}.cu, *_out_frame).
SERIAL_UPSAMPLE_KEYS = frozenset(
    {"upsample_linear1d", "upsample_bilinear2d", "upsample_bicubic2d", "upsample_trilinear3d"}
)
SERIAL_UPSAMPLE_MODES = frozenset({"linear", "bilinear", "bicubic", "trilinear"})
# One (batch, channel) iteration of that loop: a round trip to DRAM. Measured on an H200 (torch
# 2.11, benchmarks/conv_families.py, ×2 bilinear upsamples of 64×512×7², 32×256×28², 8×64×112² in
# float32 and float16): 0.17-0.44 µs an iteration, median 0.353 µs. (A kernel profile of
# EfficientFormerV2-S0 at batch 256 agrees: its two 256×1024×7² upsamples, 0.347 µs an iteration.)
UPSAMPLE_ITERATION_S = 0.353e-6
THREADS_PER_SM = 2048


def serial_upsample_s(op: dict, spec: DeviceSpec) -> float:
    """The time of an interpolating upsample's per-position loop (0 for other ops): batch ×
    channels iterations one after another, in as many waves as the output positions need."""
    attrs = op.get("attrs") or {}
    if op.get("channels_last"):  # NHWC memory: PyTorch's upsample_*_nhwc kernels are parallel
        return 0.0
    if op["kind"] != "upsample" or not (
        op.get("key") in SERIAL_UPSAMPLE_KEYS or attrs.get("mode") in SERIAL_UPSAMPLE_MODES
    ):
        return 0.0
    outs = op.get("out_shapes") or []
    if not outs or len(outs[0]) < 3:
        return 0.0
    out = outs[0]
    waves = math.ceil(_prod(out[2:]) / (spec.sms * THREADS_PER_SM))
    return int(out[0]) * int(out[1]) * UPSAMPLE_ITERATION_S * waves


def native_depthwise(op: dict) -> bool:
    """A depthwise conv PyTorch runs in its own CUDA kernels rather than cuDNN's: cuDNN takes only
    16-bit square 3×3 and 5×5 depthwise convs of at least 32 channels (use_cudnn_depthwise,
    aten/src/ATen/native/Convolution.cpp); the native kernels add the bias themselves."""
    if op["kind"] != "conv":
        return False
    w = (op.get("param_shapes") or {}).get("weight")
    groups = int(op.get("attrs", {}).get("groups", 1) or 1)
    if not w or groups <= 1 or int(w[1]) != 1 or len(w) != 4:
        return False
    if op.get("channels_last"):  # channels_last depthwise convs always go to cuDNN
        return False
    cudnn = int(op.get("itemsize", 2)) == 2 and int(w[2]) == int(w[3]) in (3, 5) and groups >= 32
    return not cudnn


def wide_depthwise(op: dict) -> bool:
    """A depthwise conv on PyTorch's generic kernel: native (not cuDNN) and not the 1×1 or 3×3 it
    has kernels for (ConvNeXt's 7×7, InceptionNeXt's 1×11 bands): bound by its arithmetic (H200:
    7×7 at 2.7 TFLOP/s where 3×3 and 5×5 reach 4-8, benchmarks/conv_families.py)."""
    w = (op.get("param_shapes") or {}).get("weight") or ()
    return native_depthwise(op) and tuple(int(k) for k in w[2:]) not in ((1, 1), (3, 3))


def conv_bias_bytes(op: dict) -> int:
    """A conv's bias on a GPU is an element-wise add of its own after cuDNN's kernel (output.add_,
    Convolution.cpp; the `add` kernels beside every biased conv in the A100 and H200 traces): the
    output read and written once more. PyTorch's native depthwise kernels add it themselves."""
    if op["kind"] != "conv" or "bias" not in (op.get("param_shapes") or {}) or native_depthwise(op):
        return 0
    return 2 * int(op.get("out_bytes", 0)) + _prod(op["param_shapes"]["bias"] or ()) * int(op.get("itemsize", 2))


PERMUTING_VIEWS = frozenset({"permute", "transpose", "t", "movedim", "swapaxes", "swapdims", "mT"})


def input_views(graph: nx.DiGraph, name: str) -> list[dict]:
    """The views the op's first input passes through since the kernel that wrote it, nearest first."""
    views: list[dict] = []
    preds = list(graph.predecessors(name))
    while preds and len(views) < 64:
        op = graph.nodes[preds[0]]
        if op["kind"] not in VIEW_KINDS:
            break
        views.append(op)
        preds = list(graph.predecessors(preds[0]))
    return views


def permuted_input(graph: nx.DiGraph, name: str) -> bool:
    """Whether the op's first input reaches it through a view that reorders dims (its memory may
    then be channels_last, for which PyTorch picks other kernels)."""
    return any(v.get("key") in PERMUTING_VIEWS for v in input_views(graph, name))


# Ops whose kernels read their input contiguous: given a view whose last dim is not the memory's
# innermost, PyTorch copies it first (matmul's reshape, softmax's and layer_norm's .contiguous()).
CONTIGUOUS_READERS = frozenset(
    {
        "Linear",
        "linear",
        "softmax",
        "Softmax",
        "log_softmax",
        "LogSoftmax",
        "layer_norm",
        "LayerNorm",
        "native_layer_norm",
        "rms_norm",
        "RMSNorm",
    }
)


def moved_last_dim(graph: nx.DiGraph, name: str) -> bool:
    """Whether the op's first input reaches it through a permute/transpose that moved the last dim."""

    def moves(view: dict) -> bool:
        dims = (view.get("attrs") or {}).get("dims")
        return view.get("key") in PERMUTING_VIEWS and bool(dims) and int(dims[-1]) % len(dims) != len(dims) - 1

    return any(moves(v) for v in input_views(graph, name))


def strided_copy_bytes(graph: nx.DiGraph, name: str) -> int:
    """The copy (read + write) of the input a contiguous reader gets through a dim-moving view."""
    op = graph.nodes[name]
    if op.get("key") not in CONTIGUOUS_READERS or not op.get("in_shapes") or not moved_last_dim(graph, name):
        return 0
    return 2 * _prod(op["in_shapes"][0] or ()) * int(op.get("itemsize", 2))
