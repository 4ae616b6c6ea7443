"""Meta kernels answered from a cache: the training step's memory model runs thousands of ops on
the meta device, and many of their meta kernels are Python decompositions (batch norm forward and
backward, type-promoting division, lerp, addcmul) that cost a millisecond or more each.

On the meta device an op's result is a function of its arguments' metadata alone (shape, stride,
dtype, storage offset, which arguments share a storage) and its other arguments' values: there is
no data. So once an op has run for one such key its result can be rebuilt without running it:

  functional ops (no argument written, no output aliasing an input): fresh outputs with the
      recorded shape, stride and dtype (torch.empty_strided on meta: the same storage size);
  in-place ops that change no metadata (add_, lerp_, hardswish_, copy_; not transpose_ or a
      resize): `self`, returned as the kernel returns it (the first run has checked the operands).

Element-wise ops need not run even once per shape: one whose operands all have `self`'s shape
and dtype in place (an optimizer's update) can only return `self`; a functional one on operands
of one contiguous shape gives outputs of that shape whose dtypes depend on the operands' dtypes
alone, learnt from its kernel run on 1-D stand-ins of the operands (the Python kernels' checks
cost a dimension each, and each op's first run on a model is one; for the common ops on one
floating dtype, from their CPU kernel on real stand-ins, a tenth of that), and once learnt it is answered
before a cache key is built (the key cost more than the answer: the optimizer's sqrt and div,
twice a parameter). Operands that broadcast, or a contiguous tensor's `expand` (mean's
backward), are learnt by their pattern from a first run as called.
A number's value never shapes an element-wise result, so it is keyed by kind (Adam's bias
correction changes every step).

Some ops' Python meta kernels are replaced by shape functions of our own where their results are
plain, checked against the stock kernels in the tests, and answered before any key is built
(each layer's op has shapes of its own, so the cache would answer few of them): batch norm
(training, contiguous float32), convolution (forward not transposed with valid arguments,
backward with no channels-last operand), mean and sum (over dimensions or all of them), mm and
addmm (a linear layer), layer norm and its backward, zeros_like, ones_like and empty_like.

Anything else (views, in-place view ops, out= ops, ops touching a real tensor other than a 0-dim
scalar, outputs that are not plain fresh tensors) runs its kernel every time. The step repeats one
block's ops per layer and one parameter's ops per optimizer update, so most ops are answered.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn
from torch._prims_common import suggest_memory_format as _suggest_memory_format

from archlint.model.train import prim_layout

aten = torch.ops.aten
MAX_ENTRIES = 100_000
_NOT_CACHEABLE = object()
_cache: dict[tuple, Any] = {}
# Ops are kept by id: an op (OpOverload) lives as long as the process, and its __hash__ is Python
# code, too slow for several lookups an op.
_kinds: dict[int, str] = {}
_POINTWISE: set[int] = set()
# element-wise ops that torch does not tag `pointwise` (MobileNetV3's activations)
_UNTAGGED_POINTWISE = {"aten::hardswish", "aten::hardswish_", "aten::hardswish_backward", "aten::hardsigmoid_backward"}
# an element-wise op's output dtypes, by its operands' dtypes and numbers' kinds: shape-free
_learned: dict[tuple, Any] = {}
# ops answered from the cache and ops whose kernel ran (for tests and benchmarks)
stats = {"hits": 0, "runs": 0}


def _tag(name: str):
    """A torch.Tag, or None where this torch has no such tag (Tag.inplace is newer than torch 2.11)."""
    return getattr(torch.Tag, name, None)


_INPLACE, _INPLACE_VIEW, _POINTWISE_TAG = _tag("inplace"), _tag("inplace_view"), _tag("pointwise")
_DYNAMIC, _DATA_DEPENDENT = _tag("dynamic_output_shape"), _tag("data_dependent_output")


def _kind(func) -> str:
    """'functional', 'inplace' (writes only `self`, returns it, changes no metadata: not a view
    op like transpose_ nor a resize), 'inplace-pointwise' (the same, element by element),
    'inplace-foreach' (a foreach op writing only its `self` list, returning nothing) or ''
    (always run)."""
    kind = _kinds.get(id(func))
    if kind is None:
        schema, tags = func._schema, set(getattr(func, "tags", ()))
        written = [a for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
        # without Tag.inplace, an in-place op is known by its name (aten::add_), as torch names them
        inplace = _INPLACE in tags if _INPLACE is not None else schema.name.endswith("_")
        if not any("Tensor" in str(a.type) for a in schema.arguments):
            kind = ""  # a factory (empty, full, arange): no meta tensor to key it by, so run it as called
        elif (
            not schema.is_mutable
            and all(r.alias_info is None for r in schema.returns)
            and _DYNAMIC not in tags
            and _DATA_DEPENDENT not in tags
        ):
            kind = "functional"
        elif (
            schema.name.startswith("aten::_foreach_")
            and schema.name.endswith("_")
            and not schema.returns
            and len(written) == 1
            and written[0].name == "self"
        ):
            kind = "inplace-foreach"  # torch._foreach_lerp_(exp_avgs, grads, 0.1): returns nothing
        elif (
            inplace
            and _INPLACE_VIEW not in tags
            and "resize" not in schema.name
            and len(written) == 1
            and written[0].name == "self"
            and len(schema.returns) == 1
            and schema.returns[0].alias_info is not None
        ):
            kind = "inplace-pointwise" if _POINTWISE_TAG in tags or schema.name in _UNTAGGED_POINTWISE else "inplace"
        else:
            kind = ""
        _kinds[id(func)] = kind
        if _POINTWISE_TAG in tags or schema.name in _UNTAGGED_POINTWISE:
            _POINTWISE.add(id(func))
    return kind


_SCALARS = (bool, int, float, str, torch.dtype, torch.device, torch.memory_format, torch.layout, type(None))


def _key(func, args: tuple, kwargs: dict) -> tuple | None:
    """The op's arguments as metadata, or None if one is a real tensor other than a 0-dim one (a
    scalar: its value never shapes a meta result) or not a plain value, or none is on meta.
    (A walk of its own: torch's pytree flatten cost more than the kernels it saves.)"""
    storages: dict[int, int] = {}
    parts: list[Any] = [id(func)]
    meta: list[bool] = []
    # an element-wise op's result depends on a number's kind (bool, int, float), never its value:
    # Adam divides by a bias correction that changes every step
    by_kind = id(func) in _POINTWISE
    for value in args:
        if not _add(value, parts, storages, meta, by_kind):
            return None
    for name, value in kwargs.items():
        parts.append(name)
        if not _add(value, parts, storages, meta, by_kind):
            return None
    return tuple(parts) if meta else None


def _add(value, parts: list, storages: dict[int, int], meta: list[bool], by_kind: bool) -> bool:
    """One argument of `_key` into `parts`; False where it cannot be keyed. (A function of its own,
    not a closure in `_key`: a closure that calls itself is a reference cycle, and one an op, with
    the cyclic collector off through the step, left ~1,700 cycles on efficientnet_b0 for a
    collection of 16-28 ms after it.)"""
    if isinstance(value, torch.Tensor):
        if type(value) is not torch.Tensor and type(value) is not nn.Parameter:
            return False
        if not value.is_meta:
            if value.dim() != 0:
                return False
            parts.append((value.device, value.dtype))
            return True
        meta.append(True)
        # which earlier argument (if any) shares this one's storage: aliasing can change a result
        shared = storages.setdefault(id(value.untyped_storage()), len(storages))
        parts.append((value.shape, value.stride(), value.dtype, value.storage_offset(), shared))
        return True
    if isinstance(value, (list, tuple)):
        parts.append((type(value), len(value)))
        for v in value:
            if not _add(v, parts, storages, meta, by_kind):
                return False
        return True
    if isinstance(value, _SCALARS):
        parts.append((type(value),) if by_kind and isinstance(value, (bool, int, float)) else (type(value), value))
        return True
    return False


def tensors_of(value) -> list[torch.Tensor]:
    """The tensors of an op's result or arguments: a tensor, or lists and tuples of them."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_of(v)]
    return []


def _record(out, args: tuple, kwargs: dict) -> Any:
    """How to rebuild `out` (a fresh meta tensor, or a tuple or list of them and None), or
    _NOT_CACHEABLE: an output that shares a storage with an input (aten._unsafe_view's schema says
    fresh, its kernel returns a view) or with another output, or is not a plain tensor."""
    seen = {id(t.untyped_storage()) for t in tensors_of((args, list(kwargs.values())))}
    leaves = [out] if isinstance(out, torch.Tensor) else list(out) if isinstance(out, (tuple, list)) else None
    if leaves is None:
        return _NOT_CACHEABLE
    shapes = []
    for leaf in leaves:
        if leaf is None:
            shapes.append(None)
            continue
        if type(leaf) is not torch.Tensor or not leaf.is_meta or leaf.storage_offset() != 0:
            return _NOT_CACHEABLE
        storage = leaf.untyped_storage()
        if id(storage) in seen or storage.nbytes() != _strided_nbytes(leaf.shape, leaf.stride(), leaf.element_size()):
            return _NOT_CACHEABLE
        seen.add(id(storage))
        shapes.append((tuple(leaf.shape), leaf.stride(), leaf.dtype))
    return (None if isinstance(out, torch.Tensor) else type(out)), shapes


def _strided_nbytes(shape, stride, itemsize: int) -> int:
    """The bytes of the storage torch.empty_strided(shape, stride) makes (aten's computeStorageNbytes,
    at offset 0): what a rebuilt output's storage holds."""
    n = 1
    for size, step in zip(shape, stride):
        if size == 0:
            return 0
        n += (size - 1) * step
    return n * itemsize


def _rebuild(recorded) -> Any:
    container, shapes = recorded
    outs = [None if s is None else torch.empty_strided(s[0], s[1], dtype=s[2], device=_META) for s in shapes]
    return outs[0] if container is None else container(outs)


def _meta_empty(*shape: int) -> torch.Tensor:
    # (sizes as arguments and the device as an object: torch.empty parses a torch.Size at twice the
    # cost, 1.5 us against 0.8, and a device's name too, measured on this project's 2-core test
    # machine; three of these a batch norm)
    return torch.empty(*shape, dtype=torch.float32, device=_META)


def _plain(t, shape=None) -> bool:
    """A contiguous float32 meta tensor (of `shape`, if given)."""
    return (
        type(t) in _PLAIN
        and t.is_meta
        and t.dtype == torch.float32
        and t.is_contiguous()
        and (shape is None or tuple(t.shape) == shape)
    )


def _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """native_batch_norm in training on a contiguous float32 input: what its meta kernel (a Python
    decomposition, ~4 ms a call) gives: the output like the input, the batch's mean and 1/std."""
    if not (
        training is True and type(momentum) in _REALS and type(eps) in _REALS and _plain(input) and input.dim() >= 2
    ):
        return None
    c = input.shape[1]
    if not _per_channel(c, weight, bias, running_mean, running_var):
        return None
    return _meta_empty(*input.shape), _meta_empty(c), _meta_empty(c)


def _batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps, mask):
    """native_batch_norm_backward in training, grad-input asked for, contiguous float32: its meta
    kernel's results (grad-input like the input; grad-weight and grad-bias as the mask asks)."""
    if not (
        train is True and type(eps) in _REALS and _bools(mask, 3) and mask[0] and _plain(input) and input.dim() >= 2
    ):
        return None
    shape = input.shape
    c = shape[1]
    if not _plain(grad_out, tuple(shape)):
        return None
    if not _per_channel(c, weight, running_mean, running_var, save_mean, save_invstd):
        return None
    return _meta_empty(*shape), _meta_empty(c) if mask[1] else None, _meta_empty(c) if mask[2] else None


def _per_channel(c: int, *tensors) -> bool:
    """Each of `tensors` None or a contiguous float32 meta tensor of shape (c,): a batch norm's
    weight, bias and statistics. (A loop, not all() over a generator: one a batch norm.)"""
    shape = (c,)
    for t in tensors:
        if t is not None and not _plain(t, shape):
            return False
    return True


def _fresh_like(self, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    """zeros_like, ones_like or empty_like of a meta tensor with the default (contiguous) strides and
    no option but the memory format (the optimizers' state, once per parameter shape; the loss's
    gradient; dropout's mask; their meta kernels are Python decompositions, 50-100 us a call
    measured on this project's 2-core test machine): the same shape, dtype and strides, kept or
    asked for."""
    if not (
        type(self) in _PLAIN
        and self.is_meta
        and dtype is None
        and layout is None
        and device is None
        and not pin_memory
        and memory_format in (None, torch.preserve_format, torch.contiguous_format)
    ):
        return None
    strides = self.stride()
    if strides != _default_strides(self.shape):
        return None
    return torch.empty_strided(self.shape, strides, dtype=self.dtype, device=_META)


def _convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """convolution, not transposed, on meta tensors: what its meta kernel (torch's meta_conv, Python,
    ~0.1 ms a call, and each layer's convolution has shapes of its own) gives where the arguments
    are valid: a fresh contiguous output of the input's dtype, (N, C_out, each spatial size by
    the convolution's formula). Anything the kernel would check and refuse goes to the kernel."""
    if transposed is not False or type(input) not in _PLAIN or type(weight) not in _PLAIN or type(groups) is not int:
        return None
    n = input.dim() - 2
    if not (input.is_meta and weight.is_meta and n >= 1 and weight.dim() == n + 2 and groups > 0):
        return None
    if not (bias is None or type(bias) in _PLAIN and bias.is_meta):
        return None
    if not (_ints(stride, n) and _ints(padding, n) and _ints(dilation, n) and _ints(output_padding)):
        return None
    shape, kernel = input.shape, weight.shape
    if shape[1] == 0 or kernel[1] * groups != shape[1]:
        return None
    sizes = []
    for i in range(n):
        size, k, s, p, d = shape[i + 2], kernel[i + 2], stride[i], padding[i], dilation[i]
        if size + 2 * p < d * (k - 1) + 1 or s < 1 or d < 1 or p < 0:
            return None
        sizes.append((size + 2 * p - d * (k - 1) - 1) // s + 1)
    # (the sizes as arguments, as _meta_empty gives them)
    return torch.empty(shape[0], kernel[0], *sizes, dtype=input.dtype, device=_META)


def _convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, *rest):
    """convolution_backward on meta tensors none of which suggests channels-last: what its meta kernel
    (torch's meta_convolution_backward, Python) gives: fresh contiguous gradients of the input's and
    the weight's shapes and of the bias's sizes, as the output mask asks, of grad-output's dtype."""
    if len(rest) != 3:
        return None
    output_padding, groups, mask = rest
    if not (_bools(mask, 3) and type(groups) is int and type(transposed) is bool):
        return None
    if not (type(grad_output) in _PLAIN and type(input) in _PLAIN and type(weight) in _PLAIN):
        return None
    if not (grad_output.is_meta and input.is_meta and weight.is_meta):
        return None
    if not (_ints(bias_sizes) or bias_sizes is None and not mask[2]):
        return None
    if not (_ints(stride) and _ints(padding) and _ints(dilation) and _ints(output_padding)):
        return None
    # the kernel's channels-last gradients; a tensor with its shape's default strides never suggests
    # them (torch._prims_common.are_strides_like_channels_last_or_false: each dimension's stride
    # falls below the one before in that order), and reading that costs less than the Python check.
    # The gradients are made with those default strides (torch.empty_strided parses a torch.Size
    # in about half torch.empty's time, measured on this project's 2-core test machine)
    input_strides, weight_strides = _default_strides(input.shape), _default_strides(weight.shape)
    if _channels_last(input, input_strides) or _channels_last(weight, weight_strides):
        return None
    dtype = grad_output.dtype
    return (
        torch.empty_strided(input.shape, input_strides, dtype=dtype, device=_META) if mask[0] else None,
        torch.empty_strided(weight.shape, weight_strides, dtype=dtype, device=_META) if mask[1] else None,
        torch.empty(bias_sizes, dtype=dtype, device=_META) if mask[2] else None,
    )


def _channels_last(t, default_strides: tuple) -> bool:
    """Whether `t`, a tensor whose shape has these default strides, suggests channels-last."""
    return t.stride() != default_strides and _suggest_memory_format(t) != torch.contiguous_format


_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
_HALVES = (torch.float32, torch.float16, torch.bfloat16)  # layer norm keeps float32 statistics for these


def _dense(t) -> bool:
    """A plain floating-point meta tensor, not empty, with its shape's default (contiguous) strides."""
    return (
        type(t) in _PLAIN
        and t.is_meta
        and t.dtype in _FLOATS
        and t.numel() > 0
        and t.stride() == _default_strides(t.shape)
    )


def _reduction(input, dim, keepdim=False, dtype=None):
    """mean.dim and sum.dim_IntList of a dense floating-point tensor over distinct dimensions, no
    dtype asked: what their meta kernels (torch._refs, Python, 0.1-0.2 ms a call, and each block's
    squeeze-excitation mean has a shape of its own) give: the input's dtype, its shape with the
    dimensions reduced (kept as 1 with keepdim), default strides."""
    if dtype is not None or type(keepdim) is not bool or type(dim) not in (list, tuple) or not dim:
        return None
    n = input.dim() if type(input) in _PLAIN else 0
    if n == 0 or not _dense(input):
        return None
    dims = {d % n for d in dim if type(d) is int and -n <= d < n}
    if len(dims) != len(dim):  # a dimension out of range, repeated, or not an int: the kernel's to say
        return None
    shape = input.shape
    if keepdim:
        return torch.empty([1 if i in dims else s for i, s in enumerate(shape)], dtype=input.dtype, device=_META)
    return torch.empty([s for i, s in enumerate(shape) if i not in dims], dtype=input.dtype, device=_META)


def _reduce_all(input, dtype=None):
    """mean.default and sum.default (a loss: the mean of an output) of a dense floating-point tensor,
    no dtype asked: what their meta kernels (torch._refs, Python, ~0.2 ms) give: a 0-dim tensor of
    the input's dtype."""
    if dtype is not None or not _dense(input):
        return None
    return torch.empty((), dtype=input.dtype, device=_META)


def _mm(self, mat2):
    """mm of two 2-D meta tensors of one floating dtype with matching inner sizes: its meta kernel's
    (Python) fresh contiguous (N, P) result."""
    if not (type(self) in _PLAIN and type(mat2) in _PLAIN and self.is_meta and mat2.is_meta):
        return None
    if self.dim() != 2 or mat2.dim() != 2 or self.shape[1] != mat2.shape[0]:
        return None
    if self.dtype not in _FLOATS or mat2.dtype != self.dtype:
        return None
    return torch.empty((self.shape[0], mat2.shape[1]), dtype=self.dtype, device=_META)


def _addmm(self, mat1, mat2, beta=1, alpha=1):
    """addmm (a linear layer: bias + x @ W^T) with beta and alpha 1, a dense bias of the matrices'
    dtype that broadcasts to the (N, P) result: what its meta kernel (torch._decomp's addmm, Python,
    0.3-0.5 ms a call, once per layer shape) gives: a fresh contiguous (N, P) result."""
    if type(beta) is not int or type(alpha) is not int or beta != 1 or alpha != 1 or type(self) not in _PLAIN:
        return None
    out = _mm(mat1, mat2)
    if out is None or not _dense(self) or self.dtype != out.dtype or self.dim() > 2:
        return None
    n, p = out.shape
    if self.dim() == 2 and self.shape[0] not in (1, n) or self.dim() >= 1 and self.shape[-1] not in (1, p):
        return None
    return out


def _select_backward(grad_output, input_sizes, dim, index):
    """select_backward of a meta gradient of the selected shape, a dimension and an index in range:
    what its meta kernel (torch._decomp's: new_zeros(input_sizes), then select_scatter, whose meta
    kernel clones it with its strides; Python, 50-300 us a call measured on this project's 2-core
    test machine, once per index: ViT's q, k and v, its class token) gives: a fresh tensor of
    `input_sizes` with their default strides and the gradient's dtype, whatever its strides."""
    if not (type(grad_output) in _PLAIN and grad_output.is_meta and _ints(input_sizes) and type(dim) is int):
        return None
    n = len(input_sizes)
    if type(index) is not int or not -n <= dim < n or min(input_sizes, default=0) < 0:
        return None
    dim %= n
    size = input_sizes[dim]
    if not -size <= index < size or tuple(grad_output.shape) != (*input_sizes[:dim], *input_sizes[dim + 1 :]):
        return None
    return torch.empty(input_sizes, dtype=grad_output.dtype, device=_META)


def _cat(tensors, dim=0):
    """cat of non-empty meta tensors of one floating dtype and one number of dimensions, 1 to 3
    (none suggests channels-last), equal but along `dim`: what its meta kernel (torch._refs.cat,
    Python, ~250 us a call measured on this project's 2-core test machine: ViT's class token
    before its patches) gives: their sizes summed along `dim`, cloned to the default strides."""
    if type(tensors) not in _SEQUENCES or not tensors or type(dim) is not int:
        return None
    first = tensors[0]
    if not (_float_meta(first) and 1 <= first.dim() <= 3 and -first.dim() <= dim < first.dim()):
        return None
    dim %= first.dim()
    shape, total = list(first.shape), 0
    for t in tensors:
        if not _float_meta(t) or t.dtype != first.dtype or t.dim() != len(shape) or t.numel() == 0:
            return None
        size = t.shape[dim]
        shape[dim] = size
        if list(t.shape) != shape:
            return None
        total += size
    shape[dim] = total
    return torch.empty(shape, dtype=first.dtype, device=_META)


def _layer_norm(input, normalized_shape, weight, bias, eps):
    """native_layer_norm of a dense float32, float16 or bfloat16 input, over its last dimensions,
    with a weight and bias of those dimensions and the input's dtype (or none): what its meta
    kernel (Python, ~1 ms a call) gives: the output like the input, and float32 mean and 1/std of
    the leading dimensions' shape with a 1 for each normalized one, all with default strides."""
    if not _ints(normalized_shape) or not normalized_shape or not _dense(input) or type(eps) not in _REALS:
        return None
    k, shape = len(normalized_shape), tuple(input.shape)
    if input.dtype not in _HALVES or k > len(shape) or shape[-k:] != tuple(normalized_shape):
        return None
    if not all(t is None or _like(t, shape[-k:], input.dtype) for t in (weight, bias)):
        return None
    stats = shape[:-k] + (1,) * k
    return (
        torch.empty(shape, dtype=input.dtype, device=_META),
        torch.empty(stats, dtype=torch.float32, device=_META),
        torch.empty(stats, dtype=torch.float32, device=_META),
    )


def _layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, mask):
    """native_layer_norm_backward of a float32, float16 or bfloat16 input (of any strides) over its
    last dimensions, with a weight and bias of those dimensions and the input's dtype (or none),
    given grad-output of the input's shape and dtype (of any strides) and the statistics that the
    forward made: its meta kernel's results (grad-input like the input, grad-weight and grad-bias
    like the weight and bias, as the mask asks), each fresh. Their strides follow grad-output's and
    the input's (ViT's class token's gradient, unsqueezed: (1, 197, 768) with strides (768, 768, 1);
    ConvNeXt's permuted input; the kernel's ops lay their outputs out by their operands' strides):
    prim_layout.layer_norm_backward, the kernel's rule written out (the stock kernel measured ~1 ms a
    call on this project's 2-core test machine; the rule ~40 us where strides are odd)."""
    if not _bools(mask, 3) or not _ints(normalized_shape) or not normalized_shape:
        return None
    if not (_float_meta(input) and _float_meta(grad_out) and input.dtype in _HALVES and input.numel() > 0):
        return None
    k, shape = len(normalized_shape), tuple(input.shape)
    if k > len(shape) or shape[-k:] != tuple(normalized_shape):
        return None
    if tuple(grad_out.shape) != shape or grad_out.dtype != input.dtype:
        return None
    if not all(t is None or _like(t, shape[-k:], input.dtype) for t in (weight, bias)):
        return None
    stats = shape[:-k] + (1,) * k
    if not (_like(mean, stats, torch.float32) and _like(rstd, stats, torch.float32)):
        return None
    if (mask[1] and weight is None) or (mask[2] and bias is None):
        return None
    strides = prim_layout.layer_norm_backward(
        shape, k, _kept(grad_out), _kept(input), input.dtype == torch.float32, weight is not None
    )
    grad_input, grad_weight, grad_bias = strides
    return (
        torch.empty_strided(shape, grad_input, dtype=input.dtype, device=_META) if mask[0] else None,
        torch.empty_strided(weight.shape, grad_weight, dtype=weight.dtype, device=_META) if mask[1] else None,
        torch.empty_strided(bias.shape, grad_bias, dtype=bias.dtype, device=_META) if mask[2] else None,
    )


def _kept(t) -> tuple | None:
    """The strides `t.to(its dtype, memory_format=torch.contiguous_format)` keeps (it returns `t`
    itself unless `t` suggests channels-last), or None where it copies `t` to the default strides."""
    strides = t.stride()
    if strides == _default_strides(t.shape) or _suggest_memory_format(t) == torch.contiguous_format:
        return strides
    return None


def _float_meta(t) -> bool:
    """A plain floating-point meta tensor (of any strides)."""
    return type(t) in _PLAIN and t.is_meta and t.dtype in _FLOATS


def _like(t, shape: tuple, dtype) -> bool:
    """A dense meta tensor of this shape and dtype."""
    return _dense(t) and t.dtype == dtype and tuple(t.shape) == shape


def _named(shape_function, names: frozenset):
    """A shape function taking keyword arguments of these names only: any other goes to the kernel."""
    return lambda args, kwargs: None if kwargs.keys() - names else shape_function(*args, **kwargs)


def _ints(value, n: int | None = None) -> bool:
    """A list or tuple of ints (of length n, if given)."""
    # (a set's issuperset of the items' types, not all() over a generator: 80 ns against 150 for two
    # items, measured on this project's 2-core test machine; a convolution checks four of these)
    return type(value) in _SEQUENCES and (n is None or len(value) == n) and _INT.issuperset(map(type, value))


def _bools(value, n: int) -> bool:
    """A list or tuple of n bools (an output mask)."""
    return type(value) in _SEQUENCES and len(value) == n and _BOOL.issuperset(map(type, value))


_SEQUENCES, _INT, _BOOL = (list, tuple), frozenset((int,)), frozenset((bool,))


def _positional(shape_function):
    """A shape function of positional arguments only: an op called with keywords goes to its kernel."""
    return lambda args, kwargs: None if kwargs else shape_function(*args)


# Shape functions of our own for ops whose stock meta kernel is a slow Python decomposition, on the
# inputs where their results are plain (checked against the stock kernel in the tests); each takes
# the op's (args, kwargs) and answers None where it does not apply.
_FAST = {
    id(torch.ops.aten.native_batch_norm.default): _positional(_batch_norm),
    id(torch.ops.aten.native_batch_norm_backward.default): _positional(_batch_norm_backward),
    id(torch.ops.aten.zeros_like.default): lambda args, kwargs: _fresh_like(*args, **kwargs),
    id(torch.ops.aten.ones_like.default): lambda args, kwargs: _fresh_like(*args, **kwargs),
    id(torch.ops.aten.empty_like.default): lambda args, kwargs: _fresh_like(*args, **kwargs),
    id(torch.ops.aten.convolution.default): _positional(_convolution),
    id(torch.ops.aten.convolution_backward.default): _positional(_convolution_backward),
    id(torch.ops.aten.mean.dim): _named(_reduction, frozenset(("keepdim", "dtype"))),
    id(torch.ops.aten.sum.dim_IntList): _named(_reduction, frozenset(("keepdim", "dtype"))),
    id(torch.ops.aten.mean.default): _named(_reduce_all, frozenset(("dtype",))),
    id(torch.ops.aten.sum.default): _named(_reduce_all, frozenset(("dtype",))),
    id(torch.ops.aten.mm.default): _positional(_mm),
    id(torch.ops.aten.addmm.default): _named(_addmm, frozenset(("beta", "alpha"))),
    id(torch.ops.aten.native_layer_norm.default): _positional(_layer_norm),
    id(torch.ops.aten.native_layer_norm_backward.default): _positional(_layer_norm_backward),
    id(torch.ops.aten.select_backward.default): _positional(_select_backward),
    id(torch.ops.aten.cat.default): _positional(_cat),
}


def clear() -> None:
    """Forget every cached result (a fresh process's state: benchmarks time the cold cache)."""
    _cache.clear()
    _learned.clear()
    _DEFAULT_STRIDES.clear()
    _ONES.clear()


def run(func, args: tuple, kwargs: dict) -> Any:
    """func(*args, **kwargs), answered from the cache when the op and its arguments allow it."""
    kind = _kinds.get(id(func))
    if kind is None:
        kind = _kind(func)
    if not kind:  # views, out= ops, data-dependent ones: run, first thing (a third of a transformer's ops)
        stats["runs"] += 1
        return func(*args, **kwargs)
    if kind == "inplace-pointwise" and (_same_as_self(args, kwargs) or is_count_step(func, args, kwargs)):
        stats["hits"] += 1  # nothing the kernel could refuse: no broadcast, no cast (no key needed)
        return args[0]
    if kind == "inplace-foreach":
        if _foreach_same_as_self(args, kwargs):
            stats["hits"] += 1  # the same, tensor by tensor (the foreach optimizers' updates)
            return None
        stats["runs"] += 1
        return func(*args, **kwargs)
    if kind == "functional" and id(func) in _POINTWISE:
        # answered by its learnt dtypes before any key is built (the optimizer's sqrt and div a parameter)
        out, answered = _elementwise(func, args, kwargs, checked=False)
        if answered:
            stats["hits"] += 1
            return out
    elif (fast := _FAST.get(id(func))) is not None:
        # a shape function of our own checks all it reads (what `_key` would refuse among it) and answers
        # before any key is built: it costs less than the key, and each layer's convolution, batch norm
        # or reduction has a shape of its own (zeros_like: Adam's state, two a parameter)
        out = fast(args, kwargs)
        if out is not None:
            stats["hits"] += 1
            return out
    key = _key(func, args, kwargs)
    hit = _cache.get(key) if key is not None else None
    inplace = kind.startswith("inplace")
    if hit is not None and hit is not _NOT_CACHEABLE:
        stats["hits"] += 1
        return (args[0] if args else kwargs["self"]) if inplace else _rebuild(hit)
    if key is not None and kind == "functional" and id(func) in _POINTWISE:
        out, answered = _elementwise(func, args, kwargs)
        if out is not None:
            stats["hits" if answered else "runs"] += 1
            _cache[key] = _record(out, args, kwargs)
            return out
    stats["runs"] += 1
    if key is None or hit is _NOT_CACHEABLE:
        return func(*args, **kwargs)
    out = func(*args, **kwargs)
    if len(_cache) >= MAX_ENTRIES:
        _cache.clear()
    _cache[key] = True if inplace else _record(out, args, kwargs)
    return out


def _elementwise(func, args: tuple, kwargs: dict, checked: bool = True) -> tuple[Any, bool]:
    """An element-wise op whose meta tensors all have the default (contiguous) strides of their
    shapes: one shape, or shapes that broadcast (a squeeze-excitation's scale, a bias). Its outputs
    have the broadcast shape, and dtypes that depend on the operands' dtypes alone; their strides
    depend on the operands' strides only through which dimensions are 1 (contiguous strides compare
    as their dimensions' order, equal only across size-1 dimensions; a broadcast dimension's stride
    is 0), so a broadcast is keyed by that pattern too. Learnt from the op's first run on any
    shapes (of that pattern), where its outputs are contiguous, then given for every other
    (hardswish, sigmoid_backward, div on a new layer's shape; a scale's mul on a new block's).
    Returns (outputs, answered without running the kernel), or (None, False) where the rule does
    not apply. `checked`: the arguments passed `_key` (plain tensors, meta or 0-dim real, and plain
    values); unchecked, they are checked here and only a learnt answer is given (None, False
    otherwise: the caller keys the op and asks again)."""
    # the key: the op, its keywords' names (which of the parts after them is which), each operand's part
    parts: list[Any] = [id(func), tuple(kwargs) if kwargs else ()]
    shape, shapes, contiguous, broadcast, loose = None, [], True, False, False
    for value in (*args, *kwargs.values()) if kwargs else args:
        if type(value) in _PLAIN:
            if not value.is_meta:
                if value.dim() != 0:
                    return None, False  # a real tensor other than a scalar: `_key` refuses it
                parts.append(("scalar", value.dtype))
                continue
            if value.storage_offset() != 0:
                return None, False
            size, strides = value.shape, value.stride()
            if strides == _default_strides(size):
                parts.append(("tensor", value.dtype))
            elif id(func) in _CPU_BROADCASTS and prim_layout.lays_out_as_default(size, strides):
                # contiguous as torch counts it, a size-1 dimension's own stride aside (ViT's class
                # token, unsqueezed: (1, 197, 768) strided (768, 768, 1)): beside operands of its
                # shape, a result as the default strides' (its Python kernel, ~100 us a call on this
                # project's 2-core test machine, ran once per block); a broadcast is left to the kernel
                parts.append(("tensor", value.dtype))
                loose = True
            else:
                expanded = _expanded(size, strides)
                if expanded is None:
                    return None, False
                parts.append(("expanded", value.dtype, expanded))
                contiguous = False
            if shape is None:
                shape = size
            elif size != shape:
                broadcast = True
            shapes.append(size)
        elif isinstance(value, (bool, int, float)):
            parts.append(type(value))
        elif isinstance(value, torch.Tensor) or not isinstance(value, _SCALARS):
            return None, False  # a subclass, a list, an object: what `_key` refuses or the rule does not cover
        else:
            parts.append(value)
    # (an odd size-1 stride beside a broadcast or an expanded operand: left to the kernel, as the
    # rule was checked on operands of one shape with no stride 0 but a size-1 dimension's)
    if shape is None or (loose and (broadcast or not contiguous)):
        return None, False
    if broadcast:  # by which dimensions are 1, of shapes with no empty one
        if any(0 in s for s in shapes):
            return None, False
        shape = _broadcast_shape(shapes)
        if shape is None:  # shapes that do not broadcast: the kernel says so
            return None, False
        parts.append(("broadcast", tuple(tuple(d == 1 for d in s) for s in shapes)))
    elif not shape:
        # all 0-dim: a real scalar beside them promotes as their peer (f16 * f32 scalar: f32), where
        # beside a dimensioned operand it does not (f16): a rule of its own
        parts.append("0-dim")
    key = tuple(parts)
    learned = _learned.get(key)
    if learned is not None:
        return _fresh(shape, learned), True
    if not checked:
        return None, False
    if contiguous and not broadcast and 0 not in shape:
        learned = _learn_on_cpu(func, args, kwargs, shape) if id(func) in _CPU_RULES else None
        if learned is None and len(shape) > 1:
            learned = _learn_on_stand_ins(func, args, kwargs)
    elif (
        0 not in shape and len(shape) <= 4 and (id(func) in _CPU_BROADCASTS if contiguous else id(func) in _CPU_EXPANDS)
    ):
        # a broadcast (or an expand) on ops whose CPU layout is meta's for every such pattern (the tests)
        learned = _learn_on_cpu(func, args, kwargs, shape, pattern=True)
    if learned is not None:
        _learned[key] = learned
        return _fresh(shape, learned), False
    out = func(*args, **kwargs)
    outs = [out] if isinstance(out, torch.Tensor) else out
    if isinstance(outs, (list, tuple)) and all(
        isinstance(o, torch.Tensor) and o.is_meta and o.shape == shape and o.stride() == _default_strides(shape)
        for o in outs
    ):
        _learned[key] = (None if isinstance(out, torch.Tensor) else type(out), [o.dtype for o in outs])
    return out, False


def _fresh(shape, learned: tuple) -> Any:
    """An element-wise op's learnt answer on `shape`: fresh outputs with its default strides and the
    learnt dtypes, in the learnt container (torch.empty_strided on the meta device object, not
    torch.empty on "meta": half the cost, measured on this project's 2-core test machine)."""
    container, dtypes = learned
    strides = _default_strides(shape)
    if container is None:
        return torch.empty_strided(shape, strides, dtype=dtypes[0], device=_META)
    return container([torch.empty_strided(shape, strides, dtype=d, device=_META) for d in dtypes])


def _broadcast_shape(shapes: list) -> torch.Size | None:
    """The shape non-empty `shapes` broadcast to, or None where they do not (torch.broadcast_shapes'
    rule: aligned from the right, sizes equal or 1; that function, Python with symbolic-size
    guards, cost 20 us, more than the rest of a learnt broadcast's answer)."""
    out: list[int] = []  # from the last dimension
    for s in shapes:
        for i, size in enumerate(reversed(s)):
            if i == len(out):
                out.append(size)
            elif size != out[i] and size != 1:
                if out[i] != 1:
                    return None
                out[i] = size
    return torch.Size(out[::-1])


_STAND_IN = (2,)

# Element-wise ops whose dtype rule is learnt from their CPU kernel (C++, 5-30 us) on real stand-ins
# rather than from their meta kernel (Python for most: 60-900 us, hardsigmoid's the most), where
# every tensor operand has one floating dtype (a model's activations and gradients): there the CPU
# kernel's dtypes and refusals are the meta kernel's, checked for every dtype combination in
# tests/model/train/test_train_elementwise_cpu.py. Elsewhere they are not always (threshold_backward
# of mixed dtypes, pow of a bool, where on a uint8 condition): the meta stand-ins answer. The value:
# the position of an operand that may instead be a bool mask (where's condition), or None.
_CPU_RULE_OPS = {
    getattr(getattr(torch.ops.aten, name.split(".")[0]), name.split(".")[1]): mask
    for names, mask in (
        (("add.Tensor", "add.Scalar", "sub.Tensor", "sub.Scalar", "rsub.Scalar", "mul.Tensor"), None),
        (("mul.Scalar", "div.Tensor", "div.Scalar", "div.Tensor_mode", "div.Scalar_mode", "neg.default"), None),
        (("abs.default", "reciprocal.default", "sqrt.default", "rsqrt.default", "exp.default"), None),
        (("log.default", "sin.default", "cos.default", "tanh.default", "sigmoid.default", "erf.default"), None),
        (("pow.Tensor_Scalar", "pow.Tensor_Tensor", "relu.default", "gelu.default", "silu.default"), None),
        (("hardsigmoid.default", "hardswish.default", "hardtanh.default", "leaky_relu.default"), None),
        (("elu.default", "softplus.default", "mish.default", "clamp.default", "clamp.Tensor"), None),
        (("clamp_min.default", "clamp_max.default", "eq.Scalar", "eq.Tensor", "ne.Scalar", "ne.Tensor"), None),
        (("lt.Scalar", "lt.Tensor", "le.Scalar", "le.Tensor", "gt.Scalar", "gt.Tensor", "ge.Scalar"), None),
        (("ge.Tensor", "maximum.default", "minimum.default", "lerp.Scalar", "lerp.Tensor"), None),
        (("addcmul.default", "addcdiv.default", "clone.default", "threshold.default"), None),
        (("threshold_backward.default", "gelu_backward.default", "silu_backward.default"), None),
        (("sigmoid_backward.default", "tanh_backward.default", "hardsigmoid_backward.default"), None),
        (("hardswish_backward.default",), None),
        (("where.self",), 0),
        (("masked_fill.Scalar", "native_dropout_backward.default"), 1),
    )
    for name in names
}
_CPU_RULES = {id(op): mask for op, mask in _CPU_RULE_OPS.items()}
# of those, ops learnt on the CPU for a broadcast of operands with their shapes' default strides, and
# for a contiguous tensor's expand (mean's backward), up to 4 dimensions: for each such pattern of
# size-1, grown and other dimensions the CPU kernel's output layout is the meta kernel's (the tests
# sweep every one); other ops' and other patterns' first calls run their meta kernel as called
_CPU_BROADCASTS = {id(op) for op in (aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor)}
_CPU_EXPANDS = {id(op) for op in (aten.mul.Scalar, aten.div.Scalar)}
_CPU = torch.device("cpu")


def _learn_on_cpu(func, args: tuple, kwargs: dict, shape, pattern: bool = False) -> tuple | None:
    """The learnt answer (container, output dtypes) of an element-wise op of _CPU_RULE_OPS whose meta
    operands are contiguous and of one shape and whose tensor operands (real scalars too) have one
    floating dtype, but for a bool mask where the op takes one: from its CPU kernel run on real
    stand-ins of the meta operands, ones (a value every op takes: no division by zero, no log of a
    negative) of two elements, or 0-dim where the operands are (a 0-dim operand promotes as a real
    scalar's peer); real scalars and numbers as they are. None where the CPU kernel refuses (a dtype
    it has no kernel for), gives anything but a fresh output of the stand-ins' shape, or CPU
    autocast is on (it would cast the stand-ins, where the meta operands are not cast)."""
    mask, dtype = _CPU_RULES[id(func)], None
    for i, value in enumerate((*args, *kwargs.values())):
        if isinstance(value, torch.Tensor) and not (i == mask and value.dtype == torch.bool):
            if not value.is_floating_point() or (dtype is not None and value.dtype != dtype):
                return None  # not one floating dtype: the meta kernel's rule may differ (above)
            dtype = value.dtype
    if torch.is_autocast_enabled("cpu"):
        return None
    # `pattern`: operands of shapes that broadcast, or an expanded one: stand-ins of their pattern, each
    # dimension 1 where theirs is 1, else 2 (1 where an expand grew it, then expanded), the output 2s too
    size = tuple(1 if d == 1 else 2 for d in shape) if pattern else _STAND_IN if shape else ()
    made: list = []  # the stand-ins, alive through the check: an output must not share their storage

    def stand_in(value):
        if type(value) in _PLAIN and value.is_meta:
            if not pattern:
                value = _ones(size, value.dtype)
            else:
                dims = tuple(1 if d == 1 else 2 for d in value.shape)
                steps = value.stride()
                base = tuple(1 if step == 0 else d for d, step in zip(dims, steps))
                value = _ones(base, value.dtype).expand(dims)
                if any(d == 1 and step == 0 for d, step in zip(dims, steps)):  # a size-1 dimension's zero stride
                    value = value.as_strided(
                        dims, [0 if step == 0 else own for own, step in zip(value.stride(), steps)]
                    )
            made.append(value.untyped_storage())
        return value

    # on this thread alone: a CPU kernel that opens a parallel region for two elements (float32 gelu)
    # waits milliseconds for a second thread on a busy machine (20 ms a call at load 7 on 2 cores,
    # 15 us on one thread), as values._one_thread found for the known values' ops
    threads = torch.get_num_threads()
    if threads > 1:
        torch.set_num_threads(1)
    try:
        out = func(*[stand_in(a) for a in args], **{k: stand_in(v) for k, v in kwargs.items()})
    except (RuntimeError, NotImplementedError, IndexError, TypeError, ValueError):
        return None
    finally:
        if threads > 1:
            torch.set_num_threads(threads)
    outs = [out] if isinstance(out, torch.Tensor) else out
    if not isinstance(outs, (list, tuple)) or not all(
        type(o) is torch.Tensor
        and o.device == _CPU
        and o.shape == size
        and o.stride() == _default_strides(size)
        and all(o.untyped_storage() is not m for m in made)
        for o in outs
    ):
        return None
    return (None if isinstance(out, torch.Tensor) else type(out)), [o.dtype for o in outs]


def _ones(size: tuple, dtype: torch.dtype) -> torch.Tensor:
    """A CPU tensor of ones, kept by its size and dtype: `_learn_on_cpu`'s stand-ins, read and never
    written (its ops are functional), so one serves every op learnt on that size and dtype (each
    one made cost as much as the kernel's run on it, ~3 us, measured on this project's 2-core test
    machine)."""
    ones = _ONES.get((size, dtype))
    if ones is None:
        ones = _ONES[(size, dtype)] = torch.ones(size, dtype=dtype, device=_CPU)
    return ones


_ONES: dict[tuple, torch.Tensor] = {}


def _learn_on_stand_ins(func, args: tuple, kwargs: dict) -> tuple | None:
    """The learnt answer (container, output dtypes) of an element-wise op whose meta operands are
    contiguous and of one shape, from its kernel run on 1-D stand-ins of two elements (real 0-dim
    scalars and numbers as they are); None where that run fails or gives anything but that shape.
    The answer does not depend on the shape: type promotion reads operands' dtypes and whether each
    is 0-dim (a stand-in is not, as the operand was not), never their sizes, and operands of one
    contiguous shape give a contiguous output (TensorIterator's and torch._prims_common's
    elementwise strides keep the operands' common layout). A Python meta kernel's run costs its
    checks a dimension each (hardsigmoid's: 0.99 ms on (1, 960, 1, 1), 0.58 ms on (2,)), and
    each op's first run on a model is one."""

    made: list = []  # the stand-ins, alive through the check: an output must not share their storage

    def stand_in(value):
        if type(value) in _PLAIN and value.is_meta:
            value = torch.empty(_STAND_IN, dtype=value.dtype, device=_META)
            made.append(value.untyped_storage())
        return value

    try:
        out = func(*[stand_in(a) for a in args], **{k: stand_in(v) for k, v in kwargs.items()})
    except (RuntimeError, NotImplementedError, IndexError, TypeError, ValueError):
        return None  # the op's own checks refuse the stand-ins (a dimension argument): run it as called
    outs = [out] if isinstance(out, torch.Tensor) else out
    if not isinstance(outs, (list, tuple)) or not all(
        type(o) is torch.Tensor
        and o.is_meta
        and o.shape == _STAND_IN
        and o.stride() == (1,)
        and all(o.untyped_storage() is not m for m in made)
        for o in outs
    ):
        return None
    return (None if isinstance(out, torch.Tensor) else type(out)), [o.dtype for o in outs]


def _expanded(shape, strides) -> tuple | None:
    """A contiguous tensor's `expand` (mean's backward: the gradient of (N,C,1,1) expanded to
    (N,C,H,W)): stride 0 on the dimensions it grew (size > 1), its own default strides on the others.
    Returns which dimensions are expanded and which are 1, or None for any other strides. An
    element-wise kernel lays its output out by comparing the operands' strides dimension by
    dimension, skipping zero strides and sizes only where strides tie (TensorIterator's
    reorder_dimensions; torch._prims_common's compute_elementwise_output_logical_to_physical_perm);
    for these strides each comparison is decided by that pattern alone, never by the sizes."""
    if len(shape) != len(strides):
        return None
    # each dimension's (grown, size 1, size 1 with stride 0: a dimension an expand added, the loss's
    # gradient (1, 1000) from a 0-dim one; a zero stride is skipped where a size-1 dimension's own one
    # is compared), from the last, with the default stride it had before the expand (one pass: the
    # first form, a tuple of tuples and two more passes over it, cost 5 us a call on this project's
    # 2-core test machine, once for each mean's backward)
    pattern, own, grew = [], 1, False
    for size, step in zip(reversed(shape), reversed(strides)):
        if step == 0 and size > 1:
            pattern.append(_GROWN)
            grew = True
        elif size == 1:
            if step != 0 and step != own:
                return None
            pattern.append(_ADDED if step == 0 else _ONE)
        else:
            if step != own:
                return None
            pattern.append(_KEPT)
            own *= max(size, 1)
    return tuple(reversed(pattern)) if grew else None


_GROWN, _ADDED, _ONE, _KEPT = (True, False, False), (False, True, True), (False, True, False), (False, False, False)


def _default_strides(shape) -> tuple:
    """The contiguous strides of `shape`, kept by shape (a torch.Size or a tuple): an element-wise op
    asks for each operand's, and a step's shapes repeat (a Python loop a call cost a microsecond)."""
    strides = _DEFAULT_STRIDES.get(shape) if type(shape) is not list else None
    if strides is None:
        strides = prim_layout.default_strides(tuple(shape))
        if type(shape) is not list:
            if len(_DEFAULT_STRIDES) >= MAX_ENTRIES:
                _DEFAULT_STRIDES.clear()
            _DEFAULT_STRIDES[shape] = strides
    return strides


_DEFAULT_STRIDES: dict[tuple, tuple] = {}


def _same_as_self(args: tuple, kwargs: dict) -> bool:
    """An element-wise in-place op whose operands all have `self`'s shape and dtype (or are real
    scalars), on a floating-point meta `self`: the optimizers' updates (lerp_, addcmul_, addcdiv_,
    add_). Its meta kernel can only return `self`, so it need not run even once per shape, and its
    result needs no cache key. Tensors are plain ones (as `_key` asks) and meta ones are on meta."""
    if not args or type(args[0]) not in _PLAIN:
        return False
    self = args[0]
    if not self.is_meta or not self.is_floating_point():
        return False
    for value in (*args[1:], *kwargs.values()):
        if type(value) in _PLAIN:
            if not value.is_meta:
                if value.dim() == 0 and not value.is_complex():
                    continue  # a real scalar
                return False
            if value.shape != self.shape or value.dtype != self.dtype:
                return False
        elif type(value) not in _NUMBERS:
            return False
    return True


def is_count_step(func, args: tuple, kwargs: dict) -> bool:
    """add_ of a plain int64 meta tensor and a Python int in int64's range, nothing else (batch
    norm's num_batches_tracked += 1, each layer's, every step): an int keeps an int64 tensor's dtype
    and broadcasts to any shape, so its meta kernel can only return `self`, and its result needs no
    cache key (the key cost 3 us a call, measured on this project's 2-core test machine). Out of the
    range, the kernel raises: not this. (values.KnownValues defers the real add on the same premise.)"""
    return (
        id(func) in _ADDS
        and not kwargs
        and len(args) == 2
        and type(args[1]) is int
        and _INT64_MIN <= args[1] <= _INT64_MAX
        and type(args[0]) in _PLAIN
        and args[0].is_meta
        and args[0].dtype == torch.int64
    )


_ADDS = {id(aten.add_.Tensor), id(aten.add_.Scalar)}
_INT64_MIN, _INT64_MAX = torch.iinfo(torch.int64).min, torch.iinfo(torch.int64).max


def _foreach_same_as_self(args: tuple, kwargs: dict) -> bool:
    """An in-place foreach op (`torch._foreach_addcdiv_(params, m, v, scalars)`: the optimizers'
    foreach updates, on a GPU spec) whose every tensor operand has the shape and dtype of the `self`
    tensor at its place in the list (or is a real scalar), with numbers or lists of numbers
    besides: what _same_as_self answers for each tensor, so its meta kernel, a Python loop of
    element-wise meta kernels a millisecond a tensor, can only return nothing. Each step of the
    search for max_batch ran one for every parameter, several times: most of --device-spec's cost."""
    if not args or type(args[0]) not in (list, tuple) or not args[0]:
        return False
    selves = args[0]
    for self in selves:
        if type(self) not in _PLAIN or not self.is_meta or not self.is_floating_point():
            return False
    for value in (*args[1:], *kwargs.values()):
        if type(value) in _NUMBERS:
            continue
        if type(value) in _PLAIN:  # one tensor for the whole list: a real scalar only
            if value.is_meta or value.dim() != 0 or value.is_complex():
                return False
            continue
        if type(value) not in (list, tuple) or len(value) != len(selves):
            return False
        for self, other in zip(selves, value):
            if type(other) in _PLAIN:
                if not other.is_meta:
                    if other.dim() == 0 and not other.is_complex():
                        continue  # a real scalar
                    return False
                if other.shape != self.shape or other.dtype != self.dtype:
                    return False
            elif type(other) not in _NUMBERS:
                return False
    return True


_META = torch.device("meta")
_PLAIN = (torch.Tensor, nn.Parameter)  # not a subclass: its own dispatch may answer otherwise
_NUMBERS = (bool, int, float, type(None))
_REALS = (int, float)
