"""Issue 39 item 10: a model finding points at the user's line of the op (the call in forward for
a functional op, the line that created the module for a layer), names modules by their qualified
name, never by an internal node id, and lists each module once."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("torch")

from archlint.cli import main  # noqa: E402

NET = """\
import torch
import torch.nn.functional as F
from torch import nn


class Act(nn.Module):
    def forward(self, x):
        x = F.relu(x)
        return F.relu(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(
            nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), Act()),
            nn.Conv2d(16, 16, 3, padding=1),
        )
        self.q = nn.Linear(16, 16)
        self.k = nn.Linear(16, 16)
        self.v = nn.Linear(16, 16)
        self.scale = 4.0

    def forward(self, x):
        x = self.blocks(x)
        t = x.flatten(2).transpose(1, 2)
        q, k, v = self.q(t), self.k(t), self.v(t)
        a = torch.softmax(q @ k.transpose(-1, -2) / self.scale, dim=-1)
        return a @ v


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.spare = nn.Linear(d, d)

    def forward(self, x):
        return self.fc(x).relu()


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(16) for _ in range(3)])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x
"""


def _line(text: str) -> int:
    return next(i for i, line in enumerate(NET.splitlines(), 1) if text in line)


def _findings(tmp_path: Path, capsys, target: str, shape: str, strategy: str) -> dict[str, list[dict]]:
    (tmp_path / "net.py").write_text(NET)
    argv = [
        str(tmp_path / "net.py") + f":{target}",
        "--input-shape",
        shape,
        "--strategy",
        strategy,
        "--show-info",
        "--output-format",
        "json",
        "--exit-zero",
    ]
    assert main(argv) == 0, capsys.readouterr().err
    found: dict[str, list[dict]] = {}
    for d in json.loads(capsys.readouterr().out)["diagnostics"]:
        found.setdefault(d["code"], []).append(d)
    return found


@pytest.mark.parametrize("strategy", ["fx", "export", "dispatch"])
def test_functional_ops_point_at_their_call_in_forward(tmp_path, capsys, strategy):
    found = _findings(tmp_path, capsys, "Net", "1,3,8,8", strategy)
    (al106,) = found["AL106"]
    assert al106["line"] == _line("a = torch.softmax")  # the matmul's line, not `class Net`
    (al202,) = found["AL202"]
    assert al202["line"] == _line("return F.relu(x)")  # the second relu, not the nn.Sequential line
    message = al202["message"]
    assert f"net.py:{_line('return F.relu(x)')} in blocks.0.1" in message
    assert f"net.py:{_line('x = F.relu(x)')}" in message  # the relu that makes its input non-negative
    assert not re.search(r"\bblocks_0|\(relu at relu\)", message)  # no internal node ids


@pytest.mark.parametrize("strategy", ["fx", "export"])
def test_a_layer_finding_points_at_the_line_creating_the_layer(tmp_path, capsys, strategy):
    (al108,) = _findings(tmp_path, capsys, "Net", "1,3,8,8", strategy)["AL108"]
    assert al108["line"] == _line("self.q = nn.Linear")  # not `class Net`


def test_unused_parameters_list_each_module_once(tmp_path, capsys):
    (al201,) = _findings(tmp_path, capsys, "Stack", "2,16", "fx")["AL201"]
    message = al201["message"]
    assert "blocks.0.spare" in message
    listed = re.search(r"more like it \(([^)]*)\)", message).group(1).split(", ")
    assert listed == ["blocks.1.spare", "blocks.2.spare"], message
