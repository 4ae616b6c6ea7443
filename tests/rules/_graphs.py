"""Build a costed OpGraph from an nn.Module with archlint's own layers (analyze_model: capture
with the analyzer's fallbacks, then cost), and run the model checks on it as the analyzer does."""

from __future__ import annotations

import torch

from archlint.config import Settings
from archlint.model.analyze import analyze_model
from archlint.model.checks import CheckContext, run_checks


def opgraph(
    model: torch.nn.Module, *shapes, mode: str = "eval", device: str = "cpu", dtype: torch.dtype = torch.float32
):
    inputs = tuple(torch.randn(*s, device=device, dtype=dtype) for s in shapes)
    graph, _ = analyze_model(model, inputs, Settings(mode=mode))
    return graph


def findings(graph, settings: Settings | None = None, pricer=None, target: str = "test.py:Net"):
    return run_checks(graph, CheckContext(target, settings or Settings(), pricer))
