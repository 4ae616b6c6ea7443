"""Reading fx graphs (the fx and export strategies): a node's node arguments, the OpGraph node
that a node stands for, tuple items as aliases, and a model attribute by dotted path."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx as fx
from torch import nn

from archlint.model.capture.common import _tensors
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


def alias_tuple_item(
    n: fx.Node, value_of: Callable[[fx.Node], Any], value: Any, alias: dict[str, str], b: _Builder
) -> bool:
    """`x[i]` of a tuple/list an op returned is that op's output, not an op of its own: record
    the alias and say so (True); False for anything else (indexing a tensor is a real op)."""
    if not (n.op == "call_function" and n.target is operator.getitem):
        return False
    if isinstance(value_of(n.args[0]), torch.Tensor):
        return False
    source = _resolve(n.args[0], alias, b)
    if source is not None and _tensors(value):
        alias[n.name] = source
    return True


def _fetch(model: nn.Module, path: str) -> Any:
    obj = model
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj
