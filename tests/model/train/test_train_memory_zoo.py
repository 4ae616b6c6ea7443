"""The memory model against the real step on this CPU (benchmarks/train_memory.py's measurement:
persistent tensors after a warm step + the profiler's peak over the next). A small sample runs in
CI; the whole benchmark zoo is slow-marked."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "train_memory.py"


def _bench():
    spec = importlib.util.spec_from_file_location("train_memory_bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _bench()
# oneDNN's convolution_backward on the CPU allocates a scratch buffer (about 4× the weight for
# ResNet's 512×512 3×3 convolutions) that no storage of the step holds: a CPU-kernel internal the
# meta device cannot see (MemTracker misses it too). SGD's peak is in that backward; Adam's is not.
KNOWN = {("resnet18", "sgd"): "oneDNN convolution_backward scratch (37.8 MB) on the CPU; 0.989 without oneDNN"}


def _check(name, optimizer):
    if (name, optimizer) in KNOWN:
        pytest.xfail(KNOWN[(name, optimizer)])
    row = bench.measure(bench.MODELS[name], optimizer, peers=False)
    assert abs(row["archlint"] / row["measured"] - 1) <= 0.10, row


@pytest.mark.parametrize("name, optimizer", sorted(KNOWN))
def test_known_miss_is_the_cpu_library_scratch(name, optimizer):
    """The known misses are what KNOWN says: with oneDNN off the same row is within 10%."""
    import torch

    with torch.backends.mkldnn.flags(enabled=False):
        row = bench.measure(bench.MODELS[name], optimizer, peers=False)
    assert abs(row["archlint"] / row["measured"] - 1) <= 0.10, row


@pytest.mark.parametrize("name, optimizer", [("mlp", "adam"), ("squeezenet1_0", "sgd")])
def test_sample_within_10_percent_of_the_real_step(name, optimizer):
    _check(name, optimizer)


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adamw"])
@pytest.mark.parametrize("name", sorted(bench.MODELS))
def test_zoo_within_10_percent_of_the_real_step(name, optimizer):
    _check(name, optimizer)
