"""An analysis lets the user's model go: once the caller drops the model and the result, the model
and its weights are freed by their reference counts, not at the cyclic collector's next full pass
(which, in a notebook or a test suite holding half a million objects, may come much later: a
ViT-B's 344 MB of weights meanwhile)."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
from torch import nn

import archlint


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.head = nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.Linear(8, 4)

    def forward(self, x):
        y = self.bn(self.conv(x)).relu().mean((2, 3))
        return self.head(y) * torch.tensor(2.0)  # a tensor constant: the replay keeps one


@pytest.fixture(scope="module", autouse=True)
def _imported():
    """What the first analysis of a process imports (torch._dynamo and the like) done first: a
    module-level `torch.fx.wrap` there keeps the importing frames, the caller's among them, in a
    cycle once (torch's), not once per analysis."""
    archlint.analyze(_Net(), torch.randn(2, 3, 8, 8), quiet=True, select=[], train=True, latency=True, repeat=1)
    gc.collect()


@pytest.mark.parametrize(
    "options",
    [{}, {"latency": True, "warmup": 1, "repeat": 1}, {"train": True}, {"strategy": "dispatch"}],
    ids=["fx", "fx-latency", "train", "dispatch"],
)
def test_the_model_goes_with_its_last_reference(options):
    # was: kept by two reference cycles, fx's tracer (its root) and the op graph (networkx caches
    # its views on it; the replay and each op's parameters) until gc.collect()
    model = _Net()
    gone, weights = weakref.ref(model), weakref.ref(model.conv.weight)
    was = gc.isenabled()
    gc.disable()  # an automatic pass would free it either way
    try:
        result = archlint.analyze(model, torch.randn(2, 3, 8, 8), quiet=True, select=[], **options)
        assert result.totals.flops > 0
        del model, result
        assert gone() is None and weights() is None
    finally:
        if was:
            gc.enable()
