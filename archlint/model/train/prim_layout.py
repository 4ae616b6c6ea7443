"""The strides torch's Python meta kernels give their outputs, computed on tuples of ints.

On the meta device most of torch's kernels are Python decompositions over torch._refs, whose
element-wise results are laid out by torch._prims_common's
compute_elementwise_output_logical_to_physical_perm: every operand contiguous (as torch counts it:
a size-1 dimension's stride is free) and not all channels-last gives the default strides; otherwise
the dimensions are sorted by the operands' strides. Where a size-1 dimension's stride is not its
default one (ViT's class token's gradient, unsqueezed: (1, 197, 768) with strides (768, 768, 1)),
that sort decides the result's size-1 strides, so a shape function that answers for such operands
must follow it exactly: this module is that rule, written out on plain ints (torch's own function,
with its symbolic-size guards, cost ~160 us a call on this project's 2-core test machine; the Python
meta kernel of a layer norm's backward, ~12 such ops, ~1 ms there). Checked against the stock kernels over size-1 stride variants in
tests/model/train/test_train_meta_shapes.py.
"""

from __future__ import annotations

from collections.abc import Callable

Shape = tuple[int, ...]
# an operand: its shape and strides, before it is broadcast to the result's shape
Operand = tuple[Shape, Shape]


def default_strides(shape: Shape) -> Shape:
    """A contiguous tensor's strides (torch's make_contiguous_strides_for: a size-0 dimension counts as 1)."""
    out, step = [], 1
    for size in reversed(shape):
        out.append(step)
        step *= max(size, 1)
    return tuple(reversed(out))


def is_contiguous(shape: Shape, strides: Shape) -> bool:
    """torch's is_contiguous: fewer than two elements, or each dimension of size > 1 strided by the
    sizes after it (a size-1 dimension's stride is not read)."""
    numel = 1
    for size in shape:
        numel *= size
    if numel < 2:
        return True
    expected = 1
    for size, step in zip(reversed(shape), reversed(strides)):
        if size == 1:
            continue
        if step != expected:
            return False
        expected *= size
    return True


def _is_channels_last(shape: Shape, strides: Shape) -> bool:
    """torch._prims_common.is_channels_last_contiguous_2d: 4-D, NHWC order, size-1 dimensions not read."""
    if len(shape) != 4:
        return False
    expected = 1
    for i in (1, 3, 2, 0):
        if shape[i] == 1:
            continue
        if strides[i] != expected:
            return False
        expected *= shape[i]
    return True


def lays_out_as_default(shape: Shape, strides: Shape) -> bool:
    """Whether an element-wise torch._refs op lays out its output as if this operand had the default
    strides, beside any operands of its shape that have them (no broadcast): contiguous as torch
    counts it and not channels-last (so the operands are all contiguous, not all channels-last: the
    identity permutation, whatever the size-1 dimensions' strides)."""
    return is_contiguous(shape, strides) and not _is_channels_last(shape, strides)


def _ge(a: int, b: int) -> bool:
    return True if b == 0 else False if a == 0 else a >= b or a % b == 0


def _perm(shape: Shape, operands: list[Shape]) -> list[int]:
    """compute_elementwise_output_logical_to_physical_perm of tensors of `shape` with these strides."""
    ndim = len(shape)
    if ndim <= 1:
        return list(range(ndim))
    contiguous = all(is_contiguous(shape, s) for s in operands)
    channels_last = all(_is_channels_last(shape, s) for s in operands)
    if contiguous and not channels_last:
        return list(range(ndim))
    if channels_last and not contiguous:
        return [0, *range(2, ndim), 1]

    def should_swap(a: int, b: int) -> int:
        for s in operands:
            sa, sb = s[a], s[b]
            if sa == 0 or sb == 0:
                continue
            if sa == sb:
                if _ge(shape[b], shape[a]):
                    continue
                return 1
            if _ge(sb, sa):
                return -1
            if _ge(sa, sb):
                return 1
        return 0

    perm = list(reversed(range(ndim)))
    insertion_sort(perm, should_swap)
    return list(reversed(perm))


def insertion_sort(perm: list[int], should_swap: Callable[[int, int], int]) -> None:
    """Sort `perm` in place as torch orders dimensions (TensorIterator's reorder_dimensions, prims'
    stride sort): an insertion sort that moves a dimension down while `should_swap` says 1 and stops
    at the first -1 (0, ambiguous, leaves the pair and looks further down)."""
    for i in range(1, len(perm)):
        dim1 = i
        for dim0 in reversed(range(i)):
            comparison = should_swap(perm[dim0], perm[dim1])
            if comparison > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif comparison < 0:
                break


def broadcast(operand: Operand, shape: Shape) -> Shape:
    """The strides of `operand` expanded to `shape` (torch._refs.expand: prims.broadcast_in_dim): a
    grown or added dimension of size > 1 strided 0, a kept one as it was, an added size-1 one by the
    operand's first dimension's extent."""
    own, strides = operand
    if own == shape:
        return strides
    offset = len(shape) - len(own)
    out = []
    for i, size in enumerate(shape):
        if i >= offset:
            j = i - offset
            out.append(0 if own[j] == 1 and size != 1 else strides[j])
        elif size != 1:
            out.append(0)
        else:
            out.append(1 if not own else strides[0] * own[0])
    return tuple(out)


def elementwise(shape: Shape, *operands: Operand) -> Shape:
    """The strides of an element-wise torch._refs op's output of `shape` on these tensor operands
    (numbers and CPU scalars aside: they take no part), each broadcast to `shape` first."""
    strides = [broadcast(operand, shape) for operand in operands]
    perm = _perm(shape, strides)
    physical = default_strides(tuple(shape[p] for p in perm))
    out = [0] * len(shape)
    for i, p in enumerate(perm):
        out[p] = physical[i]
    return tuple(out)


def layer_norm_backward(
    shape: Shape, k: int, grad_out: Shape | None, input: Shape | None, same_dtype: bool, weight: bool
) -> tuple[Shape, Shape, Shape]:
    """The strides of native_layer_norm_backward's grad-input, grad-weight and grad-bias (the stock
    meta kernel: torch._decomp's decomposition) over the last k of `shape`'s dimensions, from
    grad-output's and the input's strides, where the statistics, weight and bias have their
    shapes' default strides. The kernel first takes each of grad-output and the input `.to(float32,
    memory_format=torch.contiguous_format)`: a copy with the default strides where the dtype
    differs (`same_dtype` False: float16, bfloat16) or the tensor suggests channels-last, the tensor
    itself otherwise, whatever its strides; a caller passes None for an operand that is copied. So
    where the dtypes differ both are copied and every result has its shape's default strides (the
    cast back to the input's dtype keeps them)."""
    default = default_strides(shape)
    g = grad_out if same_dtype and grad_out is not None else default
    x = input if same_dtype and input is not None else default
    inner_shape = shape[len(shape) - k :]
    if g == default and x == default:  # the common case, answered without the sort (measured here: 50 us a call)
        return default, default_strides(inner_shape), default_strides(inner_shape)
    stats_shape = shape[: len(shape) - k] + (1,) * k
    stats = (stats_shape, default_strides(stats_shape))
    # a sum over the normalized dimensions, kept as 1s: prims.sum's contiguous result, broadcast_in_dim back
    summed = (stats_shape, default_strides(shape[: len(shape) - k]) + (1,) * k)
    x_hat = elementwise(shape, (shape, elementwise(shape, (shape, x), stats)), stats)  # (x - mean) * rstd
    g_hat = elementwise(shape, (shape, g), (inner_shape, default_strides(inner_shape))) if weight else g
    a = elementwise(shape, (shape, g_hat))  # g_hat * N
    c3 = elementwise(shape, (shape, x_hat), summed)  # x_hat * sum(g_hat * x_hat)
    inner = elementwise(shape, (shape, elementwise(shape, (shape, a), summed)), (shape, c3))  # a - b - c3
    grad_input = elementwise(shape, (stats_shape, elementwise(stats_shape, stats)), (shape, inner))  # rstd / N * inner
    if k < len(shape):  # sums over the leading dimensions: contiguous
        grad_weight = grad_bias = default_strides(inner_shape)
    else:
        grad_weight, grad_bias = elementwise(shape, (shape, g), (shape, x_hat)), g  # g * x_hat; g's clone
    return grad_input, grad_weight, grad_bias
