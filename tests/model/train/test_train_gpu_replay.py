"""What the caching allocator's replay is fed on a GPU spec: cuDNN's workspaces inside their op (two
in a convolution's backward), as requests a kernel can do without under a limit; both steps of the
process in order; and max_batch held to the replay under the budget, as PyTorch runs under
set_per_process_memory_fraction."""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from archlint.devices import resolve
from archlint.model.train.allocator import Allocator, replay
from archlint.model.train.fit import ALLOCATED_LOW, budget_peak, fit_report
from archlint.model.train.gpu_workspaces import cudnn_workspaces
from archlint.model.train.memory import CUDA_CONTEXT_BYTES, _both_steps, _Storage, _Tracker, _Watch, step_memory

aten = torch.ops.aten
MiB = 1 << 20
INF = math.inf


def meta(*shape):
    return torch.empty(*shape, device="meta")


def test_a_convolutions_backward_has_two_workspaces_after_the_grads_their_calls_make():
    x, w, g = meta(32, 64, 56, 56), meta(64, 64, 3, 3), meta(32, 64, 56, 56)
    each = 2 * 32 * 64 * 56 * 56 * 4 + 64 * 64 * 9 * 4  # input + grad-output + weight
    backward = (g, x, w, [64], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True])
    # backward-data after grad_input (output 1), backward-filter after grad_weight (output 2)
    assert cudnn_workspaces(aten.convolution_backward.default, backward) == [(1, each), (2, each)]
    weight_only = backward[:10] + ([False, True, True],)  # the first layer's: no grad_input, one call
    assert cudnn_workspaces(aten.convolution_backward.default, weight_only) == [(2, each)]
    forward = (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    assert cudnn_workspaces(aten.convolution.default, forward) == [(1, 2 * 32 * 64 * 56 * 56 * 4)]


def test_the_tracker_puts_each_workspace_between_the_outputs():
    tracker = _Tracker(round_to=512, workspace_sizes={"cublas": 0, "cublasLt": 0})
    x, w = meta(8, 16, 32, 32), meta(16, 16, 3, 3)
    g = meta(8, 16, 32, 32)
    with _Watch(tracker):
        aten.convolution_backward.default(g, x, w, [16], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True])
    grad_input, grad_weight, grad_bias = tracker.records
    data, filt = tracker.transients
    assert grad_input.born < data.born < data.died < grad_weight.born < filt.born < filt.died < grad_bias.born
    assert data.nbytes == filt.nbytes == 2 * 8 * 16 * 32 * 32 * 4 + 16 * 16 * 9 * 4
    # the op's highest point: grad_input and its workspace, or all three grads and the second one
    assert tracker.timeline[-1][1] == grad_input.nbytes + grad_weight.nbytes + filt.nbytes


def test_a_workspace_replayed_between_two_outputs_leaves_its_segment_cached():
    # 24.5 MiB output (its own 26 MiB segment), a 49 MiB workspace (a 50 MiB segment) freed, then
    # another 24.5 MiB output: best fit takes it from the workspace's cached segment
    out = 49 * MiB // 2
    assert replay([(0, INF, out), (3, INF, out)]).peak_reserved == 2 * 26 * MiB
    a = replay([(0, INF, out), (3, INF, out)], workspaces=[(1, 2, 49 * MiB)])
    assert a.peak_reserved == 26 * MiB + 50 * MiB and a.skipped == 0


def test_under_a_limit_a_workspace_that_does_not_fit_is_done_without():
    # PyTorch's cuDNN convolution takes the next plan when a plan's workspace runs out of memory
    a = Allocator(limit=40 * MiB)
    a.free(a.malloc(12 * MiB))  # a cached free segment, released before giving up
    a.malloc(20 * MiB)
    assert a.reserved == 32 * MiB
    assert a.malloc(25 * MiB, optional=True) is None
    assert not a.out_of_memory and a.skipped == 1 and a.reserved == 20 * MiB  # the free one released
    assert a.malloc(15 * MiB) is not None and a.reserved == 20 * MiB + 16 * MiB  # ≥ 10 MiB: its own, to 2 MiB
    assert a.malloc(30 * MiB) is None and a.out_of_memory  # a tensor's request: out of memory
    limited = replay([(0, INF, 20 * MiB), (3, INF, 15 * MiB)], limit=40 * MiB, workspaces=[(1, 2, 25 * MiB)])
    assert not limited.out_of_memory and limited.skipped == 1 and limited.peak_reserved == 36 * MiB


def test_both_steps_replay_as_one_process():
    first, second = _Tracker(), _Tracker()
    param = _Storage(100, 0, -1, "start")
    temp = _Storage(200, 1, 0, "forward", died=3)
    grad = _Storage(300, 4, 1, "backward")  # kept after the first step
    first.records = [param, temp, grad]
    first.transients = [_Storage(50, 2, 0, "forward", died=3, skippable=True)]  # cuDNN's
    param2, grad2 = _Storage(100, 0, -1, "start"), _Storage(300, 1, -1, "start", died=2)  # zero_grad frees it
    new = _Storage(400, 5, 0, "forward", died=6)
    second.records, second.carried = [param2, grad2, new], [(param2, param), (grad2, grad)]
    second.transients = [_Storage(60, 7, 1, "backward", died=8, skippable=True)]
    second.marks["first_step_events"] = 10
    storages, workspaces = _both_steps(first, second)
    assert storages == [(0, INF, 100), (1, 3, 200), (4, 12, 300), (15, 16, 400)]
    assert workspaces == [(2, 3, 50), (17, 18, 60)]


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 16, 3, padding=1), nn.Conv2d(16, 16, 3, padding=1)

    def forward(self, x):
        return self.b(self.a(x).relu())


def test_fits_is_the_replay_under_the_budget():
    x, h200 = torch.randn(8, 3, 64, 64), resolve("h200")
    free = step_memory(ConvNet(), (x,), optimizer="adam", device_spec=h200)
    roomy = step_memory(ConvNet(), (x,), optimizer="adam", device_spec=h200, budget_bytes=free["device_peak_bytes"])
    under = roomy["allocator"]["under_budget"]
    assert roomy["fits"] and not under["out_of_memory"] and under["workspaces_skipped"] == 0
    assert under["reserved_peak_bytes"] == free["allocator"]["reserved_peak_bytes"]
    assert budget_peak(roomy) == free["device_peak_bytes"]
    # a budget below what the tensors alone need: out of memory, held to more than the budget
    tight = CUDA_CONTEXT_BYTES + free["peak_bytes"] - free["cudnn_workspace_largest_bytes"] - 1
    short = step_memory(ConvNet(), (x,), optimizer="adam", device_spec=h200, budget_bytes=tight)
    assert not short["fits"] and short["allocator"]["under_budget"]["out_of_memory"]
    assert budget_peak(short) > tight


def test_max_batch_on_a_gpu_spec_is_the_largest_batch_the_limited_replay_runs():
    h200 = resolve("h200")
    x = torch.randn(8, 3, 64, 64)
    budget = step_memory(ConvNet(), (torch.randn(40, 3, 64, 64),), optimizer="sgd", device_spec=h200)[
        "device_peak_bytes"
    ]
    r = fit_report(ConvNet(), (x,), {}, optimizer="sgd", budget_bytes=budget, device_spec=h200)
    b = r["max_batch"]
    assert b >= 40  # what fits unlimited fits under the limit

    def runs(batch):  # under the limit times ALLOCATED_LOW: max_batch allows for the model's measured error
        m = step_memory(
            ConvNet(),
            (torch.randn(batch, 3, 64, 64),),
            optimizer="sgd",
            device_spec=h200,
            budget_bytes=budget,
            limit_scales=(ALLOCATED_LOW,),
        )
        return not m["allocator"]["under_budget"]["scaled"][0]["out_of_memory"]

    assert runs(b) and not runs(b + 1)
