"""The --train results are typed records (archlint/train_result.py) whose one serializer writes the
JSON contract as the memory model's dicts had it: the same keys, values and key order, so the JSON
of every run is the same bytes (issue 40.1)."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import archlint
from archlint.model import stepped
from archlint.train_result import StepMemory


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.BatchNorm2d(8)
        self.head = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.head(torch.relu(self.norm(self.conv(x))).flatten(1))


# each mode adds its own keys: none, a budget on the CPU, a GPU spec (workspaces, the allocator,
# max_batch_range), and the distributed step (min_world_size, fit_plan; no fits)
MODES = {
    "cpu": {},
    "cpu-budget": {"memory_budget": "2MB"},
    "gpu-spec": {"device_spec": "a100-sxm"},
    "distributed": {"world_size": 4, "strategy": "zero2", "memory_budget": "2MB"},
}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_step_memory_writes_the_memory_models_dict_key_for_key_in_order(mode, monkeypatch):
    made = []

    class Recorded(StepMemory):
        @classmethod
        def from_dict(cls, d):
            made.append(json.loads(json.dumps(d)))  # the dict as the JSON had it before the record
            return StepMemory.from_dict(d)

    monkeypatch.setattr(stepped, "StepMemory", Recorded)
    result = archlint.analyze(Net(), torch.randn(2, 3, 8, 8), train=True, **MODES[mode]).result
    [before] = made
    written = json.loads(json.dumps(result.to_dict()))["models"][0]["memory"]
    assert json.dumps(written) == json.dumps(before)  # the same bytes: keys, values, order
    if mode == "distributed":
        assert "fits" not in written and written["min_world_size"]
    if mode == "gpu-spec":
        assert written["max_batch_range"] and "max_batch" in written


def test_a_max_batch_not_searched_is_written_null_and_an_unknown_key_is_refused():
    base = {
        "peak_bytes": 1,
        "params_bytes": 0,
        "buffers_bytes": 0,
        "inputs_bytes": 0,
        "grads_bytes": 0,
        "optimizer_bytes": 0,
        "activations_bytes": 0,
        "temporaries_bytes": 0,
        "at_peak": {},
        "forward_peak_bytes": 0,
        "at": "",
        "ops": 0,
        "timeline": [],
        "per_module_activations": {},
    }
    searched = StepMemory.from_dict({**base, "max_batch": None, "max_batch_basis": {"basis": "not searched"}})
    assert searched.to_dict()["max_batch"] is None and "max_batch" not in StepMemory.from_dict(base).to_dict()
    with pytest.raises(TypeError):
        StepMemory.from_dict({**base, "peak": 1})


def test_the_estimate_writes_estimate_graphs_dict_then_autocast_then_the_step(monkeypatch):
    """models[].estimate is the Estimate record (archlint/result.py): estimate_graph's keys in its
    order, then what the analysis adds (the forward under autocast, the step), as the dict had them."""
    from archlint.model import analyze as analyze_mod
    from archlint.result import Estimate

    made = []

    class Recorded(Estimate):
        @classmethod
        def from_dict(cls, d):
            made.append(json.loads(json.dumps(d)))
            return Estimate.from_dict(d)

    monkeypatch.setattr(analyze_mod, "Estimate", Recorded)
    result = archlint.analyze(Net(), torch.randn(2, 3, 8, 8), train=True, device_spec="a100-sxm").result
    [before] = made
    written = json.loads(json.dumps(result.to_dict()))["models"][0]["estimate"]
    assert list(written) == [*before, "autocast", "train"]
    assert {k: written[k] for k in before} == before
    assert written["train"]["forward_ms"] == written["latency_ms"] and "autocast" in written["train"]


def test_the_step_writes_its_costs_in_the_contracts_order_and_its_split_adds_up():
    result = archlint.analyze(Net(), torch.randn(2, 3, 8, 8), train=True).result
    s = result.models[0].totals.train
    written = json.loads(json.dumps(result.to_dict()))["models"][0]["totals"]["train"]
    assert list(written) == [
        "loss",
        "optimizer",
        "forward_flops",
        "backward_flops",
        "loss_flops",
        "optimizer_flops",
        "step_flops",
        "forward_mac_bytes",
        "backward_mac_bytes",
        "loss_mac_bytes",
        "optimizer_mac_bytes",
        "step_mac_bytes",
        "trainable_params",
        "frozen_params",
        "updated_params",
        "backward_unknown_ops",
    ]  # no "measured" without --latency
    split = s.split()
    assert list(split) == ["forward", "backward", "loss", "optimizer", "step"]
    assert sum(f for part, (f, _) in split.items() if part != "step") == split["step"][0] == written["step_flops"]
    assert sum(m for part, (_, m) in split.items() if part != "step") == split["step"][1]
