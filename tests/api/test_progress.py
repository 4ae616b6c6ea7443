"""Progress shows on a terminal and nowhere else (pipes, CI, --quiet, JSON to stdout)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
REPO = Path(__file__).resolve().parents[2]
ARGS = ["examples/nets.py:TinyNet", "--input-shape", "1,3,56,56", "--latency", "--warmup", "2", "--repeat", "40"]


def _on_terminal(*extra: str, env: dict | None = None, args=ARGS) -> str:
    """Run archlint with stdout and stderr on a pseudo-terminal; everything it drew."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "archlint", *args, *extra],
        stdout=follower,
        stderr=follower,
        cwd=REPO,
        env=env or {k: v for k, v in os.environ.items() if k != "CI"},
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=300)
    os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace")


def test_progress_on_a_terminal():
    drawn = _on_terminal()
    assert "analyzing examples/nets.py:TinyNet" in drawn
    # every stage says what it does (issue 25 item 6: pricing sat under an unlabelled "0/?")
    assert "timing each op and the model end to end" in drawn and "checking rules and pricing findings" in drawn
    assert "0/?" not in drawn


def test_lint_progress_on_a_terminal(tmp_path):
    for i in range(12):
        (tmp_path / f"train{i}.py").write_text("import torch\nx = torch.zeros(3).cuda()\n")
    drawn = _on_terminal(args=[str(tmp_path), "--no-cache", "-j", "2"])
    assert "linting files" in drawn and "Found 12 findings" in drawn


def test_no_progress_when_quiet_in_ci_or_json():
    assert "timing each op" not in _on_terminal("--quiet")
    assert "timing each op" not in _on_terminal(env={**os.environ, "CI": "true"})
    assert "timing each op" not in _on_terminal("--output-format", "json")  # stdout is for the JSON


def test_no_progress_when_piped():
    proc = subprocess.run(
        [sys.executable, "-m", "archlint", *ARGS],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if k != "CI"},
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert "timing each op" not in proc.stderr + proc.stdout
