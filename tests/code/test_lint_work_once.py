"""Work a file's lint used to do twice is done once: AL401's findings (sync.py), which host_numpy
also reads to stay silent on their lines."""

from __future__ import annotations

from archlint.code import engine
from archlint.code.checks import sync

TRAIN = """import numpy as np
import torch

def train(model, loader, opt):
    for x, y in loader:
        out = model(x.cuda())
        loss = out.sum()
        loss.backward()
        opt.step()
        print(loss.item())
        pred = np.argmax(out.cpu().numpy())
"""


def test_sync_findings_are_worked_out_once_per_file(monkeypatch):
    calls = []
    original = sync._findings
    monkeypatch.setattr(sync, "_findings", lambda facts: calls.append(1) or original(facts))
    codes = [d.code for d in engine.lint_text(TRAIN, "train.py")]
    assert "AL401" in codes
    assert len(calls) == 1
