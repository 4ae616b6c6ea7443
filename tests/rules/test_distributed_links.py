"""AL410 and AL415 checked against the model analyzed in the same run (links.link_distributed):
find_unused_parameters=True on a model whose forward reads every parameter becomes a warning, on
one that leaves a module unused it says the flag is needed; with --train AL415 names the bytes."""

from __future__ import annotations

import json
import textwrap

from archlint.cli import main

MODEL = """
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(32, 32)
        self.head = nn.Linear(32, 10)
        {extra}

    def forward(self, x):
        return self.head(self.body(x).relu())
"""

TRAIN = """
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from model import Net


def train(loader, rank):
    model = DDP(Net().cuda(rank), device_ids=[rank], find_unused_parameters=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x.cuda(rank)), y.cuda(rank))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""


def _run(tmp_path, capsys, extra: str, *flags: str) -> dict:
    (tmp_path / "model.py").write_text(textwrap.dedent(MODEL.format(extra=extra)))
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    code = main(
        [
            str(tmp_path / "train.py"),
            f"{tmp_path}/model.py:Net",
            "--input-shape",
            "8,32",
            "--output-format",
            "json",
            "--select",
            "AL201,AL410,AL415",
            *flags,
        ]
    )
    out = capsys.readouterr()
    assert code in (0, 1), out.err
    return {d["code"]: d for d in json.loads(out.out)["diagnostics"]}


def test_every_parameter_used_in_training_makes_the_flag_a_warning(tmp_path, capsys):
    found = _run(tmp_path, capsys, "", "--train", "--optimizer", "sgd")
    d = found["AL410"]
    assert d["severity"] == "warning" and "AL201" not in found
    assert "train-mode forward reads every parameter" in d["message"] and d["evidence"]["unused"] == []
    assert d["evidence"]["model"].endswith("model.py:Net") and d["evidence"]["mode"] == "train"


def test_the_eval_forward_alone_keeps_it_info(tmp_path, capsys):
    # the training forward may skip layers (LayerDrop) or run heads the eval forward does not
    d = _run(tmp_path, capsys, "")["AL410"]
    assert d["severity"] == "info" and "eval-mode forward reads every parameter" in d["message"]
    assert "--train" in d["message"]


def test_an_unused_module_says_the_flag_is_needed(tmp_path, capsys):
    found = _run(tmp_path, capsys, "self.old_head = nn.Linear(32, 10)")
    d = found["AL410"]
    assert found["AL201"]["module"] == "old_head"
    assert d["severity"] == "info" and "needed here" in d["message"] and "old_head" in d["message"]
    assert d["evidence"]["unused"] == ["old_head"]


def test_without_al201_selected_nothing_is_claimed(tmp_path, capsys):
    (tmp_path / "model.py").write_text(textwrap.dedent(MODEL.format(extra="")))
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    main(
        [
            str(tmp_path / "train.py"),
            f"{tmp_path}/model.py:Net",
            "--input-shape",
            "8,32",
            "--output-format",
            "json",
            "--select",
            "AL410",
        ]
    )
    (d,) = json.loads(capsys.readouterr().out)["diagnostics"]
    assert d["severity"] == "info" and "AL201" not in d["message"] and "model" not in d["evidence"]


def test_train_run_names_the_bytes_the_bucket_view_saves(tmp_path, capsys):
    found = _run(tmp_path, capsys, "", "--train", "--optimizer", "sgd")
    d = found["AL415"]
    assert d["severity"] == "info"
    assert d["evidence"]["grads_bytes"] == (32 * 32 + 32 + 32 * 10 + 10) * 4  # float32 gradients of Net
    assert "per GPU on" in d["message"]


def test_al201_says_what_ddp_does_with_an_unused_module(tmp_path, capsys):
    found = _run(tmp_path, capsys, "self.old_head = nn.Linear(32, 10)")
    message = found["AL201"]["message"]
    assert "second step fails" in message and "Expected to have finished reduction" in message
    assert "AL410" in message
