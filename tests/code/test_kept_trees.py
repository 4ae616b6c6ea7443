"""A file linted again in its project context, in the same process, takes the tree its own lint
parsed (engine.KeptTrees) instead of parsing it again, and finds exactly what a fresh parse finds;
a changed text, a file past the budget, or a run whose first pass ran in workers parses again.
A file's own checks wait for the join (issue 45): each file is checked once a run."""

from __future__ import annotations

import os
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
    assert kept.take("a.py", "x = 1\n") == (module, None, None)
    kept.keep("big.py", "y" * 101, module, None)  # past the budget
    assert kept.trees == {}


def test_a_dropped_file_leaves_nothing_kept():
    """drop: a file linted in context from the join's cache forgets its tree and releases its
    deferred checks' facts (what take with a text that never matches did)."""
    from archlint.code.facts import Facts

    kept = engine.KeptTrees(100)
    module = cst.parse_module("x = 1\n")
    facts = Facts(module, "x = 1\n")
    kept.keep("a.py", "x = 1\n", module, None)
    kept.deferred["a.py"] = engine._Deferred(facts, None, {}, [])
    kept.drop("a.py")
    assert kept.trees == {} and kept.deferred == {} and kept.chars == 0
    assert vars(facts) == {}  # released
    kept.drop("never.py")  # nothing kept: nothing to do


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


def _count_checks(monkeypatch) -> list[str]:
    checked: list[str] = []
    original = engine._checked
    monkeypatch.setattr(engine, "_checked", lambda facts, path, *a: checked.append(path) or original(facts, path, *a))
    return checked


def test_each_file_is_checked_once_on_a_cold_run(project, monkeypatch):
    """Issue 45: a file with a project context is checked in it only (its own checks wait for the
    join and are dropped), a file without one alone; the findings are those of a run that checks
    every file alone first (nothing kept: no check deferred)."""
    checked = _count_checks(monkeypatch)
    linted = _lint(project, 1)
    assert linted.relinted > 0
    assert sorted(checked) == sorted(set(checked))  # no file checked twice
    monkeypatch.setattr(lint, "KEEP_CHARS", 0)
    checked.clear()
    unkept = _lint(project, 1)
    assert len(checked) == len(set(checked)) + unkept.relinted  # without kept facts: own checks, then in context
    assert [d.to_dict() for d in unkept.diagnostics] == [d.to_dict() for d in linted.diagnostics]


HEAD = "from pathlib import Path\nfrom PIL import Image\nfrom torch.utils.data import Dataset\n"
FOLDER = """

class Folder(Dataset):
    def __init__(self, root):
        self.files = sorted(Path(root).rglob("*.jpg"))

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        return Image.open(self.files[i]).convert("RGB")
"""


def test_a_file_whose_context_empties_is_linted_alone_on_a_warm_run(project, tmp_path):
    """Its own findings were never cached (always linted in context): the warm run lints it alone,
    and finds what a cold run finds."""
    settings = Settings(root=project, jobs=1, cache_dir=tmp_path / "cache")
    model_py = project / "src" / "seg" / "model.py"  # a finding of its own, found alone too
    model_py.write_text(HEAD + model_py.read_text() + FOLDER)
    files = discover([project])
    first = lint.lint_files(files, settings, [project])
    model = os.path.abspath(project / "src" / "seg" / "model.py")
    assert model in first.contexts  # train.py moves it to the GPU
    (project / "train.py").write_text("import torch\n")  # nothing of the model's is run on a GPU any more
    warm = lint.lint_files(files, settings, [project])
    assert warm.extracted == 1 and model not in warm.contexts
    cold = _lint(project, 1)
    assert [d.to_dict() for d in warm.diagnostics] == [d.to_dict() for d in cold.diagnostics]
    assert {d.code for d in warm.diagnostics if d.file.endswith("model.py")} == {"AL312"}
