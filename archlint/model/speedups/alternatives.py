"""What-if prices: a finding's layer next to its local alternative, each built as a small
nn.Module and timed with the measure layer's timer (`pricer.time_modules`: the two interleaved,
the median of repeats after warm-up on the analyzed device). Each returns the relative saving,
(original − alternative) / original, measured, never modelled; it can come out ≤ 0, and is then
reported as it is; a difference within the timing noise counts as 0. The rules apply it to the measured in-model time of the ops it replaces
(`checks/_pricing.alternative_ms`), so a saving is never larger than what those ops cost in the model, and a
layer timed alone on a busy machine cannot claim more than the model spent on it.

The checks call these only when --latency gave them a pricer; identical layers (a block the
model repeats) are timed once per pricer.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from archlint.model.timing.paired import WithinNoise

_cache: dict[tuple, float] = {}


def _saving(pricer: Any, key: tuple, original, alternative, formats=(None, None)) -> float:
    """Time both (each a (module, input shape) pair) once per pricer; (original − alternative) /
    original. The pricer moves modules and inputs to its device and dtype (keeping their memory
    format); `formats` gives each input's (None: contiguous)."""
    full = (id(pricer), *key)
    if full not in _cache:
        with torch.no_grad():
            a, b = pricer.time_modules_stats(
                *((module, (_input(shape, f),)) for (module, shape), f in zip((original, alternative), formats))
            )
        if a.median > 0 and _beyond_noise(a, b):
            _cache[full] = float((a.median - b.median) / a.median)
        else:  # inside the noise: 0, with the noise's width as a share of the original
            _cache[full] = WithinNoise(_noise(a, b) / a.median if a.median > 0 else math.inf)
    return _cache[full]


def _input(shape, memory_format) -> torch.Tensor:
    x = torch.randn(*shape)
    return x if memory_format is None else x.contiguous(memory_format=memory_format)


def _noise(a, b) -> float:
    """Twice the standard error of the difference of two medians (σ from each interquartile
    range, IQR/1.349; a median's error ≈ 1.25·σ/√n), in ms."""
    n = max(1, min(a.n, b.n))
    sigma = math.hypot((a.q3 - a.q1) / 1.349, (b.q3 - b.q1) / 1.349)
    return 2 * 1.2533 * sigma / math.sqrt(n)


def _beyond_noise(a, b) -> bool:
    """True when the two medians differ by more than the noise. A difference within the noise is
    no measured saving: it counts as 0, never as a (random) gain or loss."""
    return abs(a.median - b.median) > _noise(a, b)


def _conv(c1: int, c2: int, kernel, stride, padding, groups: int = 1, bias: bool = False, dilation=1) -> nn.Conv2d:
    return nn.Conv2d(c1, c2, kernel, stride=stride, padding=padding, groups=groups, bias=bias, dilation=dilation)


class _ConvBN(nn.Module):
    def __init__(self, conv: nn.Conv2d):
        super().__init__()
        self.conv, self.bn = conv, nn.BatchNorm2d(conv.out_channels)

    def forward(self, x):
        return self.bn(self.conv(x))


def folded_bn(
    pricer: Any, shape, c2: int, kernel, stride, padding, groups: int, dilation=1, bias: bool = False
) -> float:
    """Conv + BatchNorm (eval) against the same conv with the BN folded into its weights and bias."""
    key = ("folded", tuple(shape), c2, str(kernel), str(stride), str(padding), groups, str(dilation), bias)
    c1 = shape[1]
    return _saving(
        pricer,
        key,
        (_ConvBN(_conv(c1, c2, kernel, stride, padding, groups, bias, dilation)), tuple(shape)),
        (_conv(c1, c2, kernel, stride, padding, groups, True, dilation), tuple(shape)),
    )


def conv_without_bias(pricer: Any, shape, c2: int, kernel, stride, padding, groups: int, dilation=1) -> float:
    """A conv with bias against the same conv without (the BatchNorm after it cancels the bias)."""
    key = ("nobias", tuple(shape), c2, str(kernel), str(stride), str(padding), groups)
    c1 = shape[1]
    return _saving(
        pricer,
        key,
        (_conv(c1, c2, kernel, stride, padding, groups, True, dilation), tuple(shape)),
        (_conv(c1, c2, kernel, stride, padding, groups, False, dilation), tuple(shape)),
    )


def _chain(layers, widths) -> nn.Sequential:
    """Convs ("conv", kernel, stride, padding, groups, dilation) at widths w[i]→w[i+1], each
    followed by its depthwise riders ("dw", kernel, stride, padding, groups, dilation) at w[i+1]."""
    out, i = [], 0
    for kind, kernel, stride, padding, groups, dilation in layers:
        if kind == "conv":
            out.append(_conv(widths[i], widths[i + 1], kernel, stride, padding, groups, False, dilation))
            i += 1
        else:
            w = widths[i]
            out.append(_conv(w, w, kernel, stride, padding, w, False, dilation))
    return nn.Sequential(*out)


def chain_widths(pricer: Any, shape, layers, widths, balanced) -> float | None:
    """G1 on a chain: the chain at its widths against the same chain at balanced interior widths
    (same input and output widths, equal FLOPs). None when the chain is not 2-D convs."""
    if shape is None or layers is None:
        return None
    key = ("chain", tuple(shape), tuple(layers), tuple(widths), tuple(balanced))
    return _saving(pricer, key, (_chain(layers, widths), tuple(shape)), (_chain(layers, balanced), tuple(shape)))


def fewer_groups(pricer: Any, shape, c2: int, kernel, stride, padding, groups: int, dilation, fewer: int) -> float:
    """G2 keeping the interface: the grouped conv against the same c1→c2 conv with `fewer` groups."""
    c1 = shape[1]
    key = ("groups", tuple(shape), c2, str(kernel), str(stride), str(padding), groups, str(dilation), fewer)
    return _saving(
        pricer,
        key,
        (_conv(c1, c2, kernel, stride, padding, groups, False, dilation), tuple(shape)),
        (_conv(c1, c2, kernel, stride, padding, fewer, False, dilation), tuple(shape)),
    )


def channels_last_conv(pricer: Any, shape, c2: int, kernel, stride, padding, groups: int, dilation=1) -> float:
    """A conv on an NCHW input against the same conv with its input and weights in channels_last
    (what `model.to(memory_format=torch.channels_last)` and a channels_last input give every conv)."""
    key = ("channels_last", tuple(shape), c2, str(kernel), str(stride), str(padding), groups, str(dilation))
    conv = _conv(shape[1], c2, kernel, stride, padding, groups, False, dilation)
    last = _conv(shape[1], c2, kernel, stride, padding, groups, False, dilation).to(memory_format=torch.channels_last)
    return _saving(pricer, key, (conv, tuple(shape)), (last, tuple(shape)), formats=(None, torch.channels_last))
