"""AL401 and the `if` around a sync: a test that changes from step to step (`step % 100`, a value
of the loop, a random draw) makes it periodic, silent; a setting the loop never changes
(`args.distributed`, the process rank) picks runs, not steps, so the sync is every step."""

from __future__ import annotations

import pytest

from archlint.code.engine import lint_text

LOOP = """import random
import torch

RANK = 0


def train(model, loader, optimizer, args):
    model.cuda()
    seen = 0
    for step, (x, y) in enumerate(loader):
        out = model(x.cuda(non_blocking=True))
        loss = out.sum()
        loss.backward()
        optimizer.step()
        seen += 1
        if {test}:
            print(loss.item())
"""


def _lines(test: str) -> list[int]:
    return [d.line for d in lint_text(LOOP.format(test=test), "train.py") if d.code == "AL401"]


@pytest.mark.parametrize("test", ["not args.distributed", "RANK in {-1, 0}", "args.local_rank == 0 and args.verbose"])
def test_a_setting_selects_runs_so_the_sync_is_every_step(test):
    assert _lines(test) == [17]


@pytest.mark.parametrize(
    "test",
    ["step % 100 == 0", "seen % args.log_every == 0", "random.random() < 0.01", "args.verbose and step % 10 == 0"],
)
def test_a_test_that_changes_per_step_is_periodic(test):
    assert _lines(test) == []


def test_an_asked_for_synchronize_is_not_reported():
    text = LOOP.format(test="args.synchronize_step").replace("print(loss.item())", "torch.cuda.synchronize()")
    assert [d for d in lint_text(text, "train.py") if d.code == "AL401"] == []
    unconditional = text.replace("        if args.synchronize_step:\n            torch", "        torch")
    assert [d.line for d in lint_text(unconditional, "train.py") if d.code == "AL401"] == [16]
