"""Issue 44: which `if`s around a sync make it not per step (output flags), and which do not (a
setting of the run, a warm-up bound on a trange counter)."""

from __future__ import annotations

from archlint.code.engine import lint_text

HEAD = """import argparse
import torch
from tqdm import trange
parser = argparse.ArgumentParser()
args = parser.parse_args()
model = torch.nn.Linear(8, 1).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with torch.autocast("cuda"):
    for T in trange(args.steps):
        x = torch.randn(32, 8, device="cuda")
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
"""


def _lines(body: str) -> list[int]:
    text = HEAD + body
    return [d.line for d in lint_text(text, "train.py") if d.code == "AL401"]


def test_output_flags_are_not_per_step():
    for test in ("args.verbose > 0", "args.plot", "not args.no_debug", "args.visdom_epoch", "verbose == 2"):
        assert _lines(f"        if {test}:\n            print(loss.item())\n") == [], test


def test_run_settings_and_warm_up_bounds_stay_per_step():
    assert _lines("        if not args.distributed:\n            print(loss.item())\n") == [15]
    assert _lines("        if T >= args.learn_start:\n            print(loss.item())\n") == [15]  # trange counter
    assert _lines("        if T % args.log_every == 0:\n            print(loss.item())\n") == []  # every k-th step


def test_a_helper_behind_a_debug_return_is_not_per_step(tmp_path):
    from archlint.code import lint
    from archlint.config import Settings

    (tmp_path / "guard.py").write_text(
        "import torch\nDEBUG_NAN = False\n\n\ndef nan_guard(name, tensor):\n    if not DEBUG_NAN:\n        return\n"
        "    if torch.isnan(tensor).any():\n        raise RuntimeError(name)\n\n\n"
        "def strict_guard(name, tensor):\n    if torch.isnan(tensor).any():\n        raise RuntimeError(name)\n"
    )
    (tmp_path / "train.py").write_text(
        "import torch\nfrom guard import nan_guard, strict_guard\n"
        "model = torch.nn.Linear(8, 1).cuda()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "loader = torch.utils.data.DataLoader(torch.randn(64, 8), batch_size=8, pin_memory=True, num_workers=2)\n"
        "with torch.autocast('cuda'):\n    for x in loader:\n        loss = model(x.cuda(non_blocking=True)).mean()\n"
        "        loss.backward()\n        opt.step()\n        nan_guard('loss', loss)\n        strict_guard('loss', loss)\n"
    )
    found = lint.lint_paths([tmp_path], Settings(root=tmp_path, cache=False)).diagnostics
    assert sorted((d.file.rsplit("/", 1)[-1], d.line, d.code) for d in found if d.code == "AL401") == [
        ("guard.py", 13, "AL401")
    ]


def test_a_submodule_method_called_from_a_loss_method_is_per_step(tmp_path):
    """`model.calculate_loss(...)` → `self.crf.nll(...)` with `self.crf = CRF(...)`: NCRF++'s layout."""
    from archlint.code import lint
    from archlint.config import Settings

    (tmp_path / "model.py").write_text(
        "import torch\n\n\nclass CRF(torch.nn.Module):\n    def nll(self, feats, mask):\n"
        "        return feats.masked_select(mask).sum()\n\n\n"
        "class Tagger(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.proj = torch.nn.Linear(8, 4)\n        self.crf = CRF()\n\n"
        "    def calculate_loss(self, words, mask):\n        return self.crf.nll(self.proj(words), mask)\n"
    )
    (tmp_path / "train.py").write_text(
        "import torch\nfrom model import Tagger\nmodel = Tagger().cuda()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "with torch.autocast('cuda'):\n    for step in range(100):\n        words = torch.randn(16, 8, device='cuda')\n"
        "        mask = torch.rand(16, 4, device='cuda') > 0.5\n        loss = model.calculate_loss(words, mask)\n"
        "        loss.backward()\n        opt.step()\n"
    )
    found = lint.lint_paths([tmp_path], Settings(root=tmp_path, cache=False)).diagnostics
    assert [(d.file.rsplit("/", 1)[-1], d.line) for d in found if d.code == "AL401"] == [("model.py", 6)]
