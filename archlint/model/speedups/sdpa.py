"""sdpa: attention written by hand — softmax(q @ kᵀ · scale) @ v — replaced by
F.scaled_dot_product_attention on the fx graph of the model.

The pattern, on torch.fx.symbolic_trace's graph (shapes from one forward pass):
    kT     = k.transpose(-2, -1)                    (or the same two last dims by number)
    scores = q @ kT  |  torch.matmul(q, kT)         (then optionally * c, / c with c a number;
                                                     or q itself scaled first: (q * c) @ kT)
    p      = softmax(scores, dim=-1)                (F.softmax, torch.softmax or .softmax)
    p      = dropout(p)                             (optional: an identity in eval mode)
    out    = p @ v
with the scores and p used by nothing else. Anything in between (a mask added, a bias, a scale
held in a tensor) leaves the attention as it is: only what is provably the same is replaced.
"""

from __future__ import annotations

import math
import operator

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn
from torch.fx.passes.shape_prop import ShapeProp

_MATMUL = (operator.matmul, torch.matmul)
_SOFTMAX = (F.softmax, torch.softmax)
_DROPOUT_FN = (F.dropout,)


def replace_attention(model: nn.Module, inputs: tuple) -> tuple[nn.Module, int]:
    """(the model with each hand-written attention replaced, how many); raises what fx raises
    when the model cannot be traced."""
    gm = fx.symbolic_trace(model)
    ShapeProp(gm).propagate(*inputs)
    modules = dict(gm.named_modules())
    found = 0
    for node in list(gm.graph.nodes):
        match = _match(node, modules)
        if match is None:
            continue
        q, k, v, scale, out = match
        with gm.graph.inserting_before(out):
            fused = gm.graph.call_function(F.scaled_dot_product_attention, (q, k, v), {"scale": scale})
        out.replace_all_uses_with(fused)
        found += 1
    if found:
        gm.graph.eliminate_dead_code()
        gm.graph.lint()
        gm.recompile()
    return gm, found


def _rank(node) -> int | None:
    meta = node.meta.get("tensor_meta") if isinstance(node, fx.Node) else None
    return len(meta.shape) if meta is not None and hasattr(meta, "shape") else None


def _is_matmul(node) -> bool:
    return isinstance(node, fx.Node) and (
        (node.op == "call_function" and node.target in _MATMUL)
        or (node.op == "call_method" and node.target == "matmul")
    )


def _last_two(dims, rank: int) -> bool:
    return {d % rank for d in dims} == {rank - 2, rank - 1}


def _transposed_key(node) -> fx.Node | None:
    """k, when node is k with its last two dims swapped."""
    if not isinstance(node, fx.Node) or node.kwargs:
        return None
    is_transpose = (node.op == "call_method" and node.target == "transpose") or (
        node.op == "call_function" and node.target is torch.transpose
    )
    rank = _rank(node)
    if is_transpose and len(node.args) == 3 and rank and all(isinstance(d, int) for d in node.args[1:]):
        return node.args[0] if _last_two(node.args[1:], rank) else None
    return None


def _softmax_input(node, modules) -> fx.Node | None:
    rank = _rank(node)
    if not rank:
        return None
    if node.op == "call_function" and node.target in _SOFTMAX:
        args, kwargs = node.args, node.kwargs
    elif node.op == "call_method" and node.target == "softmax":
        args, kwargs = node.args, node.kwargs
    elif node.op == "call_module" and isinstance(modules.get(node.target), nn.Softmax):
        args, kwargs = node.args, {"dim": modules[node.target].dim}
    else:
        return None
    dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
    kwargs = {k: v for k, v in kwargs.items() if k != "_stacklevel" and not (k == "dtype" and v is None)}
    if set(kwargs) - {"dim"} or len(args) > 2 or not isinstance(dim, int) or dim % rank != rank - 1:
        return None  # a softmax in another dtype, or over another dim, is not SDPA's
    return args[0]


def _skip_dropout(node, modules) -> fx.Node:
    """The single user of node past eval-mode dropouts (identities at inference)."""
    while len(node.users) == 1:
        user = next(iter(node.users))
        is_dropout = (user.op == "call_module" and isinstance(modules.get(user.target), nn.Dropout)) or (
            user.op == "call_function"
            and user.target in _DROPOUT_FN  # F.dropout's training defaults to True
            and (user.kwargs.get("training") is False or (len(user.args) > 2 and user.args[2] is False))
        )
        if not is_dropout:
            return node
        node = user
    return node


def _prescaled(q, scale: float) -> tuple:
    """(q0, scale · c) when q = q0 * c with c a number and q used only here; else (q, scale)."""
    if (
        isinstance(q, fx.Node)
        and q.op == "call_function"
        and q.target is operator.mul
        and len(q.users) == 1
        and not q.kwargs
        and isinstance(q.args[1], (int, float))
        and isinstance(q.args[0], fx.Node)
    ):
        return q.args[0], scale * float(q.args[1])
    return q, scale


def _match(softmax: fx.Node, modules) -> tuple | None:
    scores = _softmax_input(softmax, modules)
    if scores is None or len(scores.users) != 1:
        return None
    scale = 1.0
    if scores.op == "call_function" and scores.target in (operator.mul, operator.truediv) and not scores.kwargs:
        a, b = scores.args
        if isinstance(b, (int, float)) and isinstance(a, fx.Node):
            scale, scores = (float(b) if scores.target is operator.mul else 1.0 / float(b)), a
        elif isinstance(a, (int, float)) and isinstance(b, fx.Node) and scores.target is operator.mul:
            scale, scores = float(a), b
        else:
            return None
        if len(scores.users) != 1 or not math.isfinite(scale):
            return None
    if not _is_matmul(scores) or len(scores.args) != 2:
        return None
    q, kt = scores.args
    q, scale = _prescaled(q, scale)
    k = _transposed_key(kt)
    if k is None or len(kt.users) != 1 or not (_rank(q) and _rank(q) >= 3 and _rank(q) == _rank(k)):
        return None
    last = _skip_dropout(softmax, modules)
    if len(last.users) != 1:
        return None
    out = next(iter(last.users))
    if not _is_matmul(out) or len(out.args) != 2 or out.args[0] is not last or not isinstance(out.args[1], fx.Node):
        return None
    v = out.args[1]
    if _rank(v) != _rank(q):
        return None
    return q, k, v, scale, out
