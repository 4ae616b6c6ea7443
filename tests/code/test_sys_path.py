"""Issue 44 item 5: project imports resolved through the folders a script adds to `sys.path`
(`from data import AudioDataLoader` found in src/data/data.py beside an empty src/data/__init__.py),
read statically (archlint/code/syspath.py), tried where Python would try them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from archlint.code import lint, project
from archlint.code.project_facts import SysPathEntry
from archlint.code.syspath import added_paths_of
from archlint.config import Settings

PROJECTS = Path(__file__).parents[1] / "fixtures" / "code" / "projects"
REPO = Path(__file__).resolve().parents[2]
APPEND = 'sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "src", "data"))'
FOUND = "src/data/data.py:32 AL401"


def _found(folder: Path) -> set[str]:
    diagnostics = lint.lint_paths([folder], Settings(root=folder, cache=False)).diagnostics
    return {f"{Path(os.path.relpath(d.file, folder)).as_posix()}:{d.line} {d.code}" for d in diagnostics}


@pytest.mark.parametrize(
    "source, paths",
    [
        (
            'import os, sys\nsys.path.append(os.path.join(os.path.dirname(__file__), "src", "data"))',
            [["back", "src/data"]],
        ),
        (
            'import os, sys\nsys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))',
            [["front", ".."]],
        ),
        (
            "import sys\nfrom pathlib import Path\nROOT = Path(__file__).resolve().parents[1]\n"
            'sys.path.insert(0, str(ROOT / "src"))',
            [["front", "../src"]],
        ),
        ("import sys\nfrom pathlib import Path\nsys.path.append(str(Path(__file__).parent.parent))", [["back", ".."]]),
        (
            'import sys\nimport os.path as osp\nsys.path.insert(1, osp.join(osp.dirname(__file__), "lib"))',
            [["middle", "lib"]],
        ),
        (
            'import sys\nfrom os.path import join, dirname\nsys.path.extend([join(dirname(__file__), "lib"), "/opt/x"])',
            [["back", "lib"], ["back", "/opt/x"]],
        ),
        ('import os, sys\nsys.path += [os.getcwd() + "/src"]', [["back", "src"]]),
        (
            "import os, sys\nhere = os.path.dirname(os.path.realpath(__file__))\n"
            'sys.path.append(os.path.split(os.path.split(here)[0])[0])\nsys.path.append(f"{here}/data")',
            [["back", "../.."], ["back", "data"]],
        ),
        ('import os, sys\nsys.path.insert(0, os.path.join(sys.path[0], "src"))', [["front", "src"]]),
        # Python's order: the last insert(0) first, appends in the order made, a folder added twice once
        (
            'import sys\nsys.path.append("src/data")\nsys.path.insert(0, "a")\nsys.path.insert(0, "b")\n'
            'sys.path.append("a")',
            [["front", "b"], ["front", "a"], ["back", "src/data"]],
        ),
        # not evaluable without running anything: left out
        (
            'import os, sys\nsys.path.append(os.environ["DATA"])\nsys.path.insert(i, "x")\nsys.path.append(args.root)',
            [],
        ),
        ('import os, sys\nROOT = "a"\nROOT = "b"\nsys.path.append(ROOT)', []),  # bound twice: which one is unknown
        ("import sys\nsys.path.append(", []),  # does not parse
    ],
)
def test_paths_a_file_adds(source, paths):
    assert added_paths_of(source) == [SysPathEntry(where, folder) for where, folder in paths]


def test_a_torch_free_script_s_paths_are_read_too():
    light = project.light('import os, sys\nsys.path.insert(0, os.path.dirname(__file__) + "/src")\nfrom m import f\n')
    assert light.sys_path == [SysPathEntry("front", "src")]


def test_the_fixture_finding_is_reached_only_through_the_added_path(tmp_path):
    """Without the line, `data` is the empty package src/data (found first among the guessed roots):
    the loader class is not reached. With `insert(0, src)`, the package wins as in Python."""
    assert _found(PROJECTS / "sys_path_data") == {FOUND}
    for line, expect in (
        (APPEND, {FOUND}),
        ("", set()),
        ('sys.path.insert(0, os.path.join(os.path.dirname(__file__), "src"))', set()),
        ('sys.path.insert(0, "src/data")', {FOUND}),
    ):
        folder = tmp_path / f"case{len(list(tmp_path.iterdir()))}"
        shutil.copytree(PROJECTS / "sys_path_data", folder)
        train = folder / "train.py"
        text = train.read_text()
        assert APPEND in text
        train.write_text(text.replace(APPEND, line))
        assert _found(folder) == expect, line


def test_insert_0_comes_before_the_script_s_folder_and_append_after(tmp_path):
    """A `data.py` beside the script and another in lib/: insert(0) reaches lib's, append the script's."""
    for where, expect in (("sys.path.insert(0, 'lib')", {"lib/data.py:5 AL401"}), ("sys.path.append('lib')", set())):
        folder = tmp_path / where[9:15]
        (folder / "lib").mkdir(parents=True)
        (folder / "data.py").write_text("def check(x):\n    return x\n")
        (folder / "lib" / "data.py").write_text(
            "import torch\n\n\ndef check(x):\n    if torch.isnan(x).any():\n        raise ValueError('nan')\n"
        )
        (folder / "train.py").write_text(
            f"import sys\n\nimport torch\n\n{where}\nfrom data import check\n\n\ndef main(loader):\n"
            "    model = torch.nn.Linear(4, 2).cuda()\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "    for x in loader:\n        x = check(x.cuda(non_blocking=True))\n        opt.zero_grad(set_to_none=True)\n"
            "        model(x).sum().backward()\n        opt.step()\n"
        )
        assert {f for f in _found(folder) if f.endswith("AL401")} == expect, where


def test_the_fixture_lints_alike_for_every_hash_seed():
    outputs = set()
    for seed in ("0", "1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "archlint",
                "sys_path_data",
                "--no-cache",
                "-j",
                "1",
                "--show-info",
                "--output-format",
                "json",
            ],
            cwd=PROJECTS,
            env=env,
            capture_output=True,
            timeout=300,
        )
        assert done.returncode == 1, done.stderr.decode()[-2000:]
        assert b"AL401" in done.stdout
        outputs.add(done.stdout)
    assert len(outputs) == 1
