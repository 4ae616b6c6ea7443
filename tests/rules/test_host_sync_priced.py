"""AL112 on a GPU device spec: a sync in forward is priced as the drained launch queue it costs
(estimated from the spec) and judged by the one materiality rule like every warning: a warning
where it pays, info where it is under the floor, info without a GPU spec (issue 39, item 8)."""

from __future__ import annotations

import pytest
from torch import nn

import archlint
from archlint.devices import resolve
from archlint.diagnostics import Severity
from archlint.model.checks.host_sync import STALL_BASIS


class Gate(nn.Module):
    """Long convolutions, a value read, then many short layers: the read drains the queue the host had built."""

    def __init__(self, small: int = 30):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(64, 64, 3, padding=1) for _ in range(4)])
        self.small = nn.ModuleList([nn.Linear(64, 64) for _ in range(small)])

    def forward(self, x):
        for conv in self.convs:
            x = conv(x).relu()
        scale = x.mean().item()
        y = x.mean((2, 3))
        for layer in self.small:
            y = layer(y).relu()
        return y * scale


def al112(analysis):
    return next(d for d in analysis.findings if d.code == "AL112")


def test_a_sync_that_drains_a_full_queue_is_a_priced_warning_on_a_gpu_spec():
    d = al112(archlint.analyze(Gate(), (32, 64, 56, 56), device_spec="h100-sxm", show_info=True))
    assert d.severity is Severity.WARNING
    assert d.price.basis == "estimated" and d.price.device == "h100-sxm"
    assert d.price.saving_ms == pytest.approx(d.evidence["stall_ms"]) and d.price.saving_share >= 0.01
    assert d.evidence["stall_basis"] == STALL_BASIS and "drained launch queue (estimated)" in d.message
    spec = resolve("h100-sxm")
    host = (spec.eager_op_s or spec.overhead_s) * 1e3
    # after the sync: 30 linear layers, 30 ReLUs, the mean and the product, each shorter than the host's
    # cost of launching it; the convolutions before it gave the host more lead than the device waits
    assert d.evidence["stall_ms"] > 60 * (host - 0.002)


def test_the_same_sync_is_info_without_a_gpu_spec():
    d = al112(archlint.analyze(Gate(), (32, 64, 56, 56), show_info=True))
    assert d.severity is Severity.INFO and d.price.saving_ms is None
    cpu = al112(archlint.analyze(Gate(), (32, 64, 56, 56), device_spec="cpu-example", show_info=True))
    assert cpu.severity is Severity.INFO and "stall_ms" not in cpu.evidence


def test_a_sync_that_costs_under_the_floor_is_info_with_the_verdict():
    # nothing short after the read: the device waits on two launches only, against a long forward
    d = al112(archlint.analyze(Gate(small=0), (256, 64, 112, 112), device_spec="h100-sxm", show_info=True))
    assert d.price.basis == "estimated" and 0 < d.price.saving_share < 0.01
    assert d.severity is Severity.INFO and "under the 1% floor" in d.evidence["verdict"]
