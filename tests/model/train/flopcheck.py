"""The step's conv/linear/matmul/attention multiply-adds, archlint's and torch's FlopCounterMode's.

FlopCounterMode counts 2 FLOPs per multiply-add over the aten contractions (mm, addmm, bmm,
baddbmm, convolution and its backward, the SDPA kernels) that one real forward + backward runs;
with the math SDPA backend attention is its matmuls. Halved, it is archlint's convention.
archlint's side: the forward FLOPs of its compute kinds plus their gradient contractions
(`backward_terms` grad_input and grad_weight: not the fused-attention recompute, which
FlopCounterMode does not count, nor gradient sums, which are additions)."""

from __future__ import annotations

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode, conv_backward_flop

from archlint.config import Settings
from archlint.model import opgraph
from archlint.model.analyze import analyze_model
from archlint.model.train.memory import step_loss
from archlint.model.train.optimizer import parse
from archlint.model.train.step import cost_step


def gradient_flops(op: dict) -> int:
    """The gradient contractions of an op (what torch's FlopCounterMode counts): its backward
    FLOPs less the fused-attention recompute and the gradient sums."""
    terms = op.get("backward_terms") or {}
    return sum(t["flops"] for k, t in terms.items() if k in ("grad_input", "grad_weight"))


_raw = conv_backward_flop.__wrapped__  # the formula on shapes (the registered one takes tensors)
FIXED = {torch.ops.aten.convolution_backward: None}  # filled below


def _convolution_backward(
    grad_out_shape,
    x_shape,
    w_shape,
    bias,
    stride,
    padding,
    dilation,
    transposed,
    output_padding,
    groups,
    output_mask,
    out_shape=None,
    **kwargs,
) -> int:
    """torch's convolution_backward formula with its grouped weight gradient fixed: torch counts
    the weight gradient of a conv with `groups` groups as if it had one (`groups` times too much:
    a depthwise 16-channel 3×3 conv on 2×16×8×8 gives 589,824 for grad_weight instead of 36,864,
    the forward's count; torch 2.14.1 as installed; pytorch/pytorch#183405 divides it by the groups
    the same way). The input gradient is counted right and kept as torch has it."""
    args = (grad_out_shape, x_shape, w_shape, bias, stride, padding, dilation, transposed, output_padding, groups)
    total = 0
    if output_mask[0]:
        total += _raw(*args, [True, False], out_shape=out_shape)
    if output_mask[1]:
        total += _raw(*args, [False, True], out_shape=out_shape) // groups
    return total


FIXED[torch.ops.aten.convolution_backward] = _convolution_backward


def counted(model: torch.nn.Module, args: tuple, kwargs: dict | None = None) -> int:
    """FlopCounterMode's multiply-adds of forward + mean loss + backward (math attention)."""
    model.train()
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False, custom_mapping=FIXED) as counter:
        out = model(*args, **(kwargs or {}))
        loss = step_loss(out, "mean")  # the mean of each output, added: the step archlint costs
        loss.backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() // 2


def step_graph(model: torch.nn.Module, args: tuple, kwargs: dict | None = None):
    graph, result = analyze_model(model, args, Settings(mode="train"), kwargs=kwargs)
    totals = cost_step(graph, model, parse("adamw"), "mean", result.notes)
    return graph, totals


def ours(model: torch.nn.Module, args: tuple, kwargs: dict | None = None) -> int:
    graph, _ = step_graph(model, args, kwargs)
    return sum(
        int(d.get("flops", 0)) + gradient_flops(d)
        for _, d in opgraph.ops(graph)
        if d["kind"] in opgraph.COMPUTE_KINDS and d.get("known", True)
    )
