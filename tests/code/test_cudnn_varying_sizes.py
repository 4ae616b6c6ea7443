"""AL303 asks for cudnn.benchmark only where input sizes are fixed: a script that trains with CTC
loss (speech: spectrograms of variable length) gets a new size per batch, and benchmark mode would
search cuDNN's algorithms again for each one. Packed text sequences alone do not stop it: a
captioning CNN still sees fixed-size images."""

from __future__ import annotations

import os
from pathlib import Path

from archlint.code import lint
from archlint.code.engine import lint_text
from archlint.config import Settings

SCRIPT = """import torch
from torch import nn
{IMPORT}

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 32, 3)
        self.fc = nn.Linear(32, 29)

    def forward(self, x):
        return self.fc(self.conv(x).mean((2, 3)))


def main(loader):
    model = Net().cuda()
    criterion = {LOSS}
    optimizer = torch.optim.AdamW(model.parameters())
    for inputs, targets in loader:
        loss = criterion(model(inputs.cuda()), targets.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main([])
"""


def _al303(loss: str, imported: str = "") -> list[int]:
    text = SCRIPT.replace("{IMPORT}", imported).replace("{LOSS}", loss)
    return [d.line for d in lint_text(text, "train.py") if d.code == "AL303"]


def test_fixed_sizes_ask_for_benchmark_mode():
    assert _al303("nn.CrossEntropyLoss()") == [26]  # the __main__ block


def test_ctc_does_not_packed_text_alone_still_does():
    assert _al303("nn.CTCLoss(blank=0)") == []
    assert _al303("lambda out, t: torch.nn.functional.ctc_loss(out, t, [1], [1])") == []
    packed = "lambda out, t: nn.functional.mse_loss(pack_padded_sequence(out, [1]).data, t)"
    assert _al303(packed, "from torch.nn.utils.rnn import pack_padded_sequence") == [26]


def test_a_ctc_loss_in_another_module_counts_for_the_project(tmp_path: Path):
    (tmp_path / "data.py").write_text(
        "import torch\n\n\ndef criterion():\n    return torch.nn.CTCLoss(blank=0, zero_infinity=True)\n"
    )
    (tmp_path / "train.py").write_text(
        "import data\n" + SCRIPT.replace("{IMPORT}", "").replace("{LOSS}", "nn.MSELoss()")
    )
    diagnostics = lint.lint_paths([tmp_path], Settings(root=tmp_path, cache=False)).diagnostics
    assert [f"{os.path.basename(d.file)}:{d.line}" for d in diagnostics if d.code == "AL303"] == []
    (tmp_path / "data.py").write_text("import torch\n\n\ndef criterion():\n    return torch.nn.MSELoss()\n")
    diagnostics = lint.lint_paths([tmp_path], Settings(root=tmp_path, cache=False)).diagnostics
    assert [os.path.basename(d.file) for d in diagnostics if d.code == "AL303"] == ["train.py"]
