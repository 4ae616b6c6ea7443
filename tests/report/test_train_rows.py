"""The training step's split is one table (archlint/report/train_rows.py) that the text and the
HTML reports both render: the same columns and the same cells. Before it, each rebuilt the rows
from totals.train and they disagreed: the text had no autocast column, labelled the estimate
"est. ms", printed 3 decimals and "-" for the loss timed inside the forward (issue 40.1)."""

from __future__ import annotations

import html
import io

import torch
from rich.console import Console
from torch import nn

import archlint
from archlint.report.html import render_html
from archlint.report.train_rows import IN_FORWARD, step_table
from archlint.report.train_table import print_step


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(64, 128), nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def _text(model) -> str:
    out = io.StringIO()
    print_step(model, Console(file=out, width=200, color_system=None))
    return out.getvalue()


def test_text_and_html_render_the_same_columns_and_cells():
    result = archlint.analyze(
        Net(), torch.randn(32, 64), train=True, device_spec="a100-sxm", latency=True, warmup=1, repeat=2
    ).result
    m = result.models[0]
    table = step_table(m)
    assert [c.split(" on ")[0].split(",")[0] for c in table.columns[4:]] == [
        "ESTIMATED ms",
        "ESTIMATED ms",
        "measured ms",
    ]  # the spec's, autocast's, this machine's
    assert [row[0] for row in table.rows] == ["forward", "backward", "loss", "optimizer", "step"]
    assert table.rows[2][-1] == IN_FORWARD  # --latency times the loss inside the forward
    text, page = _text(m), render_html(result)
    for column in table.columns[1:]:
        assert column in text and f"<th>{html.escape(column, quote=True)}</th>" in page
    for row in table.rows:
        assert " ".join(row).split() == next(line.split() for line in text.splitlines() if line.split()[:1] == [row[0]])
        assert "<tr>" + "".join(f"<td>{html.escape(c, quote=True)}</td>" for c in row) + "</tr>" in page


def test_no_train_no_table():
    m = archlint.analyze(Net(), torch.randn(32, 64)).model
    assert step_table(m) is None and _text(m) == ""
