"""The training step's split (--train) as one table, rendered by the text report (train_table.py)
and the HTML report (train_html.py) alike: where the step's FLOPs and bytes go (forward, backward,
loss, optimizer, the whole step), its estimated time on a device spec and under autocast there,
and the real step timed here with --latency. Built once so the two reports cannot disagree on
the columns or on what a cell says."""

from __future__ import annotations

from dataclasses import dataclass

from archlint.result import ModelResult
from archlint.train_result import PARTS
from archlint.units import human_bytes, human_count, significant

IN_FORWARD = "in forward"  # a part not timed on its own (--latency times the loss with the forward)


@dataclass
class StepTable:
    columns: list[str]  # headers; the first (the part's name) is empty
    rows: list[list[str]]  # one per part, then the step: each cell as both reports show it


def step_table(m: ModelResult) -> StepTable | None:
    """The table of `m`'s training step; None for a model analyzed without --train."""
    s = m.totals.train
    if s is None:
        return None
    est = m.estimate.train if m.estimate is not None else None
    half = (est or {}).get("autocast")  # the step under torch.autocast: AL403's price
    columns = ["", "FLOPs", "%", "MAC"]
    if est and m.estimate is not None:
        columns.append(f"ESTIMATED ms on {m.estimate.device_spec}")
    if half:
        columns.append(f"ESTIMATED ms, {half['dtype']} autocast")
    if s.measured:
        columns.append(f"measured ms on {m.device}")
    rows = []
    total = s.step_flops or 1
    for part, (flops, mac) in s.split().items():
        cells = [part, human_count(flops), f"{flops / total:.1%}" if part in PARTS else "", human_bytes(mac)]
        if est:
            cells.append(significant(est[f"{part}_ms"]))
        if half:
            cells.append(significant(half[f"{part}_ms"]))
        if s.measured:
            value = s.measured.get(f"{part}_ms")
            cells.append(IN_FORWARD if value is None else significant(value))
        rows.append(cells)
    return StepTable(columns, rows)
