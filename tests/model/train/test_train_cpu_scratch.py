"""oneDNN's scratch inside CPU convolutions (archlint.model.train.cpu_scratch): the rule on shapes,
which convolutions go to oneDNN, and the term in the training step's memory on a CPU target only."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn as nn

from archlint.devices import resolve
from archlint.model.train import steady
from archlint.model.train.cpu_scratch import AVX2, AVX512, conv_scratch_bytes, cpu_conv_scratch, cpu_isa, uses_onednn
from archlint.model.train.memory import step_memory

aten = torch.ops.aten
BOTH, GRAD_INPUT, GRAD_WEIGHT = [True, True, False], [True, False, False], [False, True, False]


def scratch(n, c, hw, o, k, s=1, g=1, mask=None, threads=1, isa=AVX2):
    """The rule's bytes; AVX2 unless asked (the figures below were measured on an AVX2 CPU)."""
    return conv_scratch_bytes(
        (n, c, hw, hw), (o, c // g, k, k), (s, s), (k // 2, k // 2), (1, 1), g, 4, mask, threads, isa
    )


def test_gemm_weight_gradient_books_four_weights_per_thread():
    # resnet18's layer4 at a 64x64 image: a 3x3 kernel over a 2x2 map fails jit:avx2's kh <= ih,
    # so oneDNN's gemm path takes the weight gradient: 4 W per thread + the im2col buffer
    w, col = 512 * 512 * 9 * 4, 512 * 9 * 2 * 2 * 4
    assert scratch(2, 512, 2, 512, 3, mask=GRAD_WEIGHT) == 4 * w + col == 37_822_464  # measured 37_822_7xx
    # two threads: the batch is threaded over (os / threads < 256, batch > 1), one buffer each
    assert scratch(2, 512, 2, 512, 3, mask=BOTH, threads=2) == 8 * w + 2 * col == 75_644_928  # measured 75.645 MB
    # batch 1, groups 1: one thread's buffers even with two threads
    assert scratch(1, 256, 2, 256, 3, mask=GRAD_WEIGHT, threads=2) == 4 * (256 * 256 * 9 * 4) + 256 * 9 * 4 * 4
    # a map as tall as the kernel: the jit kernel, its reorders and nothing per thread
    assert scratch(2, 512, 3, 512, 3, mask=GRAD_WEIGHT) == 512 * 512 * 9 * 4


def test_jit_kernels_reorder_their_operands():
    x, w_ = 8 * 64 * 56 * 56 * 4, 64 * 64 * 9 * 4
    # forward: input + weight reordered (the output, same size as the input here, is smaller)
    assert scratch(8, 64, 56, 64, 3) == x + w_ == 6_569_984  # measured 6_570.0 KB
    # grad-weight: input + grad-output reordered; grad-input: grad-output + weight
    assert scratch(8, 64, 56, 64, 3, mask=GRAD_WEIGHT) == 2 * x == 12_845_056  # measured 12_845.1 KB
    assert scratch(8, 64, 56, 64, 3, mask=GRAD_INPUT) == x + w_
    # the result's dense copy when it is the larger: a 1x1 widening (two threads put it on oneDNN)
    assert scratch(2, 64, 16, 256, 1, threads=2) == 2 * 256 * 16 * 16 * 4  # measured 524.3 KB
    # a strided grad-input adds the input (the unit-stride buffer); not for a depthwise one
    assert scratch(2, 64, 16, 128, 1, s=2, mask=GRAD_INPUT) == 2 * (2 * 64 * 16 * 16 * 4)  # measured 262.1 KB
    assert scratch(2, 144, 8, 144, 3, s=2, g=144, mask=GRAD_INPUT) == 2 * 144 * 8 * 8 * 4  # measured 73.7 KB
    # an image stem reads its input as it is: the output's copy, not input + weight
    assert scratch(2, 3, 64, 64, 7, s=2) == 2 * 64 * 32 * 32 * 4  # measured 524.3 KB


def test_backward_counts_the_larger_stage():
    # grad-input runs first, before grad-weight exists: its scratch less the weight, or grad-weight's
    gi, gw, w = (scratch(2, 64, 16, 64, 3, s=2, g=4, mask=m) for m in (GRAD_INPUT, GRAD_WEIGHT, None))
    weight = 64 * 16 * 9 * 4
    assert scratch(2, 64, 16, 64, 3, s=2, g=4, mask=BOTH) == max(gi - weight, gw) == 225_280  # measured 225.3 KB


def test_grouped_convolutions_off_the_blocked_layout_use_gemm():
    # 4 channels a group: no jit kernel; the forward's im2col buffer or its result's copy
    col, y = 4 * 9 * 8 * 8 * 4, 2 * 128 * 8 * 8 * 4
    assert scratch(2, 128, 8, 128, 3, g=32) == max(col, y) == y
    assert scratch(2, 128, 8, 128, 3, g=32, mask=GRAD_WEIGHT) == 4 * (128 * 4 * 9 * 4) + col


def test_avx512_weight_gradient_has_no_kh_le_ih_condition():
    # measured on an AMD EPYC with AVX-512: layer4's 3x3 over a 2x2 map is jit_avx512_common's
    # bwd_w kernel (no [bwd_w:r2]): the weight in its blocked layout, no 4 W per thread
    w = 512 * 512 * 9 * 4
    assert scratch(2, 512, 2, 512, 3, mask=GRAD_WEIGHT, isa=AVX512) == w  # measured 9_437_184
    assert scratch(2, 512, 2, 512, 3, mask=BOTH, threads=2, isa=AVX512) == w  # measured 9_437_184
    assert scratch(2, 64, 4, 64, 7, mask=GRAD_WEIGHT, threads=2, isa=AVX512) == 64 * 64 * 49 * 4  # measured 802_816
    # 8 channels a group: not avx512's 16-channel blocks, and avx2's kernel fails kh <= ih: gemm
    wg = 256 * 8 * 9 * 4
    assert scratch(2, 256, 2, 256, 3, g=32, mask=GRAD_WEIGHT, isa=AVX512) == 4 * wg + 8 * 9 * 2 * 2 * 4  # 296_320
    # 24 channels a group: avx512 refuses, avx2's kernel takes it (input + grad-output reordered)
    assert scratch(2, 48, 8, 48, 3, g=2, mask=GRAD_WEIGHT, isa=AVX512) == 2 * (2 * 48 * 8 * 8 * 4)  # 49_152
    # depthwise over a map smaller than the kernel: gemm as on AVX2
    assert scratch(2, 96, 2, 96, 3, g=96, mask=GRAD_WEIGHT, isa=AVX512) == scratch(
        2, 96, 2, 96, 3, g=96, mask=GRAD_WEIGHT
    )  # 14_224


def test_avx512_forward_and_grad_input_reorder_any_grouping():
    # 4 channels a group: AVX2's gemm keeps only the result's copy; AVX-512 reorders input + weight
    x, w = 2 * 128 * 4 * 4 * 4, 128 * 4 * 9 * 4
    assert scratch(2, 128, 4, 128, 3, g=32) == x and scratch(2, 128, 4, 128, 3, g=32, isa=AVX512) == x + w  # 34_816
    assert scratch(2, 12, 8, 12, 3, g=3, isa=AVX512) == 2 * 12 * 8 * 8 * 4 + 12 * 4 * 9 * 4  # measured 7_872
    # a grouped strided grad-input: no unit-stride buffer on AVX-512
    assert scratch(2, 64, 16, 64, 3, s=2, g=4, mask=GRAD_INPUT, isa=AVX512) == 2 * 64 * 16 * 16 * 4  # 131_072
    assert scratch(2, 64, 16, 64, 3, s=2, g=4, mask=GRAD_INPUT) == 2 * (2 * 64 * 16 * 16 * 4)


def test_avx512_dilated_or_wide_kernels_follow_its_conditions():
    # jit_avx512_common bwd_w: kw <= 14 (avx2: < 14); a dilation only if the dilated kernel fits
    def gw(hw, k, d, isa):
        return conv_scratch_bytes(
            (2, 64, hw, hw), (64, 64, k, k), (1, 1), (d * (k // 2),) * 2, (d, d), 1, 4, GRAD_WEIGHT, 1, isa
        )

    weight = 64 * 64 * 14 * 14 * 4
    assert gw(32, 14, 1, AVX512) == max(2 * (2 * 64 * 32 * 32 * 4), weight) < gw(32, 14, 1, AVX2)
    assert gw(16, 3, 2, AVX512) == 2 * (2 * 64 * 16 * 16 * 4) < gw(16, 3, 2, AVX2)
    assert gw(4, 3, 2, AVX512) == gw(4, 3, 2, AVX2)  # a 5-tall dilated kernel over 4 rows: gemm


@pytest.mark.parametrize(
    "capability, env, isa",
    [
        ("AVX512", None, AVX512),
        ("AVX2", None, AVX2),
        ("DEFAULT", None, AVX2),
        ("AVX512", "avx2", AVX2),
        ("AVX512", "AVX512_CORE", AVX512),
    ],
)
def test_the_isa_is_torchs_cpu_capability_capped_by_onednn(monkeypatch, capability, env, isa):
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    if env is None:
        monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    else:
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", env)
    assert cpu_isa() == isa


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    "shape",
    [
        (2, 64, 16, 64, 3, 1, 1),
        (1, 16, 8, 16, 1, 1, 1),
        (2, 16, 8, 16, 1, 1, 1),
        (1, 64, 32, 64, 1, 1, 1),
        (1, 16, 8, 16, 1, 2, 1),
        (1, 16, 8, 16, 3, 1, 1),
        (1, 16, 8, 16, 5, 1, 1),
        (1, 16, 8, 16, 3, 1, 16),
        (16, 16, 4, 16, 1, 1, 1),
        (2, 3, 32, 16, 7, 2, 1),
    ],
)
def test_which_convolutions_go_to_onednn_matches_torch(shape, threads):
    n, c, hw, o, k, s, g = shape
    x, w = torch.empty(n, c, hw, hw), torch.empty(o, c // g, k, k)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch_says = torch._C._select_conv_backend(x, w, None, [s, s], [k // 2] * 2, [1, 1], False, [0, 0], g)
    finally:
        torch.set_num_threads(before)
    assert uses_onednn(x.shape, w.shape, (s, s), (1, 1), g, threads) == (str(torch_says).endswith(".Mkldnn"))


def meta(*shape, **kw):
    return torch.empty(*shape, device="meta", **kw)


def test_the_op_hook_reads_aten_arguments_and_gates():
    x, w = meta(2, 512, 2, 2), meta(512, 512, 3, 3)
    forward = (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    backward = (meta(2, 512, 2, 2), x, w, [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, BOTH)
    assert cpu_conv_scratch(aten.convolution.default, forward, 1, AVX2) == 512 * 512 * 9 * 4 + 2 * 512 * 4 * 4
    assert cpu_conv_scratch(aten.convolution_backward.default, backward, 1, AVX2) == 37_822_464
    assert cpu_conv_scratch(aten.mm.default, (meta(2, 3), meta(3, 4)), 1, AVX2) == 0
    transposed = (x, w, None, [1, 1], [1, 1], [1, 1], True, [0, 0], 1)
    half = (meta(2, 512, 2, 2, dtype=torch.bfloat16), meta(512, 512, 3, 3, dtype=torch.bfloat16)) + forward[2:]
    nhwc = (x.to(memory_format=torch.channels_last),) + forward[1:]
    assert cpu_conv_scratch(aten.convolution.default, transposed, 1, AVX2) == 0
    assert cpu_conv_scratch(aten.convolution.default, half, 1, AVX2) == 0
    assert cpu_conv_scratch(aten.convolution.default, nhwc, 1, AVX2) == 0
    with torch.backends.mkldnn.flags(enabled=False):
        assert cpu_conv_scratch(aten.convolution_backward.default, backward, 1, AVX2) == 0


class Deep(nn.Module):
    """A stem and a 3x3 convolution over a 2x2 map: the latter's weight gradient is oneDNN's gemm path."""

    def __init__(self):
        super().__init__()
        self.stem, self.deep = nn.Conv2d(3, 64, 3, stride=4, padding=1), nn.Conv2d(64, 64, 3, padding=1)

    def forward(self, x):
        return self.deep(self.stem(x).relu())


def test_a_cpu_step_counts_the_scratch_at_its_op_and_a_gpu_spec_does_not(monkeypatch):
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")  # the AVX2 rule's figures
    x = torch.randn(2, 3, 8, 8)
    cpu = step_memory(Deep(), (x,), optimizer="sgd")
    with torch.backends.mkldnn.flags(enabled=False):
        off = step_memory(Deep(), (x,), optimizer="sgd")
    gpu = step_memory(Deep(), (x,), optimizer="sgd", device_spec=resolve("h200"))
    deep = 4 * (64 * 64 * 9 * 4) + 64 * 9 * 2 * 2 * 4  # the deep convolution's weight gradient: gemm, 1 thread
    assert cpu["cpu_scratch_largest_bytes"] == deep
    assert cpu["at"].startswith("backward: aten.convolution_backward") and cpu["cpu_scratch_bytes"] == deep
    assert cpu["at_peak"]["workspaces"] == deep and cpu["peak_bytes"] > off["peak_bytes"]
    assert (
        "oneDNN" in cpu["cpu_scratch_basis"]
        and "(1)" in cpu["cpu_scratch_basis"]
        and "AVX2" in cpu["cpu_scratch_basis"]
    )
    json.dumps(cpu)
    for other in (off, gpu):
        assert not any(key.startswith("cpu_scratch") for key in other)


def test_an_avx512_step_runs_the_deep_weight_gradient_on_jit(monkeypatch):
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    cpu = step_memory(Deep(), (torch.randn(2, 3, 8, 8),), optimizer="sgd")
    x, w = 2 * 64 * 2 * 2 * 4, 64 * 64 * 9 * 4
    assert cpu["cpu_scratch_largest_bytes"] == x + w  # the deep forward's reorders; its weight gradient: w
    assert "AVX512" in cpu["cpu_scratch_basis"]


def test_the_replayed_step_carries_the_scratch(monkeypatch):
    """The steady step replayed from the first (steady.py) counts the same scratch as the step run in full."""
    plans = []
    real_plan = steady.plan
    torch.manual_seed(0)
    model, x = Deep(), torch.randn(2, 3, 8, 8)
    with monkeypatch.context() as m:
        m.setattr(steady, "plan", lambda *a: plans.append(real_plan(*a)) or plans[-1])
        replayed = step_memory(model, (x,), optimizer="adam")
    assert plans and plans[0] is not None
    with monkeypatch.context() as m:
        m.setattr(steady, "plan", lambda *a, **k: None)
        full = step_memory(model, (x,), optimizer="adam")
    assert replayed["cpu_scratch_largest_bytes"] > 0
    assert json.dumps(replayed, sort_keys=True) == json.dumps(full, sort_keys=True)


def test_avx512_channels_last_depthwise_books_256_weights_for_its_weight_gradient():
    # convnext_atto's depthwise 7x7 on NHWC activations, measured with the profiler on AVX-512 (issue 46):
    # grad-weight 2_014_880 B at 40 channels (257 W, at batch 2 and 8, 1 and 2 threads, stride 1 and 2),
    # 16_119_040 at 320; forward and grad-input the weight in 16-channel blocks: 9_408 at 40 channels
    def op(c, hw, k, mask, isa=AVX512):
        x = torch.empty(2, c, hw, hw, device="meta").to(memory_format=torch.channels_last)
        w = torch.empty(c, 1, k, k, device="meta")
        if mask is None:
            return cpu_conv_scratch(
                aten.convolution.default, (x, w, None, [1, 1], [k // 2] * 2, [1, 1], False, [0, 0], c), 1, isa
            )
        return cpu_conv_scratch(
            aten.convolution_backward.default,
            (x, x, w, [c], [1, 1], [k // 2] * 2, [1, 1], False, [0, 0], c, mask),
            1,
            isa,
        )

    assert op(40, 16, 7, GRAD_WEIGHT) == 2_014_880 and op(320, 2, 7, BOTH) == 16_119_040
    assert op(80, 8, 7, BOTH) == 4_029_760 and op(64, 8, 5, GRAD_WEIGHT) == 1_644_800
    assert op(40, 16, 3, GRAD_WEIGHT) == 3_168  # 3x3: the weight and its padded copy, measured 3_168
    assert op(40, 16, 7, None) == 9_408 and op(160, 4, 7, GRAD_INPUT) == 31_360
    assert op(40, 16, 7, GRAD_WEIGHT, isa=AVX2) == 0  # not measured on AVX2: left out, as NHWC is there
