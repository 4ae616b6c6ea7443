"""torch.autocast's cast policy for the memory model's meta step, where autocast itself does not run.

autocast keys on a tensor's device ('cuda', 'cpu'); meta tensors have no autocast key, so
`torch.autocast("cuda")` around the meta step changes nothing. What autocast changes for memory
is which dtype each op's output (and what autograd saves) has, and that is its cast policy,
applied here above autograd by a torch-function mode, as autocast's own dispatch key sits above
autograd: the ops of CUDA autocast's lower-precision list (aten/src/ATen/autocast_mode.cpp,
`AT_FORALL_LOWER_PRECISION_FP`: convolutions, linear, matmul and its batched forms, attention)
get their floating-point inputs cast to the autocast dtype (the cast copies are what autograd
keeps for backward, as under autocast); the ops of its fp32 list that a model's forward reaches
(softmax, log_softmax, layer_norm, group_norm, the losses) get theirs cast to float32; every other
op runs on what it is given, so element-wise ops promote as they do under autocast.

A torch-function mode is off while its handler runs, so the calls inside a composite function
are not seen one by one: F.multi_head_attention_forward (nn.MultiheadAttention) is cast as a whole
to the autocast dtype, as its projections and attention are on the lower-precision list.

Not modelled: autocast's cache of a weight's cast within one region (a weight used by several
calls is cast once there; here once per call: more, never less).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

BASIS = (
    "the step run with torch.autocast's CUDA cast policy (aten/src/ATen/autocast_mode.cpp: convolutions, "
    "linear, matmul and attention in {dtype}; softmax, norms and losses in float32), applied on the meta device "
    "by a torch-function mode; a weight used by several calls is cast once per call (autocast caches it: "
    "less); F.multi_head_attention_forward as a whole in {dtype}"
)

LOWER = frozenset(
    {
        F.linear,
        F.bilinear,
        F.conv1d,
        F.conv2d,
        F.conv3d,
        F.conv_transpose1d,
        F.conv_transpose2d,
        F.conv_transpose3d,
        F.prelu,
        F.scaled_dot_product_attention,
        # a composite whose inner calls the mode does not see (it is off while its handler runs): its
        # projections and attention are all on the lower-precision list
        F.multi_head_attention_forward,
        torch.matmul,
        torch.mm,
        torch.bmm,
        torch.addmm,
        torch.addbmm,
        torch.baddbmm,
        torch.addmv,
        torch.mv,
        torch.einsum,
        torch.chain_matmul,
        torch.Tensor.matmul,
        torch.Tensor.__matmul__,
        torch.Tensor.__rmatmul__,
        torch.Tensor.mm,
        torch.Tensor.bmm,
        torch.Tensor.addmm,
        torch.Tensor.baddbmm,
    }
)
FP32 = frozenset(
    {
        F.softmax,
        F.log_softmax,
        F.layer_norm,
        F.group_norm,
        F.cross_entropy,
        F.nll_loss,
        F.mse_loss,
        F.l1_loss,
        F.binary_cross_entropy_with_logits,
        F.kl_div,
        F.smooth_l1_loss,
        F.cosine_similarity,
        torch.softmax,
        torch.log_softmax,
        torch.Tensor.softmax,
        torch.Tensor.log_softmax,
        torch.layer_norm,
        torch.group_norm,
    }
)


class MetaAutocast(TorchFunctionMode):
    """Within: the ops above see their inputs cast as torch.autocast(dtype) would cast them."""

    def __init__(self, dtype: torch.dtype = torch.bfloat16):
        super().__init__()
        self.dtype = dtype

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        target = self.dtype if func in LOWER else torch.float32 if func in FP32 else None
        if target is not None:

            def cast(value):
                if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != target:
                    return value.to(target)
                if isinstance(value, (list, tuple)):
                    return type(value)(cast(v) for v in value)
                return value

            args, kwargs = cast(tuple(args)), {k: cast(v) for k, v in kwargs.items()}
        return func(*args, **kwargs)
