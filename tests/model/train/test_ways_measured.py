"""The ways to fit that used to be estimates run in the memory model itself: bitsandbytes' 8-bit
state (counted by hand here) and autocast's cast policy (issue 39, item 1)."""

import torch
from torch import nn

from archlint.model.train.memory import step_memory


def test_eight_bit_state_is_what_bitsandbytes_makes():
    model = nn.Linear(128, 128)  # weight 16384 elements (8-bit), bias 128 (< 4096: float32)
    r = step_memory(model, (torch.randn(4, 128),), optimizer="adamw", eight_bit=True)
    uint8_moments = 2 * 16384
    absmax = 2 * 4 * (16384 // 2048)
    bias_moments = 2 * 4 * 128
    qmaps = 2 * 4 * 256
    steps = 2 * 4  # a 0-d float32 step per parameter
    assert r["optimizer_bytes"] == uint8_moments + absmax + bias_moments + qmaps + steps
    plain = step_memory(model, (torch.randn(4, 128),), optimizer="adamw")
    assert plain["optimizer_bytes"] == 2 * 4 * (16384 + 128) + 2 * 4  # two float32 moments, two 0-d steps
    assert any("bitsandbytes" in n for n in r["notes"])


def test_autocast_keeps_linear_outputs_in_bf16():
    model = nn.Sequential(*[nn.Sequential(nn.Linear(256, 256), nn.ReLU()) for _ in range(4)])
    x = torch.randn(512, 256)
    plain = step_memory(model, (x,), optimizer="sgd")
    amp = step_memory(model, (x,), optimizer="sgd", autocast=torch.bfloat16)
    # float32: each ReLU's output (kept by it and by the next Linear) and the 0-d loss
    assert plain["activations_bytes"] == 4 * 512 * 256 * 4 + 4
    # autocast: the ReLU outputs in bf16, the input's bf16 cast (the first Linear keeps it for its weight
    # gradient), the bf16 weight casts the Linears keep for the input gradient (not the first: the raw input
    # needs none), and the 0-d bf16 loss
    assert amp["activations_bytes"] == 4 * 512 * 256 * 2 + 512 * 256 * 2 + 3 * 256 * 256 * 2 + 2
    assert any("autocast to bfloat16" in n for n in amp["notes"])
