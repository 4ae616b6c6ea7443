"""A CUDA sum or mean split across thread blocks takes a buffer and semaphores from the caching
allocator inside the op (Reduce.cuh): the sizes the H200's allocator recorded for the bias gradients of
vit_small_patch16_224, vit_b_16 and convnext_atto (benchmarks/gpu_checks.py section alloc_trace), and
where the memory model puts them."""

from __future__ import annotations

import torch
import torch.nn as nn

from archlint.devices import resolve
from archlint.model.train.gpu_workspaces import reduction_workspace, threads_per_sm
from archlint.model.train.memory import _both_steps, _Tracker, _Watch, step_memory

aten = torch.ops.aten
H200 = (132, 2048)


def meta(*shape, dtype=torch.float32):
    return torch.empty(*shape, device="meta", dtype=dtype)


def bias_grad(rows, cols, dtype=torch.float32, grid=H200):
    return reduction_workspace(aten.sum.dim_IntList, (meta(rows, cols, dtype=dtype), [0], True), *grid)


def test_a_bias_gradients_buffer_is_the_one_the_h200_recorded():
    # (buffer, semaphores) as traced, each rounded up to the allocator's 512 bytes
    assert bias_grad(6304, 384) == 19464192 + 512  # vit_small: 32 x 197 tokens, 384 outputs
    assert bias_grad(6304, 1536) == 77856768 + 512  # vit_small's fc1
    assert bias_grad(6304, 768) == 38928384 + 512  # vit_b_16
    assert bias_grad(6304, 2304) == 116785152 + 512  # vit_b_16's in_proj
    assert bias_grad(100352, 40) == 2007040 + 512  # convnext_atto's stage-1 MLP, 32 x 56 x 56 rows


def test_a_reduction_in_one_block_per_output_takes_none():
    assert reduction_workspace(aten.mean.default, (meta(32, 1000),), *H200) == 0  # the loss
    assert bias_grad(64, 384) == 0  # too few inputs per output to split
    assert reduction_workspace(aten.mean.dim, (meta(32, 197, 384), [-1], True), *H200) == 0  # along the fastest dim
    assert bias_grad(6304, 384, dtype=torch.float16) == 0  # 16-bit: not modelled (said in the basis)
    assert reduction_workspace(aten.add.Tensor, (meta(6304, 384), meta(6304, 384)), *H200) == 0


def test_fewer_sms_split_into_fewer_blocks():
    # a T4 (40 SMs, 1024 threads each): the grid's target, not the inputs, caps the blocks per output
    assert threads_per_sm(resolve("t4"))[0] == 1024 and threads_per_sm(resolve("h200"))[0] == 2048
    # 2304 outputs: 18 blocks of 128 outputs; a T4's target of 40 x (1024 / 128) blocks gives each 18
    # blocks (the H200's 132 x 16 would give 118; the inputs cap it at 99)
    assert bias_grad(6304, 2304, grid=(40, 1024)) == 4 * 2304 * 18 * 128 + 512
    assert bias_grad(6304, 384, grid=(40, 1024)) == bias_grad(6304, 384)  # 3 blocks: the inputs cap both


def test_the_tracker_puts_the_buffer_after_the_sums_output():
    tracker = _Tracker(round_to=512, workspace_sizes={"cublas": 0, "cublasLt": 0}, reduce_grid=H200)
    g = meta(6304, 384)
    with _Watch(tracker):
        aten.sum.dim_IntList(g, [0], True)
    (out,), (buffer,) = tracker.records, tracker.transients
    assert out.born < buffer.born < buffer.died and buffer.nbytes == 19464192 + 512
    assert tracker.peak == out.nbytes + buffer.nbytes
    # unlike a cuDNN workspace, the kernel cannot do without it: the replay gets it as a storage
    assert not buffer.skippable
    tracker.marks["first_step_events"] = 0
    storages, workspaces = _both_steps(_Tracker(), tracker)
    assert (buffer.born, buffer.died, buffer.nbytes) in storages and not workspaces
    plain = _Tracker(round_to=512, workspace_sizes={"cublas": 0, "cublasLt": 0})  # no SM count: none
    with _Watch(plain):
        aten.sum.dim_IntList(g, [0], True)
    assert not plain.transients


def test_step_memory_counts_a_linears_bias_gradient_buffer_on_a_gpu_spec_only():
    model, x = nn.Linear(384, 384), torch.randn(6304, 384)
    gpu = step_memory(model, (x,), optimizer="sgd", device_spec=resolve("h200"))
    assert gpu["reduction_workspace_largest_bytes"] == 19464192 + 512
    assert "Reductions: PyTorch's CUDA reductions" in gpu["workspace_basis"]
    cpu = step_memory(model, (x,), optimizer="sgd")
    assert "reduction_workspace_bytes" not in cpu
