"""Issue 39 item 4: a CPU user reads the CPU-build line before any command that pulls torch's CUDA
build, and the `models` extra declares what the first model run needs (numpy)."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[2]


def _commands(text: str) -> list[str]:
    """The lines of the README's bash blocks, in reading order."""
    return [line for block in re.findall(r"```bash\n(.*?)```", text, re.S) for line in block.splitlines()]


def test_the_cpu_build_line_comes_before_the_first_install():
    lines = _commands((REPO / "README.md").read_text(encoding="utf-8"))
    installs = [i for i, line in enumerate(lines) if line.startswith("pip install")]
    cpu = [i for i, line in enumerate(lines) if "download.pytorch.org/whl/cpu" in line]
    assert cpu and installs
    assert cpu[0] == installs[0], lines[installs[0]]  # the very first pip command a reader meets
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert text.index("whl/cpu") < text.index("pip install -e '.[models]'")


def test_the_models_extra_declares_numpy():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = [re.split(r"[<>=!\[; ]", r)[0].lower() for r in project["optional-dependencies"]["models"]]
    assert {"torch", "numpy", "networkx"} <= set(names)
