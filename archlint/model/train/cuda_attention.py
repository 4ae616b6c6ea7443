"""Scaled dot-product attention as CUDA runs it, for the memory model on the meta device.

On the meta device (and the CPU) `F.scaled_dot_product_attention` falls back to its math form,
which keeps the B×H×L×L attention weights for backward. On a GPU, PyTorch picks a fused kernel
(flash or memory-efficient attention) that keeps only the output and a B×H×L log-sum-exp, and
recomputes the weights in backward: at ViT-B/16 and batch 32 the math form over-counts the step's
peak by 18% (measured on an H200, benchmarks/gpu_checks.py). Within fused_attention() the call runs
aten._scaled_dot_product_efficient_attention, whose meta kernel gives the fused kernel's outputs
and whose backward is the fused backward; flash attention keeps the same tensors.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F


@contextlib.contextmanager
def fused_attention() -> Iterator[None]:
    """Within: `F.scaled_dot_product_attention` on meta tensors runs the fused kernel's meta form.
    The function is swapped in torch.nn.functional itself (and restored), so the calls that look it
    up there are all seen: models' own, and nn.MultiheadAttention's through
    F.multi_head_attention_forward (a torch-function mode would not see those: it is off while
    its handler runs that whole function)."""
    original = F.scaled_dot_product_attention

    def sdpa(*args, **kwargs):
        fused = _fused(*args, **kwargs)
        return original(*args, **kwargs) if fused is None else fused

    F.scaled_dot_product_attention = sdpa
    try:
        yield
    finally:
        F.scaled_dot_product_attention = original


def _fused(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    if query.device.type != "meta" or enable_gqa or query.dim() != 4 or key.shape[1] != query.shape[1]:
        return None  # meta only (a real CPU run has no fused kernel); the fused layout: (B, H, L, D)
    bias = attn_mask
    if bias is not None and bias.dtype == torch.bool:  # the fused kernel takes an additive bias
        bias = torch.zeros(bias.shape, dtype=query.dtype, device=query.device).masked_fill(~bias, float("-inf"))
    if bias is not None:
        bias = bias.expand(query.shape[0], query.shape[1], query.shape[2], key.shape[2])
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
    out = torch.ops.aten._scaled_dot_product_efficient_attention(
        query, key, value, bias, grad, dropout_p, is_causal, scale=scale
    )
    return out[0]
