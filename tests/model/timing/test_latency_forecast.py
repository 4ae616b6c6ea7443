"""--latency says up front how long it will take, from a first timed pass, and where that passes
--latency-budget, where it will stop and what gives a figure sooner: the static estimate
(--device-spec) or fewer --repeat (issue 39, item 15)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from archlint import progress
from archlint.cli import main
from archlint.config import Settings
from archlint.model.timing.budget import Budget
from archlint.model.timing.measure import forecast

MODELS = str(Path(__file__).resolve().parents[2] / "whatif" / "models.py")


def test_within_the_budget_it_only_says_how_long():
    budget = Budget(120.0)
    with progress.shown(Settings(quiet=True)):
        assert forecast(0.1, 4, 50, budget, "m.py:Net") == 0.1 * 54
    assert budget.notes() == []


def test_past_the_budget_it_says_where_it_stops_and_offers_the_static_estimate(capsys, monkeypatch):
    monkeypatch.setattr(progress, "command_line", True)  # as archlint.cli sets it
    budget = Budget(120.0)  # timing gets half: 60 s
    with progress.shown(Settings()):
        expected = forecast(2.0, 4, 50, budget, "m.py:Net")  # 108 s of passes
    assert expected == 108.0
    err = capsys.readouterr().err
    assert "about 1 min 48 s (an estimate from a first timed pass of 2000 ms)" in err
    note = budget.notes()[0]
    assert "stops after about 26 of --repeat 50 passes" in note  # 60 s / 2 s = 30 rounds, 4 of them warm-up
    assert "--device-spec NAME (no --latency)" in note and "--repeat 26 to fit the budget" in note
    assert "archlint: at about 1 min 48 s it would pass" in err


def test_the_cli_says_it_before_timing_and_not_under_quiet(capsys):
    args = [
        f"{MODELS}:ConvBN",
        "--input-shape",
        "2,3,16,16",
        "--latency",
        "--warmup",
        "2",
        "--repeat",
        "5",
        "--output-format",
        "json",
    ]
    assert main(args) in (0, 1)
    err = capsys.readouterr().err
    said = re.search(
        r"archlint: --latency on .*ConvBN: 5 timed passes of its ops and of the whole model, "
        r"about \d+ s \(an estimate from a first timed pass of \d+ ms\)",
        err,
    )
    assert said, err
    assert main([*args, "-q"]) in (0, 1)
    out = capsys.readouterr()
    assert "archlint: --latency" not in out.err and json.loads(out.out)["models"]


def test_library_callers_see_nothing(capsys, monkeypatch):
    monkeypatch.setattr(progress, "command_line", False)  # the API
    with progress.shown(Settings()):
        forecast(2.0, 4, 50, Budget(120.0), "m.py:Net")
    assert capsys.readouterr().err == ""
