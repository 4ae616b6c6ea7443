"""AL313: NumPy math every training step on an array fetched from the GPU; one finding per line with AL401."""

from __future__ import annotations

from archlint.code.engine import lint_text

LOOP = """import numpy as np
import torch


def train(model, loader, optimizer):
    model.cuda()
    for step, (x, y) in enumerate(loader):
        out = model(x.cuda(non_blocking=True))
        loss = out.sum()
        loss.backward()
        optimizer.step()
{body}
"""


def _found(body: str, cuda: bool = True) -> list[tuple[int, str]]:
    text = LOOP.format(body=body)
    if not cuda:
        text = text.replace("    model.cuda()\n", "").replace("x.cuda(non_blocking=True)", "x")
    return [(d.line, d.code) for d in lint_text(text, "train.py") if d.code in ("AL313", "AL401")]


def test_numpy_math_on_a_fetched_array_is_reported_on_its_line():
    found = _found("        p = out.detach().cpu().numpy()\n        s = np.sum(p)\n        m = np.max(p)")
    assert found == [(12, "AL401"), (13, "AL313")]  # one AL401 per copy, one AL313 per fetched array


def test_same_line_fetch_is_left_to_al401():
    found = _found("        s = np.sum(out.detach().cpu().numpy())")
    assert {code for _, code in found} == {"AL401"}


def test_every_n_steps_and_cpu_only_files_are_silent():
    every_n = "        if step % 100 == 0:\n            p = out.cpu().numpy()\n            print(np.mean(p))"
    assert _found(every_n) == []
    assert _found("        p = out.detach().numpy()\n        s = np.sum(p)", cuda=False) == []


def test_numpy_on_host_data_is_not_reported():
    assert _found("        w = np.ones(3)\n        s = np.sum(w)") == []
