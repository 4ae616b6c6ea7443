"""The checks the project runs on itself, configured in pyproject.toml: ruff's lint, ruff's format
check and mypy over the package. Each runs as `python -m TOOL` from the repository root and fails
with the tool's own output. The dev extra installs both tools (skipped, saying so, without them)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # the dependency pyproject.toml declares there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _tool(name: str, *args: str, timeout: float = 120, stdin: str | None = None) -> subprocess.CompletedProcess:
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]')")
    return subprocess.run(
        [sys.executable, "-m", name, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, input=stdin
    )


def _clean(proc: subprocess.CompletedProcess, what: str) -> None:
    assert proc.returncode == 0, f"{what} (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}"


def test_ruff_lint_is_clean():
    _clean(_tool("ruff", "check", "."), "ruff check")


def test_ruff_lint_uses_the_project_rules():
    # the settings are read (not an empty selection): a planted unused import and a bare except are found
    proc = _tool(
        "ruff",
        "check",
        "--stdin-filename",
        "archlint/planted.py",
        "-",
        stdin="import os\n\ntry:\n    pass\nexcept:\n    pass\n",
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "F401" in proc.stdout and "E722" in proc.stdout, proc.stdout


def test_ruff_lint_leaves_deliberately_bad_inputs_alone():
    # the code fixtures and evaluation projects are archlint's input: their text is what it is tested on
    proc = _tool("ruff", "check", "--show-files", ".")
    listed = proc.stdout
    assert "tests/fixtures/" not in listed and "benchmarks/eval_data/" not in listed
    assert "archlint/cli.py" in listed and "tests/test_habits.py" in listed


def test_ruff_format_is_clean():
    _clean(_tool("ruff", "format", "--check", "--diff", "."), "ruff format --check")


def test_mypy_is_clean():
    # the package only, three tiers (pyproject.toml [tool.mypy]); a cold run reads torch's annotations
    _clean(_tool("mypy", timeout=1800), "mypy")


def _tier(key: str) -> set[str]:
    return {m for o in PYPROJECT["tool"]["mypy"]["overrides"] if o.get(key) for m in o["module"]}


def test_mypy_tiers_name_modules_that_exist_once():
    strict, skipped = _tier("disallow_untyped_defs"), _tier("ignore_errors")
    assert strict and not strict & skipped, sorted(strict & skipped)
    for module in strict | skipped:
        path = ROOT / module.replace(".", "/")
        assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), f"{module}: no such module"
