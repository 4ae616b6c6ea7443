"""Family microbenchmarks: what real kernels reach of the roofs, per op family (`archlint calibrate --families`).

One kernel per case at model-like sizes (ResNet-50, ViT-B/16, EfficientNet and ConvNeXt layers at
the given batch), timed with archlint's timer (CUDA events on a GPU, perf_counter on the CPU),
median of `repeat` runs after warm-ups. Each case counts under the share the device-spec estimate
applies to its op (archlint.model.estimating.estimate.share_names): a compute-bound case under its compute
share (2·MACs per second over the FLOP/s roof, divided by the spec's tile/wave efficiency when a
spec gives the roofs, as the estimate multiplies by it), a memory-bound one under its memory share
(the fewest bytes the op must move, inputs read once and output written once, per second over the
bandwidth). A family's share is [median, min, max] of its cases: the `[achieved]` table of a spec.

The roofs are a spec's datasheet figures (`--device-spec`: what the estimate multiplies the shares by),
else the peaks measured by the same command (archlint.model.timing.roofline). Also measured: the eager
per-op host cost (N tiny ops timed end to end, plain and under torch.autocast), and a size curve
(one GEMM and one conv from batch 1 to the given batch: how a small GEMM fills the device).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from archlint.errors import UsageError
from archlint.model.estimating.estimate import gemm_of, share_names, tile_efficiency, tile_for
from archlint.model.estimating.torch_kernels import wide_depthwise
from archlint.model.timing.timer import median_ms

VIT_TOKENS, VIT_WIDTH, VIT_HEADS = 197, 768, 12  # ViT-B/16 at 224²
CURVE_BATCHES = (1, 4, 16, 64, 256)  # the size curve's batches (those below the given batch, and it)


@dataclass(frozen=True)
class Case:
    """One kernel. `op` is the op as archlint's capture describes it (kind, shapes): the estimate's
    own functions name its family and its GEMM. `make` allocates the inputs and returns the call."""

    name: str
    op: dict
    tensor: bool  # runs on the tensor cores (a GEMM in 16 bits): its compute share is tensor-gemm/attention
    bound: str  # compute | memory: which share the case measures
    macs: int
    nbytes: int
    make: Callable[[], Callable[[], object]]
    used: bool = True  # False: reported beside the others, counted in no share (said why in its name)
    dtype: torch.dtype | None = None  # another dtype than the command's (the CUDA-core fp32 GEMM)

    @property
    def family(self) -> str:
        compute, memory = share_names(self.op, self.tensor)
        return compute if self.bound == "compute" else memory


@dataclass(frozen=True)
class Roofs:
    """What the shares are of: FLOP/s per roof ("tensor", "cuda"), DRAM bytes/s, and the tile and
    SM count the estimate's tile/wave efficiency uses (None: no such term divided out)."""

    flops: dict[str, float]
    bandwidth: float
    basis: str
    tile: tuple[int, int, int] | None = None
    sms: int | None = None


def share(case: Case, ms: float, roofs: Roofs) -> float | None:
    """The share of its roof `case` reached in `ms`; None when the roofs have no such roof."""
    seconds = ms / 1e3
    if case.bound == "memory":
        return case.nbytes / seconds / roofs.bandwidth
    roof = roofs.flops.get("tensor" if case.tensor else "cuda")
    if not roof:
        return None
    return 2 * case.macs / seconds / (roof * efficiency(case, roofs))


def efficiency(case: Case, roofs: Roofs) -> float:
    """The estimate's tile/wave efficiency of this case's GEMM on the spec (1 without a spec)."""
    g = gemm_of(case.op) if case.tensor else None
    if g is None or roofs.tile is None or roofs.sms is None:
        return 1.0
    return tile_efficiency(g, tile_for(case.op["kind"], g, roofs.tile), roofs.sms)


def summarize(shares: list[float]) -> tuple[float, float, float, bool]:
    """[value, low, high] of one family: the median, the lowest and the highest case, each capped
    at 1 (a spec's share is at most the roof); the flag says whether a cap was applied."""
    capped = max(shares) > 1
    cut = [min(s, 1.0) for s in shares]
    return statistics.median(cut), min(cut), max(cut), capped


# ---- the cases --------------------------------------------------------------------------------


def _randn(device, dtype, *shape, channels_last=False):
    x = torch.randn(*shape, device=device, dtype=dtype)
    return x.to(memory_format=torch.channels_last) if channels_last else x


def linear_case(name, m, k, n, device, dtype, used=True) -> Case:
    def make():
        x, w = _randn(device, dtype, m, k), _randn(device, dtype, n, k)
        return lambda: F.linear(x, w)

    op = {"kind": "linear", "in_shapes": [[m, k]], "out_shapes": [[m, n]], "param_shapes": {"weight": [n, k]}}
    size = torch.tensor([], dtype=dtype).element_size()
    return Case(name, op, _tensor(dtype, device), "compute", m * k * n, size * (m * k + k * n + m * n), make, used)


def conv_case(name, n, cin, cout, hw, k, device, dtype, stride=1, groups=1, nhwc=False, used=True) -> Case:
    out = (hw + 2 * (k // 2) - k) // stride + 1

    def make():
        x = _randn(device, dtype, n, cin, hw, hw, channels_last=nhwc)
        w = _randn(device, dtype, cout, cin // groups, k, k, channels_last=nhwc)
        return lambda: F.conv2d(x, w, stride=stride, padding=k // 2, groups=groups)

    op = {
        "kind": "conv",
        "in_shapes": [[n, cin, hw, hw]],
        "out_shapes": [[n, cout, out, out]],
        "param_shapes": {"weight": [cout, cin // groups, k, k]},
        "attrs": {"groups": groups},
    }
    width = min(cin, cout) // groups  # channels per group: cuDNN's tensor-core kernels need ≥ 8, multiples of 8
    tensor = _tensor(dtype, device) and (groups == 1 or (width >= 8 and width % 8 == 0))
    size = torch.tensor([], dtype=dtype).element_size()
    macs = n * cout * out * out * (cin // groups) * k * k
    nbytes = size * (n * cin * hw * hw + cout * (cin // groups) * k * k + n * cout * out * out)
    # as the estimate bounds it: a grouped conv by its bytes (window), a wide depthwise one by the
    # generic kernel's arithmetic (depthwise-wide, of the float32 CUDA-core roof), a dense one by its GEMM
    bound = "compute" if wide_depthwise(op) or (tensor and groups == 1) else "memory"
    return Case(name, op, tensor, bound, macs, nbytes, make, used)


def _tensor(dtype: torch.dtype, device: torch.device) -> bool:
    """A GEMM in this dtype runs on tensor cores: 16 bits on a GPU (a CPU has one roof)."""
    return device.type == "cuda" and dtype in (torch.float16, torch.bfloat16) or device.type == "cpu"


def _memory(name, kind, shape, fn_of, device, dtype, reads=1, out_shape=None, params=None, extra=None) -> Case:
    """A memory-bound case: `fn_of(x, *extra)` on x of `shape`; bytes = inputs read once + output written once."""
    out_shape = out_shape or shape
    size = torch.tensor([], dtype=dtype).element_size()
    extras = extra or []
    nbytes = size * (reads * math.prod(shape) + sum(math.prod(s) for s in extras) + math.prod(out_shape))

    def make():
        x = _randn(device, dtype, *shape)
        more = [_randn(device, dtype, *s) for s in extras]
        return lambda: fn_of(x, *more)

    op = {
        "kind": kind,
        "in_shapes": [list(shape)] * reads + [list(s) for s in extras],
        "out_shapes": [list(out_shape)],
        "param_shapes": params or {},
    }
    return Case(name, op, False, "memory", 0, nbytes, make)


def family_cases(device: torch.device, dtype: torch.dtype, batch: int, cuda_core: bool) -> list[Case]:
    """The cases at `batch`: ResNet-50/ViT-B/EfficientNet/ConvNeXt layer sizes."""
    b, t, d = batch, VIT_TOKENS, VIT_WIDTH
    act = (b, 256, 56, 56)  # a ResNet-50 stage-1 activation: far larger than an L2 at batch 256
    cases = [
        linear_case(f"linear ViT-B MLP fc1 ({b * t}×{d}×{4 * d})", b * t, d, 4 * d, device, dtype),
        linear_case(f"linear classifier ({b}×2048×1000)", b, 2048, 1000, device, dtype),
        conv_case(f"conv 3×3 64→64 @56 NHWC (b{b})", b, 64, 64, 56, 3, device, dtype, nhwc=True),
        conv_case(f"conv 3×3 256→256 @14 NHWC (b{b})", b, 256, 256, 14, 3, device, dtype, nhwc=True),
        conv_case(f"conv 1×1 256→1024 @14 NHWC (b{b})", b, 256, 1024, 14, 1, device, dtype, nhwc=True),
        conv_case(
            f"conv 3×3 64→64 @56 NCHW (b{b}; layout transposes inside: reported only)",
            b,
            64,
            64,
            56,
            3,
            device,
            dtype,
            used=False,
        ),
        conv_case(
            f"conv 7×7/2 stem 3→64 @224 NCHW (b{b}; 3 input channels: reported only)",
            b,
            3,
            64,
            224,
            7,
            device,
            dtype,
            stride=2,
            used=False,
        ),
        _attention(f"sdpa ViT-B {b}×{VIT_HEADS}×{t}×64", b, VIT_HEADS, t, 64, False, device, dtype),
        _attention(f"sdpa causal {max(1, b // 16)}×12×1024×64", max(1, b // 16), 12, 1024, 64, True, device, dtype),
        _memory(f"relu {'×'.join(map(str, act))}", "activation", act, torch.relu, device, dtype),
        _memory(f"gelu {'×'.join(map(str, act))}", "activation", act, F.gelu, device, dtype),
        _memory(f"silu {'×'.join(map(str, act))}", "activation", act, F.silu, device, dtype),
        _memory(f"add {'×'.join(map(str, act))}", "elementwise", act, torch.add, device, dtype, extra=[act]),
        _memory(f"softmax {b}×12×{t}²", "activation", (b, 12, t, t), lambda x: x.softmax(-1), device, dtype),
        _memory(
            f"mul broadcast (SE gate) {'×'.join(map(str, act))}",
            "elementwise",
            act,
            torch.mul,
            device,
            dtype,
            extra=[(b, 256, 1, 1)],
        ),
        _memory(
            f"batchnorm eval {'×'.join(map(str, act))}",
            "norm",
            act,
            lambda x, m, v, w, bias: F.batch_norm(x, m, v, w, bias, training=False),
            device,
            dtype,
            extra=[(256,)] * 4,
        ),
        _memory(
            f"layernorm {b * t}×{d}",
            "norm",
            (b * t, d),
            lambda x, w: F.layer_norm(x, (d,), w),
            device,
            dtype,
            extra=[(d,)],
        ),
        _memory(
            f"maxpool 3×3/2 {b}×64×112²",
            "pool",
            (b, 64, 112, 112),
            lambda x: F.max_pool2d(x, 3, 2, 1),
            device,
            dtype,
            out_shape=(b, 64, 56, 56),
        ),
        _memory(
            f"global avgpool {'×'.join(map(str, act))}",
            "pool",
            act,
            lambda x: F.adaptive_avg_pool2d(x, 1),
            device,
            dtype,
            out_shape=(b, 256, 1, 1),
        ),
        conv_case(f"conv depthwise 3×3 C144 @56 NCHW (b{b})", b, 144, 144, 56, 3, device, dtype, groups=144),
        conv_case(f"conv depthwise 7×7 C96 @56 NCHW (b{b})", b, 96, 96, 56, 7, device, dtype, groups=96),
        conv_case(f"conv grouped 3×3 g32 128→128 @56 NCHW (b{b})", b, 128, 128, 56, 3, device, dtype, groups=32),
        conv_case(
            f"conv grouped 3×3 g32 256→256 @56 NCHW (b{b}; 8 a group, tensor cores)",
            b,
            256,
            256,
            56,
            3,
            device,
            dtype,
            groups=32,
        ),
        conv_case(f"conv depthwise 7×7 C384 @14 NCHW (b{b})", b, 384, 384, 14, 7, device, dtype, groups=384),
    ]
    if cuda_core:  # fp32 GEMMs on the CUDA cores (TF32 off, PyTorch's default for matmuls)
        for m, k, n in ((4096, 4096, 4096), (b, 2048, 1000)):
            c = linear_case(f"linear fp32 CUDA cores ({m}×{k}×{n})", m, k, n, device, torch.float32)
            cases.append(Case(c.name, c.op, False, "compute", c.macs, c.nbytes, c.make, dtype=torch.float32))
    return cases


def _attention(name, b, heads, tokens, dim, causal, device, dtype) -> Case:
    shape = (b, heads, tokens, dim)

    def make():
        q, k, v = (_randn(device, dtype, *shape) for _ in range(3))
        return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    macs = 2 * b * heads * tokens * tokens * dim // (2 if causal else 1)  # QKᵀ and PV; causal: half the blocks
    size = torch.tensor([], dtype=dtype).element_size()
    op = {
        "kind": "attention",
        "key": "scaled_dot_product_attention",
        "in_shapes": [list(shape)] * 3,
        "out_shapes": [list(shape)],
    }
    return Case(name, op, _tensor(dtype, device), "compute", macs, size * 4 * math.prod(shape), make)


def curve_cases(device: torch.device, dtype: torch.dtype, batch: int) -> dict[str, list[tuple[tuple[int, ...], Case]]]:
    """The size curve: the ViT-B MLP GEMM and a 3×3 NHWC conv at batches 1, 4, 16, … up to `batch`."""
    batches = sorted({b for b in CURVE_BATCHES if b < batch} | {batch})
    t, d = VIT_TOKENS, VIT_WIDTH
    return {
        "gemm": [
            ((b * t, d, 4 * d), linear_case(f"curve linear {b * t}×{d}×{4 * d}", b * t, d, 4 * d, device, dtype))
            for b in batches
        ],
        "conv": [
            (
                (b, 64, 64, 56, 3),
                conv_case(f"curve conv 3×3 64→64 @56 NHWC b{b}", b, 64, 64, 56, 3, device, dtype, nhwc=True),
            )
            for b in batches
        ],
    }


# ---- timing -----------------------------------------------------------------------------------


def time_case(case: Case, device: torch.device, dtype: torch.dtype, repeat: int, warmup: int = 3) -> float:
    """Median ms of `repeat` runs; a case that cannot run here is a UsageError naming it."""
    fn: Callable[[], object] | None = None
    try:
        fn = case.make()
        with torch.no_grad():
            ms = median_ms(fn, device, repeat, warmup)
    except (RuntimeError, NotImplementedError) as exc:  # an unsupported dtype or kernel, out of memory
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise UsageError(
            f"calibrate --families: {case.family} case {case.name!r} cannot run on {device} in "
            f"{str(case.dtype or dtype).removeprefix('torch.')}: {first}"
        ) from None
    finally:
        fn = None
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return ms


def host_op_us(device: torch.device, kind: str, autocast: bool, n: int = 1000, repeat: int = 5) -> float:
    """The eager per-op host cost: `n` tiny ops (a 1-element relu, or a 1×8·8×8 linear) timed end
    to end, median of `repeat`, per op. The kernels are too small to matter, so the time is the
    host's: Python, the dispatcher (under autocast it also casts the linear's inputs to 16 bits,
    a kernel each) and the launch."""
    x = torch.ones(1 if kind == "elementwise" else (1, 8), device=device)
    w = torch.ones(8, 8, device=device)  # requires no grad: autocast casts it at every call, as once per layer
    op = (lambda: torch.relu(x)) if kind == "elementwise" else (lambda: F.linear(x, w))
    low = torch.float16 if device.type == "cuda" else torch.bfloat16
    times = []
    with torch.no_grad(), torch.autocast(device.type, dtype=low, enabled=autocast):
        for _ in range(repeat + 1):  # the first run warms up
            _sync(device)
            start = time.perf_counter()
            for _ in range(n):
                op()
            _sync(device)
            times.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(times[1:])


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
