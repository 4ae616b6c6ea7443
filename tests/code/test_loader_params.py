"""AL302 follows a loader into the functions it is passed to by where the value comes from, not by
its name: a factory's tuple unpacked into any names, a wrapper's parameter passed on again (in the
same file or another), to a fixed point. The fixture pair is projects/loader_params(_ok); these are
the negatives and the one-file case."""

from __future__ import annotations

from pathlib import Path

from archlint.code import lint
from archlint.config import Settings

ENGINE = """import torch
import torch.nn.functional as F


def run_epoch(net, batches, opt):
    for images, labels in batches:
        images = images.cuda()
        labels = labels.cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(net(images), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""

TRAIN = """import torch

from data import make_data
from engine import run_epoch

torch.backends.cudnn.benchmark = True


def fit(net, stream, epochs):
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(epochs):
        run_epoch(net, stream, opt)


def main():
    tr, va = make_data(64)
    net = torch.nn.Linear(8, 10).cuda()
    fit(net, tr, epochs=10)
    {EXTRA}
"""

PINNED = """from torch.utils.data import DataLoader


def make_data(batch_size):
    fit_dl = DataLoader(range(512), batch_size=batch_size, num_workers=4, pin_memory={PIN})
    check_dl = DataLoader(range(128), batch_size=batch_size, num_workers=4, pin_memory={PIN})
    return fit_dl, check_dl
"""

NOT_LOADERS = """import torch


def make_data(batch_size):
    batches = [(torch.randn(batch_size, 8), torch.randint(0, 10, (batch_size,))) for _ in range(16)]
    return batches, batches[:2]
"""


def _project(tmp_path: Path, data: str, extra: str = "") -> set[str]:
    (tmp_path / "data.py").write_text(data)
    (tmp_path / "engine.py").write_text(ENGINE)
    (tmp_path / "train.py").write_text(TRAIN.replace("{EXTRA}", extra))
    found = lint.lint_paths([tmp_path], Settings(root=tmp_path, cache=False)).diagnostics
    return {f"{Path(d.file).name}:{d.line} {d.code}" for d in found}


def test_pinned_loaders_through_a_wrapper_under_other_names(tmp_path):
    assert _project(tmp_path, PINNED.replace("{PIN}", "True")) == {"engine.py:7 AL302", "engine.py:8 AL302"}


def test_values_that_are_not_loaders_are_not_followed(tmp_path):
    """The same wrapper chain over lists of tensors a project function built: no loader, no AL302."""
    assert _project(tmp_path, NOT_LOADERS) == set()


def test_unpinned_loaders_are_reported_at_the_loader_only(tmp_path):
    assert _project(tmp_path, PINNED.replace("{PIN}", "False")) == {"data.py:5 AL301", "data.py:6 AL301"}


def test_a_wrapper_given_pinned_and_unpinned_loaders_is_not_judged(tmp_path):
    """`fit` is called with a pinned loader and, elsewhere, with batches of unknown pinning: the
    parameter's pin is unknown, so its copies are not reported."""
    data = PINNED.replace("{PIN}", "True")
    extra = "from extra import spare\n    fit(net, spare(), epochs=1)"
    (tmp_path / "extra.py").write_text(
        "from torch.utils.data import DataLoader\n\n\ndef spare():\n"
        "    return DataLoader(range(8), num_workers=2, pin_memory=False)\n"
    )
    assert "engine.py:7 AL302" not in _project(tmp_path, data, extra)


ONE_FILE = """import torch
from torch.utils.data import DataLoader


def fit(model, stream, optimizer):
    for x, y in stream:
        x, y = x.cuda(), y.cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x, y)
        loss.backward()
        optimizer.step()


def main(model, optimizer, dataset):
    torch.backends.cudnn.benchmark = True
    dl = DataLoader(dataset, batch_size=8, num_workers=4, pin_memory=True)
    spare = DataLoader(dataset, batch_size=8, num_workers=4, pin_memory={PIN})
    fit(model, dl, optimizer)
    return spare
"""


def _one_file(tmp_path: Path, text: str) -> list[tuple[int, int, str]]:
    path = tmp_path / "train.py"
    path.write_text(text)
    found = lint.lint_paths([path], Settings(root=tmp_path, cache=False)).diagnostics
    return sorted((d.line, d.column, d.code) for d in found if d.code == "AL302")


def test_a_wrapper_of_the_same_file_takes_the_pin_of_what_it_is_given(tmp_path):
    """Another loader of the file is unpinned, so "every loader here is pinned" does not decide it:
    the parameter `stream` receives `dl`, pinned."""
    assert _one_file(tmp_path, ONE_FILE.replace("{PIN}", "False")) == [(7, 16, "AL302"), (7, 26, "AL302")]


def test_a_wrapper_of_the_same_file_given_an_unpinned_loader_is_left_alone(tmp_path):
    text = ONE_FILE.replace("{PIN}", "False").replace("fit(model, dl,", "fit(model, spare,")
    assert _one_file(tmp_path, text) == []
