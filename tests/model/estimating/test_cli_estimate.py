"""--device-spec through the CLI: the JSON contract, the text label, config keys and the budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archlint.cli import main

ROOT = Path(__file__).resolve().parents[3]
NETS = str(ROOT / "examples" / "nets.py")


def _json(args: list[str], tmp_path: Path, capsys) -> dict:
    out = tmp_path / "r.json"
    code = main(args + ["--output-format", "json", "-o", str(out), "--exit-zero"])
    assert code == 0, capsys.readouterr().err
    return json.loads(out.read_text())


def test_json_contract(tmp_path, capsys):
    data = _json([f"{NETS}:TinyNet", "--input-shape", "8,3,64,64", "--device-spec", "l4"], tmp_path, capsys)
    m = data["models"][0]
    e = m["estimate"]
    assert set(e) >= {"device_spec", "latency_ms", "method", "assumptions"}
    assert e["device_spec"] == "l4" and isinstance(e["latency_ms"], float) and e["latency_ms"] > 0
    assert "sum of ops" in e["method"] and "eager" in e["method"]
    assert isinstance(e["assumptions"], list) and any("estimate, not a measurement" in a for a in e["assumptions"])
    assert all(isinstance(la["estimated_ms"], float) for la in m["layers"])
    assert {la["bound"] for la in m["layers"]} <= {"compute", "memory", "overhead"}
    assert sum(la["estimated_ms"] for la in m["layers"]) == pytest.approx(e["latency_ms"])
    assert m["totals"]["latency_ms"] is None  # nothing was measured: the estimate is not latency


def test_without_device_spec_fields_are_null(tmp_path, capsys):
    data = _json([f"{NETS}:TinyNet", "--input-shape", "1,3,32,32"], tmp_path, capsys)
    m = data["models"][0]
    assert m["estimate"] is None and all(la["estimated_ms"] is None and la["bound"] is None for la in m["layers"])


def test_text_labels_it_an_estimate(capsys):
    assert main([f"{NETS}:TinyNet", "--input-shape", "2,3,32,32", "--device-spec", "t4", "--exit-zero"]) == 0
    out = capsys.readouterr().out
    assert "ESTIMATED on t4" in out and "not measured" in out and "slowest" in out


def test_budget_checked_against_the_estimate(tmp_path, capsys):
    args = [f"{NETS}:TinyNet", "--input-shape", "8,3,64,64", "--device-spec", "t4", "--select", "AL0"]
    assert main(args + ["--max-latency-ms", "1000"]) == 0
    out = capsys.readouterr().out
    assert main(args + ["--max-latency-ms", "0.0001"]) == 1
    out = capsys.readouterr().out
    assert "gate failed" in out and "estimated on t4" in out


def test_config_keys_global_and_per_model(tmp_path, capsys):
    spec = tmp_path / "specs" / "mine.toml"
    spec.parent.mkdir()
    spec.write_text((ROOT / "archlint" / "devices" / "l4.toml").read_text().replace('name = "l4"', 'name = "my-l4"'))
    (tmp_path / "nets.py").write_text(Path(NETS).read_text())
    (tmp_path / "pyproject.toml").write_text(
        '[tool.archlint]\ndevice-spec = "a100-sxm"\n'
        '[[tool.archlint.models]]\ntarget = "nets.py:TinyNet"\ninput-shape = [1, 3, 32, 32]\n'
        '[[tool.archlint.models]]\ntarget = "nets.py:TinyNet"\ninput-shape = [2, 3, 32, 32]\ndevice-spec = "specs/mine.toml"\n'
    )
    data = _json(["--models", "--config", str(tmp_path / "pyproject.toml")], tmp_path, capsys)
    assert [m["estimate"]["device_spec"] for m in data["models"]] == ["a100-sxm", "my-l4"]
    # the flag overrides both
    data = _json(["--models", "--config", str(tmp_path / "pyproject.toml"), "--device-spec", "t4"], tmp_path, capsys)
    assert [m["estimate"]["device_spec"] for m in data["models"]] == ["t4", "t4"]


def test_config_bad_spec_is_exit_2(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text('[tool.archlint]\ndevice-spec = "nope"\n')
    assert main([f"{NETS}:TinyNet", "--config", str(tmp_path / "pyproject.toml")]) == 2
    assert "nope" in capsys.readouterr().err


def test_prices_use_the_estimate_when_nothing_was_measured(tmp_path, capsys):
    base = [f"{NETS}:TinyNet", "--input-shape", "8,3,64,64", "--show-info"]
    static = _json(base, tmp_path, capsys)["diagnostics"]
    estimated = _json(base + ["--device-spec", "l4"], tmp_path, capsys)["diagnostics"]
    priced = [d for d in estimated if d["code"] == "AL205"]
    assert priced and all(d["price"]["basis"] == "estimated" and d["price"]["saving_ms"] > 0 for d in priced)
    assert all(d["price"]["device"] == "l4" for d in priced if "device" in d["price"])
    assert all(d["price"]["basis"] == "static" for d in static if d["price"])


def test_html_labels_the_estimate_and_plots_it(tmp_path, capsys):
    html = tmp_path / "r.html"
    args = [f"{NETS}:TinyNet", "--input-shape", "8,3,64,64", "--device-spec", "rtx4090", "--html", str(html)]
    assert main(args + ["--exit-zero", "-o", str(tmp_path / "r.txt")]) == 0
    text = html.read_text()
    assert "latency ESTIMATED" in text and "on rtx4090" in text
    assert (
        '"estimated":true' in text and '"est":' in text and '"bound":"overhead"' in text
    )  # a tiny net on a big GPU: launch-bound
    assert "spec sheet, tensor-tf32" in text  # the roofs drawn: fp32 convs reach TF32
