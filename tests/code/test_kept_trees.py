"""A file linted again in its project context, in the same process, takes the tree its own lint
parsed (engine.KeptTrees) instead of parsing it again, and finds exactly what a fresh parse finds;
a changed text, a file past the budget, or a run whose first pass ran in workers parses again."""

from __future__ import annotations

import shutil
from pathlib import Path

import libcst as cst
import pytest

from archlint.code import chunks, engine, lint
from archlint.code.discover import discover
from archlint.config import Settings

ROOT = Path(__file__).parents[2]
PROJECT = ROOT / "tests" / "fixtures" / "code" / "projects" / "trainer_class"


def _count_parses(monkeypatch) -> list[str]:
    parsed: list[str] = []
    original = cst.parse_module
    monkeypatch.setattr(cst, "parse_module", lambda text, *a, **k: parsed.append(text) or original(text, *a, **k))
    original_chunked = chunks.parse
    monkeypatch.setattr(chunks, "parse", lambda text, plan: parsed.append(text) or original_chunked(text, plan))
    return parsed


def _lint(folder: Path, jobs: int):
    settings = Settings(root=folder, jobs=jobs, cache=False)
    return lint.lint_files(discover([folder]), settings, [folder])


@pytest.fixture
def project(tmp_path):
    shutil.copytree(PROJECT, tmp_path / "p", ignore=shutil.ignore_patterns("expected.txt"))
    return tmp_path / "p"


def test_a_file_linted_again_in_context_is_parsed_once(project, monkeypatch):
    parsed = _count_parses(monkeypatch)
    linted = _lint(project, 1)
    assert linted.relinted > 0
    assert len(parsed) == len(set(parsed))  # no text parsed twice
    monkeypatch.setattr(lint, "KEEP_CHARS", 0)  # nothing kept: the files in context are parsed again
    parsed.clear()
    unkept = _lint(project, 1)
    again = len(parsed) - len(set(parsed))
    assert again == linted.relinted
    assert [d.to_dict() for d in unkept.diagnostics] == [d.to_dict() for d in linted.diagnostics]


def test_a_kept_tree_is_only_taken_for_the_same_text():
    kept = engine.KeptTrees(100)
    module = cst.parse_module("x = 1\n")
    kept.keep("a.py", "x = 1\n", module, None)
    assert kept.take("a.py", "x = 2\n") is None and kept.chars == 0  # changed since: forgotten
    kept.keep("a.py", "x = 1\n", module, None)
    assert kept.take("a.py", "x = 1\n") == (module, None)
    kept.keep("big.py", "y" * 101, module, None)  # past the budget
    assert kept.trees == {}


@pytest.mark.parametrize("jobs,in_process", [(1, True), (2, False)])
def test_trees_are_kept_only_when_the_first_pass_runs_here(project, monkeypatch, jobs, in_process):
    budgets = []
    original = lint.lint_many

    def lint_many(items, n, work, died):
        budgets.append(engine._KEPT.budget)  # what a lint in this process would keep up to
        return original(items, n, work, died)

    monkeypatch.setattr(lint, "lint_many", lint_many)
    monkeypatch.setattr(lint, "PARALLEL_MIN_FILES", 1)  # this small project in workers when jobs > 1
    monkeypatch.setattr("archlint.code.workers.PARALLEL_MIN_FILES", 1)
    _lint(project, jobs)
    assert budgets == [lint.KEEP_CHARS if in_process else 0]
