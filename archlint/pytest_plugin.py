"""pytest plugin (entry point `pytest11`): the `archlint_budget` fixture and baseline options.

    def test_budget(archlint_budget):
        archlint_budget(Net(), (1, 3, 32, 32), max_flops=5e7, forbid=["AL205"])

    pytest --archlint-save-baseline model-baseline.json   # record every budgeted model once
    pytest --archlint-baseline model-baseline.json        # then fail on growth or new findings

A baseline entry is the test's node id and the model's name (`name=`, default its class name):
`tests/test_models.py::test_budget[resnet18]::ResNet`.

Loaded into every pytest run where archlint is installed, so it imports nothing heavy up front.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

_SNAPSHOTS = pytest.StashKey[list]()
_KEYS = pytest.StashKey[set]()  # baseline keys recorded this session


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("archlint", "archlint model budgets")
    group.addoption(
        "--archlint-baseline",
        type=Path,
        metavar="FILE",
        help="archlint_budget also fails on metric growth or new findings versus this baseline",
    )
    group.addoption(
        "--archlint-save-baseline",
        type=Path,
        metavar="FILE",
        help="write the metrics and findings of every archlint_budget call to FILE at the end",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_SNAPSHOTS] = []
    config.stash[_KEYS] = set()
    path = config.getoption("archlint_save_baseline", None)
    if path is not None:  # a folder, a link or the baseline read: said now, before the tests run
        from archlint import writeguard
        from archlint.errors import UsageError

        try:
            with writeguard.run_inputs():
                _check_save(config, path, [])
        except UsageError as exc:
            raise pytest.UsageError(f"--archlint-save-baseline: {exc}") from None


def _check_save(config: pytest.Config, path: Path, tests: list) -> None:
    """The baseline's file must not be a folder, a link, or a file this session reads."""
    from archlint import outputs, writeguard

    writeguard.note_inputs([config.getoption("archlint_baseline", None)], "the baseline")
    writeguard.note_inputs([config.inipath] if config.inipath else [], "pytest's config file")
    writeguard.note_inputs(tests, "a test file")
    outputs.check_target(Path(path), "the baseline")


@pytest.fixture
def archlint_budget(request: pytest.FixtureRequest):
    """`archlint.testing.assert_budget`, with the session's baseline options applied. Baseline
    entries are keyed by the test and the model's name (`name=`, default its class): two tests
    budgeting resnet18 and resnet50 keep two entries, never one `ResNet` written over."""
    from archlint.testing import assert_budget

    config = request.config
    baseline = config.getoption("archlint_baseline")
    saving = config.getoption("archlint_save_baseline") is not None
    nodeid = request.node.nodeid

    def check(model, *inputs, forbid=(), **options):
        __tracebackhide__ = True  # a failure shows the user's call, not this fixture's source
        if baseline is None:
            analysis = assert_budget(model, *inputs, forbid=forbid, **options)
        else:
            analysis = _against_baseline(model, inputs, forbid, options, baseline, nodeid)
        if saving:
            from archlint import gate

            snap = gate.snapshot(analysis.result, analysis.settings)
            (target,) = snap["models"]
            key = baseline_key(nodeid, target)
            if key in config.stash[_KEYS]:
                pytest.fail(
                    f"archlint_budget: {nodeid} budgets two models named {target!r}; give each call "
                    "its own name= so the baseline keeps both",
                    pytrace=False,
                )
            config.stash[_KEYS].add(key)
            snap["models"] = {key: snap["models"][target]}
            for finding in snap["findings"]:
                finding["test"] = key
            config.stash[_SNAPSHOTS].append(snap)
        return analysis

    return check


def baseline_key(nodeid: str, target: str) -> str:
    """A fixture baseline's entry: the test's node id and the model's name."""
    return f"{nodeid}::{target}"


def _against_baseline(model, inputs, forbid, options, path: Path, nodeid: str):
    """assert_budget, compared with this test's own entry of the baseline (and its findings only)."""
    __tracebackhide__ = True
    from archlint import gate
    from archlint.api import analyze
    from archlint.testing import raise_failures

    saved = gate.read_baseline(path)
    analysis = analyze(model, *inputs, **options)
    (name,) = gate.snapshot(analysis.result, analysis.settings)["models"]  # the model's name as baselines write it
    key = baseline_key(nodeid, name)
    entry = saved["models"].get(key)
    findings = [f for f in saved["findings"] if f.get("test") == key]
    if entry is None and name in saved["models"]:  # a baseline written before entries were keyed by test
        entry, findings = saved["models"][name], [f for f in saved["findings"] if "test" not in f]
    own = {
        "archlint_baseline": saved["archlint_baseline"],
        "models": {name: entry} if entry else {},
        "findings": findings,
    }
    result = analysis.result
    result.gate += gate.regressions(result, own, analysis.settings) + gate.grandfather(result, own, analysis.settings)
    raise_failures(analysis, forbid)
    return analysis


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("archlint_save_baseline", None)
    snapshots = session.config.stash.get(_SNAPSHOTS, [])
    if path is None or not snapshots:
        return
    from archlint import gate

    merged: dict[str, Any] = {"archlint_baseline": gate.BASELINE_VERSION, "models": {}, "findings": []}
    for snap in snapshots:
        merged["models"].update(snap["models"])
        merged["findings"] += snap["findings"]
    merged["models"] = dict(sorted(merged["models"].items()))
    merged["findings"].sort(key=lambda f: (f["code"], f["where"], f["fingerprint"], f.get("test", "")))
    from archlint import writeguard
    from archlint.errors import UsageError

    try:
        with writeguard.run_inputs():
            _check_save(session.config, path, sorted({str(item.path) for item in getattr(session, "items", [])}))
            gate.write_baseline(merged, path)
    except UsageError as exc:  # one line and pytest's usage exit code, never a traceback at the end
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"archlint: error: --archlint-save-baseline: {exc}", red=True)
        else:
            print(f"archlint: error: --archlint-save-baseline: {exc}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
