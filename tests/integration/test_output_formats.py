"""SARIF (validated against the published 2.1.0 schema), GitHub workflow commands and JUnit XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from archlint.config import Settings
from archlint.diagnostics import Applicability, Diagnostic, Edit, Fix, Price, Severity
from archlint.registry import catalog
from archlint.report import github, junit, sarif
from archlint.result import GateResult, RunResult

SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("import torch\nloader = DataLoader(ds, pin_memory=False)\n")
    (tmp_path / "nets.py").write_text(
        "import torch\n\n\nclass Block(torch.nn.Module):\n    pass\n\n\nclass Net(torch.nn.Module):\n    pass\n"
    )
    return tmp_path


@pytest.fixture
def result(project: Path) -> RunResult:
    code = Diagnostic(
        code="AL301",
        message="DataLoader without pin_memory, 50% slower H2D copies",
        file=str(project / "src" / "train.py"),
        line=2,
        column=10,
        end_line=2,
        end_column=40,
        fix=Fix("set pin_memory=True", Applicability.SAFE, (Edit(2, 35, 2, 40, "True"),)),
    )
    # A model finding the rules located at its module's class, and one they could not locate.
    located = Diagnostic(
        code="AL101",
        message="conv 16→256 channels: MAC 2.1× its lower bound, 100% more",
        severity=Severity.WARNING,
        file=str(project / "nets.py"),
        line=4,
        node="blocks_0_conv",
        module="blocks.0.conv",
        target="nets.py:Net",
        evidence={"c1": 16, "c2": 256},
        price=Price.static("conv 64→64", mac_bytes_saved=123456, model_mac_bytes=493824),
    )
    unlocated = Diagnostic(
        code="AL201",
        message="unused submodule head2",
        severity=Severity.INFO,
        node="head2",
        module="head2",
        target="nets.py:Net",
    )
    gate = [GateResult("nets.py:Net", "max-flops", False, "1.2M FLOPs exceeds budget 1M FLOPs by 20.0%", 1.2e6, 1e6)]
    return RunResult(diagnostics=[code, located, unlocated], gate=gate)


def test_sarif_validates_against_the_sarif_2_1_0_schema(project, result, monkeypatch):
    monkeypatch.chdir(project)
    log = json.loads(sarif.render(result, Settings(root=project)))
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    assert log["version"] == "2.1.0"


def test_sarif_lists_every_rule_with_its_page_as_help(project, result, monkeypatch):
    monkeypatch.chdir(project)
    run = json.loads(sarif.render(result, Settings(root=project)))["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == sorted(catalog())
    for r in rules:
        info = catalog()[r["id"]]
        assert r["help"]["text"] == info.body and r["shortDescription"]["text"] == info.summary
        assert r["defaultConfiguration"]["level"] == info.severity.sarif_level
        if "## What it does" in info.body:  # the full description is the page's first real paragraph
            section = " ".join(info.body.split("## What it does", 1)[1].split())
            assert section.startswith(r["fullDescription"]["text"])
    for res in run["results"]:
        if res["ruleId"] in catalog():
            assert rules[res["ruleIndex"]]["id"] == res["ruleId"]


def test_sarif_locations_are_relative_and_model_findings_point_at_the_class(project, result, monkeypatch):
    monkeypatch.chdir(project / "src")  # paths are relative to the project root, not the cwd
    run = json.loads(sarif.render(result, Settings(root=project)))["runs"][0]
    by_rule = {r["ruleId"]: r for r in run["results"]}
    code = by_rule["AL301"]["locations"][0]["physicalLocation"]
    assert code["artifactLocation"]["uri"] == "src/train.py"
    assert code["region"] == {"startLine": 2, "startColumn": 10, "endLine": 2, "endColumn": 40}
    assert by_rule["AL301"]["fixes"][0]["artifactChanges"][0]["replacements"][0]["insertedContent"]["text"] == "True"

    located = by_rule["AL101"]["locations"][0]
    assert located["physicalLocation"]["artifactLocation"]["uri"] == "nets.py"
    assert located["physicalLocation"]["region"]["startLine"] == 4
    assert located["logicalLocations"][0]["name"] == "blocks.0.conv"
    # No location from the rule: fall back to the line of `class Net` in the target's file.
    fallback = by_rule["AL201"]["locations"][0]["physicalLocation"]
    assert fallback["artifactLocation"]["uri"] == "nets.py" and fallback["region"]["startLine"] == 8
    assert by_rule["AL201"]["level"] == "note"
    assert (
        "target's class" in by_rule["AL201"]["properties"]["location"]
        and "location" not in by_rule["AL101"]["properties"]
    )
    # Stable ids for code scanning: the same finding, the same fingerprint, whatever its line.
    assert all(len(r["partialFingerprints"]["archlintFingerprint/v1"]) == 20 for r in run["results"])
    assert "max-flops" in run["invocations"][0]["toolExecutionNotifications"][0]["message"]["text"]


def test_github_workflow_commands(project, result, monkeypatch):
    monkeypatch.chdir(project)
    lines = github.render(result, Settings(root=project)).splitlines()
    assert (
        "::warning file=src/train.py,line=2,col=10,endLine=2,endColumn=40,title=archlint AL301::"
        "AL301 DataLoader without pin_memory, 50%25 slower H2D copies" in lines
    )
    assert (
        "::warning file=nets.py,line=4,title=archlint AL101::AL101 [blocks.0.conv] conv 16→256 channels: "
        "MAC 2.1× its lower bound, 100%25 more  [saves 123 KB MAC, 25.0%25 of model MAC (static); vs conv 64→64]"
        in lines
    )
    assert (
        "::error title=archlint gate%3A max-flops::nets.py:Net: max-flops: 1.2M FLOPs exceeds budget 1M FLOPs by 20.0%25"
        in lines
    )
    assert len(lines) == 3  # the info finding is hidden without --show-info
    shown = github.render(result, Settings(root=project, show_info=True)).splitlines()
    assert "::notice file=nets.py,line=8,title=archlint AL201::AL201 [head2] unused submodule head2" in shown


def test_junit_one_testcase_per_finding_grouped_by_file(project, result, monkeypatch):
    monkeypatch.chdir(project)
    root = ET.fromstring(junit.render(result, Settings(root=project)))
    assert root.tag == "testsuites" and root.get("tests") == "3" and root.get("failures") == "3"
    suites = {s.get("name"): s for s in root}
    assert set(suites) == {"src/train.py", "nets.py:Net", "archlint gate"}
    case = suites["src/train.py"].find("testcase")
    assert case.get("name") == "archlint.AL301" and case.get("line") == "2"
    assert case.find("failure").text.startswith("line 2, col 10; DataLoader")
    assert suites["nets.py:Net"].get("failures") == "1" and suites["nets.py:Net"].get("tests") == "1"
    # With --show-info the info finding is a skipped test case: shown, never a failure.
    root = ET.fromstring(junit.render(result, Settings(root=project, show_info=True)))
    suites = {s.get("name"): s for s in root}
    assert suites["nets.py:Net"].get("failures") == "1" and suites["nets.py:Net"].get("tests") == "2"
    assert suites["nets.py:Net"].find("testcase/skipped").get("message") == "unused submodule head2"


def test_junit_with_nothing_to_report_has_one_passing_case(project):
    root = ET.fromstring(junit.render(RunResult(), Settings(root=project)))
    assert root.get("failures") == "0" and root.find("testsuite/testcase").get("name") == "No errors found"
