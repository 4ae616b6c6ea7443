"""Issue 39 item 12: the README's example outputs are archlint's output today. Each marked region
(`<!-- readme-example: NAME -->`) is what benchmarks/readme_examples.py generates; the cheap ones
(static counts and device-spec estimates: deterministic) are checked on every run, the --train
fit search at batch 512 under `-m slow`. After a change that moves a number:
`PYTHONPATH=. python benchmarks/readme_examples.py` rewrites them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("torchvision")

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("readme_examples", REPO / "benchmarks" / "readme_examples.py")
examples = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("readme_examples", examples)  # dataclasses look their module up
_spec.loader.exec_module(examples)


def _check(name: str) -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start, end = examples.regions(text)[name]
    assert text[start:end] == examples.region(name, examples.EXAMPLES[name]), (
        f"README example {name!r} is stale: run `PYTHONPATH=. python benchmarks/readme_examples.py {name}`"
    )


def test_every_example_has_a_region_and_every_region_an_example():
    marked = examples.regions((REPO / "README.md").read_text(encoding="utf-8"))
    assert sorted(marked) == sorted(examples.EXAMPLES)


@pytest.mark.parametrize("name", sorted(n for n, e in examples.EXAMPLES.items() if e.cheap))
def test_cheap_examples_match(name):
    _check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(n for n, e in examples.EXAMPLES.items() if not e.cheap))
def test_slow_examples_match(name):
    _check(name)
