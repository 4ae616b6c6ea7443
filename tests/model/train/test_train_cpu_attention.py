"""SDPA on a CPU target (archlint.model.train.cpu_attention): the meta step keeps what the CPU's
kernel keeps. A real CPU run takes PyTorch's CPU flash kernel, which saves no L×L weights; meta's
math form saved them (timm's ViT-Tiny at 224 px: 1.085x the real peak, benchmarks/train_memory.py)."""

import pytest
import torch
import torch.nn as nn

from archlint.model.train.cpu_attention import picks_flash
from archlint.model.train.memory import step_memory

B, H, L, D = 1, 2, 128, 4
WEIGHTS = B * H * L * L * 4  # the math form's attention weights (float32): 128 KiB, far above the rest


class _Attention(nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        torch.manual_seed(0)
        self.qkv, self.dropout = nn.Linear(H * D, 3 * H * D), dropout

    def forward(self, x):
        q, k, v = self.qkv(x).view(B, L, 3, H, D).permute(2, 0, 3, 1, 4)
        return nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout, is_causal=True)


def test_the_cpu_flash_kernel_keeps_no_attention_weights():
    x = torch.randn(B, L, H * D)
    flash = step_memory(_Attention(), (x,), optimizer="sgd")
    assert flash["peak_bytes"] < WEIGHTS  # only the output and a B×H×L log-sum-exp are kept
    # with dropout the CPU runs the math form too: its weights are kept, as the real step keeps them
    math = step_memory(_Attention(dropout=0.1), (x,), optimizer="sgd")
    assert math["peak_bytes"] > WEIGHTS


@pytest.mark.parametrize(
    "kw, flash",
    [({}, True), ({"dropout_p": 0.1}, False), ({"is_causal": True}, True), ({"enable_gqa": True}, True)],
)
def test_the_choice_is_the_cpus_own(kw, flash):
    meta = torch.empty(B, H, L, D, device="meta")
    kv = torch.empty(B, 1, L, D, device="meta") if kw.get("enable_gqa") else meta
    args = dict(attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False) | kw
    assert picks_flash(meta, kv, kv, **args) is flash
    cpu = torch.empty(B, H, L, D)
    cpu_kv = torch.empty(B, 1, L, D) if kw.get("enable_gqa") else cpu
    assert (torch._fused_sdp_choice(cpu, cpu_kv, cpu_kv, **args) == 1) is flash  # 1: SDPBackend.FLASH_ATTENTION
