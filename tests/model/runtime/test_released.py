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


class _Masked(nn.Module):
    """A causal mask built in forward: AL107 under export, re-checked on an eager (dispatch) capture."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        mask = torch.tril(torch.ones(8, 8, dtype=torch.bool))
        return (self.proj(x) @ x.transpose(1, 2)).masked_fill(~mask, 0.0)


def test_the_eager_recheck_graph_is_let_go_as_the_analysis_graph(monkeypatch):
    """The eager re-check's graph (real weights in its ops, its views a cycle) is emptied as the
    analysis's own graph is, not left for the collector's next full pass."""
    from archlint.model import analyze as analyze_module

    graphs = []
    real = analyze_module._eager_capture

    def kept(*args, **kwargs):
        graph, how = real(*args, **kwargs)
        graphs.append(graph)
        return graph, how

    monkeypatch.setattr(analyze_module, "_eager_capture", kept)
    result = archlint.analyze(_Masked(), torch.randn(2, 8, 16), quiet=True, strategy="export")
    assert any("re-checked on the eager forward" in note for note in result.notes)
    assert len(graphs) == 1 and graphs[0].number_of_nodes() == 0 and not graphs[0].graph
