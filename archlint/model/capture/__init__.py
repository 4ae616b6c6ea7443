"""Capture a model into an OpGraph, by the first strategy that works: "fx" (symbolic trace and
meta shape propagation: fx.py), "export" (`torch.export.export(strict=False)`: export.py), then
"dispatch" (one real forward pass under a TorchFunctionMode: dispatch.py).

All three record at the same granularity (the one fx uses): a torch.nn "leaf" module
(cost.LEAF_MODULES: Conv2d, Linear, MultiheadAttention, ...) is one op; everything else is traced
through down to torch functions, Tensor methods and operators. So the same model gives the same
kinds, module paths and totals whatever the strategy.

Shared by the strategies: common.py (CaptureFailed, Replay, leaf modules), describe.py (call
attributes and labels), graph.py (the OpGraph builder), fxnodes.py (reading fx graphs).
"""

from __future__ import annotations

import networkx as nx
from torch import nn

from archlint.model.capture.common import CaptureFailed, Replay, is_leaf
from archlint.model.capture.describe import call_attrs, function_label, module_attrs
from archlint.model.capture.dispatch import capture_dispatch
from archlint.model.capture.export import capture_export
from archlint.model.capture.fx import capture_fx
from archlint.model.capture.graph import GraphBuilder, class_source, modules_table

__all__ = [
    "CAPTURE",
    "STRATEGIES",
    "CaptureFailed",
    "Replay",
    "call_attrs",
    "capture",
    "capture_dispatch",
    "capture_export",
    "capture_fx",
    "class_source",
    "function_label",
    "is_leaf",
    "module_attrs",
    "modules_table",
]

STRATEGIES = ("fx", "export", "dispatch")

CAPTURE = {"fx": capture_fx, "export": capture_export, "dispatch": capture_dispatch}


def capture(
    model: nn.Module, inputs: tuple, strategy: str, kwargs: dict | None = None
) -> tuple[nx.DiGraph, Replay | None]:
    """One strategy; raises CaptureFailed. The model's training flags are the caller's business.
    `kwargs`: keyword-only inputs (fx takes none: it then fails and the next strategy runs)."""
    builder = GraphBuilder(model)
    try:
        replay = CAPTURE[strategy](model, inputs, builder, **({"kwargs": kwargs} if kwargs else {}))
    except CaptureFailed:
        raise
    except Exception as exc:
        raise CaptureFailed(strategy, exc) from exc
    graph = builder.finish(strategy)
    graph.graph["replay"] = replay
    return graph, replay
