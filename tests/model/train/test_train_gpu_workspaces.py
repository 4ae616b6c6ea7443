"""Library workspaces on a GPU spec (archlint.model.train.gpu_workspaces): cuBLAS per thread, cuDNN per convolution."""

from __future__ import annotations

import torch
import torch.nn as nn

from archlint.devices import resolve
from archlint.model.train.gpu_workspaces import (
    CUBLAS_OTHER_BYTES,
    CUBLAS_SM90_BYTES,
    CUBLASLT_BYTES,
    cublas_sizes,
    cublas_workspaces,
    cudnn_workspaces,
)
from archlint.model.train.memory import step_memory

aten = torch.ops.aten


def _largest(func, args) -> int:
    """The largest workspace a convolution op takes on cuDNN (0 for none)."""
    return max((nbytes for _, nbytes in cudnn_workspaces(func, args)), default=0)


def mlp(bias=True):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 128, bias=bias), nn.ReLU(), nn.Linear(128, 8, bias=bias))


class ConvOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        return self.conv(x)


def test_workspace_sizes_follow_torchs_defaults_by_architecture(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.delenv("CUBLASLT_WORKSPACE_SIZE", raising=False)
    assert cublas_sizes(resolve("h200"))[:2] == (32 << 20, 1 << 20) == (CUBLAS_SM90_BYTES, CUBLASLT_BYTES)
    assert cublas_sizes(resolve("h100-sxm"))[0] == CUBLAS_SM90_BYTES
    assert cublas_sizes(resolve("a100-sxm"))[0] == CUBLAS_OTHER_BYTES == 8 * 2**20 + 128 * 1024
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8:16:8")  # torch adds every :SIZE:COUNT
    monkeypatch.setenv("CUBLASLT_WORKSPACE_SIZE", "65536")  # 64 MiB: capped at the cuBLAS size
    size, lt, basis = cublas_sizes(resolve("t4"))
    assert size == 4096 * 1024 * 8 + 16 * 1024 * 8 and lt == size
    assert "CUBLAS_WORKSPACE_CONFIG=:4096:8:16:8" in basis and "capped" in basis


def test_which_ops_take_which_workspace():
    bias, x, w = torch.empty(4, device="meta"), torch.empty(2, 3, device="meta"), torch.empty(3, 4, device="meta")
    assert cublas_workspaces(aten.addmm.default, (bias, x, w), "forward") == [
        "cublas forward thread",
        "cublasLt forward thread",
    ]
    assert cublas_workspaces(aten.mm.default, (x, w), "autograd") == ["cublas autograd thread"]
    assert cublas_workspaces(aten.addmm.default, (torch.empty(2, 4, device="meta"), x, w), "forward") == [
        "cublas forward thread"
    ]
    assert cublas_workspaces(aten.convolution.default, (), "forward") == []


def test_a_gpu_step_holds_a_cublas_workspace_per_thread(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.delenv("CUBLASLT_WORKSPACE_SIZE", raising=False)
    x = torch.randn(16, 64)
    h200 = resolve("h200")
    cpu = step_memory(mlp(), (x,), optimizer="sgd")
    gpu = step_memory(mlp(), (x,), optimizer="sgd", device_spec=h200)
    # forward: addmm with a bias → cuBLAS and cuBLASLt on the forward thread; backward: mm on autograd's
    held = 2 * CUBLAS_SM90_BYTES + CUBLASLT_BYTES
    assert gpu["cublas_workspace_bytes"] == held == gpu["at_peak"]["workspaces"]
    assert "cublas autograd thread" in gpu["workspace_basis"] and "sm90" in gpu["workspace_basis"]
    assert gpu["peak_bytes"] - held - cpu["peak_bytes"] < 4096  # the rest: 512-byte rounding of a few blocks
    assert gpu["first_step_peak_bytes"] >= held  # made in the first step, kept
    assert gpu["allocator"]["reserved_peak_bytes"] >= held
    # no bias: no cuBLASLt
    assert (
        step_memory(mlp(bias=False), (x,), optimizer="sgd", device_spec=h200)["cublas_workspace_bytes"]
        == 2 * CUBLAS_SM90_BYTES
    )
    # no GEMM at all: none held; and the CPU result has no such key
    conv = step_memory(ConvOnly(), (torch.randn(2, 3, 8, 8),), optimizer="sgd", device_spec=h200)
    assert conv["cublas_workspace_bytes"] == 0 and conv["at_peak"].get("workspaces", 0) == conv["cudnn_workspace_bytes"]
    assert "cublas_workspace_bytes" not in cpu and "workspaces" not in cpu["at_peak"]


def meta(*shape):
    return torch.empty(*shape, device="meta")


def test_cudnn_workspace_of_a_convolution_by_kind():
    x, w = meta(32, 64, 56, 56), meta(64, 64, 3, 3)
    conv = (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    assert _largest(aten.convolution.default, conv) == 2 * 32 * 64 * 56 * 56 * 4  # input + output
    grad = (meta(32, 64, 56, 56), x, w, [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False])
    assert _largest(aten.convolution_backward.default, grad) == 2 * 32 * 64 * 56 * 56 * 4 + 64 * 64 * 9 * 4
    stem = (meta(32, 3, 224, 224), meta(64, 3, 7, 7), None, [2, 2], [3, 3], [1, 1], False, [0, 0], 1)
    patchify = (meta(32, 40, 224, 224), meta(96, 40, 4, 4), None, [4, 4], [0, 0], [1, 1], False, [0, 0], 1)
    assert _largest(aten.convolution.default, stem) == _largest(aten.convolution.default, patchify) == 0
    pointwise = (x, meta(256, 64, 1, 1), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    depthwise = (x, meta(64, 1, 3, 3), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 64)
    strided_1x1 = (x, meta(128, 64, 1, 1), None, [2, 2], [0, 0], [1, 1], False, [0, 0], 1)
    assert _largest(aten.convolution.default, pointwise) == _largest(aten.convolution.default, depthwise) == 0
    assert _largest(aten.convolution.default, strided_1x1) == (64 * 56 * 56 + 128 * 28 * 28) * 32 * 4
    assert _largest(aten.mm.default, (meta(2, 3), meta(3, 4))) == 0


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 16, 3, padding=1), nn.Conv2d(16, 16, 3, padding=1)  # a: a stem, none

    def forward(self, x):
        return self.b(self.a(x).relu())


def test_a_convolutions_workspace_is_in_the_peak_and_in_the_replay():
    x = torch.randn(8, 3, 64, 64)
    h200 = resolve("h200")
    m = step_memory(ConvNet(), (x,), optimizer="sgd", device_spec=h200)
    assert m["cudnn_workspace_largest_bytes"] > 0 and "cuDNN" in m["workspace_basis"]
    # the peak is at a convolution whose workspace is in it; the allocator's replay carries it too
    assert "convolution" in m["at"] and m["cudnn_workspace_bytes"] > 0
    assert m["at_peak"]["workspaces"] == m["cudnn_workspace_bytes"] + m["cublas_workspace_bytes"]
    assert "cuDNN's workspaces inside their convolutions" in m["allocator"]["reserved_basis"]
    assert m["allocator"]["reserved_peak_bytes"] >= m["peak_bytes"]
    with torch.backends.mkldnn.flags(enabled=False):  # the CPU step without oneDNN's own scratch (cpu_scratch.py)
        cpu = step_memory(ConvNet(), (x,), optimizer="sgd")
    assert m["peak_bytes"] - cpu["peak_bytes"] >= m["cudnn_workspace_bytes"] and "cudnn_workspace_bytes" not in cpu


def test_the_timeline_reaches_the_peak_at_a_convolution():
    m = step_memory(ConvNet(), (torch.randn(8, 3, 64, 64),), optimizer="sgd", device_spec=resolve("h200"))
    assert max(b for _, b in m["timeline"]) == m["peak_bytes"]
