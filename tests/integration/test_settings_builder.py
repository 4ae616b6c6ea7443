"""Settings are built one way (config.apply), whether the file, a flag or an API keyword gives a
value: the same rule checks it, and the error names it as the user wrote it."""

from __future__ import annotations

import dataclasses

import pytest

import archlint
from archlint import config
from archlint.api import settings_for
from archlint.cli import main
from archlint.errors import UsageError


@pytest.mark.parametrize(
    "field, bad, rule",
    [
        ("warmup", -1, "must be ≥ 0, got -1"),
        ("repeat", 0, "must be ≥ 1, got 0"),
        ("timeout", 0, "must be a number > 0, got 0"),
    ],
)
def test_one_rule_per_field_from_file_flag_and_api(tmp_path, monkeypatch, capsys, field, bad, rule):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text("x = 1\n")
    value = f'"{bad}"' if isinstance(bad, str) else bad
    (tmp_path / "pyproject.toml").write_text(f"[tool.archlint]\n{field} = {value}\n")
    with pytest.raises(UsageError) as from_file:
        config.load()
    assert str(from_file.value) == f"{tmp_path / 'pyproject.toml'}: [tool.archlint] {field} {rule}"

    (tmp_path / "pyproject.toml").unlink()
    assert main(["a.py", f"--{field}", str(bad)]) == 2
    assert capsys.readouterr().err == f"archlint: error: --{field} {rule}\n"

    with pytest.raises(UsageError) as from_api:
        archlint.lint("a.py", **{field: bad})
    assert str(from_api.value) == f"{field}= {rule}"


def test_a_choice_has_one_rule_too(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # (on the command line argparse's choices say it first)
    (tmp_path / "pyproject.toml").write_text('[tool.archlint]\nmode = "training"\n')
    with pytest.raises(UsageError, match=r"\[tool.archlint\] mode must be one of eval, train, got 'training'"):
        config.load()
    (tmp_path / "pyproject.toml").unlink()
    with pytest.raises(UsageError, match="^mode= must be one of eval, train, got 'training'$"):
        settings_for(mode="training")


def test_what_if_implies_latency_whoever_sets_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.archlint]\nwhat-if = ["fold-bn"]\n')
    assert config.load().latency is True
    s = config.apply(config.Settings(), {"what_if": "fold-bn"}, label=lambda name: name)
    assert (s.what_if, s.latency) == (["fold-bn"], True)


def test_extend_select_adds_to_the_file_and_select_replaces_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.archlint]\nselect = ["AL1"]\nextend-select = ["AL2"]\n')
    s = config.apply(config.load(), {"extend_select": ["AL3"]}, label=lambda name: name)
    assert (s.select, s.extend_select) == (["AL1"], ["AL2", "AL3"])
    s = config.apply(s, {"select": ["AL4"]}, label=lambda name: name)
    assert s.select == ["AL4"]


def test_every_field_a_reporter_reads_is_declared():
    declared = {f.name for f in dataclasses.fields(config.Settings)}
    assert {"tree", "tree_depth", "top", "strategy", "trace_dir"} <= declared
    with pytest.raises(TypeError, match="no field 'tre'"):
        config.apply(config.Settings(), {"tre": True}, label=lambda name: name)
