"""The distributed section of the HTML report (--world-size/--strategy): one rank's memory as a table,
the collectives per step, the estimated step, the fewest GPUs and the plan that fits. Built from the
same rows as the text report (archlint/report/distributed_table.py: distributed_rows)."""

from __future__ import annotations

import html

from archlint.report.distributed_table import distributed_rows
from archlint.result import ModelResult
from archlint.units import human_bytes


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "<tr>" + "".join(f"<th>{_e(c)}</th>" for c in header) + "</tr>"
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table>{head}{body}</table>"


def distributed_section(m: ModelResult) -> str:
    """The section, or "" for a model analyzed without --world-size/--strategy."""
    rows = distributed_rows(m)
    if rows is None:
        return ""
    parts = [
        f"<h3>Per rank</h3><p><b>{_e(rows.head)}</b></p><p>{_e(rows.peak)}</p>",
        _table(["one rank", "bytes"], [[what, human_bytes(n)] for what, n in rows.per_rank]),
    ]
    parts.append("<h4>Collectives per step</h4>")
    if rows.collectives:
        parts.append(
            _table(
                ["op", "phase", "count", "bytes per rank"],
                [[c.op, c.phase, f"{c.count:,}", human_bytes(c.bytes_per_rank)] for c in rows.collectives],
            )
        )
    else:
        parts.append("<p class=muted>none</p>")
    parts.append(f"<p>volume {_e(human_bytes(rows.volume_bytes))} per rank (all-reduce counted twice)</p>")
    if rows.estimate:
        parts.append(f"<p>{_e(rows.estimate)}</p>")
    if rows.notes:
        parts.append("<ul>" + "".join(f"<li class=muted>{_e(n)}</li>" for n in rows.notes) + "</ul>")
    if rows.fewest:
        parts.append(f"<p>{_e(rows.fewest)}</p>")
    if rows.plan_head:
        parts.append(f"<h4>{_e(rows.plan_head)}</h4>")
        parts.append(
            _table(
                ["#", "changes", f"{rows.plan[0].figure} per rank", "verdict", "adds (ms)", "basis"],
                [
                    [
                        str(i),
                        e.changes,
                        human_bytes(e.bytes),
                        "fits" if e.fits else "does not fit",
                        "" if e.adds_ms is None else f"{e.adds_ms:+.1f}",
                        e.adds_basis,
                    ]
                    for i, e in enumerate(rows.plan, 1)
                ],
            )
        )
    return "".join(parts)
