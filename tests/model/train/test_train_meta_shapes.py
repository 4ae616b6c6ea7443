"""The meta step's shortcuts for ops whose stock meta kernel is slow Python (archlint.model.train.metacache):
each answers exactly what the stock kernel gives, or leaves the op to it; and the real values beside
the meta tensors (archlint.model.train.values) are computed on one thread."""

import itertools
import json

import pytest
import torch
import torch.nn as nn

from archlint.model.train import metacache, values
from archlint.model.train.memory import step_memory

aten = torch.ops.aten


def meta(*shape, dtype=torch.float32):
    return torch.empty(*shape, device="meta", dtype=dtype)


def _described(out):
    outs = out if isinstance(out, (tuple, list)) else [out]
    return [None if t is None else (tuple(t.shape), t.stride(), t.dtype, t.untyped_storage().nbytes()) for t in outs]


def _same_as_stock(func, args, kwargs=None) -> bool:
    """The shape function's answer is the stock kernel's, where it answers (True), or it leaves the
    op to the kernel (False); it never answers where the kernel raises."""
    kwargs = kwargs or {}
    got = metacache._FAST[id(func)](args, kwargs)
    try:
        stock = func(*args, **kwargs)
    except RuntimeError:
        assert got is None, (func, args)
        return False
    if got is None:
        return False
    assert _described(got) == _described(stock), (func, [getattr(a, "shape", a) for a in args])
    return True


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_reduction_shape_functions_match_the_stock_meta_kernels(dtype):
    answered, cases = 0, 0
    for rank in (1, 2, 3, 4):
        for shape in itertools.product((1, 3), repeat=rank):
            x = meta(*shape, dtype=dtype)
            for r in range(1, rank + 1):
                for dims in itertools.combinations(range(rank), r):
                    for keepdim in (True, False):
                        for dim in (list(dims), [d - rank for d in dims]):
                            for func in (aten.mean.dim, aten.sum.dim_IntList):
                                answered += _same_as_stock(func, (x, dim, keepdim))
                                cases += 1
            answered += _same_as_stock(aten.mean.dim, (x, [0]), {"keepdim": True})
            cases += 1
    assert answered == cases == 2510  # every one (size-1 dimensions among them)
    for shape in ((3,), (1, 1000), (2, 1, 3, 4)):  # mean.default and sum.default: a loss
        for func in (aten.mean.default, aten.sum.default):
            assert _same_as_stock(func, (meta(*shape, dtype=dtype),))
    # left to the stock kernel: a repeated or out-of-range dimension, a dtype asked for, a
    # transposed or an empty input, an integer input (sum gives int64), no dimension
    x = meta(2, 3, 4)
    for args, kwargs in (
        ((x, [1, 1], True), {}),
        ((x, [3]), {}),
        ((x, [1]), {"dtype": torch.float64}),
        ((x.transpose(0, 1), [1]), {}),
        ((meta(2, 0, 4), [1]), {}),
        ((torch.empty(2, 3, device="meta", dtype=torch.int64), [1]), {}),
        ((x, []), {}),
        ((x, None), {}),
    ):
        assert metacache._FAST[id(aten.sum.dim_IntList)](args, kwargs) is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_mm_and_addmm_shape_functions_match_the_stock_meta_kernels(dtype):
    answered, cases = 0, 0
    for n, m, p in itertools.product((1, 2, 3), (1, 2), (1, 2, 3)):
        a = meta(n, m, dtype=dtype)
        for b in (meta(m, p, dtype=dtype), meta(p, m, dtype=dtype).t()):
            answered += _same_as_stock(aten.mm.default, (a, b))
            cases += 1
            for bias in (
                meta(p, dtype=dtype),
                meta(1, p, dtype=dtype),
                meta(n, p, dtype=dtype),
                meta(n, 1, dtype=dtype),
                torch.empty((), dtype=dtype, device="meta"),
            ):
                answered += _same_as_stock(aten.addmm.default, (bias, a, b))
                answered += _same_as_stock(aten.addmm.default, (bias, a, b), {"beta": 1, "alpha": 1})
                cases += 2
    assert answered == cases == 18 * 2 * 11  # every one (a bias over rows, over columns, 0-dim, N or P of 1)
    a, b, bias = meta(3, 2, dtype=dtype), meta(2, 4, dtype=dtype), meta(4, dtype=dtype)
    for args, kwargs in (
        ((bias, a, b), {"beta": 0}),  # other factors, a strided or mismatched bias, other dtypes
        ((bias, a, b), {"alpha": 2.0}),
        ((meta(8, dtype=dtype)[::2], a, b), {}),
        ((meta(5, dtype=dtype), a, b), {}),
        ((bias, a, meta(2, 4, dtype=torch.float64)), {}),
        ((bias, a, meta(3, 4, dtype=dtype)), {}),
    ):
        assert metacache._FAST[id(aten.addmm.default)](args, kwargs) is None
    assert metacache._FAST[id(aten.mm.default)]((a, meta(3, 4, dtype=dtype)), {}) is None  # the kernel's error


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_layer_norm_shape_functions_match_the_stock_meta_kernels(dtype):
    answered, cases = 0, 0
    for rank in (1, 2, 3):
        for shape in itertools.product((1, 3), repeat=rank):
            x = meta(*shape, dtype=dtype)
            for k in range(1, rank + 1):
                ns = list(shape[-k:])
                for w, b in ((meta(*ns, dtype=dtype), meta(*ns, dtype=dtype)), (None, None)):
                    answered += _same_as_stock(aten.native_layer_norm.default, (x, ns, w, b, 1e-5))
                    out = aten.native_layer_norm.default(x, ns, w, b, 1e-5)
                    cases += 1
                    for mask in ([True, True, True], [True, False, False], [False, True, True]):
                        bargs = (meta(*shape, dtype=dtype), x, ns, out[1], out[2], w, b, mask)
                        answered += _same_as_stock(aten.native_layer_norm_backward.default, bargs)
                        cases += w is not None or mask == [True, False, False]  # no weight: grad-input alone
    assert answered == cases == 34 * (2 + 3 + 1)  # 34 shapes and normalized dimensions
    x, w = meta(2, 3), meta(3)
    assert (
        metacache._FAST[id(aten.native_layer_norm.default)](
            (meta(2, 3, dtype=torch.float64), [3], None, None, 1e-5), {}
        )
        is None
    )
    assert metacache._FAST[id(aten.native_layer_norm.default)]((x, [2], w, w, 1e-5), {}) is None  # the kernel's error
    assert metacache._FAST[id(aten.native_layer_norm.default)]((x.t().contiguous().t(), [3], w, w, 1e-5), {}) is None


def _layouts(shape):
    """Strides for a tensor of `shape`: the default ones with each size-1 dimension's stride kept, 0
    or 12345 (torch counts them all contiguous), and every other order of the dimensions."""
    default = metacache._default_strides(shape)
    ones = [i for i, n in enumerate(shape) if n == 1]
    for choice in itertools.product((None, 0, 12345), repeat=len(ones)):
        strides = list(default)
        for i, c in zip(ones, choice):
            strides[i] = strides[i] if c is None else c
        yield tuple(strides)
    for order in itertools.permutations(range(len(shape))):
        if list(order) != sorted(order):
            steps = metacache._default_strides(tuple(shape[i] for i in order))
            yield tuple(steps[order.index(i)] for i in range(len(shape)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_layer_norm_backward_follows_the_stock_kernel_over_strides(dtype):
    """Grad-output and input of other strides (ViT's class token's gradient: (1, 197, 768) strided
    (768, 768, 1); ConvNeXt's permuted input; their size-1 dimensions' strides reach the results
    in float32) get the stock kernel's results, strides and all; ViT's and ConvNeXt's own cases
    among them."""
    answered = 0
    for rank in (1, 2, 3):
        for shape in itertools.product((1, 3), repeat=rank):
            layouts = list(_layouts(shape))
            for k in range(1, rank + 1):
                ns = list(shape[-k:])
                stats = meta(*shape[: rank - k], *[1] * k)
                for i, g in enumerate(layouts):
                    for x in layouts[i % 5 :: 5]:
                        for w in (meta(*ns, dtype=dtype), None):
                            args = (
                                torch.empty_strided(shape, g, dtype=dtype, device="meta"),
                                torch.empty_strided(shape, x, dtype=dtype, device="meta"),
                                *(ns, stats, stats, w, w, [True, w is not None, w is not None]),
                            )
                            assert _same_as_stock(aten.native_layer_norm_backward.default, args)
                            answered += 1
    assert answered == 2384
    for g, x, ns in (
        (((1, 197, 8), (8, 8, 1)), ((1, 197, 8), (1576, 8, 1)), [8]),  # ViT's last norm
        (((1, 1, 1, 8), (8, 1, 1, 1)), ((1, 1, 1, 8), (8, 8, 8, 1)), [8]),  # ConvNeXt's head norm
        (((1, 5, 5, 8), (200, 40, 8, 1)), ((1, 5, 5, 8), (200, 5, 1, 25)), [8]),  # its permuted input
    ):
        stats = meta(*g[0][:-1], 1)
        w = meta(*ns, dtype=dtype)
        args = (
            torch.empty_strided(*g, dtype=dtype, device="meta"),
            torch.empty_strided(*x, dtype=dtype, device="meta"),
        )
        assert _same_as_stock(aten.native_layer_norm_backward.default, (*args, ns, stats, stats, w, w, [True] * 3))


def _expanded(pattern, sizes, dtype=torch.float32):
    """A contiguous tensor expanded: per dimension 'e' grown from 1 to its size, '1' size 1, 'f' its size."""
    base = [1 if p in "e1" else s for p, s in zip(pattern, sizes)]
    return meta(*base, dtype=dtype).expand([s if p in "ef" else 1 for p, s in zip(pattern, sizes)])


@pytest.mark.parametrize(
    "func, operands",
    [
        (aten.div.Scalar, lambda a, full: (a, 49)),  # mean's backward: the gradient expanded, divided
        (aten.mul.Tensor, lambda a, full: (a, full)),
        (aten.add.Tensor, lambda a, full: (full, a)),
        (aten.sigmoid.default, lambda a, full: (a,)),
        (aten.threshold_backward.default, lambda a, full: (a, full, 0)),
        (aten.mul.Tensor, lambda a, full: (a, a)),
    ],
)
@pytest.mark.parametrize("pattern", ["ffee", "1fee", "fe", "e", "efe1", "1e1f"])
def test_elementwise_on_an_expanded_operand_answered_once_learnt_as_the_stock_kernel(func, operands, pattern):
    def args(sizes):
        a = _expanded(pattern, sizes)
        full = meta(*[s if p in "ef" else 1 for p, s in zip(pattern, sizes)])
        return operands(a, full)

    metacache.clear()
    metacache.run(func, args([5, 3, 7, 2][: len(pattern)]), {})  # learnt here
    runs = metacache.stats["runs"]
    for sizes in ([11, 6, 2, 9], [2, 2, 2, 2], [7, 13, 3, 5]):
        out = metacache.run(func, args(sizes[: len(pattern)]), {})
        assert _described(out) == _described(func(*args(sizes[: len(pattern)])))
    assert metacache.stats["runs"] == runs  # answered, not run


def test_expanded_operand_rule_refuses_other_strides():
    no = (False, False, False)
    assert metacache._expanded((2, 5, 7), (5, 1, 0)) == (no, no, (True, False, False))
    assert metacache._expanded((2, 5, 7), (35, 7, 1)) is None  # contiguous: not expanded
    assert metacache._expanded((2, 5, 7), (0, 7, 1)) == ((True, False, False), no, no)
    # an expand of a 0-dim tensor (the loss's gradient): its size-1 dimension's stride 0 is in the pattern
    assert metacache._expanded((1, 1000), (0, 0)) == ((False, True, True), (True, False, False))
    assert metacache._expanded((2, 5, 7), (0, 1, 5)) is None  # a transpose expanded
    assert metacache._expanded((2, 1, 7), (7, 0, 1)) is None  # a size-1 dimension with stride 0: not grown
    metacache.clear()
    transposed = meta(7, 5).t().unsqueeze(0).expand(3, 5, 7)
    runs = metacache.stats["runs"]
    metacache.run(aten.div.Scalar, (transposed, 2), {})
    metacache.run(aten.div.Scalar, (meta(9, 4).t().unsqueeze(0).expand(3, 4, 9), 2), {})
    assert metacache.stats["runs"] == runs + 2  # never learnt: each runs its kernel


class _Net(nn.Module):
    """Convolutions, batch norms, a squeeze-excitation mean (and its backward's expand), linear
    layers, a layer norm: every op the shape functions answer."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        x = self.bn(self.conv(x)).relu()
        x = x * torch.sigmoid(x.mean((2, 3), keepdim=True))
        return self.head(self.norm(self.fc(x.mean((2, 3)))))


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_step_memory_same_with_and_without_the_shape_functions(monkeypatch, optimizer):
    torch.manual_seed(0)
    model, x = _Net(), torch.randn(2, 3, 6, 6)
    metacache.clear()
    before = dict(metacache.stats)
    fast = step_memory(model, (x,), optimizer=optimizer)
    fast_runs = metacache.stats["runs"] - before["runs"]
    monkeypatch.setattr(metacache, "_FAST", {})
    monkeypatch.setattr(metacache, "_expanded", lambda shape, strides: None)
    metacache.clear()
    before = dict(metacache.stats)
    slow = step_memory(model, (x,), optimizer=optimizer)
    assert json.dumps(fast, sort_keys=True) == json.dumps(slow, sort_keys=True)
    assert metacache.stats["runs"] - before["runs"] >= fast_runs + 8  # kernels the shortcuts answered


def test_shape_functions_leave_what_the_key_refuses_to_the_kernel():
    """Answered before any key is built, each checks what the key would refuse: a real or subclassed
    tensor, an argument that is not a plain value."""

    class Sub(torch.Tensor):
        pass

    x, w = meta(1, 4, 5, 5), meta(4, 4, 3, 3)
    conv = metacache._FAST[id(aten.convolution.default)]
    assert conv((x, w, meta(4), [1, 1], [1, 1], [1, 1], False, [0, 0], 1), {}) is not None
    assert conv((x, w, torch.zeros(4), [1, 1], [1, 1], [1, 1], False, [0, 0], 1), {}) is None  # a real bias
    assert conv((x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1.0), {}) is None
    assert conv((x, w, None, [1, 1.0], [1, 1], [1, 1], False, [0, 0], 1), {}) is None
    bn = metacache._FAST[id(aten.native_batch_norm.default)]
    c = meta(4)
    assert bn((x, c, c, c, c, True, 0.1, 1e-5), {}) is not None
    assert bn((x.as_subclass(Sub), c, c, c, c, True, 0.1, 1e-5), {}) is None
    assert bn((x, c, c, c, c, 1, 0.1, 1e-5), {}) is None
    assert bn((x, c, c, c, c, True, None, 1e-5), {}) is None
    assert metacache._FAST[id(aten.mean.dim)]((x.as_subclass(Sub), [2, 3], True), {}) is None
    assert metacache._FAST[id(aten.mm.default)]((meta(2, 3), torch.zeros(3, 4)), {}) is None


def test_real_values_are_computed_on_one_thread(monkeypatch, two_threads):
    """An op on known values runs on one thread (values._one_thread): GPT-2's causal `tril` of its
    128x128 mask took 1-21 ms on two threads of a busy machine, 5 us on one."""
    threads = []
    real = values._one_thread
    monkeypatch.setattr(
        values, "_one_thread", lambda func, a, k: threads.append(torch.get_num_threads()) or real(func, a, k)
    )
    known = values.KnownValues()
    mask = meta(6, 6, dtype=torch.bool)
    known.know(mask, torch.ones(6, 6, dtype=torch.bool))
    out = known.run(aten.tril.default, (mask,), {}, metacache.run)
    assert torch.equal(known.values[out], torch.ones(6, 6, dtype=torch.bool).tril())
    assert threads == [2] and torch.get_num_threads() == 2  # given back
    assert real(lambda: torch.get_num_threads(), (), {}) == 1


_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.bool)


@pytest.mark.parametrize(
    "func, operands",
    [
        (aten.hardsigmoid.default, lambda s, a, b: (meta(*s, dtype=a),)),
        (aten.relu.default, lambda s, a, b: (meta(*s, dtype=a),)),
        (aten.sigmoid.default, lambda s, a, b: (meta(*s, dtype=a),)),
        (aten.gelu.default, lambda s, a, b: (meta(*s, dtype=a),)),
        (aten.isnan.default, lambda s, a, b: (meta(*s, dtype=a),)),
        (aten.mul.Tensor, lambda s, a, b: (meta(*s, dtype=a), meta(*s, dtype=b))),
        (aten.add.Tensor, lambda s, a, b: (meta(*s, dtype=a), meta(*s, dtype=b))),
        (aten.div.Tensor, lambda s, a, b: (meta(*s, dtype=a), meta(*s, dtype=b))),
        (aten.eq.Tensor, lambda s, a, b: (meta(*s, dtype=a), meta(*s, dtype=b))),
        (aten.hardswish_backward.default, lambda s, a, b: (meta(*s, dtype=a), meta(*s, dtype=b))),
        (aten.threshold_backward.default, lambda s, a, b: (meta(*s, dtype=a), meta(*s, dtype=b), 0)),
        (aten.tanh_backward.default, lambda s, a, b: (meta(*s, dtype=a), meta(*s, dtype=b))),
        (aten.where.self, lambda s, a, b: (meta(*s, dtype=torch.bool), meta(*s, dtype=a), meta(*s, dtype=b))),
        (aten.mul.Tensor, lambda s, a, b: (meta(*s, dtype=a), torch.tensor(2.0, dtype=torch.float64))),  # a real scalar
        (aten.div.Scalar, lambda s, a, b: (meta(*s, dtype=a), 3)),
        (aten.pow.Tensor_Scalar, lambda s, a, b: (meta(*s, dtype=a), 2.0)),
    ],
)
def test_elementwise_learnt_on_stand_ins_answers_as_the_stock_kernel(func, operands):
    """An element-wise op on operands of one contiguous shape learns its output dtypes from its
    kernel run on 1-D stand-ins (metacache._learn_on_stand_ins), its first call included: the
    same as the stock kernel's on that shape and on the next ones, for every pair of dtypes (where
    the stock kernel raises, the call raises too)."""
    learnt = 0
    for a, b in itertools.product(_DTYPES, repeat=2):
        metacache.clear()
        try:
            stock = [func(*operands(s, a, b)) for s in ((3, 4, 5), (2, 1, 7, 3))]
        except RuntimeError:
            with pytest.raises(RuntimeError):
                metacache.run(func, operands((3, 4, 5), a, b), {})
            continue
        for s, expected in zip(((3, 4, 5), (2, 1, 7, 3)), stock):
            assert _described(metacache.run(func, operands(s, a, b), {})) == _described(expected), (a, b, s)
        learnt += len(metacache._learned)
    assert learnt >= 6


def test_stand_ins_the_op_refuses_leave_it_to_its_own_run(monkeypatch):
    """Where the kernel refuses the stand-ins, or gives anything but a fresh output of their shape,
    nothing is learnt from them: the op runs as called (and learns there, as before)."""
    x = meta(4, 6)
    assert metacache._learn_on_stand_ins(aten.mul.Tensor, (x, x), {}) == (None, [torch.float32])
    assert metacache._learn_on_stand_ins(aten.add.Tensor, (x, meta(4, 6, dtype=torch.float16)), {}) == (
        None,
        [torch.float32],
    )
    assert metacache._learn_on_stand_ins(aten.t.default, (x,), {}) is None  # not of the stand-in's shape
    assert metacache._learn_on_stand_ins(aten.select.int, (x, 1, 2), {}) is None  # the kernel refuses a 1-D one
    metacache.clear()
    calls = []
    monkeypatch.setattr(metacache, "_learn_on_stand_ins", lambda *a: calls.append(a) and None)
    runs = metacache.stats["runs"]
    out = metacache.run(aten.expm1.default, (meta(3, 5),), {})  # (no CPU rule: metacache._CPU_RULE_OPS)
    assert _described(out) == _described(aten.expm1.default(meta(3, 5))) and len(calls) == 1
    assert metacache.stats["runs"] == runs + 1
    metacache.run(aten.expm1.default, (meta(6, 2),), {})  # learnt from the run as called
    assert metacache.stats["runs"] == runs + 1 and len(calls) == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_select_backward_shape_function_matches_the_stock_meta_kernel(dtype):
    """Every dimension and index (negative ones too) of a few shapes, the gradient with each of its
    layouts (odd size-1 strides, permuted: the result's strides never follow them): the stock
    kernel's result; an index, a dimension or a gradient shape it does not cover: the kernel's."""
    answered = 0
    for sizes in ([3, 197, 1, 768], [1, 197, 768], [2, 5], [4], [3, 0, 2]):
        n = len(sizes)
        for dim in range(-n, n):
            selected = tuple(s for i, s in enumerate(sizes) if i != dim % n)
            for index in range(-sizes[dim], sizes[dim]):
                for strides in _layouts(selected):
                    grad = torch.empty_strided(selected, strides, device="meta", dtype=dtype)
                    answered += _same_as_stock(aten.select_backward.default, (grad, sizes, dim, index))
    assert answered > 500
    fast = metacache._FAST[id(aten.select_backward.default)]
    grad = meta(2, 3, dtype=dtype)
    assert fast((grad, [2, 5, 3], 1, 5), {}) is None  # an index out of range
    assert fast((grad, [2, 5, 3], 3, 0), {}) is None  # a dimension out of range
    assert fast((meta(2, 4, dtype=dtype), [2, 5, 3], 1, 0), {}) is None  # not the selected shape
    assert fast((grad, [2, 5, 3], 1, True), {}) is None  # not an int


@pytest.mark.parametrize("func", [aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor])
def test_elementwise_on_odd_size_one_strides_answered_as_the_stock_kernel(func):
    """Two operands of one shape, each with every layout of `_layouts` (size-1 dimensions strided
    0, as their default or 12345; permuted), among them ViT's class token's (1, 197, 768) strided
    (768, 768, 1), channels-last ones and those of a single element or none: the stock kernel's
    results, each after the shape's first, default-strided, call has taught the op's dtypes; the
    odd size-1 strides answered without a run."""
    answered = 0
    for shape in [(1, 197, 768), (3, 1, 5), (2, 1, 1, 3), (1, 4, 1, 1), (1, 1, 1, 1), (1, 1), (0, 1, 3)]:
        metacache.clear()
        metacache.run(func, (meta(*shape), meta(*shape)), {})  # learnt here, where the shape allows
        for a, b in itertools.product(_layouts(shape), repeat=2):
            args = (torch.empty_strided(shape, a, device="meta"), torch.empty_strided(shape, b, device="meta"))
            runs = metacache.stats["runs"]
            assert _described(metacache.run(func, args, {})) == _described(func(*args)), (shape, a, b)
            answered += metacache.stats["runs"] == runs
    assert answered > 300
    metacache.clear()
    metacache.run(func, (meta(2, 3), meta(2, 3)), {})
    runs = metacache.stats["runs"]
    metacache.run(func, (torch.empty_strided((1, 3), (7, 1), device="meta"), meta(2, 3)), {})  # a broadcast
    metacache.run(func, (meta(1, 4, 1, 1).to(memory_format=torch.channels_last), meta(1, 4, 1, 1)), {})
    assert metacache.stats["runs"] == runs + 2  # left to the kernel


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cat_shape_function_matches_the_stock_meta_kernel(dtype):
    """Tensors of each layout of `_layouts` (odd size-1 strides, permuted: the result's strides never
    follow them) along each dimension (negative ones too), ViT's class token and patches among
    them: the stock kernel's result; what it does not cover (a dtype mixed in, a size that does not
    match, an empty tensor, 4-D, an odd dimension): the kernel's."""
    answered = 0
    for shapes in ([(1, 1, 768), (1, 196, 768)], [(2, 3), (2, 5), (2, 1)], [(4,), (7,)], [(3, 1, 2)] * 3):
        n = len(shapes[0])
        for dim in range(-n, n):
            grown = [tuple(7 if i == dim % n else s for i, s in enumerate(shapes[0])), *shapes[1:]]
            for cases in (shapes, grown):
                for layouts in itertools.product(*[list(_layouts(s))[:4] for s in cases]):
                    tensors = [torch.empty_strided(s, st, device="meta", dtype=dtype) for s, st in zip(cases, layouts)]
                    answered += _same_as_stock(aten.cat.default, (tensors, dim))
    assert answered > 100
    fast = metacache._FAST[id(aten.cat.default)]
    assert fast(([meta(2, 3, dtype=dtype), meta(2, 3, dtype=torch.float64)], 0), {}) is None
    assert fast(([meta(2, 3, dtype=dtype), meta(2, 4, dtype=dtype)], 0), {}) is None  # the kernel raises
    assert fast(([meta(2, 3, dtype=dtype), meta(0, dtype=dtype)], 0), {}) is None  # the legacy empty tensor
    assert fast(([meta(1, 2, 3, 3, dtype=dtype)] * 2, 1), {}) is None  # 4-D: channels-last is the kernel's
    assert fast(([meta(2, 3, dtype=dtype)] * 2, 2), {}) is None  # out of range
