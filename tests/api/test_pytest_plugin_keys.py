"""Issue 39 items 6 and 14: the pytest fixture's baseline keeps one entry per test and model name
(resnet18 and resnet50 are two entries, not one `ResNet` written over), a failure shows the user's
call rather than archlint's source and says what failed, and a model rule that fails in a user's
suite is a note, as on the command line."""

from __future__ import annotations

import json
from importlib.metadata import entry_points

import pytest

pytest.importorskip("torch")
pytest_plugins = ["pytester"]

_INSTALLED = any(ep.value == "archlint.pytest_plugin" for ep in entry_points(group="pytest11"))
PLUGIN = () if _INSTALLED else ("-p", "archlint.pytest_plugin")

TWO_OF_A_CLASS = """
import pytest
from torch import nn

class Net(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.conv = nn.Conv2d(3, width, 3, padding=1)

    def forward(self, x):
        return self.conv(x)

@pytest.mark.parametrize("width", [pytest.param({small}, id="small"), pytest.param(16, id="large")])
def test_sizes(archlint_budget, width):
    archlint_budget(Net(width).eval(), (1, 3, 16, 16), max_flops=1e8)

def test_named(archlint_budget):
    archlint_budget(Net(4).eval(), (1, 3, 16, 16), name="narrow")
    archlint_budget(Net(32).eval(), (1, 3, 16, 16), name="wide")
"""


def test_models_of_one_class_keep_their_own_entries(pytester: pytest.Pytester):
    pytester.makepyfile(test_models=TWO_OF_A_CLASS.format(small=8))
    baseline = pytester.path / "baseline.json"
    saved_run = pytester.runpytest_subprocess(*PLUGIN, "-q", "--archlint-save-baseline", str(baseline))
    saved_run.assert_outcomes(passed=3)
    models = json.loads(baseline.read_text())["models"]
    assert sorted(models) == [
        "test_models.py::test_named::narrow",
        "test_models.py::test_named::wide",
        "test_models.py::test_sizes[large]::Net",
        "test_models.py::test_sizes[small]::Net",
    ]
    assert models["test_models.py::test_sizes[small]::Net"]["params"] == 3 * 8 * 9 + 8
    assert models["test_models.py::test_sizes[large]::Net"]["params"] == 3 * 16 * 9 + 16

    same = pytester.runpytest_subprocess(*PLUGIN, "-q", "--archlint-baseline", str(baseline))
    same.assert_outcomes(passed=3)
    # the small case grew to 12 channels: within the large one's 16 (one merged `Net` entry let it
    # pass), over its own 8
    pytester.makepyfile(test_models=TWO_OF_A_CLASS.format(small=12))
    grown = pytester.runpytest_subprocess(*PLUGIN, "-q", "--archlint-baseline", str(baseline))
    grown.assert_outcomes(passed=2, failed=1)
    grown.stdout.fnmatch_lines(["*FAILED test_models.py::test_sizes[[]small[]]*"])
    pytester.makepyfile(test_models=TWO_OF_A_CLASS.format(small=8).replace("Net(32)", "Net(64)"))
    wider = pytester.runpytest_subprocess(*PLUGIN, "-q", "--archlint-baseline", str(baseline))
    wider.assert_outcomes(passed=2, failed=1)
    wider.stdout.fnmatch_lines(["*archlint: wide regressed against the baseline:*", "*FLOPs grew +100.0%*"])


def test_two_models_of_one_name_in_one_test_fail_the_save(pytester: pytest.Pytester):
    pytester.makepyfile(
        test_twice="""
from torch import nn

def test_twice(archlint_budget):
    archlint_budget(nn.Linear(4, 4), (1, 4))
    archlint_budget(nn.Linear(8, 8), (1, 8))
"""
    )
    result = pytester.runpytest_subprocess(*PLUGIN, "-q", "--archlint-save-baseline", str(pytester.path / "b.json"))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*budgets two models named 'Linear'; give each call its own name=*"])


FAILING = """
from torch import nn

class MyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=True)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        return self.bn(self.conv(x))

def test_forbidden(archlint_budget):
    archlint_budget(MyNet().eval(), (1, 3, 16, 16), forbid=["AL204"])
"""


def test_a_failure_shows_the_users_call_and_says_what_failed(pytester: pytest.Pytester):
    pytester.makepyfile(test_fail=FAILING)
    result = pytester.runpytest_subprocess(*PLUGIN, "-q")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "archlint: MyNet has forbidden finding AL204:" in out
    assert "is over budget" not in out
    assert 'archlint_budget(MyNet().eval(), (1, 3, 16, 16), forbid=["AL204"])' in out  # the user's line
    # archlint's own source is not in the traceback
    assert "raise AssertionError" not in out and "budget_failures(" not in out and "def check(" not in out


def test_assert_budget_headline_names_each_kind_of_failure():
    from torch import nn

    from archlint.testing import assert_budget

    class MyNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=True)
            self.bn = nn.BatchNorm2d(8)

        def forward(self, x):
            return self.bn(self.conv(x))

    with pytest.raises(
        AssertionError, match=r"archlint: MyNet has forbidden finding AL204:\n  forbidden AL204 at conv"
    ):
        assert_budget(MyNet().eval(), (1, 3, 16, 16), forbid=["AL204"])
    with pytest.raises(AssertionError, match=r"archlint: MyNet is over budget and has forbidden finding AL204:"):
        assert_budget(MyNet().eval(), (1, 3, 16, 16), forbid=["AL204"], max_flops=10)
    with pytest.raises(AssertionError, match=r"archlint: MyNet is over budget:\n  max-flops"):
        assert_budget(MyNet().eval(), (1, 3, 16, 16), max_flops=10)


RULE_FAILS = """
import archlint.model.checks.redundant_shortcut as rule
from torch import nn

def boom(graph, options, ctx):
    raise ValueError("a rule's own bug")

def test_budget_with_a_failing_rule(archlint_budget, monkeypatch):
    monkeypatch.setattr(rule, "check", boom)
    analysis = archlint_budget(nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU()), (1, 3, 16, 16), max_flops=1e8)
    assert any("rule AL203 failed on this model and was skipped" in n for n in analysis.notes)
"""


def test_a_failing_rule_is_a_note_in_a_users_suite(pytester: pytest.Pytester, monkeypatch):
    """PYTEST_CURRENT_TEST is set in every pytest run; only archlint's own suite is strict."""
    monkeypatch.delenv("ARCHLINT_STRICT_RULES", raising=False)
    pytester.makepyfile(test_rule=RULE_FAILS)
    result = pytester.runpytest_subprocess(*PLUGIN, "-q")
    result.assert_outcomes(passed=1)
