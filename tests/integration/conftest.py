from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory) -> Path:
    """archlint's dependencies and build backend, fetched from the package index once. Installs
    in these tests then run with --no-index from here: quick, and proof that an install needs
    nothing beyond libcst and rich (torch is not here, so a dependency on it would fail)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    wanted = [*project["build-system"]["requires"], *project["project"]["dependencies"]]
    assert not [w for w in wanted if w.startswith("torch")], "the code linter's dependencies must not pull torch"
    wheels = tmp_path_factory.mktemp("wheelhouse")
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(wheels), *wanted], check=True, timeout=600)
    assert not list(wheels.glob("torch-*")) and list(wheels.glob("libcst-*"))
    return wheels


@pytest.fixture(scope="session")
def offline_env(wheelhouse: Path) -> dict[str, str]:
    """Environment for processes whose pip installs only from the wheelhouse."""
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse)}
    for name in ("VIRTUAL_ENV", "PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL", "PIP_CONSTRAINT", "PYTHONPATH"):
        env.pop(name, None)
    return env
