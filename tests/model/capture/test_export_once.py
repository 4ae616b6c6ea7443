"""The export strategy traces the forward once (issue 45): a Hugging Face model's output holds a KV
cache that export refuses; it was traced whole, refused, and traced again with its output reduced to
its tensors (two traces: seconds each on an 8B-sized model). The reduction is now decided while the
forward is traced, with the same note and the same graph."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from archlint.model.capture import capture
from archlint.model.capture import export as export_strategy

transformers = pytest.importorskip("transformers")


def _counted(monkeypatch) -> list:
    calls: list = []
    real = export_strategy._export

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(export_strategy, "_export", counted)
    return calls


def _llama():
    cfg = transformers.LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=64,
    )
    with torch.device("meta"):
        return transformers.LlamaForCausalLM(cfg)


def _graph_content(graph):
    return [(n, d.get("kind"), str(d.get("shape")), d.get("module")) for n, d in graph.nodes(data=True)]


def test_a_kv_cache_output_is_reduced_in_one_trace(monkeypatch):
    model, ids = _llama(), torch.randint(0, 64, (1, 8))
    calls = _counted(monkeypatch)
    graph, _ = capture(model, (), "export", {"input_ids": ids})
    assert len(calls) == 1
    assert (
        graph.graph["notes"].count(
            "exported with the output reduced to its tensors (<class 'transformers.cache_utils.DynamicCache'>)"
        )
        == 1
    )
    assert "forward" not in model.__dict__  # the instance's forward is restored
    # the same graph as the two traces gave: the refusal found after the trace (a torch that does not
    # say which output types it knows)
    monkeypatch.setattr(export_strategy, "_aot_utils", None)
    again, _ = capture(model, (), "export", {"input_ids": ids})
    assert len(calls) == 3
    assert again.graph["notes"] == graph.graph["notes"]
    assert _graph_content(again) == _graph_content(graph)


def test_an_output_export_takes_is_not_reduced(monkeypatch):
    class TwoOut(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            y = self.lin(x)
            return {"y": y, "pair": (y, y.relu())}

    calls, reduced = _counted(monkeypatch), []
    real = export_strategy.output_tensors
    monkeypatch.setattr(export_strategy, "output_tensors", lambda *a: reduced.append(1) or real(*a))
    graph, _ = capture(TwoOut(), (torch.randn(2, 4),), "export")
    assert len(calls) == 1
    assert not reduced
    assert not any("reduced" in note for note in graph.graph.get("notes", []))
