"""Reading fx graphs (the fx and export strategies): a node's node arguments, the OpGraph node
that a node stands for, tuple items as aliases, and a model attribute by dotted path."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx as fx
from torch import nn

from archlint.model.capture.common import tensors_in
from archlint.model.capture.graph import GraphBuilder


def input_nodes(n: fx.Node) -> list[fx.Node]:
    """The nodes among a node's arguments and keyword arguments, nested ones included."""
    found: list[fx.Node] = []
    fx.node.map_arg((n.args, n.kwargs), found.append)
    return found


def opgraph_node(a: Any, alias: dict[str, str], b: GraphBuilder) -> str | None:
    """The OpGraph node an fx argument stands for (through tuple-item aliases); None for a
    constant or a node that is not in the graph."""
    if not isinstance(a, fx.Node):
        return None
    if a.name in alias:
        return alias[a.name]
    return a.name if a.name in b.graph else None


def alias_tuple_item(
    n: fx.Node, value_of: Callable[[fx.Node], Any], value: Any, alias: dict[str, str], b: GraphBuilder
) -> bool:
    """`x[i]` of a tuple/list an op returned is that op's output, not an op of its own: record
    the alias and say so (True); False for anything else (indexing a tensor is a real op)."""
    if not (n.op == "call_function" and n.target is operator.getitem):
        return False
    if isinstance(value_of(n.args[0]), torch.Tensor):
        return False
    source = opgraph_node(n.args[0], alias, b)
    if source is not None and tensors_in(value):
        alias[n.name] = source
    return True


def attribute_at(model: nn.Module, path: str) -> Any:
    """The model's attribute at a dotted path ('layer1.0.conv1.weight')."""
    obj = model
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj
