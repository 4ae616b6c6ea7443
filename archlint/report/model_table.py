"""Text report of one analyzed model: totals first, then the costliest layers (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from archlint.config import Settings
from archlint.result import ModelResult
from archlint.units import human_bytes as _bytes
from archlint.units import human_count as _count


def _shapes(shapes: list[list[int]]) -> str:
    return " ".join("×".join(str(d) for d in s) for s in shapes)


def _inputs(model: ModelResult) -> str:
    """Every input's name, shape and dtype: `input_ids 1×128 int64, attention_mask 1×128 bool`."""
    if not model.inputs:
        return ", ".join(_shapes([s]) for s in model.input_shapes) or "none"
    return ", ".join(f"{i['name']} {_shapes([i['shape']])} {i['dtype']}" for i in model.inputs)


def print_model(model: ModelResult, settings: Settings, console: Console) -> None:
    t = model.totals
    console.print(Text(model.target, style="bold"))  # a user path: no markup, no emoji
    console.print(
        f"  strategy {model.strategy} · build {model.build} · mode {model.mode} · {model.dtype} on {model.device}"
        f" · inputs {_inputs(model)}"
    )
    totals = Table(show_header=True, header_style="bold", box=None, padding=(0, 2))
    for column in ("FLOPs", "MAC", "params", "activations", "layers", "unknown ops"):
        totals.add_column(column, justify="right")
    totals.add_row(
        _count(t.flops),
        _bytes(t.mac_bytes),
        _count(t.params) + (f" ({_count(t.unused_params)} unused)" if t.unused_params else ""),
        _bytes(t.activation_bytes),
        str(len(model.layers)),
        str(t.unknown_ops),
    )
    console.print(totals)
    console.print(f"  FLOPs = {model.flops_convention}; MAC = bytes read + written (ShuffleNetV2)")
    if t.train:  # --train: the step's split
        from archlint.report.train_table import print_step

        print_step(model, console)
        if model.distributed:  # --world-size/--strategy: the step per rank
            from archlint.report.distributed_table import print_distributed

            print_distributed(model, console)

    top = max(0, int(settings.top))
    if settings.tree:  # the module view instead of the op table
        from archlint.report.tree import DEFAULT_DEPTH, print_tree

        depth = settings.tree_depth
        print_tree(model, console, DEFAULT_DEPTH if depth is None else depth)
    elif top and model.layers:
        ranked = sorted(model.layers, key=lambda layer: (layer.flops, layer.mac_bytes), reverse=True)[:top]
        table = Table(title=f"costliest {len(ranked)} of {len(model.layers)} layers (by FLOPs)", title_justify="left")
        for column, justify in (
            ("layer", "left"),
            ("kind", "left"),
            ("op", "left"),
            ("FLOPs", "right"),
            ("%", "right"),
            ("MAC", "right"),
            ("params", "right"),
            ("out shape", "left"),
        ):
            table.add_column(column, justify=justify, overflow="fold")
        for layer in ranked:
            share = f"{layer.flops / t.flops:.1%}" if t.flops else "-"
            table.add_row(
                Text(layer.label),
                Text(layer.kind),
                Text(layer.op),
                _count(layer.flops),
                share,
                _bytes(layer.mac_bytes),
                _count(layer.params),
                _shapes(layer.out_shapes),
            )
        console.print(table)
    for note in model.notes:
        console.print(f"  note: {note}", markup=False)
    for detail in model.details if settings.verbose else ():
        console.print(f"  detail: {detail}", markup=False)
    if t.latency_ms is not None:
        from archlint.report.time_table import print_time

        print_time(model, console)
    if model.estimate:
        from archlint.report.estimate_table import print_estimate

        print_estimate(model, console, top=min(top, 10) if top else 10)
    if model.what_if:
        from archlint.report.what_if_table import print_what_if

        print_what_if(model.what_if, console)
