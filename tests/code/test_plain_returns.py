"""A project function that returns only literals (DeepSpeech's `check_loss(loss, loss_value)` →
`return loss_valid, error`) gives no tensor back, even when it is handed one: an `if` on its result
reads no tensor. One that returns something computed from the tensor does."""

from __future__ import annotations

from pathlib import Path

from archlint.code import lint
from archlint.code.engine import lint_text
from archlint.config import Settings

CHECK_PLAIN = """def check_loss(loss, loss_value):
    loss_valid = True
    error = ""
    if loss_value != loss_value:
        loss_valid = False
        error = "nan loss"
    return loss_valid, error
"""

CHECK_TENSOR = """import torch


def check_loss(loss, loss_value):
    error = ""
    return torch.isfinite(loss), error
"""

TRAIN = """import torch
{IMPORT}

def train(model, loader, optimizer, criterion):
    model.cuda()
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = criterion(model(x.cuda()), y.cuda())
        loss_value = loss.item()
        valid_loss, error = check_loss(loss, loss_value)
        if valid_loss:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""


def test_same_file():
    plain = TRAIN.replace("{IMPORT}", "\n" + CHECK_PLAIN)
    lines = [d.line for d in lint_text(plain, "train.py") if d.code == "AL401"]
    assert lines == [17]  # the .item(); not the `if valid_loss:`
    tensor = TRAIN.replace("{IMPORT}", "\n" + CHECK_TENSOR.replace("import torch\n", ""))
    lines = [d.line for d in lint_text(tensor, "train.py") if d.code == "AL401"]
    assert lines == [15, 17]  # the `if` on a tensor returned by the helper is a sync


def test_across_files(tmp_path):
    def al401(utils: str) -> list[int]:
        (tmp_path / "utils.py").write_text(utils)
        (tmp_path / "train.py").write_text(TRAIN.replace("{IMPORT}", "from utils import check_loss\n"))
        diagnostics = lint.lint_paths([tmp_path], Settings(root=tmp_path, cache=False, select=["AL401"])).diagnostics
        return sorted(d.line for d in diagnostics if Path(d.file).name == "train.py")

    assert al401("import torch\n\n\n" + CHECK_PLAIN) == [10]
    assert al401(CHECK_TENSOR) == [10, 12]
