"""Scaled dot-product attention as the CPU runs it, for the memory model on the meta device.

On the meta device `F.scaled_dot_product_attention` always takes its math form, which keeps the
B×H×L×L attention weights for backward. A real CPU run picks PyTorch's CPU flash kernel
(aten._scaled_dot_product_flash_attention_for_cpu) wherever its checks pass (no dropout, 4-D
inputs, a dense last dimension, ...), which keeps only the output and a B×H×L log-sum-exp and
recomputes the weights in backward: the math form over-counted timm's ViT-Tiny at 224 px by 8.5%
and a Llama-style LM at 512 tokens by 2.7% (benchmarks/train_memory.py). Within cpu_attention()
the choice is the CPU's own (torch._fused_sdp_choice, asked on CPU stand-ins of the same shapes,
strides and dtypes) and, where it is flash, the call runs that kernel's meta form, whose backward is
the flash backward; a boolean mask becomes the additive float mask the CPU path makes of it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend
from torch.utils._python_dispatch import _disable_current_modes

_FLASH: int = SDPBackend.FLASH_ATTENTION.value
_CHOICES: dict[tuple, bool] = {}  # the inputs' metadata -> the CPU picks flash (the step repeats each layer's call)


@contextlib.contextmanager
def cpu_attention() -> Iterator[None]:
    """Within: `F.scaled_dot_product_attention` on meta tensors runs the kernel a CPU would. Swapped
    in torch.nn.functional itself and restored, as cuda_attention.fused_attention does (and why)."""
    original = F.scaled_dot_product_attention

    def sdpa(*args, **kwargs):
        flash = _cpu_flash(*args, **kwargs)
        return original(*args, **kwargs) if flash is None else flash

    F.scaled_dot_product_attention = sdpa
    try:
        yield
    finally:
        F.scaled_dot_product_attention = original


def _key(t: torch.Tensor | None) -> tuple | None:
    return None if t is None else (tuple(t.shape), t.stride(), t.dtype)


def picks_flash(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa) -> bool:
    """Whether a CPU run of these inputs (their shapes, strides and dtypes) takes the flash kernel:
    PyTorch's own choice, asked on empty CPU tensors laid out alike (never written: no page is
    touched), outside any dispatch mode (the memory model's tracker must not see them)."""
    k = (_key(query), _key(key), _key(value), _key(attn_mask), dropout_p, is_causal, scale, enable_gqa)
    hit = _CHOICES.get(k)
    if hit is None:
        with _disable_current_modes():

            def cpu(t):
                return None if t is None else torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="cpu")

            choice = torch._fused_sdp_choice(
                cpu(query),
                cpu(key),
                cpu(value),
                cpu(attn_mask),
                dropout_p,
                is_causal,
                scale=scale,
                enable_gqa=enable_gqa,
            )
        hit = _CHOICES[k] = choice == _FLASH
    return hit


def _cpu_flash(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    if not all(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in (query, key, value)):
        return None  # meta only: a real CPU run chooses for itself
    if not picks_flash(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa):
        return None
    mask = attn_mask
    if mask is not None and mask.dtype == torch.bool:  # the CPU path's additive mask: where(mask, 0, -inf)
        zero = torch.zeros((), dtype=query.dtype, device=mask.device)
        mask = torch.where(mask, zero, torch.full((), float("-inf"), dtype=query.dtype, device=mask.device))
    out = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        query, key, value, dropout_p, is_causal, attn_mask=mask, scale=scale
    )
    return out[0]
