"""A static latency estimate per op and end to end for a device the user names by its spec.

No device, no weights: the OpGraph's shapes and costs, and the spec's datasheet figures
(archlint.devices). Each op's time is a roofline refined by four named terms, each a function
below with its own test:

    unit            which peak the op can reach: tensor cores only for dense GEMM-like ops in
                    fp16/bf16 (and TF32 for fp32 convs, cuDNN's default); depthwise/grouped convs,
                    norms, reductions and element-wise ops run on the CUDA cores (vector units).
    tile_efficiency the share of the SMs' tile work that is useful: a GEMM is cut into tiles of
                    the spec's size; partial tiles are padded and partial waves leave SMs idle
                    (a GEMM whose tiles fill 1.1 waves costs 2 waves).
    cache_resident  bytes of an op's input that the op just before it wrote and that fit in the
                    L2 (last-level cache on a CPU): read from cache, not from DRAM.
    layout          tensor-core convs run in NHWC: on NCHW activations (torch's default memory
                    format) cuDNN transposes the input in and the output back, one more read and
                    write of each (NVIDIA Deep Learning Performance guide, "Tensor layouts in
                    memory: NCHW vs NHWC").
    overhead        the fixed cost of launching one op. A GPU runs kernels asynchronously, so
                    the host's launch cost hides under longer kernels: time = max(kernel, launch).
                    A CPU runs the framework and the kernel on the same cores: time = launch + kernel.

    op time = combine(overhead, max(2·FLOPs / (peak(unit) · tile_efficiency),
                                   (MAC bytes − cache-resident bytes + layout bytes) / bandwidth))

That is the roofline alone (`terms=ROOFLINE_ONLY`). By default (ALL_TERMS) two measured terms
refine it on a GPU, and `autocast=True` models torch.autocast's dtypes:

    achieved-share  each roof times the share real kernels of the op's family reach
                    (archlint.devices.achieved: tensor-core GEMM/conv, fused attention, CUDA-core
                    compute; DRAM streams, broadcasts, sliding windows), measured in a real A100
                    trace or published kernel benchmarks; their spread gives the estimate's range
                    (`range_ms`) and the terms that widen it most (`range_terms`).
    layout-kernels  cuDNN transposes a tensor-core conv's input and weight to NHWC in kernels
                    of their own before it and writes NCHW itself (the trace): those bytes add to
                    the conv's time instead of hiding under its compute.
    autocast        autocast_flow: float32 inputs and weights cast for each GEMM, norms and
                    softmax in float32, float32 parameters widening element-wise ops.
    sdpa-math       an attention call no fused kernel takes (query/key/value not 4-D) costed as
                    torch's math path, kernel by kernel (archlint.model.sdpa_math).
    serial-upsample PyTorch's NCHW interpolating upsample loops over batch × channels in each
                    output position's thread (torch_kernels.serial_upsample_s).
    conv-bias       a biased conv on cuDNN adds its bias in an element-wise kernel of its own
                    (torch_kernels.conv_bias_bytes).
    strided-copy    a linear, softmax or layer norm given a view whose last dim a permute moved
                    reads a contiguous copy PyTorch makes first (torch_kernels.strided_copy_bytes).
    host-pipeline   on a spec that measured its host's cost per op (eager-op-us), the host issues
                    ops one after another and the GPU runs each once issued and the one before
                    is done: short kernels wait for the host (host_wait_ms).

Grouped convs tile by their group width (grouped_tile) and stream at the `window` share; a
depthwise conv on PyTorch's generic kernel (torch_kernels.wide_depthwise) is bound by its
arithmetic (`depthwise-wide`): from H200 microbenchmarks (benchmarks/conv_families.py).

FLOPs are multiply-adds; roofline math uses 2 × FLOPs. End to end = the sum of the ops: eager
execution, one kernel per op, no fusion, no torch.compile, no CUDA graphs. No fitted factors:
every number comes from the spec or a named measurement.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import networkx as nx

from archlint.devices import DeviceSpec
from archlint.devices.achieved import shares_for
from archlint.model import opgraph, sdpa_math
from archlint.model.estimating.torch_kernels import (
    VIEW_KINDS,
    conv_bias_bytes,
    permuted_input,
    serial_upsample_s,
    strided_copy_bytes,
    wide_depthwise,
)

GEMM_KINDS = frozenset({"conv", "linear", "matmul", "attention"})
# Kinds that launch no kernel: views and eval-mode dropout (MAC 0).
_NO_KERNEL = VIEW_KINDS
_BITS = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64", "int8": "int8"}
# cuDNN's tensor-core grouped kernels need at least this many channels per group (multiples of 8).
MIN_TENSOR_CORE_GROUP_WIDTH = 8


@dataclass
class OpEstimate:
    ms: float
    bound: str  # compute | memory | overhead
    compute_ms: float
    memory_ms: float
    overhead_ms: float
    unit: str  # the peak used: "tensor-fp16", "cuda-fp32", "vector-fp32", ...
    tile_efficiency: float
    cache_bytes_saved: int
    layout_bytes: int = 0
    share: str | None = None  # the achieved-share term that binds this op (None: roofline only)
    cast_bytes: int = 0  # autocast's casts around this op (read + write)
    kernel_ms: float = 0.0  # the kernels alone, without the launch they may wait for

    def to_dict(self) -> dict:  # the per-layer JSON keeps its keys; shares and casts are in the model's estimate
        return {
            "compute_ms": self.compute_ms,
            "memory_ms": self.memory_ms,
            "overhead_ms": self.overhead_ms,
            "unit": self.unit,
            "tile_efficiency": round(self.tile_efficiency, 4),
            "cache_bytes_saved": self.cache_bytes_saved,
            "layout_bytes": self.layout_bytes,
        }


# ---- the GEMM view of an op -------------------------------------------------------------------


@dataclass(frozen=True)
class Gemm:
    """batch independent (m × k)·(k × n) products; what tiles and waves are computed from."""

    m: int
    n: int
    k: int
    batch: int = 1


def _prod(xs: Iterable[int]) -> int:
    return math.prod(int(x) for x in xs)


def gemm_of(op: dict) -> Gemm | None:
    """The GEMM an op runs (conv as implicit GEMM: m = N·out pixels, n = Cout/groups,
    k = Cin/groups·kernel, one GEMM per group), or None when it has no GEMM form."""
    kind, ins, outs = op["kind"], op.get("in_shapes") or [], op.get("out_shapes") or []
    if not outs or not outs[0]:
        return None
    out = outs[0]
    try:
        if kind == "conv":
            w = (op.get("param_shapes") or {}).get("weight") or (ins[1] if len(ins) > 1 else None)
            if w is None or len(out) < 3:
                return None
            groups = int(op.get("attrs", {}).get("groups", 1) or 1)
            spatial_dims = len(w) - 2
            if op.get("attrs", {}).get("transposed"):
                pixels = _prod(ins[0][-spatial_dims:]) * _prod(ins[0][: len(ins[0]) - spatial_dims - 1])
                return Gemm(m=pixels, n=int(w[1]), k=int(w[0]) // groups * _prod(w[2:]), batch=groups)
            pixels = _prod(out[: len(out) - spatial_dims - 1]) * _prod(out[-spatial_dims:])
            return Gemm(m=pixels, n=int(w[0]) // groups, k=int(w[1]) * _prod(w[2:]), batch=groups)
        if kind == "linear":
            k = ins[1][-1] if op.get("key") == "addmm" and len(ins) > 2 else ins[0][-1]
            return Gemm(m=_prod(out[:-1]), n=int(out[-1]), k=int(k))
        if kind == "matmul":
            if op.get("key") == "einsum" or len(out) < 2:
                return None
            a = ins[1] if op.get("key") in ("baddbmm", "addbmm") else ins[0]
            return Gemm(m=int(out[-2]), n=int(out[-1]), k=int(a[-1]), batch=_prod(out[:-2]))
        if kind == "attention" and op.get("key") != "MultiheadAttention" and len(ins) >= 3:
            # Fused (flash) attention: one tile of query rows per (batch·head), looping over keys;
            # the tile's output is the whole head dimension.
            q, k = ins[0], ins[1]
            return Gemm(m=int(q[-2]), n=int(ins[2][-1]), k=int(k[-2]), batch=_prod(q[:-2]))
    except (IndexError, TypeError, ValueError):
        return None
    return None


# ---- the refinement terms ----------------------------------------------------------------------


def tile_efficiency(g: Gemm, tile: tuple[int, int, int], sms: int) -> float:
    """Useful share of the work the SMs do for this GEMM: tile padding (m, n, k rounded up to
    the tile) times wave quantization (tiles spread over the SMs in whole waves). The library
    may swap m and n (compute the transpose); the better of the two is taken."""

    def one(m: int, n: int) -> float:
        tm, tn, tk = tile
        tiles = g.batch * math.ceil(m / tm) * math.ceil(n / tn)
        padded = g.batch * math.ceil(m / tm) * tm * math.ceil(n / tn) * tn * math.ceil(g.k / tk) * tk
        waves = math.ceil(tiles / sms)
        useful = g.batch * m * n * g.k
        return useful / padded * tiles / (waves * sms)

    if min(g.m, g.n, g.k, g.batch) <= 0:
        return 1.0
    return max(one(g.m, g.n), one(g.n, g.m))


def attention_tile(g: Gemm, tile: tuple[int, int, int]) -> tuple[int, int, int]:
    """Fused attention kernels are built per head dimension: a block of `tile[0]` query rows holds
    the whole head (n = the power of two ≥ head dim, at least 32) and walks the keys in blocks of
    `tile[1]` (the GEMM's k is the key count)."""
    head = max(32, 1 << max(0, (g.n - 1).bit_length()))
    return (tile[0], head, tile[1])


def grouped_tile(g: Gemm, tile: tuple[int, int, int]) -> tuple[int, int, int]:
    """A grouped conv's kernels are built for narrow groups: the tile's n is the power of two
    ≥ the group's output width (at least 8, at most the spec's tile), not a 128-wide tile
    padded 16× for 8-channel groups."""
    return (tile[0], min(tile[1], max(8, 1 << max(0, (g.n - 1).bit_length()))), tile[2])


def tile_for(kind: str, g: Gemm, tile: tuple[int, int, int]) -> tuple[int, int, int]:
    if kind == "attention":
        return attention_tile(g, tile)
    return grouped_tile(g, tile) if g.batch > 1 and kind == "conv" else tile


def unit_for(op: dict, dtype: str, spec: DeviceSpec) -> tuple[str, bool]:
    """(the spec's peak key this op can use, whether it is a tensor-core GEMM).

    GPU: dense convs, linears, matmuls and attention in fp16/bf16/fp8/int8 use tensor cores; in
    fp32, convs use TF32 (torch.backends.cudnn.allow_tf32 is True by default) while matmuls and
    linears stay on the CUDA cores (torch.backends.cuda.matmul.allow_tf32 is False by default).
    A depthwise conv, or a grouped one narrower than 8 channels per group, never reaches the
    tensor cores, nor do norms, reductions, pools and element-wise ops. CPU: everything runs
    on the vector units."""
    bits = _BITS.get(dtype, "fp32")
    if spec.kind == "cpu":
        return f"vector-{'fp64' if bits == 'fp64' else 'fp32'}", op["kind"] in GEMM_KINDS
    cuda = f"cuda-{bits}" if spec.peaks.get(f"cuda-{bits}", 0) > 0 else "cuda-fp32"  # no such unit: fp32
    if op["kind"] not in GEMM_KINDS:
        return cuda, False
    if op["kind"] == "conv":
        attrs = op.get("attrs", {})
        groups = int(attrs.get("groups", 1) or 1)
        if groups > 1:
            w = (op.get("param_shapes") or {}).get("weight")
            width = min(int(w[1]), int(w[0]) // groups) if w else 1  # channels per group, in and out
            if width < MIN_TENSOR_CORE_GROUP_WIDTH or width % 8:
                return cuda, False
        tensor = "tensor-tf32" if bits == "fp32" else f"tensor-{bits}"
    else:
        tensor = f"tensor-{bits}" if bits != "fp32" else None
    if tensor and spec.peaks.get(tensor, 0) > 0:
        return tensor, True
    return cuda, False


def cache_resident(op_bytes_in: int, producer_out_bytes: int | None, cache_bytes: float) -> int:
    """Bytes of this op's input still in cache: what the op run just before wrote, when it fits
    in the cache (with this op's own reads beside it, half the cache is the bound used)."""
    if producer_out_bytes is None or producer_out_bytes > cache_bytes / 2:
        return 0
    return min(op_bytes_in, producer_out_bytes)


def layout_bytes(op: dict, tensor: bool, spec: DeviceSpec, input_only: bool = False) -> int:
    """Extra DRAM bytes of the NCHW ↔ NHWC transposes around a tensor-core conv on a GPU: the
    input activation read and written once more, and the output likewise. `input_only` (the
    term "layout-kernels"): what a real trace shows instead: cuDNN transposes the input and
    the weight (nchwToNhwcKernel, kernels of their own) and its implicit-GEMM kernel writes NCHW
    itself (`..._nhwckrsc_nchw` kernels; A100 AlexNet trace, conv3-conv5)."""
    if spec.kind != "gpu" or not tensor or op["kind"] != "conv" or op.get("channels_last"):
        return 0  # a channels_last model's convs run in NHWC as they are
    ins, outs = op.get("in_shapes") or [], op.get("out_shapes") or []
    if not ins or len(ins[0]) < 4:
        return 0
    itemsize = int(op.get("itemsize", 2))
    if input_only:
        weight = (op.get("param_shapes") or {}).get("weight") or ()
        return 2 * (_prod(ins[0]) + (_prod(weight) if weight else 0)) * itemsize
    return 2 * (_prod(ins[0]) + sum(_prod(o) for o in outs)) * itemsize


def broadcasts(op: dict) -> bool:
    """An element-wise op with an operand of another size than its output (a bias, a per-channel
    scale, a gate): PyTorch runs it in the non-vectorized element-wise kernel."""
    outs = op.get("out_shapes") or []
    if not outs or not outs[0]:
        return False
    n = _prod(outs[0])
    return bool(op.get("param_shapes")) or any(_prod(i) != n for i in (op.get("in_shapes") or []) if i)


def share_names(op: dict, tensor: bool) -> tuple[str, str]:
    """(the compute share, the memory share) an op reaches on a GPU (archlint.devices.achieved)."""
    kind = op["kind"]
    compute = ("attention" if kind == "attention" else "tensor-gemm") if tensor else "cuda-core"
    if wide_depthwise(op):
        compute = "depthwise-wide"
    if kind == "conv" and int(op.get("attrs", {}).get("groups", 1) or 1) > 1:
        memory = "window"  # grouped and depthwise convs, on the tensor cores or not (H200 microbenchmarks)
    elif tensor or kind in ("linear", "matmul", "attention"):
        memory = "stream"
    elif kind in ("pool", "reduction", "conv", "upsample"):
        memory = "window"  # sliding windows and reductions; a conv off the tensor cores is depthwise/narrow
    elif kind == "norm" or broadcasts(op):
        memory = "broadcast"
    else:
        memory = "stream"
    return compute, memory


def combine(kernel_s: float, overhead_s: float, asynchronous: bool) -> float:
    """Asynchronous launch (GPU): the host's launch cost hides under a longer kernel. Synchronous
    (CPU): the framework's per-op cost adds to the kernel."""
    return max(kernel_s, overhead_s) if asynchronous else kernel_s + overhead_s


# ---- one op, a whole graph ---------------------------------------------------------------------


def estimate_op(
    op: dict,
    spec: DeviceSpec,
    dtype: str,
    resident_bytes: int = 0,
    terms: frozenset[str] | None = None,
    shares: dict[str, float] | None = None,
    amp: tuple[float, int] = (1.0, 0),
    torch_version: str | None = None,
    copy_bytes: int = 0,
) -> OpEstimate:
    """One op's estimate. `terms` (default ALL_TERMS) names the refinements on; `shares` overrides
    the achieved shares (name → share; the range is computed with their low and high ends);
    `amp` is autocast's (byte factor, cast bytes) for this op (autocast_flow); `torch_version`
    the torch whose SDPA math path is costed (default: the installed one); `copy_bytes` a copy of
    its input PyTorch makes first (strided_copy_bytes, term "strided-copy")."""
    terms = ALL_TERMS if terms is None else terms
    kind = op["kind"]
    if "sdpa-math" in terms and sdpa_math.runs_math(op):
        return math_attention(op, spec, dtype, terms, shares, amp, torch_version or sdpa_math.installed_torch())
    flops, mac = int(op.get("flops", 0)), int(op.get("mac_bytes", 0))
    unit, tensor = unit_for(op, dtype, spec)
    if kind in _NO_KERNEL or (mac == 0 and flops == 0 and op.get("known", True)):
        # A view launches nothing: free on a GPU; on a CPU the framework still dispatches it.
        overhead = 0.0 if spec.kind == "gpu" else spec.overhead_s
        return OpEstimate(overhead * 1e3, "overhead", 0.0, 0.0, overhead * 1e3, unit, 1.0, 0)  # no kernel
    efficiency = 1.0
    if tensor and spec.kind == "gpu":
        g = gemm_of(op)
        if g is not None:
            efficiency = tile_efficiency(g, tile_for(kind, g, spec.tile), spec.sms)
    achieved = "achieved-share" in terms and spec.kind == "gpu"
    if achieved and shares is None:
        shares = {n: s.value for n, s in shares_for(spec).items()}
    compute_name, memory_name = share_names(op, tensor)
    compute_share = share_of(compute_name, shares) if achieved else 1.0
    memory_share = share_of(memory_name, shares) if achieved else 1.0
    # the generic depthwise kernel accumulates in float32: its share is of the float32 CUDA-core peak
    peak = spec.peaks["cuda-fp32"] if compute_name == "depthwise-wide" and achieved else spec.peaks[unit]
    compute_s = 2 * flops / (peak * efficiency * compute_share)
    kernels = "layout-kernels" in terms
    extra = layout_bytes(op, tensor, spec, input_only=kernels)
    factor, cast = amp
    dram = max(0, int(mac * factor) - resident_bytes)
    # "layout-kernels": cuDNN's transposes are kernels of their own (nchwToNhwcKernel in the trace),
    # run before the conv: their time adds to it instead of hiding under its compute
    body = dram if kernels else dram + extra
    memory_s = body / (spec.bandwidth * memory_share)
    stream = spec.bandwidth * (share_of("stream", shares) if achieved else 1.0)
    kernel = max(compute_s, memory_s) + ((extra if kernels else 0) + cast) / stream
    if "serial-upsample" in terms and spec.kind == "gpu":
        kernel = max(kernel, serial_upsample_s(op, spec))
    if "conv-bias" in terms and spec.kind == "gpu":
        kernel += conv_bias_bytes(op) / (spec.bandwidth * (share_of("broadcast", shares) if achieved else 1.0))
    if copy_bytes and "strided-copy" in terms:  # a strided read, in TensorIterator's non-vectorized kernel
        kernel += copy_bytes / (spec.bandwidth * (share_of("broadcast", shares) if achieved else 1.0))
    memory_s = (dram + extra) / (spec.bandwidth * memory_share)  # reported: the op's bytes, transposes included
    total = combine(kernel, spec.overhead_s, spec.kind == "gpu")
    bound = "overhead" if spec.overhead_s >= kernel else ("compute" if compute_s >= memory_s else "memory")
    return OpEstimate(
        ms=total * 1e3,
        bound=bound,
        compute_ms=compute_s * 1e3,
        memory_ms=memory_s * 1e3,
        overhead_ms=spec.overhead_s * 1e3,
        unit=unit,
        tile_efficiency=efficiency,
        cache_bytes_saved=min(mac, resident_bytes),
        layout_bytes=extra,
        share=(compute_name if compute_s >= memory_s else memory_name) if achieved else None,
        cast_bytes=cast,
        kernel_ms=kernel * 1e3,
    )


def math_attention(
    op: dict,
    spec: DeviceSpec,
    dtype: str,
    terms: frozenset[str],
    shares: dict[str, float] | None,
    amp: tuple[float, int],
    torch_version: str,
) -> OpEstimate:
    """An SDPA call no fused kernel takes (sdpa_math): its math path's kernels one by one, each
    a roofline of its own with its launch, the matmuls on the unit their dtype reaches, every other
    pass over the score matrix a DRAM stream."""
    achieved = "achieved-share" in terms and spec.kind == "gpu"
    if achieved and shares is None:
        shares = {n: s.value for n, s in shares_for(spec).items()}
    stream = spec.bandwidth * (share_of("stream", shares) if achieved else 1.0)
    itemsize = int(op.get("itemsize", 2 if _BITS.get(dtype, "fp32") in ("fp16", "bf16") else 4))
    total = compute_total = memory_total = kernel_total = 0.0
    unit = ""
    for k in sdpa_math.kernels(op, itemsize, torch_version):
        compute_s = 0.0
        if k.macs:
            unit, tensor = unit_for({"kind": "matmul", "attrs": {}}, "float32" if k.float32 else dtype, spec)
            compute_name = "tensor-gemm" if tensor else "cuda-core"
            compute_s = 2 * k.macs / (spec.peaks[unit] * (share_of(compute_name, shares) if achieved else 1.0))
        memory_s = k.bytes / stream
        compute_total, memory_total = compute_total + compute_s, memory_total + memory_s
        kernel_total += max(compute_s, memory_s)
        total += combine(max(compute_s, memory_s), spec.overhead_s, spec.kind == "gpu")
    cast = amp[1]
    total += cast / stream
    kernel_total += cast / stream
    bound = "compute" if compute_total >= memory_total else "memory"
    return OpEstimate(
        ms=total * 1e3,
        bound=bound,
        compute_ms=compute_total * 1e3,
        memory_ms=memory_total * 1e3,
        overhead_ms=spec.overhead_s * 1e3,
        unit=unit,
        tile_efficiency=1.0,
        cache_bytes_saved=0,
        share=("stream" if bound == "memory" else "cuda-core") if achieved else None,
        cast_bytes=cast,
        kernel_ms=kernel_total * 1e3,
    )


def share_of(name: str, shares: dict[str, float] | None, spec: DeviceSpec | None = None) -> float:
    """The share `name` of the roof: from `shares`, else the spec's own measured one, else the built-in."""
    if shares and name in shares:
        return shares[name]
    return shares_for(spec)[name].value


def _source_kernel(graph: nx.DiGraph, name: str) -> str:
    """The op that wrote a tensor, looking through views (which write nothing)."""
    seen = 0
    while graph.nodes[name]["kind"] in _NO_KERNEL and seen < 64:
        preds = list(graph.predecessors(name))
        if len(preds) != 1:
            break
        name, seen = preds[0], seen + 1
    return name


ROOFLINE_ONLY: frozenset[str] = frozenset()  # the estimate before the measured terms (benchmarks compare)
ALL_TERMS = frozenset(
    {"achieved-share", "layout-kernels", "sdpa-math", "serial-upsample", "conv-bias", "strided-copy", "host-pipeline"}
)

# torch.autocast on CUDA runs these in float32 whatever their inputs ("CUDA Ops that can autocast to
# float32", PyTorch's Automatic Mixed Precision reference); keys as the capture names them.
AUTOCAST_FP32 = frozenset(
    "layer_norm LayerNorm group_norm GroupNorm softmax Softmax log_softmax LogSoftmax softmin Softmin "
    "sum prod cumsum cumprod exp expm1 log log1p log2 log10 pow rsqrt reciprocal softplus Softplus "
    "norm normalize cosine_similarity cdist dist acos asin cosh sinh tan erfinv".split()
)


def autocast_flow(graph: nx.DiGraph) -> dict[str, tuple[float, int]]:
    """The graph (captured in 16 bits) run as a float32 model under torch.autocast: per op, the
    factor on its memory bytes and the bytes of autocast's casts. Inputs and parameters are
    float32; GEMM-like ops run in 16 bits after casting their float32 inputs and their weights
    (every pass: read 4 + write 2 bytes an element); AUTOCAST_FP32 ops cast 16-bit inputs up
    (read 2 + write 4) and write float32; other ops take the widest of their inputs, and a
    float32 parameter (a position embedding, a layer scale) widens an element-wise op to float32."""
    width: dict[str, int] = {}
    out: dict[str, tuple[float, int]] = {}
    for name in nx.topological_sort(graph):
        op = graph.nodes[name]
        kind = op["kind"]
        if kind == "input":
            width[name] = 4
            continue
        widest = max((width.get(p, 2) for p in graph.predecessors(name)), default=2)
        ins = sum(_prod(s) for s in op.get("in_shapes") or [] if s)
        if kind in GEMM_KINDS or kind == "recurrent":
            weights = sum(_prod(s) for s in (op.get("param_shapes") or {}).values() if s)
            out[name], width[name] = (1.0, 6 * ((ins if widest == 4 else 0) + weights)), 2
            continue
        if op.get("key") in AUTOCAST_FP32:
            wide = 4
            cast = 6 * ins if widest == 2 else 0
        else:
            wide = 4 if kind == "elementwise" and op.get("param_shapes") else widest
            cast = 0
        width[name] = wide
        mac, in_b, out_b = int(op.get("mac_bytes", 0)), int(op.get("in_bytes", 0)), int(op.get("out_bytes", 0))
        if mac > 0:
            rest = max(0, mac - in_b - out_b)
            out[name] = ((in_b * max(widest, wide if cast else widest) / 2 + out_b * wide / 2 + rest) / mac, cast)
        elif cast:
            out[name] = (1.0, cast)
    return out


def estimate_graph(
    graph: nx.DiGraph, spec: DeviceSpec, terms: frozenset[str] | None = None, autocast: bool = False
) -> dict:
    """Set `estimated_ms`, `estimate_bound` and `estimate_terms` on every op; return the model's
    estimate (the JSON `models[].estimate`). `terms`: the refinements on (default ALL_TERMS;
    ROOFLINE_ONLY is the estimate before them). `autocast`: the 16-bit graph runs as a float32
    model under torch.autocast (autocast_flow) rather than converted to 16 bits."""
    terms = ALL_TERMS if terms is None else terms
    dtype = graph.graph.get("dtype", "float32")
    torch_version = graph.graph.get("torch_version") or sdpa_math.installed_torch()
    flow = autocast_flow(graph) if autocast else {}
    measured = "achieved-share" in terms and spec.kind == "gpu"
    known = shares_for(spec)
    low = {n: s.low for n, s in known.items()}
    high = {n: s.high for n, s in known.items()}
    total_ms, slow_ms, fast_ms, last_kernel, unknown = 0.0, 0.0, 0.0, None, 0
    bounds = {"compute": 0.0, "memory": 0.0, "overhead": 0.0}
    spread: dict[str, float] = {}
    pipeline = "host-pipeline" in terms and spec.kind == "gpu" and spec.eager_op_s is not None
    host_s = gpu_s = 0.0  # when the host has issued the op, when the GPU has run it
    nhwc = graph.graph.get("memory_format") == "channels_last"
    for name, op in opgraph.ops(graph):
        # the op as it runs on NHWC memory: a channels_last model's convs (the graph's memory_format),
        # and an upsample whose input a view reordered (CoaT's transposed tokens). An activation's
        # layout is its producer's: in a channels_last model, EfficientFormerV2's upsamples read
        # tokens reshaped to NCHW and still run the serial NCHW kernel (timm's channels_last table)
        if (nhwc and op["kind"] == "conv") or (op["kind"] == "upsample" and permuted_input(graph, name)):
            op = {**op, "channels_last": True}
        resident = 0
        if last_kernel is not None and op["kind"] not in _NO_KERNEL:
            readers = {_source_kernel(graph, p) for p in graph.predecessors(name)}
            if last_kernel in readers:
                resident = cache_resident(
                    int(op.get("in_bytes", 0)), int(graph.nodes[last_kernel].get("out_bytes", 0)), spec.cache_bytes
                )
        amp = flow.get(name, (1.0, 0))
        copy = strided_copy_bytes(graph, name) if "strided-copy" in terms else 0
        est = estimate_op(op, spec, dtype, resident, terms, amp=amp, torch_version=torch_version, copy_bytes=copy)
        if measured:  # the range: every share at its lowest, then at its highest measurement
            slow = estimate_op(op, spec, dtype, resident, terms, low, amp, torch_version, copy).ms
            fast = estimate_op(op, spec, dtype, resident, terms, high, amp, torch_version, copy).ms
            slow_ms, fast_ms = slow_ms + slow, fast_ms + fast
            if est.share is not None and slow > fast:
                spread[est.share] = spread.get(est.share, 0.0) + slow - fast
        if not op.get("known", True):
            unknown += 1
        node = graph.nodes[name]  # `op` may be the conv as it runs on NHWC (a copy)
        node["estimated_ms"], node["estimate_bound"], node["estimate_terms"] = est.ms, est.bound, est.to_dict()
        total_ms += est.ms
        if pipeline and est.kernel_ms > 0:
            host_s += spec.eager_op_s
            gpu_s = max(gpu_s, host_s) + est.kernel_ms / 1e3
        bounds[est.bound] += est.ms
        if op["kind"] not in _NO_KERNEL and int(op.get("mac_bytes", 0)) > 0:
            last_kernel = name
    host_wait_ms = max(0.0, gpu_s * 1e3 - total_ms) if pipeline else 0.0
    if host_wait_ms:  # the GPU waits for the host: the pipeline's end, not the ops' sum
        total_ms, slow_ms, fast_ms = (
            total_ms + host_wait_ms,
            max(slow_ms, total_ms + host_wait_ms),
            max(fast_ms, host_s * 1e3),
        )
        bounds["overhead"] += host_wait_ms
    out = {
        "device_spec": spec.name,
        "latency_ms": total_ms,
        "method": (
            f"static estimate for {spec.name} ({spec.description}) from its spec sheet: per op "
            "max(2·FLOPs / peak of the unit it can use × tile/wave efficiency, DRAM bytes / bandwidth), "
            + (
                "each roof times the share real kernels of its family reach (measured, see assumptions); "
                if measured
                else ""
            )
            + (
                "max with the launch overhead (asynchronous launch)"
                if spec.kind == "gpu"
                else "plus the per-op framework overhead"
            )
            + "; end to end = sum of ops (eager execution, one kernel per op)"
        ),
        "assumptions": assumptions(spec, dtype, graph, unknown, bounds, total_ms, terms, autocast),
        "roofs": roofs(spec, dtype),
    }
    if measured:
        out["range_ms"] = [fast_ms, slow_ms]
        widest = sorted(spread.items(), key=lambda kv: -kv[1])[:3]
        out["assumptions"].append(
            f"range {fast_ms:.3f}–{slow_ms:.3f} ms (every measured share at its highest, then its lowest); widest: "
            + ", ".join(f"{n} {ms / (slow_ms - fast_ms):.0%}" for n, ms in widest if slow_ms > fast_ms)
        )
        out["range_terms"] = [
            {
                "term": n,
                "ms": ms,
                "share": known[n].value,
                "low": known[n].low,
                "high": known[n].high,
                "source": known[n].source,
            }
            for n, ms in sorted(spread.items(), key=lambda kv: -kv[1])
        ]
    if pipeline:
        out["host_wait_ms"] = host_wait_ms
        out["assumptions"].append(
            f"the host issues each op in {spec.eager_op_s * 1e6:.1f} µs (eager-op-us: "
            f"{spec.sources.get('eager-op-us', '')}); the GPU waits for it {host_wait_ms:.3f} ms in all"
        )
    if autocast:
        out["precision"] = f"torch.autocast: {dtype} GEMMs, float32 inputs, weights and autocast's float32 ops"
    return out


def roofs(spec: DeviceSpec, dtype: str) -> dict:
    """The spec's roofs for this dtype: the best peak a GEMM can reach, and DRAM bandwidth."""
    unit, _ = unit_for({"kind": "linear", "attrs": {}}, dtype, spec)
    if spec.kind == "gpu" and dtype == "float32" and spec.peaks.get("tensor-tf32", 0) > 0:
        unit = "tensor-tf32"  # fp32 convs reach TF32 (cuDNN's default)
    return {"unit": unit, "peak_flops_per_s": spec.peaks[unit], "bandwidth_bytes_per_s": spec.bandwidth}


def assumptions(
    spec: DeviceSpec,
    dtype: str,
    graph: nx.DiGraph,
    unknown: int,
    bounds: dict,
    total_ms: float,
    terms: frozenset[str] = ALL_TERMS,
    autocast: bool = False,
) -> list[str]:
    out = [
        "an estimate, not a measurement: datasheet peaks (dense, no sparsity) and peak DRAM bandwidth; "
        "real kernels reach less of both, so real time is usually higher",
        "eager PyTorch: one kernel per op, no fusion, no torch.compile, no CUDA graphs; end to end = sum of ops",
        f"dtype {dtype} for every op (as captured); FLOPs are multiply-adds, the roofline counts 2 per multiply-add",
    ]
    if spec.kind == "gpu":
        out += [
            f"GEMM-like ops on tensor cores in {tile_note(spec)}; fp32 convs use TF32 (cuDNN default), fp32 matmuls "
            "do not (torch default); depthwise/narrow grouped convs, norms, reductions and element-wise ops use CUDA cores",
            "activations in NCHW (torch's default memory format): a tensor-core conv pays cuDNN's NCHW→NHWC transposes of "
            + (
                "its input and weight, kernels of their own before it (its kernel writes NCHW)"
                if "layout-kernels" in terms
                else "its input and output"
            ),
            f"an op's input written by the op just before it is read from L2 when it fits in half of {spec.cache_bytes / 2**20:.0f} MiB",
            f"launch overhead {spec.overhead_s * 1e6:.1f} µs per kernel, hidden under longer kernels (asynchronous launch); views launch nothing",
        ]
    else:
        out += [
            f"all ops on {spec.cores} cores' vector units (peak fp32 {spec.peaks['vector-fp32'] / 1e9:,.0f} GFLOP/s)",
            f"an op's input written by the op just before it is read from cache when it fits in half of {spec.cache_bytes / 2**20:.0f} MiB",
            f"{spec.overhead_s * 1e6:.1f} µs of framework overhead per op (views included), added to each op",
        ]
    if spec.kind == "gpu" and "achieved-share" in terms:
        out.append(
            "kernels reach a measured share of each roof: "
            + ", ".join(f"{s.name} {s.value:.0%} ({s.low:.0%}-{s.high:.0%})" for s in shares_for(spec).values())
            + (
                f"; {', '.join(spec.achieved)} measured on this GPU ({spec.sources.get('achieved', '')}); the others"
                if spec.achieved
                else ";"
            )
            + " measured on an A100 (kernel times of a real trace) and FlashAttention-2's published figures, "
            "taken to hold on this GPU; the range is every share at its lowest and at its highest measurement"
        )
    if autocast:
        out.append(
            "torch.autocast: float32 inputs and parameters; GEMMs cast their float32 inputs and weights to 16 bits each pass; "
            "norms, softmax and the other float32-listed ops run in float32, and float32 parameters widen element-wise ops"
        )
    if unknown:
        out.append(f"{unknown} ops without a cost formula are counted at the launch overhead only")
    if total_ms > 0:
        shares = ", ".join(f"{k} {v / total_ms:.0%}" for k, v in bounds.items() if v > 0)
        out.append(f"time by bound: {shares}")
    return out


def tile_note(spec: DeviceSpec) -> str:
    tm, tn, tk = spec.tile
    return f"{tm}×{tn}×{tk} tiles over {spec.sms} SMs (padding and partial waves counted)"
