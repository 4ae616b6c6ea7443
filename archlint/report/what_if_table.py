"""The --what-if table (text report): each standard speed-up measured on a copy of the model,
sorted by speed-up, then those that do not apply with the reason. Reads only the ModelResult."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from archlint.result import WhatIf
from archlint.units import significant, times


def _num(value: float | None, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)


def _ms(value: float | None) -> str:
    return "–" if value is None else significant(value, fixed=True)  # one format in every row (archlint/units.py)


def ranked(what_ifs: list[WhatIf]) -> list[WhatIf]:
    timed = sorted((w for w in what_ifs if w.speedup is not None), key=lambda w: -w.speedup)
    return timed + [w for w in what_ifs if w.speedup is None]


def print_what_if(what_ifs: list[WhatIf], console: Console) -> None:
    if not what_ifs:
        return
    table = Table(title="what-if: standard speed-ups measured end to end on a copy of the model", title_justify="left")
    for column, justify in (
        ("transformation", "left"),
        ("speed-up", "right"),
        ("IQR", "right"),
        ("", "left"),
        ("base ms", "right"),
        ("new ms", "right"),
        ("abs diff", "right"),
        ("rel diff", "right"),
        ("compile s", "right"),
    ):
        table.add_column(column, justify=justify, no_wrap=True)
    table.add_column("applied / why not", ratio=1, overflow="fold")  # the one column that wraps
    for w in ranked(what_ifs):
        if not w.applicable or w.speedup is None:
            table.add_row(w.name, "n/a", "", "", "", "", "", "", "", w.reason)
            continue
        spread = f"{times(w.spread[0])[:-1]}–{times(w.spread[1])}" if w.spread else ""
        table.add_row(
            w.name,
            times(w.speedup),
            spread,
            w.verdict,
            _ms(w.baseline_ms),
            _ms(w.transformed_ms),
            _num(w.max_abs_diff, ".2g"),
            _num(w.max_rel_diff, ".2g"),
            _num(w.compile_s, ".1f"),
            w.reason,
        )
    console.print(table)
    console.print(
        "  speed-up = median of the per-pass ratios baseline / transformed (interleaved passes); IQR = their "
        "quartiles; base/new ms: medians; abs diff = max |a − b| over the outputs on the same input, rel diff = that "
        "/ max |a|",
        style="dim",
    )
