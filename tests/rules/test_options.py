"""Every model rule option can be set in [tool.archlint.rules.CODE] and with --option CODE.NAME=V,
and a finding can be silenced for module paths with module-ignores — end to end through the CLI."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from archlint import cli, config
from archlint.errors import UsageError
from archlint.model.checks import check_modules

from ._graphs import findings, opgraph

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "models" / "table1_unbalanced.py"
OPTIONS = [(m.CODE, name, default) for m in check_modules() for name, default in m.OPTIONS.items()]


@functools.cache
def _small_graph():
    return opgraph(torch.nn.Conv2d(3, 8, 1), (1, 3, 8, 8))


def _other_value(default):
    if isinstance(default, bool):
        return not default
    if isinstance(default, (int, float)):
        return default + 1
    return ["x.*", "y"]


def _cli_text(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


@pytest.mark.parametrize(("code", "name", "default"), OPTIONS)
def test_every_option_is_settable_in_config_and_on_the_command_line(tmp_path, code, name, default):
    value = _other_value(default)
    toml_value = json.dumps(value)
    (tmp_path / "pyproject.toml").write_text(f"[tool.archlint.rules.{code}]\n{name.replace('_', '-')} = {toml_value}\n")
    from_config = config.load(path=tmp_path / "pyproject.toml")
    assert from_config.options(code, dict(next(m for m in check_modules() if m.CODE == code).OPTIONS))[name] == value

    args = cli.build_parser().parse_args(
        ["m.py:Net", "--config", str(tmp_path / "pyproject.toml"), "--option", f"{code}.{name}={_cli_text(value)}"]
    )
    from_cli = cli._settings(args)
    given = from_cli.rule_options[code][name]
    # A list option comes from the command line as "a,b"; the check layer splits it (run_checks).
    assert given == value or given == _cli_text(value)
    findings(_small_graph(), from_cli)  # accepted by the check layer: no UsageError


def test_threshold_changes_what_fires():
    sys.path.insert(0, str(FIXTURE.parent))
    import shufflenet_tables as tables

    r = tables.row("1:6")  # the chain's MAC is 42% above the balanced chain's
    graph = opgraph(r.build(), r.input_shape)
    assert any(d.code == "AL101" for d in findings(graph))
    strict = config.from_table({"rules": {"AL101": {"threshold": 0.5}}}, root=Path("."))
    assert not any(d.code == "AL101" for d in findings(graph, strict))
    share = config.from_table({"rules": {"AL101": {"min-share": 0.5}}}, root=Path("."))
    assert not any(d.code == "AL101" for d in findings(graph, share))


def test_module_ignores_silence_one_subtree():
    sys.path.insert(0, str(FIXTURE.parent))
    import table1_unbalanced as fixture

    graph = opgraph(fixture.Net(), fixture.INPUT_SHAPE)
    found = [d for d in findings(graph) if d.code == "AL101"]
    # backbone.0 and backbone.1 are the same chain: one finding listing both; head its own.
    assert {d.module for d in found} == {"backbone.0", "head"}
    assert next(d for d in found if d.module == "backbone.0").evidence["instances"] == ["backbone.0", "backbone.1"]
    quiet = config.from_table({"module-ignores": {"AL101": ["backbone.*"]}}, root=Path("."))
    assert {d.module for d in findings(graph, quiet) if d.code == "AL101"} == {"head"}
    by_prefix = config.from_table({"module-ignores": {"AL1": ["head*"]}}, root=Path("."))
    assert {d.module for d in findings(graph, by_prefix) if d.code == "AL101"} == {"backbone.0"}


def test_bad_option_values_are_usage_errors():
    graph = _small_graph()
    with pytest.raises(UsageError, match="AL101.threshold must be a number"):
        findings(graph, config.Settings(rule_options={"AL101": {"threshold": "high"}}))
    with pytest.raises(UsageError, match="AL201.train_only must be a list of strings"):
        findings(graph, config.Settings(rule_options={"AL201": {"train_only": 3}}))


def _archlint(*args, cwd):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "archlint",
            f"{FIXTURE}:Net",
            "--input-shape",
            "1,9,56,56",
            "--output-format",
            "json",
            *args,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_end_to_end_config_cli_and_silencing(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.archlint]\nmodule-ignores = {"AL101" = ["backbone.*"]}\n\n[tool.archlint.rules.AL104]\nthreshold = 0.9\n'
    )
    out = _archlint(cwd=tmp_path)
    assert out.returncode == 0, out.stderr  # AL101's new channel split needs retraining: info (issue 26)
    found = json.loads(out.stdout)["diagnostics"]
    assert {d["module"] for d in found if d["code"] == "AL101"} == {"head"}
    d = next(d for d in found if d["code"] == "AL101")
    assert d["severity"] == "info" and "retrain" in d["message"]
    assert d["file"] == str(FIXTURE) and d["price"]["mac_bytes_saved"] == d["evidence"]["excess_bytes"]
    out = _archlint("--option", "AL101.threshold=0.95", cwd=tmp_path)
    # Only info is left (AL103's fragments: no static saving): listed in JSON, never a failure.
    left = json.loads(out.stdout)["diagnostics"]
    assert out.returncode == 0 and left and all(d["severity"] == "info" for d in left)
    assert all(d["price"]["basis"] == "static" and d["price"]["alternative"] for d in left)
    out = _archlint("--option", "AL101.threshold=lots", cwd=tmp_path)
    assert out.returncode == 2 and "AL101.threshold must be a number" in out.stderr
    assert "Traceback" not in out.stderr


def test_text_output_hides_info_unless_show_info(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.archlint]\n")
    args = [sys.executable, "-m", "archlint", f"{FIXTURE}:Net", "--input-shape", "1,9,56,56", "--select", "AL103"]
    out = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr  # info never fails the run
    assert "AL103" not in out.stdout.replace("--show-info", "") and "1 info finding hidden" in out.stdout
    shown = subprocess.run([*args, "--show-info"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert (
        shown.returncode == 0
        and "AL103 (info)" in shown.stdout
        and "no runtime saving counted (static)" in shown.stdout
    )
