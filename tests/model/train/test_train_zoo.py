"""--train over the forward analysis's zoo (issue 46): every model the forward sweeps capture gets a
training step (benchmarks/zoo_train.py's cases: torchvision, the timm sample, Hugging Face configs
with MoE, encoder-decoder, audio and vision-text, a diffusion U-Net with a timestep input).

The full sweep is slow-marked; a sample of one model per kind runs in CI. A model whose own code
refuses the step (BatchNorm in train mode on a batch of 1) gets that one-line error, not a traceback.
"""

from __future__ import annotations

import importlib.util
import logging
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from archlint.errors import UsageError

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "zoo_train.py"
spec = importlib.util.spec_from_file_location("zoo_train_for_tests", SCRIPT)
zoo_train = importlib.util.module_from_spec(spec)
spec.loader.exec_module(zoo_train)

SAMPLE = {"torchvision/mnasnet1_0", "hf-zoo/mixtral", "hf-zoo/t5", "diffusion/tiny_unet"}


def _check(case):
    name, build, strategy = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            row = zoo_train.run_case(name, build, strategy, limit=600)
        finally:
            logging.disable(logging.NOTSET)
    assert "error" not in row, row
    assert row["train"]["step_flops"] > row["train"]["forward_flops"] > 0, row["train"]
    assert row["memory"]["peak_bytes"] > 0 and row["memory"]["basis"].startswith("measured"), row["memory"]
    return row


def _sample():
    pytest.importorskip("transformers")
    return [c for c in zoo_train.cases(1, 0) if c[0] in SAMPLE]


@pytest.mark.parametrize("case", _sample(), ids=lambda c: c[0])
def test_sample_gets_a_training_step(case):
    _check(case)


def test_a_model_refusing_the_step_is_its_one_line_error():
    # deeplabv3's pooled ASPP branch: BatchNorm over a 1×1 map; at batch 1 PyTorch's real step refuses
    # it too (was: a raw ValueError out of the memory model, ending the run)
    from torchvision.models import get_model

    import archlint

    with torch.device("meta"):
        model = get_model("deeplabv3_mobilenet_v3_large", weights=None, weights_backbone=None)
    with pytest.raises(UsageError, match=r"training step of .* failed: ValueError: Expected more than 1 value"):
        archlint.analyze(model, torch.randn(1, 3, 96, 96), train=True)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["torchvision", "timm", "hf"])
def test_zoo_gets_a_training_step(family):
    if family != "torchvision":
        pytest.importorskip(family if family == "timm" else "transformers")
    failures = []
    for case in zoo_train.cases(1, 300, family):
        try:
            _check(case)
        except AssertionError as exc:
            failures.append(str(exc)[:300])
    assert not failures, "\n".join(failures)


class ShapeBranchBNHead(nn.Module):
    """efficientvit_m3's and mobilenetv4's case in small: a branch on a shape (fx cannot trace it) and
    a BatchNorm1d head (at a batch of 1, training refuses it)."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)
        self.head, self.fc = nn.BatchNorm1d(8), nn.Linear(8, 4)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x)))
        if h.shape[-1] > 4:
            h = h[..., ::2]
        return self.fc(self.head(h.mean((2, 3))))


def test_a_meta_model_refusing_the_step_names_its_refusal_not_metas():
    # given on meta with no factory: dispatch's real forward runs on meta weights and fails on meta's
    # account (a CPU input meeting a meta buffer); was: that device error was the only one named
    import archlint

    with torch.device("meta"):
        model = ShapeBranchBNHead()
    with pytest.raises(UsageError) as raised:
        archlint.analyze(model, torch.randn(1, 3, 16, 16), train=True)
    message = str(raised.value)
    assert "export capture: ValueError: Expected more than 1 value per channel when training" in message
    assert "dispatch capture, on meta weights: the model was given on the meta device" in message
    assert "\n" not in message
    archlint.analyze(model, torch.randn(2, 3, 16, 16), train=True)  # a batch of 2 trains
