"""Text report of the training step (--train): where the step's FLOPs and bytes go (forward,
backward, loss, optimizer), its estimated time and MFU on a device spec, the real step timed
here with --latency, and its memory when the memory model ran."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from archlint.units import human_bytes as _bytes
from archlint.units import human_count as _count
from archlint.result import ModelResult

PARTS = ("forward", "backward", "loss", "optimizer")


def print_step(model: ModelResult, console: Console) -> None:
    s = model.totals.train
    if not s:
        return
    opt = s["optimizer"]
    console.print(
        f"  training step: optimizer {opt['name']}, loss {s['loss']['name']} of the outputs · "
        f"{_count(s['trainable_params'])} trainable params, {_count(s['frozen_params'])} frozen",
        markup=False,
    )
    est = (model.estimate or {}).get("train")
    measured = s.get("measured")
    table = Table(show_header=True, header_style="bold", box=None, padding=(0, 2))
    columns = ["", "FLOPs", "%", "MAC"]
    if est:
        columns.append(f"est. ms on {model.estimate['device_spec']}")
    if measured:
        columns.append(f"measured ms on {model.device}")
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i == 0 else "right")
    total = s["step_flops"] or 1
    for part in PARTS:
        flops = s[f"{part}_flops"]
        row = [part, _count(flops), f"{flops / total:.1%}", _bytes(s[f"{part}_mac_bytes"])]
        if est:
            row.append(f"{est[f'{part}_ms']:.3f}")
        if measured:
            value = measured.get(f"{part}_ms")
            row.append("-" if value is None else f"{value:.3f}")
        table.add_row(*row)
    row = ["step", _count(s["step_flops"]), "", _bytes(s["step_mac_bytes"])]
    if est:
        row.append(f"{est['step_ms']:.3f}")
    if measured:
        row.append(f"{measured['step_ms']:.3f}")
    table.add_row(*row)
    console.print(table)
    launches = opt["launches"]
    console.print(f"  optimizer: {opt['how']} ({launches:,} launch{'' if launches == 1 else 'es'})", markup=False)
    if est and est.get("mfu") is not None:
        console.print(
            f"  ESTIMATED MFU on {model.estimate['device_spec']}: {est['mfu']:.1%} of {est['peak_unit']} "
            f"({est['peak_flops_per_s'] / 1e12:,.1f} TFLOP/s dense); static estimate, not measured",
            markup=False,
        )
    memory = model.memory
    if memory:
        line = f"  memory over the step: peak {_bytes(memory['peak_bytes'])}"
        if memory.get("at"):
            line += f" at {memory['at']}"
        if memory.get("device_peak_bytes"):  # a GPU spec: what the device must hold beside the live bytes
            allocator = memory["allocator"]
            line += (f" · the device needs {_bytes(memory['device_peak_bytes'])} (allocator segments "
                     f"{_bytes(allocator['reserved_peak_bytes'])} + CUDA context {_bytes(allocator['cuda_context_bytes'])})")
        if memory.get("fits") is not None:
            line += f" · {'fits' if memory['fits'] else 'does not fit'} in {_bytes(memory['budget_bytes'])}"
        if memory.get("max_batch") is not None:
            line += f" · largest batch that fits: {memory['max_batch']}"
            high = (memory.get("max_batch_range") or [None, None])[1]
            if high is not None:  # a GPU spec: max_batch allows for the model's measured error
                line += f" (allowing for the memory model's measured error; none above {high} can)"
        console.print(line, markup=False)
        if not str(memory.get("basis", "")).startswith("measured on the meta"):
            console.print(f"  memory: {memory.get('basis')}", markup=False)
        for adapted in memory.get("adapted_ops") or ():
            console.print(f"  memory: {adapted}", markup=False)
