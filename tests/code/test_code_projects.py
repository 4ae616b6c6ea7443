"""Multi-module training projects (tests/fixtures/code/projects/*), each with the findings a careful
reader expects (`file:line CODE` in expected.txt) and a negative twin (`*_ok`, the same project
written correctly, expecting none). Linted as a folder, the way `archlint src/` runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from archlint.code import lint, project
from archlint.code.discover import discover
from archlint.config import Settings

PROJECTS = Path(__file__).parents[1] / "fixtures" / "code" / "projects"
ALL = sorted(p for p in PROJECTS.iterdir() if (p / "expected.txt").is_file())


def found(folder: Path, paths: list[Path] | None = None, cache: bool = False) -> set[str]:
    diagnostics = lint.lint_paths(paths or [folder], Settings(root=folder, cache=cache)).diagnostics
    return {f"{Path(os.path.relpath(d.file, folder)).as_posix()}:{d.line} {d.code}" for d in diagnostics}


def expected(folder: Path) -> set[str]:
    return {line.strip() for line in (folder / "expected.txt").read_text().splitlines() if line.strip()}


def test_every_project_has_a_negative_twin():
    names = {p.name for p in ALL}
    positive = [n for n in names if not n.endswith("_ok") and expected(PROJECTS / n)]
    assert len(positive) >= 8
    assert all(f"{n}_ok" in names and not expected(PROJECTS / f"{n}_ok") for n in positive)


@pytest.mark.parametrize("folder", ALL, ids=lambda p: p.name)
def test_project_findings(folder):
    assert found(folder) == expected(folder)


def test_one_file_alone_uses_the_modules_beside_it():
    """`archlint train.py`: the model package and loader factory beside it are read (not reported)."""
    folder = PROJECTS / "trainer_class"
    assert found(folder, [folder / "train.py"]) == {"train.py:23 AL303"}
    folder = PROJECTS / "trainer_class"
    trainer = folder / "src" / "seg" / "trainer.py"
    assert found(folder, [trainer]) == set()  # alone, nothing says its device is a GPU (train.py does)
    folder = PROJECTS / "unet_seg"
    assert "train.py:65 AL303" in found(folder, [folder / "train.py"])  # convolutions found in unet/


def test_touching_one_file_re_extracts_only_that_file(tmp_path):
    folder = tmp_path / "proj"
    shutil.copytree(PROJECTS / "trainer_class", folder)
    first = found(folder, cache=True)
    assert first == expected(folder)
    trainer = folder / "src" / "seg" / "trainer.py"
    trainer.write_text(
        trainer.read_text().replace('log.info("step %d loss %.4f", step, loss.item())', 'log.info("step %d", step)')
    )
    settings = Settings(root=folder)
    linted = lint.lint_files(discover([folder]), settings, [folder])
    assert linted.extracted == 1
    assert found(folder, cache=True) == first - {"src/seg/trainer.py:25 AL401"}
    linted = lint.lint_files(discover([folder]), settings, [folder])
    assert linted.extracted == 0
    assert linted.relinted == 0  # contexts unchanged: findings in context come from the cache


def test_linted_project_code_is_never_executed(tmp_path):
    (tmp_path / "helpers.py").write_text("import torch\nraise SystemExit('executed')\ndef get_batch():\n    pass\n")
    (tmp_path / "train.py").write_text("import torch\nfrom helpers import get_batch\nx = get_batch()\n")
    assert found(tmp_path) == set()


def _modules_after(args: list[str], cwd) -> set[str]:
    code = (
        "import sys\nfrom archlint.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "print('MODULES', ' '.join(sorted(sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd)
    return set(next(x for x in proc.stdout.splitlines() if x.startswith("MODULES")).split()[1:])


def test_cached_project_run_never_loads_the_parser(tmp_path):
    folder = tmp_path / "proj"
    shutil.copytree(PROJECTS / "unet_seg", folder)
    assert "libcst" in _modules_after([str(folder)], folder)
    loaded = _modules_after([str(folder)], folder)
    assert "libcst" not in loaded and "torch" not in loaded


def test_a_failing_join_falls_back_to_files_alone_and_says_so(monkeypatch, capsys):
    def broken(*args):
        raise KeyError("boom")

    monkeypatch.setattr(project, "contexts", broken)
    folder = PROJECTS / "unet_seg"
    alone = {"train.py:36 AL302", "train.py:37 AL302", "train.py:50 AL401", "train.py:51 AL401"}
    assert found(folder) == alone  # each file's own findings; the cross-file ones (AL303, evaluate.py) need the join
    assert "project-wide analysis failed" in capsys.readouterr().err
