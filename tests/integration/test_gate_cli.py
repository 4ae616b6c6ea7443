"""The CI gate end to end: `archlint` on examples/nets.py:TinyNet with budgets and baselines,
run in-process (torch is imported once for the module)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from archlint.cli import main  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TINY = ["examples/nets.py:TinyNet", "--input-shape", "1,3,56,56"]
CONFIG = """\
[tool.archlint]
tolerance = { flops = 0.05 }

[[tool.archlint.models]]
target = "nets.py:TinyNet"
input-shapes = [[1, 3, 56, 56]]
budgets = { max-params = 1e6 }
"""


def archlint(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


def test_under_budget_passes(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    # --select AL201: TinyNet has no unused module, so only the gate decides the exit code.
    code, out = archlint(
        capsys, *TINY, "--select", "AL201", "--max-flops", "1e9", "--max-params", "1e6", "--output-format", "json"
    )
    assert code == 0, out
    gate = json.loads(out)["gate"]
    assert {g["check"] for g in gate} == {"max-flops", "max-params"} and all(g["passed"] for g in gate)


def test_over_budget_fails_naming_the_budget(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    code, out = archlint(capsys, *TINY, "--select", "AL201", "--max-flops", "2e7", "--max-params", "1e6")
    assert code == 1
    assert "max-flops" in out and "exceeds budget 20M FLOPs by" in out
    assert "max-params" not in out  # a passing budget is not a failure line

    # Report-only: the same failure, exit 0.
    code, out = archlint(capsys, *TINY, "--select", "AL201", "--max-flops", "2e7", "--exit-zero")
    assert code == 0 and "exceeds budget 20M FLOPs" in out


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    shutil.copy(REPO / "examples" / "nets.py", tmp_path / "nets.py")
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_baseline_grandfathers_old_findings_and_fails_new_ones(capsys, project):
    code, out = archlint(capsys, "--models", "--save-baseline", "archlint-baseline.json")
    assert code == 0, out  # saving accepts what is there
    saved = json.loads((project / "archlint-baseline.json").read_text())
    assert saved["findings"] and saved["models"]["nets.py:TinyNet"]["flops"] > 0
    old_codes = {f["code"] for f in saved["findings"]}

    code, out = archlint(capsys, "--models", "--baseline", "archlint-baseline.json", "--output-format", "json")
    assert code == 0, out
    report = json.loads(out)
    assert report["diagnostics"] == []
    assert any(g["check"] == "baseline:flops" and g["passed"] for g in report["gate"])

    # A change applies a ReLU again after the stem's: a new warning (AL202, it pays: a full pass over
    # the stem's output), the old ones stay quiet.
    source = (project / "nets.py").read_text()
    marker = "x = self.block2(self.block1(self.stem(x)))"
    (project / "nets.py").write_text(
        source.replace(marker, "x = self.block2(self.block1(torch.relu(self.stem(x))))", 1)
    )
    # A fresh process: this one has imported nets.py already.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "archlint",
            "--models",
            "--baseline",
            "archlint-baseline.json",
            "--output-format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert [d["code"] for d in report["diagnostics"] if d["severity"] == "warning"] == ["AL202"]
    assert "AL202" not in old_codes
    (new,) = [g for g in report["gate"] if not g["passed"] and g["check"] == "baseline:new-findings"]
    assert "AL202" in new["message"]


def test_flops_growth_beyond_tolerance_fails_and_says_by_how_much(capsys, project, monkeypatch):
    assert archlint(capsys, "--models", "--save-baseline", "b.json")[0] == 0
    # Run from a subdirectory: the config is found upward, targets and baseline keys still match.
    (project / "sub").mkdir()
    monkeypatch.chdir(project / "sub")
    code, out = archlint(capsys, "--models", "--baseline", "../b.json")
    assert code == 0, out
    # A wider network: same modules (findings grandfathered), more FLOPs.
    code, out = archlint(capsys, "--models", "--baseline", "../b.json", "--init", "width=40")
    assert code == 1
    line = next(x for x in out.splitlines() if "baseline:flops" in x)
    assert "FLOPs grew +" in line and "over the baseline" in line and "tolerance 5%" in line
    growth = float(line.split("grew +")[1].split("%")[0])
    assert growth > 5


def test_missing_baseline_exits_2(capsys, project):
    code, out = archlint(capsys, "--models", "--baseline", "nope.json")
    assert code == 2 and out.count("\n") == 1 and "baseline file nope.json does not exist" in out
