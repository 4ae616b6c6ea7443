"""Issue 39 item 13: the sub-commands agree with each other and with `archlint` itself: -q and
--help everywhere, JSON where --output-format json is given, every rule in the README, rule
summaries printed as written, numbers never in scientific notation, and the HTML's locations as
the text's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "tests" / "trace" / "fixtures" / "a100_alexnet_inference.json.gz"


def archlint(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "archlint", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
    )


@pytest.mark.parametrize("command", ["trace", "loader", "rules"])
def test_every_subcommand_lists_quiet(command):
    assert "-q, --quiet" in archlint(command, "--help").stdout


def test_trace_takes_quiet():
    done = archlint("trace", str(TRACE), "-q")
    assert done.returncode in (0, 1), done.stderr
    assert "AL5" in done.stdout or "step" in done.stdout


@pytest.mark.parametrize("command", [["device-specs"], ["rule"], ["rules"], ["trace"], ["loader"]])
def test_help_of_every_subcommand_exits_0(command):
    done = archlint(*command, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: archlint " + command[0]) and not done.stderr


def test_rule_help_is_not_a_rule_and_a_bad_code_still_says_so():
    assert "unknown rule" not in archlint("rule", "--help").stdout
    bad = archlint("rule", "AL999")
    assert bad.returncode == 2 and "AL999" in bad.stderr


def test_rules_as_json():
    done = archlint("rules", "--output-format", "json")
    assert done.returncode == 0, done.stderr
    rules = json.loads(done.stdout)["rules"]
    codes = [r["code"] for r in rules]
    assert "AL101" in codes and "AL611" in codes and "AL501" in codes
    assert set(rules[0]) == {"code", "name", "scope", "severity", "fix", "summary"}


def test_rules_print_summaries_as_written():
    """`x[mask]` in AL112's summary was eaten as rich markup."""
    done = archlint("rules")
    assert "x[mask]" in done.stdout


def test_help_names_every_what_if():
    from archlint.whatif_names import NAMES

    text = " ".join(archlint("--help").stdout.split())
    listed = re.search(r"all \(default\) or some of ([\w,\- ]+)", text).group(1).replace(" ", "").replace("-,", ",")
    help_text = text.replace("- ", "-").replace(" ", "")
    for name in NAMES:
        assert name in help_text, name
    assert "sdpa" in listed


def test_every_rule_is_in_the_readme():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    codes = sorted(p.name.split("-")[0] for p in (REPO / "rules").glob("AL*.md"))
    assert codes and [c for c in codes if c not in readme] == []


@pytest.mark.parametrize(
    "value,text",
    [
        (12934.2, "12,934"),
        (636.4, "636"),
        (2280.0, "2,280"),
        (6.364, "6.36"),
        (0.0001234, "0.000123"),
        (999.6, "1,000"),
        (0.0, "0"),
    ],
)
def test_numbers_never_in_scientific_notation(value, text):
    from archlint.units import human_bytes, significant

    assert significant(value) == text
    assert "e" not in human_bytes(999.7) and "e+" not in significant(1.29e4)


def test_messages_with_long_times_are_plain():
    from archlint.diagnostics import Price
    from archlint.report.wording import price_bits

    price = Price(saving_ms=12934.0, saving_share=0.5, whole="the model", basis="measured", alternative="x")
    bits = " ".join(price_bits(_with_price(price)))
    assert "12,934 ms" in bits and "e+" not in bits  # was "saves ≈ 1.29e+04 ms"


def test_a_latency_budget_verdict_is_plain(tmp_path):
    done = archlint(
        "nets.py:TinyNet",
        "--input-shape",
        "1,3,32,32",
        "--device-spec",
        "t4",
        "--max-latency-ms",
        "0.0000001",
        "--output-format",
        "json",
        "--exit-zero",
        cwd=REPO / "examples",
    )
    gate = json.loads(done.stdout)["gate"]
    assert gate and all("e-" not in g["message"] and "e+" not in g["message"] for g in gate), gate


def _with_price(price):
    from archlint.diagnostics import Diagnostic, Severity

    return Diagnostic(code="AL101", severity=Severity.WARNING, message="m", target="t", price=price)


def test_html_locations_are_the_texts(tmp_path):
    html = tmp_path / "r.html"
    done = archlint(
        "nets.py:TinyNet",
        "--input-shape",
        "1,3,32,32",
        "--show-info",
        "--html",
        str(html),
        "--exit-zero",
        cwd=REPO / "examples",
    )
    assert done.returncode == 0, done.stderr
    page = html.read_text(encoding="utf-8")
    assert "nets.py:" in done.stdout and str(REPO) not in done.stdout
    assert str(REPO) not in page  # was the finding's absolute file
