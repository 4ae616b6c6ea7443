"""AL403 (a CUDA training loop without autocast) priced by the autocast what-if of the model
analyzed in the same run: `archlint train.py model.py:Net --what-if bf16 [--device-spec l4]`.
The price is an estimate (the what-if is an inference forward on the device at hand, the finding a
training step on CUDA) and says what was measured where; with a GPU device spec, the spec's 16-bit
estimate is its basis."""

from __future__ import annotations

import json
import textwrap

import pytest

from archlint.cli import main
from archlint.code.checks.autocast import price_with_models as link_code
from archlint.diagnostics import Diagnostic
from archlint.result import ModelResult, Totals, WhatIf
from tests.whatif.autocast_project import MODEL, TRAIN

FAST = ["--warmup", "1", "--repeat", "5"]


@pytest.fixture
def project(tmp_path):
    (tmp_path / "model.py").write_text(textwrap.dedent(MODEL))
    (tmp_path / "other.py").write_text(textwrap.dedent(MODEL))
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN.format(module="model")))
    return tmp_path


def run(capsys, *argv) -> dict:
    code = main([*argv, "--input-shape", "4,3,32,32", *FAST, "--output-format", "json"])
    out = capsys.readouterr()
    assert code in (0, 1), out.err
    return json.loads(out.out)


def al403(data: dict) -> list[dict]:
    return [d for d in data["diagnostics"] if d["code"] == "AL403"]


def test_measured_what_if_prices_al403_as_an_estimate_or_says_it_found_no_speedup(project, capsys):
    data = run(capsys, str(project / "train.py"), f"{project}/model.py:Net", "--what-if", "bf16")
    (d,) = al403(data)
    w = next(w for w in data["models"][0]["what_if"] if w["name"] == "bf16")
    assert w["applicable"], w["reason"]
    assert d["evidence"]["what_if"]["speedup"] == w["speedup"]
    if w["spread"][0] > 1.0:  # faster beyond the noise on this machine
        assert d["price"]["basis"] == "estimated" and d["price"]["device"] == "cpu"
        assert d["price"]["alternative"] == (
            f"bf16 autocast measured {w['speedup']:.2f}× on the forward of {project}/model.py:Net on cpu; "
            "the training step on CUDA may differ"
        )
        assert d["price"]["saving_ms"] == pytest.approx(w["baseline_ms"] * (1 - 1 / w["speedup"]))
    else:
        assert d["price"] is None
        assert "--what-if bf16 measured no speed-up on the forward of" in d["message"]


def test_gpu_device_spec_estimate_is_the_basis(project, capsys):
    data = run(capsys, str(project / "train.py"), f"{project}/model.py:Net", "--what-if", "bf16", "--device-spec", "l4")
    (model,) = data["models"]
    fp32, half = model["estimate"]["latency_ms"], model["estimate"]["autocast"]
    assert half["dtype"] == "bfloat16" and 0 < half["latency_ms"] < fp32
    (d,) = al403(data)
    price = d["price"]
    assert price["basis"] == "estimated" and price["device"] == "l4"
    assert price["saving_ms"] == pytest.approx(fp32 - half["latency_ms"])
    assert price["saving_share"] == pytest.approx(1 - half["latency_ms"] / fp32)
    alt = price["alternative"]
    assert alt.startswith(f"bfloat16 autocast estimated {fp32 / half['latency_ms']:.2f}× on the forward of")
    assert "bf16 autocast measured" in alt and "on cpu" in alt and "the training step may differ" in alt

    # a GPU without bf16 tensor cores: float16
    data = run(capsys, str(project / "train.py"), f"{project}/model.py:Net", "--what-if", "bf16", "--device-spec", "t4")
    assert data["models"][0]["estimate"]["autocast"]["dtype"] == "float16"
    assert al403(data)[0]["price"]["alternative"].startswith("float16 autocast estimated")


def test_text_report_labels_the_price_an_estimate(project, capsys):
    code = main(
        [
            str(project / "train.py"),
            f"{project}/model.py:Net",
            "--input-shape",
            "4,3,32,32",
            *FAST,
            "--show-info",
            "--what-if",
            "bf16",
            "--device-spec",
            "l4",
        ]
    )
    out = " ".join(capsys.readouterr().out.split())
    assert code in (0, 1)
    assert "AL403" in out and "of model time (estimated on l4)" in out


def test_the_model_the_file_imports_is_the_one_linked(project, capsys):
    data = run(
        capsys,
        str(project / "train.py"),
        f"{project}/other.py:Net",
        f"{project}/model.py:Net",
        "--what-if",
        "bf16",
        "--device-spec",
        "l4",
    )
    (d,) = al403(data)
    assert f"{project}/model.py:Net" in d["price"]["alternative"]
    assert d["evidence"]["what_if"]["model"] == f"{project}/model.py:Net"


def test_one_saving_never_prices_two_findings(project, capsys):
    (project / "train2.py").write_text(textwrap.dedent(TRAIN.format(module="model")))
    data = run(
        capsys,
        str(project / "train.py"),
        str(project / "train2.py"),
        f"{project}/model.py:Net",
        "--what-if",
        "bf16",
        "--device-spec",
        "l4",
    )
    found = al403(data)
    assert len(found) == 2 and all(d["price"] is None for d in found)


def test_no_link_without_a_precision_what_if(project, capsys):
    data = run(capsys, str(project / "train.py"), f"{project}/model.py:Net", "--what-if", "inference-mode")
    (d,) = al403(data)
    assert d["price"] is None and "what_if" not in d["evidence"]


# link_code itself, on results whose what-if verdict is fixed (the CLI tests take the machine's)


def _model(spread: list[float], speedup: float, target: str = "m.py:Net") -> ModelResult:
    w = WhatIf(
        "bf16", True, "autocast", baseline_ms=10.0, transformed_ms=10.0 / speedup, spread=spread, speedup=speedup
    )
    return ModelResult(target, "fx", "cpu", "float32", [[1]], Totals(), [], what_if=[w])


def _finding(file: str = "train.py") -> Diagnostic:
    return Diagnostic("AL403", "CUDA training loop runs in float32", file=file, line=1)


@pytest.mark.parametrize(("spread", "speedup"), [([1.4, 1.8], 1.6), ([0.9, 1.1], 1.0), ([0.5, 0.7], 0.6)])
def test_link_prices_only_a_faster_what_if(spread, speedup):
    m, d = _model(spread, speedup), _finding()
    link_code([d], [m])
    if m.what_if[0].verdict == "faster":
        assert d.price.basis == "estimated" and d.price.saving_ms == pytest.approx(10.0 * (1 - 1 / 1.6))
        assert "bf16 autocast measured 1.60× on the forward of m.py:Net on cpu" in d.price.alternative
    else:
        assert d.price is None and "measured no speed-up" in d.message and m.what_if[0].verdict in d.message


def test_with_two_models_and_no_import_nothing_is_linked(tmp_path):
    (tmp_path / "train.py").write_text("import torch\n")
    d = _finding(str(tmp_path / "train.py"))
    link_code([d], [_model([1.4, 1.8], 1.6, f"{tmp_path}/a.py:Net"), _model([1.4, 1.8], 1.6, f"{tmp_path}/b.py:Net")])
    assert d.price is None
