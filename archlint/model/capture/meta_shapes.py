"""Output tensors of common ops on meta tensors worked out from their shapes, where the meta
kernels are Python decompositions costing 18 µs to 2.5 ms a call (empty_like, cat, adaptive
average pooling, nn.MultiheadAttention). Each rule gives the tensor the kernel gives (shape,
dtype and strides: later ops' layouts and views depend on them) or None, when the call is not
one it covers (an odd layout, a mask, a shape the kernel would reject with its own error): the
kernel runs then. tests/model/capture/test_capture_speed.py checks each against the kernels."""

from __future__ import annotations

from typing import Any, TypeGuard

import torch
from torch import nn


def contiguous_strides(shape: torch.Size) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def standard(x: torch.Tensor) -> bool:
    """Laid out as `torch.empty(x.shape)` lays it out (contiguous, and so in size-1 dims too)."""
    return x.is_contiguous() and (all(s > 1 for s in x.shape) or x.stride() == contiguous_strides(x.shape))


def like(x: torch.Tensor) -> torch.Tensor:
    """torch.empty_like(x) on meta: its Python decomposition costs ~18 µs a call (it works out a
    memory-format permutation); a tensor in the standard layout gets the same one from torch.empty."""
    if standard(x):
        return torch.empty(x.shape, dtype=x.dtype, device="meta")
    return torch.empty_like(x)


def cat(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | None:
    """torch.cat of meta tensors of one dtype, all in the standard layout and of one rank, whose
    shapes differ in the joined dim only: a standard-layout output (the decomposition costs ~85 µs)."""
    if not args or len(args) > 2 or set(kwargs) - {"dim"} or not isinstance(args[0], (list, tuple)):
        return None
    tensors, dim = args[0], args[1] if len(args) == 2 else kwargs.get("dim", 0)
    if not tensors or not isinstance(dim, int) or isinstance(dim, bool):
        return None
    first = tensors[0]
    if not isinstance(first, torch.Tensor) or first.dim() == 0 or not -first.dim() <= dim < first.dim():
        return None
    dim %= first.dim()
    shape = list(first.shape)
    shape[dim] = 0
    for t in tensors:
        if not (
            isinstance(t, torch.Tensor)
            and t.device.type == "meta"
            and t.dtype == first.dtype
            and t.dim() == first.dim()
            and all(a == b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != dim)
            and standard(t)
        ):
            return None
        shape[dim] += t.shape[dim]
    return torch.empty(shape, dtype=first.dtype, device="meta")


def adaptive_avg_pool(x: Any, size: Any, dims: int, none_is_input: bool) -> torch.Tensor | None:
    """adaptive_avg_pool2d/3d of a standard-layout floating meta tensor, batched or not: the output
    sizes, in the standard layout (the decomposition costs 0.2-0.6 ms a call; an SE block has one).
    `none_is_input`: a None output size keeps the input's (nn.AdaptiveAvgPool2d, F.adaptive_avg_pool2d)."""
    if not (
        isinstance(x, torch.Tensor)
        and x.device.type == "meta"
        and x.is_floating_point()
        and x.dim() in (dims + 1, dims + 2)
        and all(s > 0 for s in x.shape)
        and standard(x)
    ):
        return None
    sizes = (size,) * dims if isinstance(size, int) else size
    if not isinstance(sizes, (tuple, list)) or len(sizes) != dims:
        return None
    spatial = x.shape[-dims:]
    out = []
    for wanted, given in zip(sizes, spatial):
        if wanted is None and none_is_input:
            wanted = given
        if not isinstance(wanted, int) or isinstance(wanted, bool) or wanted < 1:
            return None
        out.append(wanted)
    return torch.empty((*x.shape[:-dims], *out), dtype=x.dtype, device="meta")


CONVS: dict[type[nn.Module], int] = {nn.Conv1d: 1, nn.Conv2d: 2, nn.Conv3d: 3}


def conv(module: nn.Module, args: tuple[Any, ...]) -> torch.Tensor | None:
    """nn.Conv1d/2d/3d (zero padding given as numbers) on a batched meta tensor: the output sizes,
    contiguous, in the input's dtype, as torch's meta convolution makes it (its Python shape
    function and the module's call on meta weights: ~25 µs a call, 120 convolutions in a DenseNet).
    A shape the kernel rejects (channels, a window larger than the padded input) gets None."""
    dims = CONVS.get(type(module))
    if (
        dims is None
        or not isinstance(module, nn.modules.conv._ConvNd)
        or len(args) != 1
        or module.padding_mode != "zeros"
        or isinstance(module.padding, str)
    ):
        return None
    x = args[0]
    if not (isinstance(x, torch.Tensor) and x.device.type == "meta" and x.dim() == dims + 2):
        return None
    weight, bias = module.weight, module.bias
    if (
        not isinstance(weight, torch.Tensor)
        or weight.dim() != dims + 2
        or x.shape[1] != weight.shape[1] * module.groups
        or weight.dtype != x.dtype
        or (bias is not None and bias.dtype != x.dtype)
    ):
        return None  # the kernel raises its own error
    out = [x.shape[0], weight.shape[0]]
    for size, k, s, p, d in zip(x.shape[2:], weight.shape[2:], module.stride, module.padding, module.dilation):
        n = (size + 2 * p - d * (k - 1) - 1) // s + 1
        if n < 1:
            return None
        out.append(n)
    if min(out) < 1:
        return None
    return torch.empty(out, dtype=x.dtype, device="meta")


POOL_DIMS = {"adaptive_avg_pool2d": 2, "adaptive_avg_pool3d": 3, "AdaptiveAvgPool2d": 2, "AdaptiveAvgPool3d": 3}


_MHA_ARGS = (
    "query",
    "key",
    "value",
    "key_padding_mask",
    "need_weights",
    "attn_mask",
    "average_attn_weights",
    "is_causal",
)
_MHA_DEFAULTS = {"key_padding_mask": None, "need_weights": True, "attn_mask": None, "average_attn_weights": True}


def _batched_meta(t: Any) -> TypeGuard[torch.Tensor]:
    return isinstance(t, torch.Tensor) and t.device.type == "meta" and t.dim() == 3


def attention(
    module: nn.MultiheadAttention, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """nn.MultiheadAttention's (output, weights) without masks or extra key/value biases: its meta
    forward is ~40 kernels (2.5 ms a call, a third of a ViT-B's analysis). The output is what
    F.multi_head_attention_forward leaves, a standard (L, N, E) tensor (batch_first: its transpose,
    as the module returns it); the weights (N, L, S), or (N, heads, L, S) not averaged, or None."""
    if len(args) > len(_MHA_ARGS) or set(kwargs) - set(_MHA_ARGS[len(args) :]):
        return None
    bound = {**_MHA_DEFAULTS, "is_causal": False, **dict(zip(_MHA_ARGS, args)), **kwargs}
    q, k, v = bound.get("query"), bound.get("key"), bound.get("value")
    if (
        bound["key_padding_mask"] is not None
        or bound["attn_mask"] is not None
        or bound["is_causal"] is not False
        or not isinstance(bound["need_weights"], bool)
        or not isinstance(bound["average_attn_weights"], bool)
        or module.bias_k is not None
        or module.add_zero_attn
    ):
        return None
    if not (_batched_meta(q) and _batched_meta(k) and _batched_meta(v)):
        return None
    tensors, weights = (q, k, v), list(module.parameters())
    dtype = q.dtype
    if not dtype.is_floating_point or any(t.dtype != dtype for t in (*tensors, *weights)):
        return None
    if module.batch_first:
        (n, tgt, e), (kn, src, kd), (vn, vs, vd) = q.shape, k.shape, v.shape
    else:
        (tgt, n, e), (src, kn, kd), (vs, vn, vd) = q.shape, k.shape, v.shape
    if (
        e != module.embed_dim
        or kd != module.kdim
        or vd != module.vdim
        or n != kn
        or n != vn
        or src != vs
        or min(n, tgt, src) < 1
        or module.embed_dim % module.num_heads
    ):
        return None
    output = torch.empty((tgt, n, e), dtype=dtype, device="meta")
    if module.batch_first:
        output = output.transpose(1, 0)
    if not bound["need_weights"]:
        return output, None
    shape = (n, tgt, src) if bound["average_attn_weights"] else (n, module.num_heads, tgt, src)
    return output, torch.empty(shape, dtype=dtype, device="meta")
