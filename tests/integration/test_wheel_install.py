"""The built wheel works on its own: installed into a fresh virtual environment (no system site
packages, nothing but the wheel and libcst/rich with their dependencies), `archlint rule AL101`
prints the page shipped inside the wheel and `archlint train.py` lints code, without torch."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed(tmp_path_factory, offline_env) -> Path:
    """bin/ of a fresh venv with the wheel built from this checkout."""
    root = tmp_path_factory.mktemp("wheel")
    dist = root / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(REPO)],
        check=True,
        env=offline_env,
        timeout=600,
    )
    (wheel,) = dist.glob("archlint-*.whl")
    env_dir = root / "venv"
    venv.create(env_dir, with_pip=True, system_site_packages=False)
    bin_dir = env_dir / "bin"
    subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "-q", str(wheel)], check=True, env=offline_env, timeout=600
    )
    return bin_dir


def run(installed: Path, *args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(installed / "archlint"), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


def test_the_environment_is_isolated(installed, offline_env):
    probe = "import importlib.util as u, archlint.registry as r; print(u.find_spec('torch'), r.rules_dir())"
    out = subprocess.run(
        [str(installed / "python"), "-c", probe], capture_output=True, text=True, check=True, env=offline_env, cwd="/"
    ).stdout.split()
    assert out[0] == "None", "torch must not be importable in the fresh environment"
    assert out[1].endswith("site-packages/archlint/_rules"), "rule pages must come from the wheel"


def test_rule_page_from_the_wheel(installed, offline_env, tmp_path):
    result = run(installed, "rule", "AL101", cwd=tmp_path, env=offline_env)
    assert result.returncode == 0, result.stderr
    (page,) = (REPO / "rules").glob("AL101-*.md")
    assert result.stdout.strip() == page.read_text().split("---", 2)[2].strip()

    listing = run(installed, "rules", cwd=tmp_path, env={**offline_env, "COLUMNS": "200"})
    assert listing.returncode == 0 and "AL101" in listing.stdout and "AL301" in listing.stdout


def test_code_lint_from_the_wheel(installed, offline_env, tmp_path):
    (tmp_path / "train.py").write_text(
        textwrap.dedent("""\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(dataset, batch_size=64, num_workers=4)
        for x, y in loader:
            x = x.cuda(non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(x).sum()
            loss.backward()
    """)
    )
    result = run(installed, "train.py", "--output-format", "json", cwd=tmp_path, env=offline_env)
    assert result.returncode == 1, result.stderr
    import json

    codes = [d["code"] for d in json.loads(result.stdout)["diagnostics"]]
    assert "AL301" in codes
