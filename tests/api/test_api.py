"""The Python API (archlint.analyze / archlint.lint): same numbers and messages as the CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import archlint  # noqa: E402
from archlint import UsageError  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NETS = REPO / "examples" / "nets.py"
CODE = REPO / "tests" / "fixtures" / "code"


class BiasBeforeNorm(nn.Module):
    """A conv with a bias before BatchNorm (AL204) and a step counter mutated in forward."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=True)
        self.bn = nn.BatchNorm2d(8)
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.steps += 1
        return torch.relu(self.bn(self.conv(x)))


def _cli_json(*args: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "archlint", *args, "--output-format", "json"], capture_output=True, text=True, cwd=REPO
    )
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def test_target_string_equals_cli_json():
    analysis = archlint.analyze("examples/nets.py:TinyNet", input_shape=(1, 3, 56, 56))
    assert analysis.to_dict() == _cli_json("examples/nets.py:TinyNet", "--input-shape", "1,3,56,56")
    assert analysis.strategy == "fx" and analysis.totals.flops > 0 and analysis.layers


@pytest.mark.parametrize("form", ["tensor", "tuple", "shape", "input_shape"])
def test_model_object_input_forms_agree(form):
    model = BiasBeforeNorm().eval()
    x = torch.randn(2, 3, 16, 16)
    args, kwargs = {
        "tensor": ((x,), {}),
        "tuple": (((x,),), {}),
        "shape": (((2, 3, 16, 16),), {}),
        "input_shape": ((), {"input_shape": (2, 3, 16, 16)}),
    }[form]
    analysis = archlint.analyze(model, *args, **kwargs)
    assert analysis.model.input_shapes == [[2, 3, 16, 16]]
    conv = next(layer for layer in analysis.layers if layer.kind == "conv")
    assert conv.flops == 2 * 16 * 16 * 8 * 3 * 9  # batch × h × w × c_out × c_in × k²
    assert "AL204" in {d.code for d in analysis.findings}
    # the cancelled bias saves under 1% of this model: info under the materiality floor, the run passes
    assert analysis.model.target == "BiasBeforeNorm" and analysis.passed


def test_model_is_left_as_it_was():
    model = BiasBeforeNorm().train()
    model.bn.running_mean.fill_(0.5)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    archlint.analyze(model, (1, 3, 8, 8), latency=True, warmup=1, repeat=2)
    after = model.state_dict()
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before), [
        k for k in before if not torch.equal(before[k], after[k])
    ]
    assert model.training and all(m.training for m in model.modules())


def test_select_and_options_mirror_the_cli():
    model = BiasBeforeNorm().eval()
    assert "AL204" in {d.code for d in archlint.analyze(model, (1, 3, 8, 8), select=["AL2"]).findings}
    assert all(d.code.startswith("AL1") for d in archlint.analyze(model, (1, 3, 8, 8), select=["AL1"]).findings)
    assert "AL204" not in {d.code for d in archlint.analyze(model, (1, 3, 8, 8), ignore="AL204").findings}
    with pytest.raises(UsageError, match="unknown option 'nonsense' for AL101"):
        archlint.analyze(model, (1, 3, 8, 8), options={"AL101.nonsense": 1})


def test_errors_are_usage_errors_with_the_cli_message(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "archlint", "examples/nets.py:NoSuchNet", "--input-shape", "1,3,8,8"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 2
    cli_message = proc.stderr.strip().removeprefix("archlint: error: ")
    with pytest.raises(UsageError) as info:
        archlint.analyze("examples/nets.py:NoSuchNet", input_shape=(1, 3, 8, 8))
    assert str(info.value) == cli_message
    with pytest.raises(UsageError, match="nn.Module"):
        archlint.analyze(42, (1, 3))
    with pytest.raises(UsageError, match="no inputs"):
        archlint.analyze(BiasBeforeNorm())
    with pytest.raises(UsageError, match="unknown option colour="):
        archlint.analyze(BiasBeforeNorm(), (1, 3, 8, 8), colour="red")


def test_reports_render(tmp_path):
    analysis = archlint.analyze(BiasBeforeNorm().eval(), (1, 3, 16, 16))
    page = analysis._repr_html_()
    assert "BiasBeforeNorm" in page and "AL204" in page
    assert "<script" not in page and "src=" not in page and "http" not in page  # self-contained
    assert "info findings hidden" in analysis.summary() and "FLOPs" in analysis.summary()  # AL204: < 1%
    assert "BiasBeforeNorm" in analysis.__rich__().plain
    html = analysis.to_html(tmp_path / "r.html").read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert json.loads(analysis.to_json())["models"][0]["target"] == "BiasBeforeNorm"


def test_lint_and_fix(tmp_path):
    found = archlint.lint(CODE / "loader_kwargs.py")
    assert found and all(d.file for d in found)
    assert {d.code for d in archlint.lint([CODE / "loader_kwargs.py"], select=["AL3"])} <= {
        c for c in {d.code for d in found} if c.startswith("AL3")
    }
    copy = tmp_path / "train.py"
    shutil.copy(CODE / "loader_kwargs.py", copy)
    remaining = archlint.lint(copy, fix=True)
    assert copy.read_text() != (CODE / "loader_kwargs.py").read_text()
    assert len(remaining) < len(found)


def test_public_surface():
    assert set(archlint.__all__) >= {"analyze", "lint", "Analysis", "UsageError"}
    assert archlint.analyze.__doc__ and archlint.lint.__doc__ and archlint.Analysis.__doc__


class KeywordNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 16)
        self.proj = nn.Linear(16, 16)

    def forward(self, input_ids, attention_mask=None):
        x = self.proj(self.embed(input_ids))
        return x if attention_mask is None else x * attention_mask.unsqueeze(-1)


def test_keyword_inputs():
    ids = torch.randint(0, 100, (2, 8))
    analysis = archlint.analyze(KeywordNet(), ids, {"attention_mask": torch.ones(2, 8)})
    linear = next(layer for layer in analysis.layers if layer.kind == "linear")
    assert linear.flops == 2 * 8 * 16 * 16
    names = [i["name"] for i in analysis.to_dict()["models"][0]["inputs"]]
    assert names == ["input_ids", "attention_mask"]
    with pytest.raises(UsageError, match="no such parameter"):
        archlint.analyze(KeywordNet(), ids, {"mask": torch.ones(2, 8)})


def test_device_spec_and_what_if_options():
    model = BiasBeforeNorm().eval()
    estimated = archlint.analyze(model, (1, 3, 16, 16), device_spec="l4")
    assert estimated.to_dict()["models"][0]["estimate"]["device_spec"] == "l4"
    timed = archlint.analyze(model, (1, 3, 16, 16), what_if=["fold-bn"], warmup=1, repeat=3)
    assert timed.totals.latency_ms > 0 and [w.name for w in timed.model.what_if][0] == "fold-bn"
    with pytest.raises(UsageError, match="nosuchgpu"):
        archlint.analyze(model, (1, 3, 16, 16), device_spec="nosuchgpu")


def test_an_option_given_as_none_is_an_option_left_off():
    # a wrapper passing its own defaults through (device_spec=None) once got "unknown option"
    plain = archlint.analyze(BiasBeforeNorm(), (2, 3, 16, 16)).to_dict()
    nones = archlint.analyze(BiasBeforeNorm(), (2, 3, 16, 16), device_spec=None, select=None, latency=None).to_dict()
    assert [d["code"] for d in nones["diagnostics"]] == [d["code"] for d in plain["diagnostics"]]
    assert nones["models"][0].get("estimate") is None
    with pytest.raises(UsageError, match="unknown option"):
        archlint.analyze(BiasBeforeNorm(), (2, 3, 16, 16), no_such_option=1)
