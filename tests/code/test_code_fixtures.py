"""Realistic training scripts with exact expected findings (`line:col CODE`, one per line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from archlint.code.engine import lint_text

FIXTURES = Path(__file__).parents[1] / "fixtures" / "code"
SCRIPTS = sorted(FIXTURES.glob("*.py"))


def test_fixture_set_is_complete():
    assert {p.stem for p in SCRIPTS} >= {"cifar_train", "imagenet_ddp", "loader_kwargs", "inference"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_expected_findings(script):
    expected = script.with_suffix(".expected").read_text().split("\n")
    found = [f"{d.line}:{d.column} {d.code}" for d in lint_text(script.read_text(), str(script))]
    assert found == [line for line in expected if line.strip()]
