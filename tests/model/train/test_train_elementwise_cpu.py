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

    def spy(*args):
        out = real_learn(*args)
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
