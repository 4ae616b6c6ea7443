"""The pytest plugin: a budget that holds passes, one that is exceeded fails with a readable
account, and baselines are saved and compared."""

from __future__ import annotations

import json
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import tomllib

pytest.importorskip("torch")
pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]
# Installed, the entry point loads the plugin; from a bare checkout it is named explicitly.
_INSTALLED = any(ep.value == "archlint.pytest_plugin" for ep in entry_points(group="pytest11"))
PLUGIN = () if _INSTALLED else ("-p", "archlint.pytest_plugin")

TESTS = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.conv = nn.Conv2d(3, width, 3, padding=1, bias=True)
        self.bn = nn.BatchNorm2d(width)

    def forward(self, x):
        return self.bn(self.conv(x))

WIDTH = {width}

def test_within(archlint_budget):
    archlint_budget(Net(WIDTH).eval(), (1, 3, 16, 16), max_flops=1e6, max_params=1e4, name="Net")

def test_over(archlint_budget):
    archlint_budget(Net(WIDTH).eval(), (1, 3, 16, 16), max_flops=1000, forbid=["AL204"], name="Net")
"""


def test_entry_point_is_declared():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["pytest11"]["archlint"] == "archlint.pytest_plugin"


def test_budget_passes_and_fails(pytester: pytest.Pytester):
    pytester.makepyfile(test_budget=TESTS.format(width=8))
    result = pytester.runpytest_subprocess(*PLUGIN, "-q")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*archlint: Net is over budget and has forbidden finding AL204:*",
            "*max-flops: * exceeds budget 1K FLOPs by *",
            "*forbidden AL204 at conv: *",
        ]
    )


def test_baseline_saved_then_compared(pytester: pytest.Pytester):
    pytester.makepyfile(test_budget=TESTS.format(width=8))
    baseline = pytester.path / "baseline.json"
    pytester.runpytest_subprocess(*PLUGIN, "-q", "-k", "within", "--archlint-save-baseline", str(baseline))
    saved = json.loads(baseline.read_text())
    key = "test_budget.py::test_within::Net"  # the test and the model's name (issue 39)
    assert list(saved["models"]) == [key] and saved["models"][key]["params"] == 3 * 8 * 9 + 8 + 16

    same = pytester.runpytest_subprocess(*PLUGIN, "-q", "-k", "within", "--archlint-baseline", str(baseline))
    same.assert_outcomes(passed=1)
    pytester.makepyfile(test_budget=TESTS.format(width=16))  # the model doubled
    grown = pytester.runpytest_subprocess(*PLUGIN, "-q", "-k", "within", "--archlint-baseline", str(baseline))
    grown.assert_outcomes(failed=1)
    grown.stdout.fnmatch_lines(["*baseline:flops: FLOPs grew +100.0% over the baseline*"])


def test_saving_the_baseline_where_it_cannot_go_is_one_line(pytester: pytest.Pytester):
    """Issue 38: `--archlint-save-baseline <folder>` ended pytest with a traceback; a test file or
    the baseline read as the file to save was replaced by the baseline."""
    pytester.makepyfile(test_budget=TESTS.format(width=8))
    (pytester.path / "folder").mkdir()
    result = pytester.runpytest_subprocess(*PLUGIN, "-q", "--archlint-save-baseline", "folder")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    result.stderr.fnmatch_lines(
        ["*--archlint-save-baseline: cannot write the baseline to *folder: it is a folder; give a file name*"]
    )

    test_file = pytester.path / "test_budget.py"
    before = test_file.read_bytes()
    result = pytester.runpytest_subprocess(*PLUGIN, "-q", "--archlint-save-baseline", str(test_file))
    assert result.ret == pytest.ExitCode.USAGE_ERROR and test_file.read_bytes() == before
    result.stdout.fnmatch_lines(
        ["*cannot write the baseline to *test_budget.py: it is a test file that this run reads*"]
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()

    pytester.runpytest_subprocess(*PLUGIN, "-q", "--archlint-save-baseline", "base.json")
    saved = (pytester.path / "base.json").read_bytes()
    result = pytester.runpytest_subprocess(
        *PLUGIN, "-q", "--archlint-baseline", "base.json", "--archlint-save-baseline", "./base.json"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR and (pytester.path / "base.json").read_bytes() == saved
    result.stderr.fnmatch_lines(["*cannot write the baseline to *base.json: it is the baseline*that this run reads*"])
