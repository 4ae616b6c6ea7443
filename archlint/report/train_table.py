"""Text report of the training step (--train): where the step's FLOPs and bytes go (forward,
backward, loss, optimizer), its estimated time and MFU on a device spec, the real step timed
here with --latency, and its memory when the memory model ran."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from archlint.report.train_rows import step_table
from archlint.result import ModelResult
from archlint.train_result import StepMemory, loss_phrase
from archlint.units import bytes_against
from archlint.units import human_bytes as _bytes
from archlint.units import human_count as _count


def print_step(model: ModelResult, console: Console) -> None:
    s, split = model.totals.train, step_table(model)
    if s is None or split is None:
        return
    opt = s.optimizer
    console.print(
        f"  training step: optimizer {opt['name']}, loss {loss_phrase(s.loss['name'])} · "
        f"{_count(s.trainable_params)} trainable params, {_count(s.frozen_params)} frozen"
        + (
            f" ({_count(s.trainable_params - s.updated_params)} of the trainable never reached by the forward: "
            "no gradient, the optimizer skips them)"
            if s.updated_params < s.trainable_params
            else ""
        ),
        markup=False,
    )
    est = model.estimate.train if model.estimate is not None else None
    table = Table(show_header=True, header_style="bold", box=None, padding=(0, 2))
    for i, column in enumerate(split.columns):
        table.add_column(column, justify="left" if i == 0 else "right")
    for row in split.rows:
        table.add_row(*row)
    console.print(table)
    launches = opt["launches"]
    console.print(f"  optimizer: {opt['how']} ({launches:,} launch{'' if launches == 1 else 'es'})", markup=False)
    if est and est.get("mfu") is not None:
        console.print(
            f"  ESTIMATED MFU on {model.estimate.device_spec}: {est['mfu']:.1%} of {est['peak_unit']} "
            f"({est['peak_flops_per_s'] / 1e12:,.1f} TFLOP/s dense); static estimate, not measured",
            markup=False,
        )
    memory = model.memory
    if memory:
        console.print(
            fit_line(memory) + (" (one process, unsharded; per rank below)" if model.distributed else ""), markup=False
        )
        if not memory.basis.startswith("measured on the meta"):
            console.print(f"  memory: {memory.basis}", markup=False)
        for adapted in memory.adapted_ops or ():
            console.print(f"  memory: {adapted}", markup=False)
        for block in memory.reused_blocks or ():
            console.print(
                f"  memory: {block['module']} blocks {block['reused']} ({block['class']}) written from "
                f"{block['forward_from']} (forward) and {block['backward_from']} (backward), the figures the exact run's",
                markup=False,
            )


def fit_line(memory: StepMemory) -> str:
    """The memory line: the peak, what the device needs and, with a budget, whether that is within
    it: "fits" exactly when the figure printed for what the device needs is within the budget
    printed (archlint.units.bytes_against keeps their order), and the device it is for named."""
    needed, budget = memory.needed, memory.budget_bytes
    needed_text, budget_text = bytes_against(needed, budget if budget is not None else needed)
    gpu = bool(memory.device_peak_bytes)
    # without a GPU spec what the device needs is the peak: printed in the budget's digits
    line = f"  memory over the step: peak {_bytes(memory.peak_bytes) if gpu else needed_text}"
    if memory.at:
        line += f" at {memory.at}"
    if memory.device_peak_bytes:  # a GPU spec: what the device must hold beside the live bytes
        context = (memory.allocator or {})["cuda_context_bytes"]
        line += (
            f" · the device needs {needed_text} (allocator segments {_bytes(needed - context)} + CUDA context "
            f"{_bytes(context)})"
        )
        if memory.device_peak_bytes > needed:  # under the budget the allocator releases cached segments
            line += f"; without a limit it would keep up to {_bytes(memory.device_peak_bytes)} reserved"
    if memory.fits is not None:
        line += f" · {'fits' if memory.fits else 'does not fit'} in {budget_text}"
    if memory.device:
        line += f" on {memory.device}"
    if memory.max_batch is not None:
        high = (memory.max_batch_range or [None, None])[1]
        if high is not None:  # a GPU spec: max_batch allows for the model's measured error
            line += (
                f" · largest batch sure to fit: {memory.max_batch} (allowing for the memory model's "
                f"measured error; none above {high} can)"
            )
        else:
            line += f" · largest batch that fits: {memory.max_batch}"
    return line
