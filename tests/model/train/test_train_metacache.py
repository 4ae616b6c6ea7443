"""Meta kernels answered from a cache (archlint.model.train.metacache): the same results as running
the kernels, fewer kernels run."""

import gc
import json

import pytest
import torch
import torch.nn as nn

from archlint.model.train import memory, metacache
from archlint.model.train.memory import step_memory

aten = torch.ops.aten


def meta(*shape):
    return torch.empty(*shape, device="meta")


def test_functional_op_answered_from_cache_with_fresh_outputs():
    x, w = meta(2, 8, 5, 5), meta(8)
    args = (x, w, w, meta(8), meta(8), True, 0.1, 1e-5)
    before = dict(metacache.stats)
    first = metacache.run(aten.native_batch_norm.default, args, {})
    second = metacache.run(
        aten.native_batch_norm.default, (meta(2, 8, 5, 5), w, w, meta(8), meta(8), True, 0.1, 1e-5), {}
    )
    assert metacache.stats["hits"] >= before["hits"] + 1
    for a, b in zip(first, second):
        assert (a.shape, a.stride(), a.dtype) == (b.shape, b.stride(), b.dtype)
        assert a.untyped_storage().nbytes() == b.untyped_storage().nbytes()
        assert b.untyped_storage() is not x.untyped_storage()
    # a different shape is a different key: run, not answered
    third = metacache.run(
        aten.native_batch_norm.default, (meta(3, 8, 5, 5), w, w, meta(8), meta(8), True, 0.1, 1e-5), {}
    )
    assert third[0].shape == (3, 8, 5, 5)


def test_inplace_pointwise_returns_self():
    p, g = meta(4, 4), meta(4, 4)
    assert metacache.run(aten.add_.Tensor, (p, g), {"alpha": -0.1}) is p
    hits = metacache.stats["hits"]
    assert metacache.run(aten.add_.Tensor, (p, g), {"alpha": -0.1}) is p
    assert metacache.stats["hits"] == hits + 1


def test_optimizer_update_never_runs_its_kernel():
    # lerp_/addcdiv_ with operands of self's shape and dtype: nothing to check, not even once
    p, m, d = meta(7, 3, 5), meta(7, 3, 5), meta(7, 3, 5)
    runs = metacache.stats["runs"]
    assert metacache.run(aten.lerp_.Scalar, (m, p, 0.1), {}) is m
    assert metacache.run(aten.addcdiv_.default, (p, m, d), {"value": -1e-3}) is p
    assert metacache.stats["runs"] == runs
    # a broadcast is checked by the kernel the first time (and refused where it must be)
    with pytest.raises(RuntimeError):
        metacache.run(aten.add_.Tensor, (meta(3), meta(4, 3)), {})


def test_numbers_key_pointwise_ops_by_kind_and_other_ops_by_value():
    x = meta(9, 2)
    metacache.run(aten.div.Tensor, (x, 0.25), {})
    hits = metacache.stats["hits"]
    out = metacache.run(aten.div.Tensor, (x, 0.5), {})  # Adam's bias correction changes each step
    assert metacache.stats["hits"] == hits + 1 and out.shape == (9, 2)
    # an int divisor is another key: its kind can change the result's dtype
    assert metacache.run(aten.div.Tensor, (meta(3).long(), 2), {}).dtype == torch.float32
    # a non-element-wise op's numbers are sizes and dims: keyed by value
    assert metacache.run(aten.sum.dim_IntList, (x, [0]), {}).shape == (2,)
    assert metacache.run(aten.sum.dim_IntList, (x, [1]), {}).shape == (9,)


def test_inplace_op_that_is_not_pointwise_is_cached():
    x = meta(2, 16, 4, 4)
    metacache.run(aten.hardswish_.default, (x,), {})
    hits = metacache.stats["hits"]
    assert metacache.run(aten.hardswish_.default, (x,), {}) is x
    assert metacache.stats["hits"] == hits + 1
    # a view op in place changes metadata: always run
    y = meta(3, 5)
    assert metacache.run(aten.transpose_.default, (y, 0, 1), {}).shape == (5, 3)
    assert metacache.run(aten.transpose_.default, (y, 0, 1), {}).shape == (3, 5)


def test_view_in_disguise_is_not_rebuilt_fresh():
    # aten._unsafe_view's schema says it returns a fresh tensor; its kernel returns a view. A fresh
    # copy from the cache would count its bytes a second time.
    x = meta(4, 6)
    for _ in range(2):
        out = metacache.run(aten._unsafe_view.default, (x, [24]), {})
        assert out.untyped_storage() is x.untyped_storage()


def test_real_tensors_are_never_cached():
    step = torch.tensor(0.0)
    hits = metacache.stats["hits"]
    for _ in range(3):
        step = metacache.run(aten.add.Tensor, (step, torch.tensor(1.0)), {})
    assert step.item() == 3.0 and metacache.stats["hits"] == hits


def test_keying_an_op_leaves_no_reference_cycle():
    """The step runs with the cyclic collector off (model/stepped.py): a key that left a cycle (a
    closure that calls itself) left one an op, collected in one long pass after it (issue 45)."""
    x, y = meta(4, 6), meta(4, 6)
    gc.collect()
    gc.disable()
    try:
        for _ in range(50):
            assert metacache._key(aten.add.Tensor, ([x, (y, 2.0)], 1), {"alpha": 1}) is not None
        assert gc.collect() == 0
    finally:
        gc.enable()


@pytest.mark.parametrize("blocks", [1, 4])
def test_the_step_leaves_no_garbage_that_grows_with_its_ops(blocks):
    torch.manual_seed(0)
    model, x = nn.Sequential(*[Block(8) for _ in range(blocks)]), torch.randn(2, 8, 6, 6)
    step_memory(model, (x,), optimizer="adam")  # lazily built tables, once
    metacache.clear()
    gc.collect()
    gc.disable()
    try:
        step_memory(model, (x,), optimizer="adam")
        left = gc.collect()
    finally:
        gc.enable()
    assert left < 100  # torch's own pytree walks a few times a step; no longer one cycle an op


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c)
        self.attn = nn.MultiheadAttention(c, 2, batch_first=True)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x))) + x
        b, c, h, w = x.shape
        seq = x.flatten(2).transpose(1, 2)
        seq = seq + self.attn(seq, seq, seq, need_weights=False)[0]
        return seq.transpose(1, 2).reshape(b, c, h, w)


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adamw-foreach"])
def test_step_memory_same_with_and_without_cache(monkeypatch, optimizer):
    torch.manual_seed(0)
    model, x = nn.Sequential(*[Block(8) for _ in range(4)]), torch.randn(2, 8, 6, 6)
    ran = []
    real_run = metacache.run

    def counting(f, a, k):
        runs = metacache.stats["runs"]
        out = real_run(f, a, k)
        if metacache.stats["runs"] > runs:
            ran.append(f)
        return out

    monkeypatch.setattr(memory.metacache, "run", counting)
    cached = step_memory(model, (x,), optimizer=optimizer)
    calls = []
    monkeypatch.setattr(memory.metacache, "run", lambda f, a, k: calls.append(f) or f(*a, **k))
    plain = step_memory(model, (x,), optimizer=optimizer)
    assert json.dumps(cached, sort_keys=True) == json.dumps(plain, sort_keys=True)
    # the four blocks repeat one block's ops (the second step's forward and backward are the
    # first's, replayed: archlint.model.train.steady): batch norm's Python meta kernels run at
    # most once per key, not once per block
    assert calls.count(aten.native_batch_norm.default) == 4
    assert ran.count(aten.native_batch_norm.default) <= 1
    assert calls.count(aten.native_batch_norm_backward.default) == 4
    assert ran.count(aten.native_batch_norm_backward.default) <= 1
    assert len(ran) < 0.8 * len(calls)
    # the optimizer state's zeros_like is answered by its shape function, never its kernel
    assert ran.count(aten.zeros_like.default) == 0
    assert (calls.count(aten.zeros_like.default) > 0) == (optimizer != "sgd")


def fast_native_batch_norm(*args):
    return metacache._FAST[id(aten.native_batch_norm.default)](args, {})


def fast_native_batch_norm_backward(*args):
    return metacache._FAST[id(aten.native_batch_norm_backward.default)](args, {})


def _described(out):
    return [None if t is None else (tuple(t.shape), t.stride(), t.dtype, t.untyped_storage().nbytes()) for t in out]


@pytest.mark.parametrize("shape", [(2, 8, 5, 5), (1, 16, 7), (4, 32), (3, 4, 2, 2, 2)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_shape_functions_match_the_stock_meta_kernels(shape, affine):
    c = shape[1]
    x = meta(*shape)
    w = meta(c) if affine else None
    for running in ((meta(c), meta(c)), (None, None)):
        args = (x, w, w, *running, True, 0.1, 1e-5)
        fast = fast_native_batch_norm(*args)
        stock = aten.native_batch_norm.default(*args)
        assert _described(fast) == _described(stock)
        for mask in ([True, True, True], [True, False, False], [True, affine, affine]):
            bargs = (meta(*shape), x, w, *running, stock[1], stock[2], True, 1e-5, mask)
            assert _described(fast_native_batch_norm_backward(*bargs)) == _described(
                aten.native_batch_norm_backward.default(*bargs)
            )
    # what the shape functions do not cover is left to the stock kernel
    assert fast_native_batch_norm(x, w, w, None, None, False, 0.1, 1e-5) is None
    cl = torch.empty(2, 8, 5, 5, device="meta").to(memory_format=torch.channels_last)
    assert fast_native_batch_norm(cl, None, None, None, None, True, 0.1, 1e-5) is None
    assert fast_native_batch_norm(x.half(), None, None, None, None, True, 0.1, 1e-5) is None


@pytest.mark.parametrize(
    "func, extra, dtype",
    [
        (aten.hardswish.default, (), torch.float32),  # torch leaves this one untagged
        (aten.sigmoid_backward.default, ("same",), torch.float32),
        (aten.eq.Tensor, ("same",), torch.bool),
        (aten.div.Tensor, (2,), torch.float32),
    ],
)
def test_elementwise_ops_answered_on_a_new_shape_once_learnt(func, extra, dtype):
    def args(*shape):
        x = meta(*shape)
        return (x, *(meta(*shape) if e == "same" else e for e in extra))

    metacache.run(func, args(5, 3), {})  # learnt here
    runs = metacache.stats["runs"]
    out = metacache.run(func, args(11, 2, 7), {})
    assert metacache.stats["runs"] == runs
    stock = func(*args(11, 2, 7))
    assert (
        (out.shape, out.stride(), out.dtype)
        == (stock.shape, stock.stride(), stock.dtype)
        == ((11, 2, 7), (14, 7, 1), dtype)
    )


def test_learnt_elementwise_and_zeros_like_answered_without_a_key(monkeypatch):
    # the optimizer's sqrt and div, and its state's zeros_like: answered before any key is built
    metacache.run(aten.sqrt.default, (meta(5, 3),), {})  # learnt here
    metacache.run(aten.div.Tensor, (meta(5, 3), 2.0), {})

    def no_key(*args):
        raise AssertionError("keyed")

    monkeypatch.setattr(metacache, "_key", no_key)
    runs = metacache.stats["runs"]
    for out, stock in (
        (metacache.run(aten.sqrt.default, (meta(9, 4),), {}), torch.sqrt(meta(9, 4))),
        (metacache.run(aten.div.Tensor, (meta(9, 4), 3.0), {}), torch.div(meta(9, 4), 3.0)),
        (
            metacache.run(aten.zeros_like.default, (meta(9, 4),), {"memory_format": torch.preserve_format}),
            torch.zeros_like(meta(9, 4)),
        ),
    ):
        assert (out.shape, out.stride(), out.dtype) == (stock.shape, stock.stride(), stock.dtype)
    assert metacache.stats["runs"] == runs


def test_batch_norm_counter_step_answered_without_a_key(monkeypatch):
    # num_batches_tracked += 1 (an int64 tensor and a Python int): its kernel can only return `self`;
    # anything else (a float or bool number, one out of int64's range, an int32 tensor, alpha) is
    # keyed as before
    def no_key(*args):
        raise AssertionError("keyed")

    monkeypatch.setattr(metacache, "_key", no_key)
    counter = torch.zeros((), dtype=torch.int64, device="meta")
    assert metacache.run(aten.add_.Tensor, (counter, 1), {}) is counter
    assert metacache.run(aten.add_.Scalar, (meta(3, 2).long(), 7), {}).dtype == torch.int64
    for args, kwargs in (
        ((counter, 1.5), {}),
        ((counter, True), {}),
        ((counter, 2**70), {}),
        ((torch.zeros((), dtype=torch.int32, device="meta"), 1), {}),
        ((counter, 1), {"alpha": 2}),
    ):
        with pytest.raises(AssertionError, match="keyed"):
            metacache.run(aten.add_.Tensor, args, kwargs)


def test_keyless_elementwise_refuses_what_the_key_refuses():
    # a real tensor that is not a 0-dim scalar goes to the kernel (which refuses a meta/cpu mix), as
    # the key sends it, even once the op's dtypes are learnt; so does a tensor subclass
    metacache.run(aten.mul.Tensor, (meta(4, 3), meta(4, 3)), {})  # learnt
    with pytest.raises(RuntimeError):
        metacache.run(aten.mul.Tensor, (meta(4, 3), torch.ones(4, 3)), {})
    assert metacache._elementwise(aten.mul.Tensor, (meta(4, 3), torch.ones(4, 3)), {}, checked=False) == (None, False)
    sub = torch.Tensor._make_subclass(_Sub, meta(4, 3))
    assert metacache._elementwise(aten.mul.Tensor, (sub, meta(4, 3)), {}, checked=False) == (None, False)
    assert metacache._elementwise(aten.mul.Tensor, (meta(4, 3), object()), {}, checked=False) == (None, False)


class _Sub(torch.Tensor):
    pass


def test_elementwise_rule_needs_contiguous_operands():
    runs = metacache.stats["runs"]
    out = metacache.run(aten.mul.Tensor, (meta(4, 6).t(), meta(6, 4)), {})  # a transposed operand
    assert out.shape == (6, 4) and metacache.stats["runs"] == runs + 1
    out = metacache.run(aten.mul.Tensor, (meta(5, 7).t(), meta(7, 5)), {})  # on a new shape: never learnt
    assert out.shape == (7, 5) and metacache.stats["runs"] == runs + 2


@pytest.mark.parametrize(
    "func, pattern",
    [
        (aten.mul.Tensor, [(1, 0, 0, 0), (1, 0, 1, 1)]),  # a squeeze-excitation's scale: (N,C,H,W) * (N,C,1,1)
        (aten.mul.Tensor, [(1, 0, 1, 1), (1, 0, 0, 0)]),
        (aten.add.Tensor, [(2, 0), (0,)]),  # a bias over rows
        (aten.add.Tensor, [(0,), (2, 0)]),
        (aten.where.self, [(1, 1, 0, 0), (1, 0, 1, 0), (0, 0, 0, 0)]),
        (aten.mul.Tensor, [(0, 1), (1, 0)]),  # an outer product's broadcast
        (aten.mul.Tensor, [(2, 0, 3), ()]),  # a 0-dim meta tensor
    ],
)
def test_broadcast_elementwise_answered_once_learnt_for_its_pattern(func, pattern):
    """Sizes stand for a dimension: 0 a free size (drawn per call, never 1), other numbers that size;
    the broadcast rule learns from the first call and answers the next ones as the stock kernel does."""
    metacache.clear()

    def operands(free):
        # a dimension's free size by its place from the right, as broadcasting aligns them
        dims = [[free[len(shape) - 1 - i] if d == 0 else d for i, d in enumerate(shape)] for shape in pattern]
        tensors = [torch.empty(tuple(d), device="meta") for d in dims]
        if func is aten.where.self:
            tensors[0] = tensors[0].bool()
        return tuple(tensors)

    metacache.run(func, operands([5, 3, 7, 2]), {})  # learnt here
    runs = metacache.stats["runs"]
    for free in ([11, 6, 2, 9], [2, 2, 2, 2], [7, 13, 3, 5]):
        out = metacache.run(func, operands(free), {})
        stock = func(*operands(free))
        assert (out.shape, out.stride(), out.dtype) == (stock.shape, stock.stride(), stock.dtype)
    assert metacache.stats["runs"] == runs  # answered, not run


def test_broadcast_rule_leaves_what_it_cannot_know_to_the_kernel():
    metacache.clear()
    runs = metacache.stats["runs"]
    with pytest.raises(RuntimeError):  # shapes that do not broadcast: the kernel's own error
        metacache.run(aten.mul.Tensor, (meta(4, 3), meta(5, 3)), {})
    metacache.run(aten.mul.Tensor, (meta(4, 0, 3), meta(4, 1, 3)), {})  # an empty operand: run
    metacache.run(aten.mul.Tensor, (meta(5, 0, 2), meta(5, 1, 2)), {})  # and on new shapes: run again
    assert metacache.stats["runs"] == runs + 3


def test_a_torch_without_the_inplace_tag_still_finds_in_place_ops(monkeypatch):
    # torch 2.11 has no Tag.inplace: in-place ops are then known by their name, and the
    # memory model ran there with an AttributeError before (seen on a lent H200, torch 2.11)
    import torch

    monkeypatch.setattr(metacache, "_INPLACE", None)
    monkeypatch.setattr(metacache, "_kinds", {})
    assert metacache._kind(torch.ops.aten.add_.Tensor) == "inplace-pointwise"
    assert metacache._kind(torch.ops.aten.add.Tensor) == "functional"
    assert metacache._kind(torch.ops.aten.transpose_.default) == ""


def _zeros_like_cases():
    odd = torch.empty_strided((1, 64), (1, 1), device="meta")  # contiguous; preserve_format gives (64, 1)
    cl = torch.empty(2, 8, 5, 5, device="meta").to(memory_format=torch.channels_last)
    return [meta(64, 32, 3, 3), meta(7), meta(3, 1, 5), odd, meta(2, 3).half(), cl, meta(4, 6).t()]


@pytest.mark.parametrize("op", [aten.zeros_like.default, aten.ones_like.default, aten.empty_like.default])
@pytest.mark.parametrize("memory_format", [None, torch.preserve_format, torch.contiguous_format])
def test_the_fresh_like_shape_function_matches_the_stock_meta_kernel(op, memory_format):
    # the optimizers' state (exp_avg, momentum buffers) is made with zeros_like, the loss's gradient
    # with ones_like, dropout's mask with empty_like, whose meta kernels are Python decompositions;
    # a shape function answers the dense cases
    fast = metacache._FAST[id(op)]
    # as torch.zeros_like calls it (Adam's state): pin_memory=False, memory_format=preserve
    kwargs = {} if memory_format is None else {"pin_memory": False, "memory_format": memory_format}
    answered = 0
    for x in _zeros_like_cases():
        out = fast((x,), kwargs)
        if out is not None:
            answered += 1
            assert _described([out]) == _described([op(x, **kwargs)])
    assert answered == 4  # default strides; a size-1 dim's own stride, channels-last, a transpose: the stock kernel
    assert fast((meta(3, 4),), {"dtype": torch.float16}) is None


def _conv_cases():
    # (input, weight, stride, padding, dilation, groups): dense, strided, padded, dilated, grouped,
    # depthwise, 1-D and 3-D, channels-last input, half, a kernel as large as the padded input
    cl = torch.empty(2, 8, 9, 9, device="meta").to(memory_format=torch.channels_last)
    return [
        (meta(1, 3, 224, 224), meta(16, 3, 3, 3), [2, 2], [1, 1], [1, 1], 1),
        (meta(2, 8, 9, 7), meta(12, 8, 1, 1), [1, 1], [0, 0], [1, 1], 1),
        (meta(2, 8, 9, 7), meta(8, 4, 3, 5), [2, 1], [1, 2], [2, 1], 2),
        (meta(1, 32, 14, 14), meta(32, 1, 5, 5), [1, 1], [2, 2], [1, 1], 32),
        (meta(2, 4, 17), meta(6, 4, 4), [3], [1], [1], 1),
        (meta(1, 2, 5, 6, 7), meta(3, 2, 3, 3, 3), [1, 2, 1], [1, 0, 1], [1, 1, 2], 1),
        (cl, meta(8, 8, 3, 3), [1, 1], [1, 1], [1, 1], 1),
        (meta(1, 4, 8, 8).half(), meta(4, 4, 3, 3).half(), [1, 1], [0, 0], [1, 1], 1),
        (meta(1, 4, 3, 3), meta(4, 4, 5, 5), [1, 1], [1, 1], [1, 1], 1),
    ]


def test_convolution_shape_function_matches_the_stock_meta_kernel():
    fast = metacache._FAST[id(aten.convolution.default)]
    for x, w, stride, padding, dilation, groups in _conv_cases():
        for bias in (None, meta(w.shape[0]).to(w.dtype)):
            args = (x, w, bias, stride, padding, dilation, False, [0] * (x.dim() - 2), groups)
            out = fast(args, {})
            assert out is not None
            assert _described([out]) == _described([aten.convolution.default(*args)])
    # what it does not cover goes to the stock kernel: transposed, a kernel larger than the padded
    # input (the kernel refuses it), channels that do not match the groups, a stride given once
    x, w = meta(1, 4, 8, 8), meta(4, 4, 3, 3)
    assert fast((x, w, None, [1, 1], [0, 0], [1, 1], True, [0, 0], 1), {}) is None
    assert fast((meta(1, 4, 2, 2), w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1), {}) is None
    assert fast((x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 2), {}) is None
    assert fast((x, w, None, [1], [0, 0], [1, 1], False, [0, 0], 1), {}) is None
    with pytest.raises(RuntimeError):
        aten.convolution.default(meta(1, 4, 2, 2), w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)


def test_convolution_backward_shape_function_matches_the_stock_meta_kernel():
    fast = metacache._FAST[id(aten.convolution_backward.default)]
    answered = 0
    for x, w, stride, padding, dilation, groups in _conv_cases():
        out = aten.convolution.default(x, w, None, stride, padding, dilation, False, [0] * (x.dim() - 2), groups)
        for mask in ([True, True, True], [False, True, True], [True, False, False]):
            args = (torch.empty_like(out), x, w, [w.shape[0]], stride, padding, dilation, False, [0], groups, mask)
            got = fast(args, {})
            stock = aten.convolution_backward.default(*args)
            if got is None:  # channels-last: the stock kernel's
                assert x.is_contiguous(memory_format=torch.channels_last) or w.is_contiguous(
                    memory_format=torch.channels_last
                )
                continue
            answered += 1
            assert _described(got) == _described(stock)
    assert answered >= 15


def test_foreach_optimizer_update_never_runs_its_kernel():
    # the foreach optimizers (torch's default on CUDA, so every --device-spec GPU step): an in-place
    # foreach op on operands of each `self`'s shape and dtype returns nothing without its Python
    # meta kernel (a loop of element-wise meta kernels, a millisecond a tensor)
    ps, ms, vs = [meta(7, 3), meta(5)], [meta(7, 3), meta(5)], [meta(7, 3), meta(5)]
    runs = metacache.stats["runs"]
    assert metacache.run(aten._foreach_lerp_.Scalar, (ms, ps, 0.1), {}) is None
    assert metacache.run(aten._foreach_addcdiv_.ScalarList, (ps, ms, vs, [-1e-3, -2e-3]), {}) is None
    assert metacache.run(aten._foreach_mul_.Scalar, (vs, 0.999), {}) is None
    assert metacache.run(aten._foreach_add_.Tensor, (ps, torch.tensor(2.0)), {}) is None  # a real scalar
    assert metacache.stats["runs"] == runs  # was: each ran its kernel, every step of every max_batch evaluation
    assert metacache._kind(aten._foreach_addcmul_.Scalar) == "inplace-foreach"
    # a mismatch (a broadcast, another dtype, lists of other lengths) runs the kernel, which refuses it
    with pytest.raises(RuntimeError):
        metacache.run(aten._foreach_add_.List, ([meta(3)], [meta(4, 3)]), {})
    assert metacache.stats["runs"] == runs + 1
    assert metacache.run(aten._foreach_add_.List, ([meta(3)], [meta(3).half()]), {}) is None
    assert metacache.stats["runs"] == runs + 2


def test_foreach_step_memory_same_with_and_without_the_fast_path(monkeypatch):
    from archlint.devices import resolve

    torch.manual_seed(0)
    model, x = nn.Sequential(*[Block(8) for _ in range(2)]), torch.randn(2, 8, 6, 6)
    spec = resolve("h100-sxm", None)
    fast = step_memory(model, (x,), optimizer="adam", device_spec=spec, budget_bytes=spec.memory_bytes)
    monkeypatch.setattr(metacache, "_foreach_same_as_self", lambda args, kwargs: False)
    slow = step_memory(model, (x,), optimizer="adam", device_spec=spec, budget_bytes=spec.memory_bytes)
    assert json.dumps(fast, sort_keys=True) == json.dumps(slow, sort_keys=True)
