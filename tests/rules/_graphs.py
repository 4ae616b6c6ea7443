"""Build a costed OpGraph from an nn.Module with archlint's own capture and cost layers, and run
the model checks on it, the way the analyzer does (without loading a target file)."""

from __future__ import annotations

import torch

from archlint.config import Settings
from archlint.model.capture import capture
from archlint.model.checks import CheckContext, run_checks
from archlint.model.cost import cost_graph


def opgraph(model: torch.nn.Module, *shapes, mode: str = "eval", strategy: str = "fx", device: str = "cpu",
            dtype: torch.dtype = torch.float32):
    model.train(mode == "train")
    inputs = tuple(torch.randn(*s, device=device, dtype=dtype) for s in shapes)
    graph, _ = capture(model, inputs, strategy)
    cost_graph(graph)
    graph.graph.setdefault("mode", mode)
    return graph


def findings(graph, settings: Settings | None = None, pricer=None, target: str = "test.py:Net"):
    return run_checks(graph, CheckContext(target, settings or Settings(), pricer))


def codes(graph, settings: Settings | None = None) -> list[str]:
    return [d.code for d in findings(graph, settings)]
