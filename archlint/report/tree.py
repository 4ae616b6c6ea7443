"""--tree [--depth N]: the model's module hierarchy, like torchinfo's summary, for readers who think
in modules rather than ops. Each row sums the ops inside that module (FLOPs and MAC of ops with a
cost formula, parameters each counted once) and shows the output shape of the module's last op.
With --train, each row also shows the activations its modules keep alive for backward (the memory
model's `per_module_activations`: what is saved at the end of the forward, by the module whose
forward made it). Modules below --depth are folded into their ancestor at that depth (its sums
include them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from archlint.result import ModelResult
from archlint.units import human_bytes, human_count

DEFAULT_DEPTH = 3


@dataclass
class Node:
    path: str  # dotted module path; "" for the model itself
    flops: int = 0
    mac_bytes: int = 0
    params: int = 0
    ops: int = 0
    unknown: int = 0
    out_shapes: list[list[int]] = field(default_factory=list)
    children: dict[str, Node] = field(default_factory=dict)
    activation_bytes: int = 0  # --train: saved for backward by the ops inside


def _chain(root: Node, module: str, depth: int) -> list[Node]:
    """The nodes from the root down to the module (folded at `depth`), made as needed."""
    node, chain = root, [root]
    parts = module.split(".") if module else []
    for i, part in enumerate(parts[:depth]):
        node = node.children.setdefault(part, Node(".".join(parts[: i + 1])))
        chain.append(node)
    return chain


def build(model: ModelResult, depth: int = DEFAULT_DEPTH) -> Node:
    """The tree of modules down to `depth` (0: the model alone), with every op summed into each of
    its ancestors. Ops run directly by a module (an F.relu in its forward) count toward it."""
    root = Node("")
    for layer in model.layers:  # topological order: the last op seen in a module is its output
        for n in _chain(root, layer.module, depth):
            n.ops += 1
            n.params += layer.params
            if layer.known:
                n.flops += layer.flops
                n.mac_bytes += layer.mac_bytes
            else:
                n.unknown += 1
            n.out_shapes = layer.out_shapes[:1]
    kept = model.memory.per_module_activations if model.memory is not None else {}
    for module, nbytes in kept.items():
        for n in _chain(root, "" if module == "<model>" else module, depth):
            n.activation_bytes += nbytes
    return root


def _rows(node: Node, prefix: str, last: bool, top: bool):
    branch = "" if top else ("└─ " if last else "├─ ")
    name = node.path.rsplit(".", 1)[-1] if node.path else "(model)"
    yield f"{prefix}{branch}{name}", node
    children = list(node.children.values())
    inner = prefix + ("" if top else ("   " if last else "│  "))
    for i, child in enumerate(children):
        yield from _rows(child, inner, i == len(children) - 1, False)


def print_tree(model: ModelResult, console: Console, depth: int = DEFAULT_DEPTH) -> None:
    root = build(model, depth)
    types = model.module_types
    kept = bool(model.memory is not None and model.memory.per_module_activations)
    title = f"module tree (depth {depth}; sums of the ops inside each module"
    title += (
        "; activations: kept alive for backward at the end of the forward, --train's memory model)" if kept else ")"
    )
    table = Table(title=title, title_justify="left")
    columns = [
        ("module", "left"),
        ("type", "left"),
        ("out shape", "left"),
        ("params", "right"),
        ("FLOPs", "right"),
        ("%", "right"),
        ("MAC", "right"),
        ("ops", "right"),
    ]
    if kept:
        columns.append(("activations", "right"))
    for column, justify in columns:
        table.add_column(column, justify=justify, overflow="fold")
    total = root.flops
    for label, node in _rows(root, "", True, True):
        share = f"{node.flops / total:.1%}" if total else "-"
        ops = f"{node.ops}" + (f" ({node.unknown} unknown)" if node.unknown else "")
        row = [
            escape(label),
            escape(types.get(node.path, "")),
            " ".join("×".join(map(str, s)) for s in node.out_shapes),
            human_count(node.params),
            human_count(node.flops),
            share,
            human_bytes(node.mac_bytes),
            ops,
        ]
        if kept:
            row.append(human_bytes(node.activation_bytes))
        table.add_row(*row)
    console.print(table)
