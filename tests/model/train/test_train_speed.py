"""What keeps `--train` within 3x of the forward analysis without changing a number
(benchmarks/train_speed.py measures it): the memory model runs with the cyclic collector off."""

import gc

import torch
import torch.nn as nn

import archlint
from archlint.model.train import memory


def test_memory_model_runs_with_the_cyclic_collector_off(monkeypatch):
    seen = []
    real = memory.step_memory

    def watching(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(memory, "step_memory", watching)
    enabled = gc.isenabled()
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    result = archlint.analyze(net, torch.randn(4, 8), train=True, quiet=True).to_dict()["models"][0]
    assert seen == [False]
    assert gc.isenabled() == enabled  # given back
    # and the step's storages are still freed as they die (by reference counts): the activations
    # kept for backward are only the ReLU's output, the output the loop's `out` keeps and the loss,
    # not every temporary
    assert result["memory"]["activations_bytes"] == (4 * 16 + 4 * 4 + 1) * 4
