"""Reading fx graphs (the fx and export strategies): a node's node arguments, the OpGraph node
that a node stands for, and a model attribute by dotted path."""

from __future__ import annotations

from typing import Any

import torch.fx as fx
from torch import nn

from archlint.model.capture.graph import _Builder


def _node_args(n: fx.Node) -> list[fx.Node]:
    found: list[fx.Node] = []
    fx.node.map_arg((n.args, n.kwargs), found.append)
    return found


def _resolve(a: Any, alias: dict[str, str], b: _Builder) -> str | None:
    if not isinstance(a, fx.Node):
        return None
    if a.name in alias:
        return alias[a.name]
    return a.name if a.name in b.graph else None


def _fetch(model: nn.Module, path: str) -> Any:
    obj = model
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj
