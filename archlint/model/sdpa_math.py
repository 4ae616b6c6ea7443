"""Attention the fused kernels cannot run: PyTorch's math path, kernel by kernel.

`F.scaled_dot_product_attention` runs a fused kernel (flash, memory-efficient or cuDNN attention
on a GPU, flash attention on a CPU) only when query, key and value are 4-D (batch, heads, length,
head dim): torch's dispatch checks this before any other condition ("All fused kernels requires
query, key and value to be 4 dimensional", aten/src/ATen/native/transformers/sdp_utils_cpp.h).
Other ranks — the 5-D windowed attention of NesT, Hiera and Twins — run
`_scaled_dot_product_attention_math`: QKᵀ, softmax and AV as kernels of their own over a score
matrix held in memory, and from torch 2.5 on:

- 16-bit inputs are computed in float32 (torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp
  is off by default): query, key and value are cast up, both matmuls run in float32 (on a GPU's
  CUDA cores: float32 matmuls do not use TF32 by default), and the weights are cast back down;
- softmax is `_safe_softmax` (softmax, isneginf, all, where: fully masked rows give 0, not NaN).

Before 2.5 the path stayed in the inputs' dtype with a plain softmax. The kernel lists below are
what torch.profiler shows for a 5-D call (tests/model/estimating/test_sdpa_math.py checks them against the
installed torch's profiler).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Kernel:
    name: str  # the aten op, as the profiler names it
    macs: int  # multiply-adds (matmuls only)
    bytes: int  # DRAM bytes read + written
    float32: bool  # computes in float32 (a matmul then runs on the CUDA cores)


def runs_math(op: dict) -> bool:
    """An SDPA call that no fused kernel takes: query, key or value not 4-D.
    nn.MultiheadAttention reshapes to 4-D itself before its SDPA call, so it is never one."""
    if op.get("kind") != "attention" or op.get("key") == "MultiheadAttention":
        return False
    ins = op.get("in_shapes") or []
    return len(ins) >= 3 and any(len(s or ()) != 4 for s in ins[:3])


def upcasts(torch_version: str) -> bool:
    """Whether this torch's math path computes 16-bit attention in float32 (2.5 and later)."""
    parts = [int(p) for p in torch_version.split("+")[0].split(".")[:2] if p.isdigit()]
    return len(parts) == 2 and tuple(parts) >= (2, 5)


@lru_cache(maxsize=1)
def installed_torch() -> str:
    """The installed torch's version, read from its metadata (no import)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return "0.0"


def kernels(op: dict, itemsize: int, torch_version: str) -> list[Kernel]:
    """The math path's kernels for this op: query (…, L, E), key (…, S, E), value (…, S, Ev),
    at `itemsize` bytes an element (the dtype the op runs in)."""
    q, k, v = (tuple(int(d) for d in s) for s in (op["in_shapes"][:3]))
    heads = math.prod(q[:-2])  # every leading dim: batch, heads and windows alike
    lq, s, e, ev = q[-2], k[-2], q[-1], v[-1]
    scores = heads * lq * s
    nq, nk, nv, nout = math.prod(q), math.prod(k), math.prod(v), heads * lq * ev
    wide = 4 if itemsize < 4 and upcasts(torch_version) else itemsize
    out: list[Kernel] = []
    if wide != itemsize:  # query, key and value cast up
        out += [Kernel("aten::_to_copy", 0, n * (itemsize + wide), False) for n in (nq, nk, nv)]
    out += [
        Kernel("aten::mul", 0, 2 * nq * wide, False),  # query × √scale
        Kernel("aten::mul", 0, 2 * nk * wide, False),  # keyᵀ × √scale
        Kernel("aten::bmm", scores * e, (nq + nk + scores) * wide, wide == 4),
    ]
    if upcasts(torch_version):  # _safe_softmax
        out += [
            Kernel("aten::_softmax", 0, 2 * scores * wide, False),
            Kernel("aten::isneginf", 0, scores * (wide + 1), False),
            Kernel("aten::all", 0, scores, False),
            Kernel("aten::where", 0, 2 * scores * wide, False),
        ]
    else:
        out.append(Kernel("aten::_softmax", 0, 2 * scores * wide, False))
    if wide != itemsize:  # the attention weights, returned beside the output, cast back down
        out.append(Kernel("aten::_to_copy", 0, scores * (wide + itemsize), False))
    out.append(Kernel("aten::bmm", scores * ev, (scores + nv + nout) * wide, wide == 4))
    if wide != itemsize:  # the output cast back down
        out.append(Kernel("aten::_to_copy", 0, nout * (wide + itemsize), False))
    return out
