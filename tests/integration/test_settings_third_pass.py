"""Issue 38, settings: a `--config` value is one TOML value, `forbid=` codes are checked as the
CLI checks them, memory sizes are spelled alike on the flag and in the API (and a bare number or an absurd size is
refused in one line), and a pyproject.toml whose `tool` is not a table is an error naming it."""

from __future__ import annotations

from pathlib import Path

import pytest
from torch import nn

import archlint
from archlint.cli import main
from archlint.errors import UsageError
from archlint.testing import assert_budget

FINDINGS = "import torch\nx = torch.zeros(3).cuda()\n"  # AL402 on line 2


def _run(capsys, argv) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(FINDINGS)
    return tmp_path


# 11. One --config value sets one key ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "item",
    [
        'select=["AL4"]\nper-file-ignores = {"*" = ["ALL"]}',
        'select=["AL4"]\n[tool]\nx = 1',
        'rules.AL101.threshold=0.2\nignore = ["ALL"]',
    ],
)
def test_a_config_value_with_newlines_sets_nothing_else(capsys, project, item):
    code, out, err = _run(capsys, ["train.py", "--no-cache", "--config", item])
    assert code == 2 and not out, out  # was: exit 0, "All checks passed." (the injected key ignored everything)
    assert len(err.strip().splitlines()) == 1 and "the value is more than one TOML value" in err, err


def test_a_value_over_several_lines_is_still_one_value(capsys, project):
    code, out, _ = _run(capsys, ["train.py", "--no-cache", "--config", 'select=[\n  "AL4",\n]'])
    assert code == 1 and "AL402" in out


# 12. forbid= names rules as --select does ----------------------------------------------------------------


@pytest.mark.parametrize(
    "forbid, message",
    [
        (["AL240"], "forbid=: unknown rule code 'AL240'"),
        ("AL9", "forbid=: unknown rule code 'AL9'"),
        ([205], "forbid= takes rule codes or prefixes"),
    ],
)
def test_an_unknown_forbidden_code_is_refused(forbid, message):
    with pytest.raises(UsageError, match=message):  # was: passed, forbidding nothing
        assert_budget(nn.Linear(4, 4), (1, 4), forbid=forbid)


def test_forbid_takes_a_comma_list_and_all():
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8))  # conv then BN: AL205
    assert_budget(model, (1, 3, 16, 16), forbid="AL3, AL4")
    with pytest.raises(AssertionError, match="forbidden AL205"):
        assert_budget(model, (1, 3, 16, 16), forbid="ALL")  # was: "ALL" matched no code


def test_archlint_budget_fixture_rejects_an_unknown_code(archlint_budget):
    with pytest.raises(UsageError, match="forbid=: unknown rule code 'AL240'; `archlint rules` lists them"):
        archlint_budget(nn.Linear(4, 4), (1, 4), forbid=["AL240"])


# Memory sizes: one spelling everywhere; a bare number and an absurd size refused -------------------------


@pytest.mark.parametrize(
    "text, size",
    [
        ("24G", 24 * 10**9),
        ("24gb", 24 * 10**9),
        ("24Gi", 24 * 2**30),
        ("24GiB", 24 * 2**30),
        ("512M", 512 * 10**6),
        ("1T", 10**12),
        ("64K", 64_000),
        ("512B", 512),
    ],
)
def test_memory_budget_spellings_agree_on_the_flag_and_the_api(text, size):
    # was: 24G refused while 24GB was taken (issue 39 item 13)
    assert archlint.api.settings_for(memory_budget=text).memory_budget == size
    from archlint.cli import build_parser

    assert (
        build_parser().parse_args(["x.py:Net", "--memory-budget", text]).memory_budget == text
    )  # config.apply checks it


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--memory-budget", "24"],
            "--memory-budget '24' has no unit; did you mean 24GB or 24GiB? (write 24B for bytes)",
        ),
        (["--memory-budget", "999999999999TB"], "--memory-budget '999999999999TB' is past the memory of any device"),
        (["--memory-budget", "9" * 400 + "TB"], "is past the memory of any device"),
    ],
)
def test_memory_budget_without_a_unit_or_past_any_device_is_one_line(capsys, project, argv, message):
    code, out, err = _run(capsys, ["examples_net.py:Net", "--train", *argv])
    assert code == 2 and not out and len(err.strip().splitlines()) == 1 and message in err, err


def test_memory_budget_as_a_bare_number_in_the_api_is_refused_too():
    with pytest.raises(UsageError, match="memory_budget= 24 has no unit; did you mean 24GB or 24GiB"):  # was: 24 bytes
        archlint.api.settings_for(memory_budget=24)


# A pyproject.toml up the tree whose `tool` is not a table ------------------------------------------------


def test_tool_that_is_not_a_table_is_an_error_naming_the_file(capsys, tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("tool = 5\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(FINDINGS)
    monkeypatch.chdir(tmp_path / "src")
    code, out, err = _run(capsys, ["train.py", "--no-cache"])
    assert code == 2 and not out  # was: an internal error (TypeError), exit 2 with a traceback hint
    assert err.strip() == (
        f"archlint: error: {Path(tmp_path, 'pyproject.toml')}: `tool` must be a table "
        "([tool.NAME] sections), got 5; fix the file"
    )
