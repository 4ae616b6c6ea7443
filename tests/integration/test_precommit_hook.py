"""The real pre-commit runs the `archlint` hook from this repository (`pre-commit try-repo`) on a
temporary git repository: a staged training script with a finding fails the commit and prints the
finding; the fixed script passes; with no Python file staged the hook is skipped.

pre-commit builds the hook's virtualenv from scratch with `pip install .` (libcst and rich from
PyPI). The tests fetch those once into a wheelhouse (conftest.py) and let pre-commit install from it with
--no-index: each hook install then takes seconds, and it proves the hook's environment needs
nothing beyond libcst and rich: torch is not in the wheelhouse, so a dependency on it would fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# What `pip install .` needs from this repository (the sdist's contents).
PACKAGE_FILES = ("archlint", "rules", "pyproject.toml", "README.md", ".pre-commit-hooks.yaml", "LICENSE")

SLOW_SCRIPT = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader


    def main(dataset, model):
        loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4)
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(x).sum()
            loss.backward()
""")
FIXED_SCRIPT = SLOW_SCRIPT.replace("num_workers=4)", "num_workers=4, pin_memory=True)")

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env={**os.environ, **GIT_ENV})


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> Path:
    """This repository's working tree as a git repository of its own: try-repo reads commits (and
    a dirty repository's tracked changes), so a copy tests exactly the code in front of us."""
    repo = tmp_path_factory.mktemp("hook-repo")
    for name in PACKAGE_FILES:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, repo / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif src.exists():
            shutil.copy2(src, repo / name)
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "snapshot")
    return repo


@pytest.fixture
def project(tmp_path) -> Path:
    git(tmp_path, "init", "-q")
    (tmp_path / "README.md").write_text("# demo\n")
    return tmp_path


def try_repo(project: Path, hook_repo: Path, offline_env: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**offline_env, **GIT_ENV, "PRE_COMMIT_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(hook_repo), "archlint", "--verbose", "--color=never"],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def test_hook_fails_on_a_staged_finding_and_passes_after_the_fix(project, hook_repo, offline_env, tmp_path):
    (project / "train.py").write_text(SLOW_SCRIPT)
    git(project, "add", "train.py", "README.md")
    first = try_repo(project, hook_repo, offline_env, tmp_path)
    out = first.stdout + first.stderr
    assert first.returncode == 1, out
    assert "train.py:6:" in out and "AL301" in out, out  # the DataLoader line, the pin_memory rule
    assert "Failed" in out

    (project / "train.py").write_text(FIXED_SCRIPT)
    git(project, "add", "train.py")
    second = try_repo(project, hook_repo, offline_env, tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "Passed" in second.stdout


def test_hook_is_skipped_without_staged_python_files(project, hook_repo, offline_env, tmp_path):
    (project / "notes.txt").write_text("nothing to lint\n")
    git(project, "add", "notes.txt", "README.md")
    result = try_repo(project, hook_repo, offline_env, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(no files to check)" in result.stdout and "Skipped" in result.stdout


MODELS_CONFIG = """\
[tool.archlint]
select = ["AL201"]

[[tool.archlint.models]]
target = "nets.py:TinyNet"
input-shapes = [[1, 3, 56, 56]]
budgets = {{ max-flops = {budget} }}
"""


def test_models_hook_runs_the_configured_models_with_the_users_torch(project, hook_repo, offline_env, tmp_path):
    """archlint-models is a `system` hook: no install, it runs the archlint (and torch) of the
    environment pre-commit is started from; here, the one running these tests."""
    pytest.importorskip("torch")
    shutil.copy(REPO / "examples" / "nets.py", project / "nets.py")
    (project / "pyproject.toml").write_text(MODELS_CONFIG.format(budget="2e7"))
    git(project, "add", "nets.py", "pyproject.toml")
    env = {**offline_env, **GIT_ENV, "PRE_COMMIT_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    argv = [
        sys.executable,
        "-m",
        "pre_commit",
        "try-repo",
        str(hook_repo),
        "archlint-models",
        "--verbose",
        "--color=never",
    ]
    over = subprocess.run(argv, cwd=project, capture_output=True, text=True, env=env, timeout=600)
    assert over.returncode == 1, over.stdout + over.stderr
    assert "max-flops" in over.stdout and "exceeds budget 20M FLOPs" in over.stdout

    (project / "pyproject.toml").write_text(MODELS_CONFIG.format(budget="1e8"))
    git(project, "add", "pyproject.toml")
    under = subprocess.run(argv, cwd=project, capture_output=True, text=True, env=env, timeout=600)
    assert under.returncode == 0, under.stdout + under.stderr
