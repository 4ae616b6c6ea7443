"""The meta step's convolutions take the memory format the CPU's do (archlint.model.train.cpu_layout):
the layout against the real CPU op's, and the NHWC scratch it lets reach a later block (issue 46)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from archlint.devices import resolve
from archlint.model.train.cpu_layout import cpu_conv_layout, suggests_channels_last
from archlint.model.train.memory import step_memory

aten = torch.ops.aten
CL = torch.channels_last

# (input shape, weight shape, groups, padding, input NHWC, weight NHWC, dtype)
CASES = [
    ((2, 40, 8, 8), (40, 1, 7, 7), 40, 3, True, False, torch.float32),  # convnext's depthwise, oneDNN
    ((2, 40, 8, 8), (80, 40, 1, 1), 1, 0, True, False, torch.float32),  # its pointwise
    ((1, 16, 6, 6), (32, 16, 1, 1), 1, 0, True, False, torch.float32),  # batch 1, 1x1: aten's own kernel
    ((2, 16, 6, 6), (32, 16, 3, 3), 1, 1, False, True, torch.float32),  # an NHWC weight alone
    ((2, 16, 6, 6), (32, 16, 3, 3), 1, 1, False, False, torch.float32),  # NCHW stays NCHW
    ((2, 16, 6, 6), (32, 16, 3, 3), 1, 1, True, False, torch.float64),  # float64: never oneDNN
    ((2, 16, 1, 1), (32, 16, 1, 1), 1, 0, True, False, torch.float32),  # a 1x1 map: NCHW and NHWC alike
]


def _layout(t):
    """The strides of the dimensions over 1 long: a size-1 dimension's stride places nothing."""
    return tuple(s for s, n in zip(t.stride(), t.shape) if n > 1)


def _args(x, w, g, p):
    return (x, w, None, [1, 1], [p, p], [1, 1], False, [0, 0], g)


def _make(shape, nhwc, dtype, device):
    t = torch.randn(shape, dtype=dtype).to(device)
    return t.to(memory_format=CL) if nhwc else t


@pytest.mark.parametrize("onednn", [True, False])
@pytest.mark.parametrize("xs, ws, g, p, x_cl, w_cl, dtype", CASES)
def test_the_meta_conv_takes_the_real_cpu_ops_strides(xs, ws, g, p, x_cl, w_cl, dtype, onednn):
    with torch.backends.mkldnn.flags(enabled=onednn):
        x, w = _make(xs, x_cl, dtype, "cpu").requires_grad_(), _make(ws, w_cl, dtype, "cpu")
        real = aten.convolution.default(*_args(x, w, g, p))
        mask = [True, True, False]
        real_back = aten.convolution_backward.default(
            real, x, w, [ws[0]], [1, 1], [p, p], [1, 1], False, [0, 0], g, mask
        )
    mx, mw = x.detach().to("meta"), w.to("meta")
    assert mx.stride() == x.stride() and mw.stride() == w.stride()
    forward = _args(mx, mw, g, p)
    meta = cpu_conv_layout(aten.convolution.default, forward, aten.convolution.default(*forward))
    assert meta.shape == real.shape and _layout(meta) == _layout(real)
    backward = (meta, mx, mw, [ws[0]], [1, 1], [p, p], [1, 1], False, [0, 0], g, mask)
    meta_back = cpu_conv_layout(
        aten.convolution_backward.default, backward, aten.convolution_backward.default(*backward)
    )
    for got, want in zip(meta_back[:2], real_back[:2]):
        assert _layout(got) == _layout(want)


def test_the_meta_kernel_alone_drops_nhwc():
    # the gap cpu_layout mends: if torch's meta kernel starts keeping NHWC, this module can go
    x = torch.empty(2, 40, 8, 8, device="meta").to(memory_format=CL)
    out = aten.convolution.default(*_args(x, torch.empty(40, 1, 7, 7, device="meta"), 40, 3))
    assert out.is_contiguous() and not out.is_contiguous(memory_format=CL)
    assert cpu_conv_layout(aten.add.Tensor, (out, out), out) is out


@pytest.mark.parametrize(
    "t",
    [
        torch.empty(2, 8, 5, 5),
        torch.empty(2, 8, 5, 5).to(memory_format=CL),
        torch.empty(2, 8, 1, 1),
        torch.empty(2, 8, 1, 1).to(memory_format=CL),
        torch.empty(4, 1, 1, 1),
        torch.empty(2, 1, 5, 5).to(memory_format=CL),
        torch.empty(2, 8, 5, 9).to(memory_format=CL)[..., ::2],
        torch.empty(2, 8, 5, 5).permute(0, 1, 3, 2),
        torch.empty(1, 8, 1, 1).expand(3, 8, 4, 4),
    ],
)
def test_suggests_channels_last_reads_strides_as_aten_does(t):
    # aten's own answer: a CPU convolution of it (a plain 1x1 weight) returns NHWC exactly when
    # its suggest_memory_format() is channels_last; the output's exact strides tell (also at 1x1)
    out = nn.functional.conv2d(t.zero_(), torch.zeros(3, t.shape[1], 1, 1))
    nhwc = torch.empty(out.shape).to(memory_format=CL).stride()
    assert out.stride() in (nhwc, torch.empty(out.shape).stride())
    assert suggests_channels_last(t) == (out.stride() == nhwc != torch.empty(out.shape).stride())


class TwoDepthwise(nn.Module):
    """An NHWC image through a small depthwise 7x7, a pointwise widening and a wider depthwise 7x7:
    the second depthwise is NHWC on the real CPU only if the pointwise convolution keeps NHWC."""

    def __init__(self):
        super().__init__()
        self.dw1, self.pw, self.dw2 = (
            nn.Conv2d(16, 16, 7, padding=3, groups=16),
            nn.Conv2d(16, 64, 1),
            nn.Conv2d(64, 64, 7, padding=3, groups=64),
        )

    def forward(self, x):
        return self.dw2(self.pw(self.dw1(x)))


def test_a_later_nhwc_depthwise_books_its_avx512_weight_gradient_scratch(monkeypatch):
    # the old meta step made pw's output NCHW, so dw2 took the NCHW rule and the largest scratch was
    # dw1's 257 W (806_008 B); on the real CPU dw2 runs NHWC: 257 of its weights, 64 x 49 x 4 B
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    x = torch.randn(2, 16, 8, 8).to(memory_format=CL)
    cpu = step_memory(TwoDepthwise(), (x,), optimizer="sgd")
    assert cpu["cpu_scratch_largest_bytes"] == 257 * 64 * 49 * 4
    gpu = step_memory(TwoDepthwise(), (x,), optimizer="sgd", device_spec=resolve("h200"))
    assert "cpu_scratch_largest_bytes" not in gpu  # a GPU target: neither the CPU's layout nor its scratch
