"""The element-wise ops whose dtype rule the meta step learns from their CPU kernel on real stand-ins
(metacache._CPU_RULE_OPS) answer as their stock meta kernels do: for every dtype of each tensor
operand (float32, float16, bfloat16, float64, int64, int32, uint8, bool), real 0-dim scalars and
Python numbers beside them, on a dimensioned, a 1-D and a 0-dim shape, on the first call (learnt)
and the next (answered from what was learnt); where the stock kernel raises, so does the call."""

from __future__ import annotations

import itertools
import warnings

import pytest
import torch

from archlint.model.train import metacache

aten = torch.ops.aten
FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
DTYPES = (*FLOATS, torch.int64, torch.int32, torch.uint8, torch.bool)
NUMBERS = (True, 3, 2.5)


def _scalars():
    """Real 0-dim scalars, as a model passes them beside meta tensors (torch.where's, a loss scale)."""
    return [torch.tensor(v, dtype=d) for v, d in ((2.0, torch.float32), (2.0, torch.float64), (3, torch.int64))] + [
        torch.tensor(True)
    ]


# what each operand of an op may be: "T" a meta tensor of any dtype, "X" the same or a real 0-dim
# scalar, "B" a bool meta tensor, "F" a floating meta tensor, "N" a number, anything else as it is
T, X, B, F, N = "T", "X", "B", "F", "N"
SIGNATURES: dict = {
    aten.add.Tensor: [(T, X), (T, X, {"alpha": N})],
    aten.add.Scalar: [(T, N)],
    aten.sub.Tensor: [(T, X), (T, X, {"alpha": N})],
    aten.sub.Scalar: [(T, N)],
    aten.rsub.Scalar: [(T, N)],
    aten.mul.Tensor: [(T, X)],
    aten.mul.Scalar: [(T, N)],
    aten.div.Tensor: [(T, X)],
    aten.div.Scalar: [(T, N)],
    aten.div.Tensor_mode: [(T, X, {"rounding_mode": "floor"}), (T, X, {"rounding_mode": "trunc"})],
    aten.div.Scalar_mode: [(T, N, {"rounding_mode": "floor"})],
    aten.neg.default: [(T,)],
    aten.abs.default: [(T,)],
    aten.reciprocal.default: [(T,)],
    aten.sqrt.default: [(T,)],
    aten.rsqrt.default: [(T,)],
    aten.exp.default: [(T,)],
    aten.log.default: [(T,)],
    aten.sin.default: [(T,)],
    aten.cos.default: [(T,)],
    aten.tanh.default: [(T,)],
    aten.sigmoid.default: [(T,)],
    aten.erf.default: [(T,)],
    aten.pow.Tensor_Scalar: [(T, N)],
    aten.pow.Tensor_Tensor: [(T, X)],
    aten.relu.default: [(T,)],
    aten.gelu.default: [(T,), (T, {"approximate": "tanh"})],
    aten.silu.default: [(T,)],
    aten.hardsigmoid.default: [(T,)],
    aten.hardswish.default: [(T,)],
    aten.hardtanh.default: [(T,), (T, N, N)],
    aten.leaky_relu.default: [(T,), (T, N)],
    aten.elu.default: [(T,), (T, N, N, N)],
    aten.softplus.default: [(T,), (T, N, N)],
    aten.mish.default: [(T,)],
    aten.clamp.default: [(T, N), (T, N, N), (T, None, N)],
    aten.clamp.Tensor: [(T, X, X)],
    aten.clamp_min.default: [(T, N)],
    aten.clamp_max.default: [(T, N)],
    aten.where.self: [(B, T, X), (X, T, T)],
    aten.masked_fill.Scalar: [(T, B, N)],
    aten.eq.Scalar: [(T, N)],
    aten.eq.Tensor: [(T, X)],
    aten.ne.Scalar: [(T, N)],
    aten.ne.Tensor: [(T, X)],
    aten.lt.Scalar: [(T, N)],
    aten.lt.Tensor: [(T, X)],
    aten.le.Scalar: [(T, N)],
    aten.le.Tensor: [(T, X)],
    aten.gt.Scalar: [(T, N)],
    aten.gt.Tensor: [(T, X)],
    aten.ge.Scalar: [(T, N)],
    aten.ge.Tensor: [(T, X)],
    aten.maximum.default: [(T, X)],
    aten.minimum.default: [(T, X)],
    aten.lerp.Scalar: [(T, X, N)],
    aten.lerp.Tensor: [(T, X, X)],
    aten.addcmul.default: [(T, X, X), (T, T, T, {"value": N})],
    aten.addcdiv.default: [(T, X, X), (T, T, T, {"value": N})],
    aten.clone.default: [(T,), (T, {"memory_format": torch.contiguous_format})],
    aten.threshold.default: [(T, N, N)],
    aten.threshold_backward.default: [(T, X, N)],
    aten.gelu_backward.default: [(T, X), (T, T, {"approximate": "tanh"})],
    aten.silu_backward.default: [(T, X)],
    aten.sigmoid_backward.default: [(T, X)],
    aten.tanh_backward.default: [(T, X)],
    aten.hardsigmoid_backward.default: [(T, X)],
    aten.hardswish_backward.default: [(T, X)],
    aten.native_dropout_backward.default: [(T, B, N), (F, T, N)],
}


def _choices(kind, floats_only: bool = False):
    """What an operand of this kind is swept over: a factory of it for a shape."""
    if kind in (T, X, F):
        dtypes = FLOATS if kind == F or floats_only else DTYPES
        made = [lambda s, d=d: torch.empty(s, dtype=d, device="meta") for d in dtypes]
        return made + ([lambda s, v=v: v for v in _scalars()] if kind == X else [])
    if kind == B:
        return [lambda s: torch.empty(s, dtype=torch.bool, device="meta")]
    if kind == N:
        return [lambda s, v=v: v for v in NUMBERS]
    return [lambda s, v=kind: v]


def _cases(signature):
    """Every combination of the signature's operands: (positional factories, keyword factories)."""
    kwargs = signature[-1] if isinstance(signature[-1], dict) else {}
    positional = signature[:-1] if kwargs else signature
    # a third tensor operand over the floating dtypes only (the sweep stays within seconds)
    slots = [_choices(k, floats_only=i >= 2) for i, k in enumerate(positional)]
    slots += [_choices(v, floats_only=True) for v in kwargs.values()]
    for combo in itertools.product(*slots):
        yield combo[: len(positional)], dict(zip(kwargs, combo[len(positional) :]))


def _described(out):
    outs = out if isinstance(out, (tuple, list)) else [out]
    return type(out), [(o.device, tuple(o.shape), o.stride(), o.dtype, o.storage_offset()) for o in outs]


def _outcome(run):
    try:
        return _described(run())
    except Exception as exc:  # the stock kernel's refusal: the call must refuse too (any kind)
        return ("raises", type(exc).__name__)


def test_every_op_given_a_cpu_rule_is_swept():
    assert {id(op) for op in SIGNATURES} == set(metacache._CPU_RULES)
    for op in SIGNATURES:  # reached by the element-wise path at all
        metacache._kind(op)
        assert id(op) in metacache._POINTWISE, op


@pytest.mark.parametrize("op", list(SIGNATURES), ids=str)
def test_cpu_learnt_rule_answers_as_the_stock_meta_kernel(op, monkeypatch):
    learnt = []
    real_learn = metacache._learn_on_cpu

    def spy(*args, **kwargs):
        out = real_learn(*args, **kwargs)
        learnt.append(out is not None)
        return out

    monkeypatch.setattr(metacache, "_learn_on_cpu", spy)
    cases = 0
    for signature in SIGNATURES[op]:
        for first, then in (((3, 4), (2, 3, 5)), ((), ()), ((5,), (7,))):
            for positional, keywords in _cases(signature):
                if first == (5,) and any(
                    isinstance(f(()), torch.Tensor) and f(()).dtype != torch.float32 for f in positional[:1]
                ):
                    continue  # 1-D: float32 first operands only (the stand-ins are 1-D for every dimensioned shape)
                metacache.clear()
                for shape in (first, then):
                    args = tuple(f(shape) for f in positional)
                    kwargs = {k: f(shape) for k, f in keywords.items()}
                    stock = _outcome(lambda: op(*args, **kwargs))
                    with warnings.catch_warnings():
                        warnings.simplefilter("error")  # the CPU kernel's run must not warn where meta's does not
                        got = _outcome(lambda: metacache.run(op, args, kwargs))
                    assert got == stock, (op, shape, args, kwargs)
                cases += 1
    assert cases and any(learnt), "no case was learnt on the CPU"


@pytest.mark.parametrize("shapes", [((), (3, 4), ()), ((3, 4), (), (5,))])
def test_a_rule_learnt_on_0_dim_operands_is_not_given_to_dimensioned_ones(shapes):
    """A real float32 scalar beside a 0-dim float16 operand promotes as its peer (float32), beside a
    dimensioned one it does not (float16): each learns its own rule, whichever comes first (a rule
    learnt on 0-dim operands was once given to dimensioned ones)."""
    metacache.clear()
    scalar = torch.tensor(2.0)
    for shape in shapes:
        x = torch.empty(shape, dtype=torch.float16, device="meta")
        assert metacache.run(aten.mul.Tensor, (x, scalar), {}).dtype == aten.mul.Tensor(x, scalar).dtype, shape


def _patterns(rank_max: int = 4):
    """Every shape pattern up to `rank_max` dimensions: for each dimension, 1 or not."""
    for rank in range(rank_max + 1):
        yield from itertools.product((True, False), repeat=rank)


def _sized(pattern, base: int):
    """A shape of the pattern, aligned from the right: a dimension's size base + its place from the right."""
    rank = len(pattern)
    return tuple(1 if one else base + rank - i for i, one in enumerate(pattern))


def _learnt_on_cpu(monkeypatch) -> list:
    learnt = []
    real_learn = metacache._learn_on_cpu

    def spy(*args, **kwargs):
        out = real_learn(*args, **kwargs)
        learnt.append(out is not None)
        return out

    monkeypatch.setattr(metacache, "_learn_on_cpu", spy)
    return learnt


@pytest.mark.parametrize("op", [aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_cpu_learnt_broadcast_answers_as_the_stock_meta_kernel(op, dtype, monkeypatch):
    """Every broadcast of two operands of up to 4 dimensions with their shapes' default strides,
    each dimension 1 or not: the answer learnt from the CPU kernel on the pattern's stand-ins (first
    call) and given for the pattern's next shapes is the stock meta kernel's, layout included."""
    assert {id(op) for op in (aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor)} == set(
        metacache._CPU_BROADCASTS
    )
    learnt = _learnt_on_cpu(monkeypatch)
    for a, b in itertools.product(_patterns(), repeat=2):
        metacache.clear()
        for base in (3, 6):
            x = torch.empty(_sized(a, base), dtype=dtype, device="meta")
            y = torch.empty(_sized(b, base), dtype=dtype, device="meta")
            assert _outcome(lambda: metacache.run(op, (x, y), {})) == _outcome(lambda: op(x, y)), (a, b, base)
    assert sum(learnt) > 500


def _expanded_cases():
    """Contiguous tensors of up to 4 dimensions expanded on some of their size-1 dimensions (mean's
    backward), or to more dimensions (the loss's gradient, a 0-dim one expanded), the added ones of
    size 1 or not: (the base pattern, which of its size-1 dimensions grow, the added dimensions)."""
    for pattern in _patterns():
        ones = [i for i, one in enumerate(pattern) if one]
        for grow in itertools.product((True, False), repeat=len(ones)):
            for added in _patterns(4 - len(pattern)):
                if any(grow) or not all(added):
                    yield pattern, {i for i, g in zip(ones, grow) if g}, added


@pytest.mark.parametrize("op", [aten.mul.Scalar, aten.div.Scalar], ids=str)
@pytest.mark.parametrize("number", [2, 2.5])
def test_cpu_learnt_expand_answers_as_the_stock_meta_kernel(op, number, monkeypatch):
    assert {id(op) for op in (aten.mul.Scalar, aten.div.Scalar)} == set(metacache._CPU_EXPANDS)
    learnt = _learnt_on_cpu(monkeypatch)
    for pattern, grow, added in _expanded_cases():
        metacache.clear()
        for base in (3, 6):
            shape = _sized(pattern, base)
            lead = [1 if one else base + 20 + i for i, one in enumerate(added)]
            x = torch.empty(shape, device="meta")
            x = x.expand([*lead, *(base + 9 if i in grow else s for i, s in enumerate(shape))])
            assert _outcome(lambda: metacache.run(op, (x, number), {})) == _outcome(lambda: op(x, number)), (
                pattern,
                grow,
                added,
            )
    assert sum(learnt) > 100


def test_broadcast_shape_is_torchs():
    shapes = [_sized(p, 3) for p in _patterns(3)] + [(4, 1), (2, 4, 3), (5,), (3, 2), (7, 1, 1, 1, 1)]
    for a, b in itertools.product(shapes, repeat=2):
        try:
            expected = torch.broadcast_shapes(a, b)
        except RuntimeError:
            expected = None
        assert metacache._broadcast_shape([a, b]) == expected, (a, b)
    assert metacache._broadcast_shape([(2, 1, 3), (4, 1), (2, 1, 1)]) == torch.broadcast_shapes(
        (2, 1, 3), (4, 1), (2, 1, 1)
    )


def test_default_strides_never_suggest_channels_last():
    """convolution_backward's shape function reads a tensor with its shape's default strides as
    contiguous without torch's (Python) suggest_memory_format: that function agrees for every 4-D
    and 5-D shape of sizes 0-3, and the strides kept by shape are torch's own."""
    from torch._prims_common import suggest_memory_format

    for rank in (4, 5):
        for shape in itertools.product(range(4), repeat=rank):
            t = torch.empty(shape, device="meta")
            assert t.stride() == metacache._default_strides(t.shape) == metacache._default_strides(tuple(shape))
            assert suggest_memory_format(t) == torch.contiguous_format, shape


def test_factory_ops_run_as_called():
    metacache.clear()
    runs = metacache.stats["runs"]
    out = metacache.run(aten.empty.memory_format, ([2, 3],), {"dtype": torch.float16, "device": torch.device("meta")})
    assert (out.shape, out.dtype, out.device.type) == ((2, 3), torch.float16, "meta")
    assert metacache._kind(aten.empty.memory_format) == "" and metacache.stats["runs"] == runs + 1
