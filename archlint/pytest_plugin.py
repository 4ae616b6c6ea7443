"""pytest plugin (entry point `pytest11`): the `archlint_budget` fixture and baseline options.

    def test_budget(archlint_budget):
        archlint_budget(Net(), (1, 3, 32, 32), max_flops=5e7, forbid=["AL205"])

    pytest --archlint-save-baseline model-baseline.json   # record every budgeted model once
    pytest --archlint-baseline model-baseline.json        # then fail on growth or new findings

Loaded into every pytest run where archlint is installed, so it imports nothing heavy up front.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_SNAPSHOTS = pytest.StashKey[list]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("archlint", "archlint model budgets")
    group.addoption(
        "--archlint-baseline", type=Path, metavar="FILE",
        help="archlint_budget also fails on metric growth or new findings versus this baseline",
    )
    group.addoption(
        "--archlint-save-baseline", type=Path, metavar="FILE",
        help="write the metrics and findings of every archlint_budget call to FILE at the end",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_SNAPSHOTS] = []
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
    """`archlint.testing.assert_budget`, with the session's baseline options applied."""
    from archlint.testing import assert_budget

    config = request.config
    baseline = config.getoption("archlint_baseline")
    saving = config.getoption("archlint_save_baseline") is not None

    def check(model, *inputs, **options):
        if baseline is not None:
            options.setdefault("baseline", baseline)
        analysis = assert_budget(model, *inputs, **options)
        if saving:
            from archlint import gate

            config.stash[_SNAPSHOTS].append(gate.snapshot(analysis.result, analysis.settings))
        return analysis

    return check


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("archlint_save_baseline", None)
    snapshots = session.config.stash.get(_SNAPSHOTS, [])
    if path is None or not snapshots:
        return
    from archlint import gate

    merged = {"archlint_baseline": gate.BASELINE_VERSION, "models": {}, "findings": []}
    for snap in snapshots:
        merged["models"].update(snap["models"])
        merged["findings"] += snap["findings"]
    merged["models"] = dict(sorted(merged["models"].items()))
    merged["findings"].sort(key=lambda f: (f["code"], f["where"], f["fingerprint"]))
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
