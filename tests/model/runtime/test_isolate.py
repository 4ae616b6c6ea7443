"""Issue 24, item 6: every model target is imported in its own module namespace. Two folders that
each hold a `layers.py` (a/model.py, b/model.py) analyzed in one process each get their own."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

import archlint
from archlint.cli import main

MODEL = """
from torch import nn
import layers
from helpers.widths import WIDTH

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = layers.block()

    def forward(self, x):
        return self.body(x)
"""


def project(root: Path, name: str, width: int) -> tuple[int, int]:
    """A folder with model.py importing its own layers.py and helpers/ package; returns the exact
    (FLOPs, params) of its Linear(width, width) → ReLU → Linear(width, 8) on a 1×width input."""
    folder = root / name
    (folder / "helpers").mkdir(parents=True)
    (folder / "model.py").write_text(MODEL)
    (folder / "helpers" / "__init__.py").write_text("")
    (folder / "helpers" / "widths.py").write_text(f"WIDTH = {width}\n")
    (folder / "layers.py").write_text(
        textwrap.dedent("""
        from torch import nn
        from helpers.widths import WIDTH

        def block():
            return nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, 8))
        """)
    )
    return width * width + width + width * 8, width * width + width + width * 8 + 8  # the ReLU counts 1 per element


def test_two_folders_each_get_their_own_layers(tmp_path):
    a = project(tmp_path, "a", 8)
    b = project(tmp_path, "b", 128)
    assert b == (17536, 17544)
    before = set(sys.modules)
    first = archlint.analyze(str(tmp_path / "a" / "model.py") + ":Net", input_shape=(1, 8), select=[])
    second = archlint.analyze(str(tmp_path / "b" / "model.py") + ":Net", input_shape=(1, 128), select=[])
    # was: b got a's layers (Linear(8, 8)) and failed on its 1×128 input, or counted a's figures
    assert (first.totals.flops, first.totals.params) == a
    assert (second.totals.flops, second.totals.params) == b
    # the folders' modules are gone again: the next target (or the user's own `import layers`) is not fooled
    assert not {"layers", "helpers", "helpers.widths"} & (set(sys.modules) - before)
    assert str(tmp_path / "a") not in sys.path and str(tmp_path / "b") not in sys.path


def test_a_users_own_module_of_the_same_name_is_put_back(tmp_path, monkeypatch):
    project(tmp_path, "proj", 16)
    mine = type(sys)("layers")
    monkeypatch.setitem(sys.modules, "layers", mine)
    analysis = archlint.analyze(str(tmp_path / "proj" / "model.py") + ":Net", input_shape=(1, 16), select=[])
    assert analysis.totals.params == 16 * 16 + 16 + 16 * 8 + 8  # the project's layers, not the user's
    assert sys.modules["layers"] is mine


def test_a_model_file_that_edits_sys_path(tmp_path, capsys):
    project(tmp_path, "edits", 8)
    model = tmp_path / "edits" / "model.py"
    here = "__import__('os').path.dirname(__import__('os').path.abspath(__file__))"
    model.write_text(
        MODEL + f"\nimport sys\nwhile {here} in sys.path:\n    sys.path.remove({here})\n"
        "sys.path.append('/no/such/folder')\n"
    )
    path = list(sys.path)
    assert main([f"{model}:Net", "--input-shape", "1,8", "--output-format", "json", "--exit-zero"]) == 0, (
        capsys.readouterr().err
    )  # was: internal error: ValueError: list.remove(x): x not in list
    assert json.loads(capsys.readouterr().out)["models"][0]["totals"]["params"] == 8 * 8 + 8 + 8 * 8 + 8
    assert sys.path == path


@pytest.mark.parametrize("count", [20])
def test_models_over_a_tree_of_projects(tmp_path, capsys, monkeypatch, count):
    widths = [8 + 4 * i for i in range(count)]
    expected = {f"p{i:02d}/model.py:Net": project(tmp_path, f"p{i:02d}", w) for i, w in enumerate(widths)}
    entries = "".join(
        f'[[tool.archlint.models]]\ntarget = "p{i:02d}/model.py:Net"\ninput-shapes = ["1,{w}"]\n\n'
        for i, w in enumerate(widths)
    )
    (tmp_path / "pyproject.toml").write_text(entries)
    monkeypatch.chdir(tmp_path)
    rc = main(["--models", "--output-format", "json", "--select", "AL1", "--exit-zero", "--strategy", "fx"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    models = json.loads(out.out)["models"]
    got = {m["target"]: (m["totals"]["flops"], m["totals"]["params"]) for m in models}
    assert got == expected  # was: every project after the first got p00's layers
