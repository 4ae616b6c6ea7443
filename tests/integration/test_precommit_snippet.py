"""Issue 39 item 5: the README's pre-commit snippets work as written from a clone (no placeholder
URL, no tag that does not exist), and the archlint-models hook in a repository without
[[tool.archlint.models]] passes, saying so and naming the file it read (or that there is none)."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from tests.integration.test_precommit_hook import FIXED_SCRIPT, GIT_ENV, PACKAGE_FILES, SLOW_SCRIPT, git

REPO = Path(__file__).resolve().parents[2]


def _snippets() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## pre-commit\n") :]
    section = section[: section.index("\n## ", 1)]
    return re.findall(r"```yaml\n(.*?)```", section, re.S)


def _archlint_on_path(tmp_path: Path) -> dict[str, str]:
    """`archlint` on PATH runs this checkout (the console script of an install would run another)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "archlint"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m archlint "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, **GIT_ENV, "PRE_COMMIT_HOME": str(tmp_path / "home"), "NO_COLOR": "1", "PYTHONPATH": str(REPO)}
    env["PATH"] = f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return env


def _models_hook(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "archlint", "--models", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
    )


def test_models_hook_without_a_pyproject_passes_and_says_there_is_none(tmp_path):
    done = _models_hook(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "no pyproject.toml with a [tool.archlint] table" in done.stderr and "nothing to analyze" in done.stderr


def test_models_hook_names_the_file_it_read(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.archlint]\nselect = ["AL2"]\n')
    done = _models_hook(tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"{tmp_path / 'pyproject.toml'} has no [[tool.archlint.models]]" in done.stderr
    # a file named with --config is the one named
    other = tmp_path / "other.toml"
    other.write_text('[tool.archlint]\nselect = ["AL2"]\n')
    done = _models_hook(tmp_path, "--config", str(other))
    assert done.returncode == 0 and f"{other} has no [[tool.archlint.models]]" in done.stderr


def test_the_snippets_name_no_placeholder_and_no_tag():
    local, clone = _snippets()[:2]
    assert "repo: local" in local
    assert "v0.1.0" not in "".join(_snippets()) and "github.com/archlint" not in "".join(_snippets())
    assert re.search(r"rev: [0-9a-f]{40}", clone) and "rev-parse HEAD" in clone


def test_the_local_snippet_runs_as_written(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q")
    (project / ".pre-commit-config.yaml").write_text(_snippets()[0])
    (project / "train.py").write_text(SLOW_SCRIPT)
    git(project, "add", ".")
    env = _archlint_on_path(tmp_path)
    argv = [sys.executable, "-m", "pre_commit", "run", "--all-files", "--verbose", "--color=never"]
    first = subprocess.run(argv, cwd=project, capture_output=True, text=True, env=env, timeout=600)
    out = first.stdout + first.stderr
    assert first.returncode == 1, out
    assert "AL301" in out and "train.py:6:" in out
    # the models hook has nothing configured here: it passes and says why
    assert re.search(r"archlint \(models\)\.+Passed", out), out
    assert "nothing to analyze" in out

    (project / "train.py").write_text(FIXED_SCRIPT)
    git(project, "add", "train.py")
    second = subprocess.run(argv, cwd=project, capture_output=True, text=True, env=env, timeout=600)
    assert second.returncode == 0, second.stdout + second.stderr


def test_the_clone_snippet_runs_with_the_commit_it_names(tmp_path, offline_env):
    """`repo:` a clone, `rev:` its commit (what `git rev-parse HEAD` prints), as the README says."""
    clone = tmp_path / "archlint"
    clone.mkdir()
    for name in PACKAGE_FILES:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, clone / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif src.exists():
            shutil.copy2(src, clone / name)
    git(clone, "init", "-q")
    git(clone, "add", ".")
    git(clone, "commit", "-q", "-m", "snapshot")
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True, check=True
    ).stdout.strip()
    snippet = _snippets()[1]
    snippet = re.sub(r"repo: \S+", f"repo: {clone}", snippet, count=1)
    snippet = re.sub(r"rev: [0-9a-f]{40}", f"rev: {sha}", snippet, count=1)
    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q")
    (project / ".pre-commit-config.yaml").write_text(snippet)
    (project / "train.py").write_text(SLOW_SCRIPT)
    git(project, "add", ".")
    env = {**_archlint_on_path(tmp_path), **{k: v for k, v in offline_env.items() if k.startswith("PIP_")}}
    done = subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--all-files", "--color=never"],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1 and "AL301" in out, out
    assert re.search(r"archlint \(models\)\.+Passed", out), out
