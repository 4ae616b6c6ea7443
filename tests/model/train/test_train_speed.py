"""What keeps `--train` within 2x of the forward analysis without changing a number
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


def test_input_values_are_copied_on_one_thread(monkeypatch):
    """The inputs' real values are copied with ATen on one thread (values.KnownValues.know_all):
    a parallel copy's threads wait on each other for milliseconds on a busy machine."""
    from archlint.model.train.values import KnownValues

    threads_seen = []
    real_know = KnownValues.know
    monkeypatch.setattr(
        KnownValues, "know", lambda self, m, r: threads_seen.append(torch.get_num_threads()) or real_know(self, m, r)
    )
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        net = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Linear(16, 4))
        x, meta = torch.randn(4, 8), memory.to_meta(net)
        meta_x = torch.empty_like(x, device="meta")
        values = memory._input_values(net, meta, ((x,), {}), ((meta_x,), {}))
        assert threads_seen == [1, 1, 1, 1] and torch.get_num_threads() == 2  # the input and 3 buffers; given back
        assert len(values.values._items) == 4
    finally:
        torch.set_num_threads(before)
