"""module_blocks is computed once per graph (AL103 and AL104 both ask for it) and again for a graph
changed since (its node and edge counts), as fork_join_blocks is."""

from __future__ import annotations

import torch
import torchvision

from archlint.config import Settings
from archlint.model.analyze import analyze_model
from archlint.model.checks import _blocks


def test_module_blocks_once_per_graph_and_again_after_a_change():
    graph, _ = analyze_model(torchvision.models.resnet18(), (torch.randn(1, 3, 64, 64),), Settings(mode="train"))
    first = _blocks.module_blocks(graph)
    assert [b.name for b in first][:2] == ["layer1.0", "layer1.1"]
    assert _blocks.module_blocks(graph) is first  # the same answer, not walked again
    fresh = _blocks._module_blocks(graph)
    assert [(b.name, b.nodes) for b in fresh] == [(b.name, b.nodes) for b in first]
    graph.add_node("__extra__", kind="output")  # changed: computed again
    again = _blocks.module_blocks(graph)
    assert again is not first and [(b.name, b.nodes) for b in again] == [(b.name, b.nodes) for b in first]
