"""benchmarks/lint_speed.py runs from the checkout's root as from anywhere else: its check of which
archlint each compared tree imports must not see the checkout's own (`python -c` puts the folder it
starts in first on sys.path)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def _bench(monkeypatch):
    spec = importlib.util.spec_from_file_location("lint_speed", ROOT / "benchmarks" / "lint_speed.py")
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "lint_speed", bench)  # its dataclasses look their module up
    spec.loader.exec_module(bench)
    return bench


def test_a_tree_imports_its_own_archlint_from_the_checkout_root(tmp_path, monkeypatch):
    tree = tmp_path / "before-tree"
    (tree / "archlint").mkdir(parents=True)
    (tree / "archlint" / "__init__.py").write_text("")
    scratch = tmp_path / "work"
    scratch.mkdir()
    monkeypatch.chdir(ROOT)  # where the old script found the checkout's archlint instead
    landed = _bench(monkeypatch).imported_from(tree, scratch)
    assert landed == str(tree / "archlint" / "__init__.py")
