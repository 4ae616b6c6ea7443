"""The training step where the meta device refuses an op the real step runs (issue 46): a
Mixture-of-Experts layer in float32, a tensor made on the CPU inside forward, a value read from the
weights. Each gets the step, by the fallback said in the output."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn

from archlint.model import stepped
from archlint.model.loading.loaded import Loaded
from archlint.model.train.memory import step_memory
from archlint.model.train.meta_shims import CPU_TENSOR_NOTE

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "train_memory.py"
spec = importlib.util.spec_from_file_location("train_memory_bench_fallbacks", SCRIPT)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


class TinyUNet(nn.Module):
    """A diffusion U-Net in small: a sinusoidal timestep embedding, and a scale made on the CPU
    (torch.linspace without device=) that meets an activation."""

    def __init__(self, ch=16, tdim=32, on_device=False):
        super().__init__()
        self.tdim, self.on_device = tdim, on_device
        self.temb = nn.Sequential(nn.Linear(tdim, ch), nn.SiLU(), nn.Linear(ch, ch))
        self.down = nn.Conv2d(3, ch, 3, padding=1)
        self.mid = nn.Conv2d(ch, ch, 3, stride=2, padding=1)
        # (nn.Upsample, not ConvTranspose2d: the CPU's transposed convolution allocates scratch the
        # memory model does not count yet, 0.86 of the real step with oneDNN, 0.31 without)
        self.up = nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv2d(ch, ch, 3, padding=1))
        self.out = nn.Conv2d(2 * ch, 3, 3, padding=1)

    def forward(self, x, t):
        half = self.tdim // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
        emb = t.float()[:, None] * freqs[None]
        emb = self.temb(torch.cat([emb.sin(), emb.cos()], dim=1))
        emb = emb * torch.linspace(0.5, 1.5, emb.shape[1], device=emb.device if self.on_device else None)
        h = self.down(x) + emb[:, :, None, None]
        return self.out(torch.cat([h, self.up(torch.relu(self.mid(h)))], dim=1))


class GateEncoder(nn.Module):
    """Reads a number from its weights (.item()) in training: the meta device has no value to give."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)
        self.gate = nn.Parameter(torch.zeros(()))
        self.out = nn.Linear(16, 16)

    def forward(self, x):
        h = torch.relu(self.proj(x))
        if self.training and torch.sigmoid(self.gate).item() > 2.0:
            return h
        return self.out(h)


@pytest.mark.parametrize("name", ["hf/mixtral-moe-32k", "hf/qwen2-moe-32k"])
def test_moe_in_float32_runs_on_meta_and_matches_the_real_step(name):
    # transformers 5.x runs its experts with torch._grouped_mm, whose meta kernel takes only bfloat16
    row = bench.measure(bench.MODELS[name], "sgd", peers=False)
    assert row["run"] == "meta"
    assert abs(row["archlint"] / row["measured"] - 1) <= 0.01, row
    torch.manual_seed(0)
    model, args, kwargs = bench.MODELS[name]()
    adapted = step_memory(model, args, kwargs, optimizer="sgd")["adapted_ops"]
    assert any(n.startswith("_grouped_mm") and "float32" in n for n in adapted)


def test_a_cpu_tensor_made_in_forward_meets_meta_weights():
    with torch.device("meta"):
        unet = TinyUNet()
    inputs = (torch.randn(2, 3, 16, 16), torch.randint(0, 1000, (2,)))
    r = step_memory(unet, inputs, optimizer="adam")  # was: "no real weights to run it with"
    assert r["basis"].startswith("measured on the meta device") and r["adapted_ops"] == [CPU_TENSOR_NOTE]
    # the same U-Net making its scale on the activations' device needs no shim: the same step
    with torch.device("meta"):
        placed = TinyUNet(on_device=True)
    same = step_memory(placed, inputs, optimizer="adam")
    assert "adapted_ops" not in same and same["peak_bytes"] == r["peak_bytes"]
    assert same["timeline"] == r["timeline"]


def test_a_value_read_from_the_weights_gets_the_step_with_real_weights():
    with torch.device("meta"):
        meta = GateEncoder()
    loaded = Loaded(model=meta, inputs=(torch.randn(4, 16),), build="meta", dtype=torch.float32, factory=GateEncoder)
    result = SimpleNamespace(notes=[], memory=None, target="enc", device="cpu")
    settings = SimpleNamespace(memory_budget=None, parallel=None, enabled=lambda code: True)
    stepped._memory(loaded, result, settings, SimpleNamespace(label="sgd"), "mean", None)
    assert loaded.build == "real"
    assert result.memory.basis.startswith("measured with real tensors")
    assert any(n.startswith("memory: built again with real weights") for n in result.notes)


def test_max_batch_is_not_searched_on_real_tensors():
    # each batch tried would allocate its step on this machine: a GPU's budget is many times its memory
    from archlint.model.train.fit import fit_report

    r = fit_report(GateEncoder(), (torch.randn(4, 16),), {}, optimizer="sgd", budget_bytes=1 << 40)
    assert r["basis"].startswith("measured with real tensors")
    assert r["max_batch"] is None and r["max_batch_basis"]["basis"].startswith("not searched")
