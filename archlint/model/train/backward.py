"""Backward cost of each op, from its own forward formula: never a multiple of the forward.

FLOPs are multiply-adds, as the forward's (archlint.model.cost). Each op's backward is a list of
named terms, one per kernel autograd runs, each only where it is needed (archlint.model.train.grad):

    grad_input    the gradient of an activation input, only where that input needs one: the
                  first conv on the raw image computes none
    grad_weight   the gradient of a parameter, only where it requires_grad: a frozen
                  parameter computes none
    grad_bias     a sum of the output gradient; no FLOPs, as the forward's bias add is not
                  counted either, only its bytes
    recompute     fused attention kernels (flash, memory-efficient, the CPU flash kernel)
                  compute QKᵀ again in backward instead of saving the L×S scores
    grad_sum      a tensor read by several ops that send gradients back gets their sum

Per kind:
    conv, linear, matmul, einsum  each gradient is one contraction as large as the forward's:
                  dX = dY·Wᵀ and dW = Xᵀ·dY (conv: the transposed and the weight-gradient
                  convolutions), the forward's multiply-adds each
    attention     dV = Pᵀ·dO, dP = dO·Vᵀ, dQ = dS·K, dK = dSᵀ·Q: twice the forward's L·S·(E+Ev),
                  as torch's FlopCounterMode counts both the math and the fused kernels; the
                  fused kernels compute all three gradients whenever one is needed, and add the
                  recompute of QKᵀ (L·S·E). nn.MultiheadAttention adds its projections' gradients.
    recurrent     the weight-gradient products over every token, the input-gradient products
                  (the first layer's input only where it needs one), the gates' element-wise
                  work again per hidden unit
    norm          x̂ recomputed (2 per element) and the two reductions Σg, Σg·x̂ (3), needed for
                  either gradient; dx's combination (4, 5 with affine) where the input needs a
                  gradient. BatchNorm in eval (a fixed affine map): dx = dy·scale, 1 per element
    elementwise, activation, dropout  1 per element for each input that needs a gradient (the
                  incoming gradient times the local derivative); softmax and log-softmax 3 (a
                  reduction and a combination); add/sub pass the gradient through (0; sub negates
                  its second input's, 1); a broadcast input sums the gradient over the broadcast
                  dims (1 per output element)
    pool          max: 1 per output element (scattered back by the saved indices); average: the
                  forward's count (each output's gradient spread over its window)
    upsample      the forward's count (each output's gradient spread over its sources)
    reduction     sum: a broadcast view of the gradient (0); mean: a divide per input element;
                  max, min, norms...: 1 per input element
    embedding     dW: the looked-up rows' gradients added into a zeroed table, 1 per output element
    reshape, concat  views of the gradient: 0 (split's backward concatenates: a copy)
    copy          the gradient copied back (contiguous/clone pass it through: 0 bytes)

MAC is ShuffleNetV2's rule per kernel: every tensor the kernel reads once, every tensor it writes
once (dX: dY and W read, dX written; dW: dY and X read, dW written).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import networkx as nx

from archlint.model import cost as forward

numel = forward.numel

Terms = dict[str, tuple[int, int]]  # term name → (flops, mac bytes)


def _bytes(shape, op: dict) -> int:
    return numel(shape) * int(op.get("itemsize", 4))


def _out_bytes(op: dict) -> int:
    return int(op.get("out_bytes", 0))


def _in(op: dict, i: int) -> bool:
    flags = op.get("grad_inputs") or []
    return i < len(flags) and flags[i]


def _any_in(op: dict) -> bool:
    return any(op.get("grad_inputs") or [])


def _param(op: dict, *names: str) -> bool:
    for n, v in (op.get("grad_params") or {}).items():  # (a loop, not any() over a generator: a frame each op)
        if v and n.rsplit(".", 1)[-1] in names:
            return True
    return False


def _param_bytes(op: dict, *names: str) -> int:
    ps = op.get("param_shapes") or {}
    return sum(_bytes(s, op) for n, s in ps.items() if n.rsplit(".", 1)[-1] in names)


def _add(terms: Terms, name: str, flops: int, mac: int) -> None:
    f, m = terms.get(name, (0, 0))
    terms[name] = (f + int(flops), m + int(mac))


BACKWARD: dict[str, Callable[[dict], Terms]] = {}
backward_formula = forward.registrar(BACKWARD, "backward formula")


def _weight_grad_needed(op: dict) -> bool:
    """The weight operand needs a gradient: a trainable parameter, or an activation passed as
    the weight (F.conv2d(x, w) with w computed in the forward)."""
    if op.get("param_shapes"):
        return _param(op, "weight", "weight_orig", "weight_v", "in_proj_weight")
    return _in(op, 1)


@backward_formula("conv")
def conv(op: dict) -> Terms:
    f = forward.conv(op)
    x = _bytes(op["in_shapes"][0], op)
    w = _bytes(forward.weight_shape(op), op)
    dy = _out_bytes(op)
    terms: Terms = {}
    if _in(op, 0):
        _add(terms, "grad_input", f, dy + w + x)
    if _weight_grad_needed(op):
        _add(terms, "grad_weight", f, dy + x + w)
    if _param(op, "bias"):
        _add(terms, "grad_bias", 0, dy + _param_bytes(op, "bias"))
    return terms


def _contraction_operands(op: dict) -> list[tuple[tuple, bool]]:
    """(shape, needs a gradient) of the two contracted operands of a linear/matmul op. Capture lists
    activations in `in_shapes` (their flags by position) and parameters apart: a parameter operand
    is matched by shape against the recorded operand shapes."""
    key = op["key"]
    ins = [tuple(s) for s in op.get("in_shapes") or []]
    if op["kind"] == "linear" and key != "addmm":
        w = forward.weight_shape(op)
        if op.get("param_shapes"):
            return [(ins[0], _in(op, 0)), (tuple(w), _param(op, "weight"))]
        return [(ins[0], _in(op, 0)), (tuple(w), _in(op, 1))]
    if key == "einsum":
        return [(s, _in(op, i)) for i, s in enumerate(ins)]
    count = 3 if key in ("addmm", "baddbmm", "addbmm") else 2
    operands = forward.operand_shapes(op, count)[count - 2 :]
    free = list(range(len(ins)))
    params = [
        (tuple(s), v)
        for n, s in (op.get("param_shapes") or {}).items()
        for v in [(op.get("grad_params") or {}).get(n, False)]
    ]
    found = []
    for shape in operands:
        i = next((i for i in free if ins[i] == tuple(shape)), None)
        if i is not None:
            free.remove(i)
            found.append((tuple(shape), _in(op, i)))
            continue
        j = next((j for j, (s, _) in enumerate(params) if s == tuple(shape)), None)
        if j is not None:
            found.append(params.pop(j))
        else:  # the same tensor passed twice (x @ x): it needs a gradient as its producer does
            found.append((tuple(shape), _any_in(op)))
    return found


@backward_formula("linear", "matmul")
def contraction(op: dict) -> Terms:
    fn = forward.linear if op["kind"] == "linear" else forward.matmul
    f = fn(op)
    dy = _out_bytes(op)
    terms: Terms = {}
    operands = _contraction_operands(op)
    is_param = [False] * len(operands)
    if op["kind"] == "linear" and op["key"] != "addmm" and op.get("param_shapes"):
        is_param[1] = True
    for index, (shape, needed) in enumerate(operands):
        if not needed:
            continue
        others = sum(_bytes(s, op) for j, (s, _) in enumerate(operands) if j != index)
        term = "grad_weight" if is_param[index] or (index == 1 and op["kind"] == "linear") else "grad_input"
        _add(terms, term, f, dy + others + _bytes(shape, op))
    if _param(op, "bias"):
        _add(terms, "grad_bias", 0, dy + _param_bytes(op, "bias"))
    return terms


@backward_formula("attention")
def attention(op: dict) -> Terms:
    if op["key"] == "MultiheadAttention":
        return _multihead(op)
    q, k, v = (tuple(s) for s in forward.operand_shapes(op, 3))
    batch = numel(q[:-2])
    qk, pv = batch * q[-2] * k[-2] * q[-1], batch * q[-2] * k[-2] * v[-1]
    dy = _out_bytes(op)
    qkv = sum(_bytes(s, op) for s in (q, k, v))
    stats = batch * q[-2] * 4  # the saved logsumexp per query row (float32)
    return {
        # all of dQ, dK, dV: read q, k, v, out, dO and the row statistics; write dq, dk, dv
        "grad_input": (2 * (qk + pv), qkv + 2 * dy + stats + qkv),
        "recompute": (qk, 0),  # inside the same kernel: no bytes of its own
    }


def _multihead(op: dict) -> Terms:
    """nn.MultiheadAttention: the attention core's backward (torch's MHA runs the math path, or the
    fused kernel with need_weights=False: then QKᵀ is recomputed), and its projections' gradients."""
    total = forward.multihead(op)
    a = op["attrs"]
    e = a["embed_dim"]
    n, lq, ls = _mha_lengths(op)
    core = n * lq * ls * e * 2  # the forward's L·S·E twice
    out_proj = n * lq * e * e
    in_proj = total - core - out_proj
    dy, w, act = _out_bytes(op), int(op.get("param_bytes", 0)), int(op.get("in_bytes", 0))
    weights = any((op.get("grad_params") or {}).values())
    terms: Terms = {}
    if _any_in(op) or weights:  # dQ, dK, dV are needed for the input gradients and the in-projection's
        _add(terms, "grad_input", out_proj + 2 * core, dy + w + 3 * act)
        if a.get("need_weights") is False:
            _add(terms, "recompute", core // 2, 0)
    if _any_in(op):
        _add(terms, "grad_input", in_proj, 2 * act + w)
    if weights:
        _add(terms, "grad_weight", in_proj + out_proj, dy + 2 * act + w)
    return terms


def _mha_lengths(op: dict) -> tuple[int, int, int]:
    """(batch, query length, key length) of an nn.MultiheadAttention call, found as the forward's
    formula finds the query and key (archlint.model.cost.multihead)."""
    a = op["attrs"]
    e = a["embed_dim"]
    ins = [tuple(s) for s in op["in_shapes"]]
    rank = max(len(s) for s in ins if s and s[-1] == e)
    qi = next(i for i, s in enumerate(ins) if len(s) == rank and s[-1] == e)
    q, rest = ins[qi], [s for s in ins[qi + 1 :] if len(s) == rank]
    kdim = a.get("kdim") or e
    k = next((s for s in rest if s[-1] == kdim), q)
    if len(q) == 2:
        return 1, q[0], k[0]
    if a.get("batch_first", False):
        return q[0], q[1], k[1]
    return q[1], q[0], k[0]


@backward_formula("recurrent")
def recurrent(op: dict) -> Terms:
    ps = op.get("param_shapes") or {}
    weights = {n: s for n, s in ps.items() if n.rsplit(".", 1)[-1].startswith(("weight_ih", "weight_hh", "weight_hr"))}
    first = next(s for n, s in weights.items() if n.rsplit(".", 1)[-1] in ("weight_ih", "weight_ih_l0"))
    tokens = numel(op["in_shapes"][0]) // first[1]
    all_weights = sum(numel(s) for s in weights.values())
    elementwise = forward.recurrent(op) - tokens * all_weights
    first_input = sum(numel(s) for n, s in weights.items() if n.rsplit(".", 1)[-1] in ("weight_ih", "weight_ih_l0"))
    dy, x, w = _out_bytes(op), int(op.get("in_bytes", 0)), int(op.get("param_bytes", 0))
    terms: Terms = {}
    # the hidden state's gradient always flows back through time; the first input's only if needed
    _add(terms, "grad_input", tokens * (all_weights - (0 if _in(op, 0) else first_input)) + elementwise, dy + w + x + x)
    if any((op.get("grad_params") or {}).values()):
        _add(terms, "grad_weight", tokens * all_weights, dy + x + w)
    return terms


@backward_formula("norm")
def norm(op: dict) -> Terms:
    x = numel(op["in_shapes"][0]) if op["in_shapes"] else 0
    xb = _bytes(op["in_shapes"][0], op) if op["in_shapes"] else 0
    dy = _out_bytes(op)
    affine = bool(op["attrs"].get("affine", True))
    frozen_bn = ("atch" in op["key"] or op["key"] == "native_batch_norm") and op.get("mode", "eval") == "eval"
    weights = _param(op, "weight", "bias")
    w = int(op.get("param_bytes", 0))
    terms: Terms = {}
    if frozen_bn:  # y = x·scale + shift: dx = dy·scale; dγ, dβ from Σdy·x̂ and Σdy
        if _in(op, 0):
            _add(terms, "grad_input", x, dy + w + xb)
        if weights:
            _add(terms, "grad_weight", 3 * x, dy + xb + w)
        return terms
    if _in(op, 0) or weights:
        _add(terms, "grad_weight" if weights else "grad_input", 5 * x, dy + xb + w + (w if weights else 0))
    if _in(op, 0):
        _add(terms, "grad_input", (5 if affine else 4) * x, dy + xb + w + xb)
    return terms


_PASS_THROUGH = frozenset({"add", "sub", "subtract", "rsub"})
_SOFTMAX = frozenset(
    {"softmax", "_softmax", "log_softmax", "_log_softmax", "Softmax", "LogSoftmax", "Softmin", "softmin"}
)


@backward_formula("elementwise", "activation", "dropout")
def elementwise(op: dict) -> Terms:
    if op["kind"] == "dropout" and op.get("mode", "eval") == "eval":
        return {}  # the identity
    out = numel(forward.output_shape(op))
    dy = _out_bytes(op)
    ins = op.get("in_shapes") or []
    terms: Terms = {}
    for i, shape in enumerate(ins):
        if not _in(op, i):
            continue
        broadcast = numel(shape) != out
        gx = _bytes(shape, op)
        if op["key"] in _PASS_THROUGH:
            flops = (out if i == 1 and op["key"] != "add" else 0) + (out if broadcast else 0)
            mac = (dy + gx) if flops else 0  # the same gradient tensor handed on: no kernel
        else:
            per = 3 if op["key"] in _SOFTMAX else 1
            flops = per * out + (out if broadcast else 0)
            mac = dy + int(op.get("in_bytes", 0)) + gx
        _add(terms, "grad_input", flops, mac)
    if _param(op, "weight"):  # PReLU's slope, a learned scale
        _add(terms, "grad_weight", out, dy + int(op.get("in_bytes", 0)) + int(op.get("param_bytes", 0)))
    return terms


@backward_formula("pool")
def pool(op: dict) -> Terms:
    if not _in(op, 0):
        return {}
    dy, dx = _out_bytes(op), _bytes(op["in_shapes"][0], op)
    if "max" in op["key"].lower():
        indices = numel(forward.output_shape(op)) * 8  # int64 argmax positions saved by the forward
        return {"grad_input": (numel(forward.output_shape(op)), dy + indices + dx)}
    return {"grad_input": (forward.pool(op), dy + dx)}


@backward_formula("upsample")
def upsample(op: dict) -> Terms:
    if not _in(op, 0):
        return {}
    return {"grad_input": (forward.upsample(op), _out_bytes(op) + _bytes(op["in_shapes"][0], op))}


@backward_formula("reduction")
def reduction(op: dict) -> Terms:
    if not _in(op, 0):
        return {}
    x = op["in_shapes"][0]
    if op["key"] == "sum":
        return {}  # dy broadcast to x's shape: a view
    if op["key"] == "mean":
        return {"grad_input": (numel(x), _out_bytes(op) + _bytes(x, op))}
    return {"grad_input": (numel(x), _out_bytes(op) + int(op.get("in_bytes", 0)) + _bytes(x, op))}


@backward_formula("embedding")
def embedding(op: dict) -> Terms:
    if not _param(op, "weight") and not _in(op, 1):
        return {}
    out = numel(forward.output_shape(op))
    table = int(op.get("param_bytes", 0)) or (_bytes(op["in_shapes"][1], op) if len(op["in_shapes"]) > 1 else 0)
    indices = _bytes(op["in_shapes"][0], op) if op["in_shapes"] else 0
    return {"grad_weight": (out, table + _out_bytes(op) + indices)}


@backward_formula("split")
def split(op: dict) -> Terms:
    if not _in(op, 0):
        return {}
    return {"grad_input": (0, _out_bytes(op) + _bytes(op["in_shapes"][0], op))}  # the pieces concatenated


_PASS_COPIES = frozenset({"contiguous", "clone", "contiguous_", "clone_"})


@backward_formula("copy")
def copy(op: dict) -> Terms:
    if not _any_in(op) or op["key"] in _PASS_COPIES or op.get("noop"):
        return {}
    written = sum(_bytes(s, op) for i, s in enumerate(op.get("in_shapes") or []) if _in(op, i))
    return {"grad_input": (0, _out_bytes(op) + written)}


@backward_formula("reshape", "concat")
def views(op: dict) -> Terms:
    return {}


def backward_terms(op: dict, mode: str) -> Terms:
    """The backward terms of one op that runs a backward (see grad.propagate)."""
    fn = BACKWARD.get(op["kind"])
    if fn is None:
        raise ValueError(f"no backward formula for kind {op['kind']!r}")
    op["mode"] = mode  # formulas read it, as the forward's do (norm, dropout)
    try:
        return {k: v for k, v in fn(op).items() if v != (0, 0)}
    finally:
        del op["mode"]


@dataclass
class BackwardCost:
    """What cost_backward_totals found: the ops left out (no formula) and the graph's totals, the
    forward's (its known ops, as totals.flops counts them) and the backward's."""

    unknown: list[str]
    forward_flops: int
    forward_mac_bytes: int
    backward_flops: int
    backward_mac_bytes: int


def cost_backward(graph: nx.DiGraph) -> list[str]:
    """Set flops_backward, mac_bytes_backward and backward_terms on every op node (0 where the op
    runs no backward); return the ops whose backward has no formula (left out of the totals)."""
    return cost_backward_totals(graph).unknown


def cost_backward_totals(graph: nx.DiGraph) -> BackwardCost:
    """cost_backward, and the forward's and backward's totals summed in the same pass over the ops
    (each op's attributes read while they are at hand, not in a pass of their own)."""
    mode = graph.graph.get("mode", "train")
    unknown = []
    fwd_flops = fwd_mac = bwd_flops = bwd_mac = 0
    for name, op in graph.nodes(data=True):
        kind = op["kind"]
        if kind == "input" or kind == "output":
            continue
        if op.get("known", True):
            fwd_flops += int(op.get("flops", 0))
            fwd_mac += int(op.get("mac_bytes", 0))
        if not op.get("backward"):
            op["backward_terms"], op["flops_backward"], op["mac_bytes_backward"] = {}, 0, 0
            continue
        terms: Terms = {}
        if not op.get("known", True):
            unknown.append(name)
        else:
            try:
                terms = backward_terms(op, mode)
            except (IndexError, KeyError, TypeError, ValueError, StopIteration) as exc:
                op["backward_unknown_reason"] = f"{type(exc).__name__}: {exc}"
                unknown.append(name)
        fanout = int(op.get("grad_fanout", 0))
        if fanout > 1:  # the gradients its consumers send back are summed
            out = sum(numel(s) for s in op["out_shapes"])
            _add(terms, "grad_sum", (fanout - 1) * out, (fanout - 1) * 3 * int(op.get("out_bytes", 0)))
        flops = mac = 0  # (one loop over the terms, not three)
        named: dict[str, dict[str, int]] = {}
        for k, (f, m) in terms.items():
            named[k] = {"flops": f, "mac_bytes": m}
            flops, mac = flops + f, mac + m
        op["backward_terms"], op["flops_backward"], op["mac_bytes_backward"] = named, flops, mac
        bwd_flops += int(flops)  # as a reader of the op's figures sums them (a formula's float, truncated)
        bwd_mac += int(mac)
    return BackwardCost(unknown, fwd_flops, fwd_mac, bwd_flops, bwd_mac)
