"""A method called on a parameter (`log_writer.update(loss=loss)` in engine.py) is resolved from the
objects the project passes for that parameter (`log_writer = utils.TensorboardLogger(...)` in main.py)."""

from __future__ import annotations

import os
from pathlib import Path

from archlint.code import lint
from archlint.config import Settings

UTILS = """import torch


class Logger:
    def update(self, **kwargs):
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                v = v.item()
            print(f"{k}")
"""

ENGINE = """import torch


def train_one_epoch(model, loader, optimizer, device, writer=None):
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        writer.update(loss=loss)
"""

MAIN = """import torch
from torch.utils.data import DataLoader

import utils
from engine import train_one_epoch


def main(dataset, model):
    device = torch.device("cuda")
    loader = DataLoader(dataset, batch_size=8, num_workers=4, pin_memory=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    writer = {BUILD}
    with torch.autocast("cuda"):
        {CALL}
"""


def _lint(tmp_path: Path, build: str, call: str) -> set[str]:
    (tmp_path / "utils.py").write_text(UTILS)
    (tmp_path / "engine.py").write_text(ENGINE)
    (tmp_path / "main.py").write_text(MAIN.replace("{BUILD}", build).replace("{CALL}", call))
    diagnostics = lint.lint_paths([tmp_path], Settings(root=tmp_path, cache=False, select=["AL401"])).diagnostics
    return {f"{Path(os.path.relpath(d.file, tmp_path)).as_posix()}:{d.line}" for d in diagnostics}


def test_class_passed_by_keyword(tmp_path):
    assert _lint(tmp_path, "utils.Logger()", "train_one_epoch(model, loader, optimizer, device, writer=writer)") == {
        "utils.py:8"
    }


def test_class_passed_by_position_and_optional(tmp_path):
    assert _lint(
        tmp_path, "utils.Logger() if device else None", "train_one_epoch(model, loader, optimizer, device, writer)"
    ) == {"utils.py:8"}


def test_library_object_or_unknown_class_is_not_followed(tmp_path):
    # a library writer passed for the parameter: nothing of the project runs per step
    assert (
        _lint(
            tmp_path,
            "torch.utils.tensorboard.SummaryWriter()",
            "train_one_epoch(model, loader, optimizer, device, writer=writer)",
        )
        == set()
    )
    # the project's class is never passed for it: its update() is not a per-step helper
    assert _lint(tmp_path, "utils.Logger()", "train_one_epoch(model, loader, optimizer, device, writer=None)") == set()
