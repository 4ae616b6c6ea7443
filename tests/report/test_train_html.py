"""The HTML report's training step (--train): the step's split, its memory, the memory timeline
drawn as inline SVG (every point of the JSON's timeline, the peak marked, the budget drawn when
on the scale) and the modules keeping the most activations; absent without --train."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch
from torch import nn

import archlint
from archlint.report.html import render_html
from archlint.report.train_html import BOTTOM, TOP, H, timeline_svg
from archlint.units import bytes_against, human_bytes


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(
            *[nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64)) for _ in range(3)]
        )

    def forward(self, x):
        return self.blocks(x)


@pytest.fixture(scope="module")
def trained():
    return archlint.analyze(Net(), torch.randn(32, 64), train=True, memory_budget="2MB").result


def _section(page: str) -> str:
    return page.split("<h3>Training step</h3>", 1)[1].split("<h3>Roofline</h3>", 1)[0]


def test_the_timeline_is_an_inline_svg_of_every_point(trained):
    memory = trained.models[0].memory
    part = _section(render_html(trained))
    svg = re.search(r"<svg viewBox='0 0 (\d+) (\d+)'.*?</svg>", part, re.S).group(0)
    line = re.search(r"<polyline class=line points='([^']*)'", svg).group(1).split()
    assert len(line) == len(memory.timeline)
    ys = [float(p.split(",")[1]) for p in line]
    # higher memory is drawn higher: the highest point is the timeline's peak
    highest = max(range(len(ys)), key=lambda i: memory.timeline[i][1])
    assert ys[highest] == min(ys)
    assert TOP <= min(ys) and max(ys) <= H - BOTTOM
    assert f"peak {human_bytes(memory.peak_bytes)}" in svg
    assert f"budget {human_bytes(2_000_000)}" in svg and "class=budget" in svg  # 2 MB: on the scale
    assert not re.search(r"(src|href)=|https?://|<script", part)  # draws itself: nothing loaded, no script


def test_the_section_has_the_split_memory_and_kept_activations(trained):
    m = trained.models[0]
    part = _section(render_html(trained))
    for row in ("forward", "backward", "loss", "optimizer", "step"):
        assert f"<td>{row}</td>" in part
    assert f"<b>{human_bytes(m.memory.peak_bytes)}</b> at {m.memory.at}" in part
    needed, budget = bytes_against(m.memory.needed_bytes, m.memory.budget_bytes)
    assert f"<b>fits</b> in {budget} on cpu (this machine; no --device-spec)" in part  # the device named
    assert f"<th>the device needs</th><td>{needed} " in part and float(needed.split()[0]) <= float(budget.split()[0])
    top = max(m.memory.per_module_activations, key=m.memory.per_module_activations.get)
    assert f"<code>{top}</code>" in part


def test_a_far_budget_is_said_off_the_scale_and_no_train_no_section(trained):
    memory = dataclasses.replace(trained.models[0].memory, budget_bytes=80 * 10**9)
    svg = timeline_svg(memory)
    assert "class=budget" not in svg and "80 GB, is off the scale" in svg
    assert timeline_svg(dataclasses.replace(memory, timeline=[[0, 5]])) == ""
    plain = archlint.analyze(Net(), torch.randn(32, 64)).result
    assert "<h3>Training step</h3>" not in render_html(plain)


def test_a_gpu_spec_adds_the_step_estimate_and_its_autocast_column():
    result = archlint.analyze(Net(), torch.randn(256, 64), train=True, device_spec="h100-sxm").result
    est = result.models[0].estimate.train
    part = _section(render_html(result))
    assert "ESTIMATED ms on h100-sxm" in part and "ESTIMATED ms, bfloat16 autocast" in part
    step_row = part.split("<td>step</td>", 1)[1].split("</tr>", 1)[0]
    assert f"<td>{est['step_ms']:.3g}</td><td>{est['autocast']['step_ms']:.3g}</td>" in step_row
    assert "<th>the device needs</th>" in part and "CUDA context" in part  # a GPU spec: segments and context
