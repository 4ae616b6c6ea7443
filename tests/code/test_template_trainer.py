"""A detectron2-style trainer: a base class's loop calls `self.run_step()`, a subclass implements the
step and calls its own helpers, which read the losses. The loop is the training loop (AL403), and the
helpers run once per step, two calls below the loop (AL401)."""

from __future__ import annotations

import os
from pathlib import Path

from archlint.code import lint
from archlint.config import Settings

TRAIN_LOOP = """import torch


class TrainerBase:
    def train(self, start_iter, max_iter):
        for self.iter in range(start_iter, max_iter):
            self.before_step()
            self.run_step()

    def before_step(self):
        pass

    def run_step(self):
        raise NotImplementedError


class SimpleTrainer(TrainerBase):
    def __init__(self, model, data_loader, optimizer):
        super().__init__()
        self.model = model
        self._data_loader_iter = iter(data_loader)
        self.optimizer = optimizer
        self.history = []

    def run_step(self):
        data = next(self._data_loader_iter)
        loss_dict = self.model(data)
        losses = sum(loss_dict.values())
        self.optimizer.zero_grad()
        losses.backward()
        self._write_metrics(loss_dict)
        self.optimizer.step()

    def _write_metrics(self, loss_dict):
        metrics = {READ}
        self.history.append(metrics)
"""

TRAIN_NET = """import torch

from train_loop import SimpleTrainer


def main(model, data_loader):
    model.to(torch.device("cuda"))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02)
    SimpleTrainer(model, data_loader, optimizer).train(0, 1000)
"""


def _lint(tmp_path: Path, read: str) -> set[str]:
    (tmp_path / "train_loop.py").write_text(TRAIN_LOOP.replace("{READ}", read))
    (tmp_path / "train_net.py").write_text(TRAIN_NET)
    diagnostics = lint.lint_paths(
        [tmp_path], Settings(root=tmp_path, cache=False, select=["AL401", "AL403"])
    ).diagnostics
    return {f"{Path(os.path.relpath(d.file, tmp_path)).as_posix()}:{d.line} {d.code}" for d in diagnostics}


def test_base_loop_over_a_subclass_step_and_its_helpers(tmp_path):
    assert _lint(tmp_path, "{k: v.detach().item() for k, v in loss_dict.items()}") == {
        "train_loop.py:6 AL403",  # the loop that calls the step
        "train_loop.py:35 AL401",  # .item() in the helper the step calls
    }


def test_negative_twin_keeps_the_metrics_on_the_device(tmp_path):
    assert _lint(tmp_path, "{k: v.detach() for k, v in loss_dict.items()}") == {"train_loop.py:6 AL403"}


def test_an_epoch_loop_around_a_function_with_its_own_batch_loop_is_not_the_training_loop(tmp_path):
    text = """import torch


def train_one_epoch(model, loader, optimizer):
    for x, y in loader:
        loss = model(x.cuda(), y.cuda())
        loss.backward()
        optimizer.step()


def main(model, loader, optimizer):
    for epoch in range(10):
        train_one_epoch(model, loader, optimizer)
"""
    (tmp_path / "train.py").write_text(text)
    diagnostics = lint.lint_paths([tmp_path], Settings(root=tmp_path, cache=False, select=["AL403"])).diagnostics
    assert [d.line for d in diagnostics] == [5]
