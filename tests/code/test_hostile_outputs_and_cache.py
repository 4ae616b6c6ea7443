"""Issue 24 (4, 5, 16 and the minor items): the cache is not believed blindly and never hides the
project from git; odd file names never crash a reporter or reach the terminal raw; report files are
written whole; form feeds and string literals do not fool positions or noqa."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import archlint
from archlint.code import cache as cache_files

PACKAGE_ROOT = Path(archlint.__file__).resolve().parents[1]
FINDING = "import torch\nx = torch.zeros(3).cuda()\n"


def cli(*args, cwd, cache=False):
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "archlint", *args, *(() if cache else ("--no-cache",))],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        errors="surrogateescape",
    )


# Cache ---------------------------------------------------------------------------------------------


def test_cache_dir_dot_never_hides_the_project_from_git(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.archlint]\ncache-dir = "."\n')
    (tmp_path / "a.py").write_text(FINDING)
    assert cli("a.py", cwd=tmp_path, cache=True).returncode == 1
    assert not (tmp_path / ".gitignore").exists()  # was: "*", and git status showed nothing
    assert (tmp_path / "code-v1.json").is_file()  # the cache itself is where it was asked to be


def test_the_default_cache_folder_gets_its_gitignore(tmp_path):
    (tmp_path / "a.py").write_text(FINDING)
    cli("a.py", cwd=tmp_path, cache=True)
    assert (tmp_path / ".archlint_cache" / ".gitignore").read_text() == "# Created by archlint\n*\n"


def test_dangling_links_in_the_cache_folder_are_not_followed(tmp_path):
    (tmp_path / "a.py").write_text(FINDING)
    folder = tmp_path / ".archlint_cache"
    folder.mkdir()
    (folder / ".gitignore").symlink_to(tmp_path / "planted_gitignore")
    (folder / "code-v1.lock").symlink_to(tmp_path / "planted_lock")
    run = cli("a.py", cwd=tmp_path, cache=True)
    assert run.returncode == 1
    assert not (tmp_path / "planted_gitignore").exists()  # was: created at the link's target
    assert not (tmp_path / "planted_lock").exists()
    assert "cannot write the cache" in run.stderr  # the lock is a link: said, and the run goes on


def test_a_cache_file_that_is_a_link_is_never_written_through(tmp_path):
    """The cache goes through the one writer (archlint/outputs.py): a link in the cache's place is
    refused and said, its target untouched (was: the signed cache renamed over the link, fine, but
    through a writer of its own that the project's rules did not cover)."""
    (tmp_path / "a.py").write_text(FINDING)
    folder = tmp_path / ".archlint_cache"
    folder.mkdir()
    elsewhere = tmp_path / "somebody_elses.json"
    elsewhere.write_text("keep me\n")
    (folder / cache_files.CODE_FILE).symlink_to(elsewhere)
    run = cli("a.py", cwd=tmp_path, cache=True)
    assert run.returncode == 1  # the findings still reported
    assert elsewhere.read_text() == "keep me\n" and (folder / cache_files.CODE_FILE).is_symlink()
    assert "cannot write the cache" in run.stderr and "link" in run.stderr


def test_a_committed_cache_with_an_empty_entry_hides_nothing(tmp_path):
    (tmp_path / "a.py").write_text(FINDING)
    assert cli("a.py", cwd=tmp_path, cache=True).returncode == 1
    path = tmp_path / ".archlint_cache" / "code-v1.json"
    entries = json.loads(path.read_text())["entries"]
    planted = {key: [] for key in entries}  # "no findings" for the file, as a committed cache said
    path.write_text(json.dumps(planted))  # the old, unsigned format
    run = cli("a.py", cwd=tmp_path, cache=True)
    assert run.returncode == 1 and "AL402" in run.stdout  # was: "All checks passed."
    signed_elsewhere = json.loads(path.read_text())
    signed_elsewhere["entries"] = planted  # signed, but not with these entries
    path.write_text(json.dumps(signed_elsewhere, separators=(",", ":")))
    run = cli("a.py", cwd=tmp_path, cache=True)
    assert "AL402" in run.stdout
    assert "not written by archlint for this user (copied, committed or edited)" in run.stderr


def test_cached_messages_reach_the_terminal_escaped(tmp_path):
    (tmp_path / "a.py").write_text(FINDING)
    cli("a.py", cwd=tmp_path, cache=True)
    path = tmp_path / ".archlint_cache" / "code-v1.json"
    entries = json.loads(path.read_text())["entries"]
    for records in entries.values():
        records[0][1] = "\x1b[2J\x1b]0;owned\x07 cleared"
    path.write_bytes(cache_files.dump(entries))
    for fmt in ("text", "github"):
        run = cli("a.py", "--output-format", fmt, cwd=tmp_path, cache=True)
        assert "\x1b" not in run.stdout and "\x07" not in run.stdout
        assert "\\x1b[2J\\x1b]0;owned\\x07 cleared" in run.stdout


def test_corrupt_project_facts_are_evicted_and_extracted_again(tmp_path):
    (tmp_path / "helpers.py").write_text("import torch\n\ndef make():\n    return torch.zeros(3)\n")
    (tmp_path / "train.py").write_text(
        "import torch\nfrom helpers import make\n\nx = make().cuda()\ny = torch.zeros(3).cuda()\n"
    )
    first = cli(".", "--output-format", "json", cwd=tmp_path, cache=True)
    path = tmp_path / ".archlint_cache" / cache_files.PROJECT_FILE
    entries = json.loads(path.read_text())["entries"]
    for key in entries["facts"]:
        entries["facts"][key] = {"defs": 5, "imports": "garbage"}  # signed: as a buggy version would write
    path.write_bytes(cache_files.dump(entries))
    again = cli(".", "--output-format", "json", cwd=tmp_path, cache=True)
    assert "project-wide analysis failed" not in again.stderr  # was: "please report this" on every run
    assert json.loads(again.stdout)["diagnostics"] == json.loads(first.stdout)["diagnostics"]
    third = cli(".", "--output-format", "json", cwd=tmp_path, cache=True)
    assert third.stderr == "" and json.loads(third.stdout)["diagnostics"] == json.loads(first.stdout)["diagnostics"]


# Odd file names ------------------------------------------------------------------------------------


@pytest.fixture
def odd_names(tmp_path):
    names = [b"bad\xff.py", b"esc\x1b[31mred.py", b"sp ace#%.py"]
    for name in names:
        (Path(os.fsdecode(tmp_path)) / os.fsdecode(name)).write_text(FINDING)
    return tmp_path


@pytest.mark.parametrize("fmt", ["text", "sarif", "github", "junit", "json"])
def test_a_non_utf8_file_name_crashes_no_reporter(odd_names, fmt):
    run = cli(".", "--output-format", fmt, "-o", "out", "--html", "out.html", cwd=odd_names)
    assert run.returncode == 1, run.stderr  # was: internal error, and a 0-byte report
    text = (odd_names / "out").read_text(encoding="utf-8")
    assert "\x1b" not in text and "\udcff" not in text
    if fmt == "sarif":
        uris = {
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in json.loads(text)["runs"][0]["results"]
        }
        assert uris == {"bad%FF.py", "esc%1B%5B31mred.py", "sp%20ace%23%25.py"}  # RFC 3986
    elif fmt == "junit":
        names = {s.get("name") for s in ET.fromstring(text)}
        assert names == {"bad\\xff.py", "esc\\x1b[31mred.py", "sp ace#%.py"}
    elif fmt in ("text", "github"):
        assert "bad\\xff.py" in text and "esc\\x1b[31mred.py" in text
    elif fmt == "json":
        json.loads(text)
    html = (odd_names / "out.html").read_text(encoding="utf-8")
    assert "bad\\xff.py" in html and "\x1b" not in html


def test_file_names_on_the_terminal_are_escaped(odd_names):
    run = cli(".", cwd=odd_names)
    assert "\x1b" not in run.stdout and "esc\\x1b[31mred.py:2:5: AL402" in run.stdout
    assert "bad\\xff.py:2:5: AL402" in run.stdout


# Report files --------------------------------------------------------------------------------------


def test_output_to_a_folder_or_a_full_device_is_one_line(tmp_path):
    (tmp_path / "a.py").write_text(FINDING)
    (tmp_path / "reports").mkdir()
    run = cli("a.py", "--output-format", "sarif", "-o", "reports", cwd=tmp_path)
    assert (run.returncode, run.stderr) == (
        2,
        "archlint: error: cannot write the report to reports: it is a folder; give a file name\n",
    )
    if os.path.exists("/dev/full"):
        for flags in (("-o", "/dev/full"), ("--html", "/dev/full")):
            run = cli("a.py", "--output-format", "json", *flags, cwd=tmp_path)
            assert run.returncode == 2 and len(run.stderr.splitlines()) == 1, run.stderr
            assert "(No space left on device)" in run.stderr and "internal error" not in run.stderr


def test_output_to_a_stream_still_works(tmp_path):
    (tmp_path / "a.py").write_text(FINDING)
    run = cli("a.py", "--output-format", "json", "-o", "/dev/stdout", cwd=tmp_path)
    assert run.returncode == 1 and json.loads(run.stdout)["diagnostics"][0]["code"] == "AL402"


def test_max_file_size_inf_is_refused_in_one_line(tmp_path):
    (tmp_path / "a.py").write_text(FINDING)
    run = cli("a.py", "--max-file-size", "inf", cwd=tmp_path)
    assert (run.returncode, run.stderr) == (
        2,
        "archlint: error: --max-file-size must be a finite number of MB, got inf; give a size such as 10\n",
    )


# Positions and noqa --------------------------------------------------------------------------------


def test_a_form_feed_at_the_start_of_a_line_keeps_columns_and_fixes_right(tmp_path):
    source = "import torch\n\fx = torch.zeros(3).cuda()\ndef f():\n    x = 1\n\f\f    y = torch.ones(2).cuda()\n"
    (tmp_path / "a.py").write_text(source)
    run = cli("a.py", cwd=tmp_path)
    assert [line.split(" ")[0] for line in run.stdout.splitlines()[:2]] == ["a.py:2:6:", "a.py:5:11:"]  # was 2:5
    diff = cli("a.py", "--diff", cwd=tmp_path).stdout
    assert '-\fx = torch.zeros(3).cuda()\n+\fx = torch.zeros(3, device="cuda")\n' in diff  # one line each
    run = cli("a.py", "--fix", cwd=tmp_path)
    assert "would not parse" not in run.stderr
    assert (tmp_path / "a.py").read_text() == source.replace(".cuda()", "").replace(
        "(3)", '(3, device="cuda")'
    ).replace("(2)", '(2, device="cuda")')


def test_noqa_counts_only_in_comments(tmp_path):
    (tmp_path / "line.py").write_text(
        'import torch\nx = torch.zeros(3).cuda(); s = "# noqa"\ny = torch.zeros(3).cuda()  # noqa: AL402\n'
    )
    (tmp_path / "whole.py").write_text('import torch\ns = "# archlint: noqa"\nx = torch.zeros(3).cuda()\n')
    (tmp_path / "real.py").write_text("import torch\n# archlint: noqa\nx = torch.zeros(3).cuda()\n")
    run = cli(".", "--output-format", "json", cwd=tmp_path)
    found = sorted((Path(d["file"]).name, d["line"]) for d in json.loads(run.stdout)["diagnostics"])
    assert found == [("line.py", 2), ("whole.py", 3)]  # was: both silenced by the strings
