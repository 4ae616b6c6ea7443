"""The model analyzer from the command line: bad input gets one line and exit 2; outputs carry the
contract fields."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from archlint.cli import main

ROOT = Path(__file__).resolve().parents[2]
NETS = str(ROOT / "examples" / "nets.py")

BAD = {
    "syntax_ok": "",
    "no_name": "import torch\nclass Other(torch.nn.Module):\n    pass\n",
    "not_module": "VALUE = 3\n",
    "bad_factory": "def make():\n    return 3\n",
    "needs_args": textwrap.dedent(
        """
        import torch
        class Net(torch.nn.Module):
            def __init__(self, width, depth=2):
                super().__init__()
                self.fc = torch.nn.Linear(width, width)
            def forward(self, x):
                return self.fc(x)
        """
    ),
    "raises": textwrap.dedent(
        """
        import torch
        class Inner(torch.nn.Module):
            def forward(self, x):
                raise ValueError("boom: this model refuses")
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = Inner()
            def forward(self, x):
                return self.inner(x * 2)
        """
    ),
    "import_error": "import torch\nimport archlint_no_such_package\n",
}


def _write(tmp_path: Path, key: str) -> str:
    path = tmp_path / f"{key}.py"
    path.write_text(BAD[key])
    return str(path)


def _error(capsys, argv) -> str:
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 2, captured
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("archlint: error: "), captured.err
    assert "Traceback" not in captured.err + captured.out
    return lines[0]


def test_missing_file(capsys, tmp_path):
    line = _error(capsys, [f"{tmp_path}/nope.py:Net", "--input-shape", "1,3"])
    assert "no such Python file" in line


def test_missing_name_lists_candidates(capsys, tmp_path):
    line = _error(capsys, [_write(tmp_path, "no_name") + ":Net", "--input-shape", "1,3"])
    assert "has no 'Net'" in line and "Other" in line


@pytest.mark.parametrize(
    "key,name,expected",
    [
        ("not_module", "VALUE", "is a int, not an nn.Module subclass"),
        ("bad_factory", "make", "returned int, not an nn.Module"),
    ],
)
def test_not_a_module(capsys, tmp_path, key, name, expected):
    line = _error(capsys, [_write(tmp_path, key) + f":{name}", "--input-shape", "1,3"])
    assert expected in line


def test_constructor_needs_arguments(capsys, tmp_path):
    target = _write(tmp_path, "needs_args") + ":Net"
    line = _error(capsys, [target, "--input-shape", "1,8"])
    assert "needs the argument width" in line and "--init width=" in line
    assert main([target, "--input-shape", "2,8", "--init", "width=8", "--exit-zero"]) == 0


def test_shape_rejected_names_layer_and_shapes(capsys):
    line = _error(capsys, [f"{NETS}:TinyNet", "--input-shape", "1,5,32,32"])
    assert "'stem.0' (Conv2d)" in line and "[1, 5, 32, 32]" in line


def test_forward_raises(capsys, tmp_path):
    line = _error(capsys, [_write(tmp_path, "raises") + ":Net", "--input-shape", "1,4"])
    assert "ValueError: boom: this model refuses" in line and "'inner'" in line


def test_import_error_inside_target(capsys, tmp_path):
    line = _error(capsys, [_write(tmp_path, "import_error") + ":Net", "--input-shape", "1,4"])
    assert "ModuleNotFoundError" in line and "archlint_no_such_package" in line


def test_no_inputs_says_how(capsys, tmp_path):
    target = _write(tmp_path, "needs_args") + ":Net"
    line = _error(capsys, [target, "--init", "width=4"])
    assert "--input-shape" in line and "example_inputs()" in line


def test_debug_shows_traceback(capsys, tmp_path):
    assert main([_write(tmp_path, "raises") + ":Net", "--input-shape", "1,4", "--debug"]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_subprocess_exit_code(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "archlint", _write(tmp_path, "not_module") + ":VALUE", "--input-shape", "1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_json_contract(capsys):
    assert main([f"{NETS}:TinyNet", "--input-shape", "1,3,56,56", "--output-format", "json", "--exit-zero"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["version"] == 1
    (model,) = data["models"]
    assert model["target"].endswith("nets.py:TinyNet") and model["strategy"] == "fx" and model["device"] == "cpu"
    assert model["input_shapes"] == [[1, 3, 56, 56]] and model["build"] == "meta"
    totals = model["totals"]
    assert {"flops", "mac_bytes", "params", "latency_ms"} <= totals.keys() and totals["latency_ms"] is None
    assert totals["params"] == sum(layer["params"] for layer in model["layers"]) == 38378
    for layer in model["layers"]:
        assert {
            "name",
            "kind",
            "module",
            "flops",
            "mac_bytes",
            "params",
            "in_shapes",
            "out_shapes",
            "latency_ms",
        } <= layer.keys()
    conv = next(layer for layer in model["layers"] if layer["module"] == "stem.0")
    assert conv["kind"] == "conv" and conv["flops"] == 32 * 27 * 28 * 28 and conv["out_shapes"] == [[1, 32, 28, 28]]
    assert isinstance(data["diagnostics"], list)


def test_text_output_shows_totals_strategy_inputs_convention(capsys):
    main([f"{NETS}:TinyNet", "--input-shape", "1,3,56,56", "--exit-zero", "--top", "3"])
    out = capsys.readouterr().out
    assert "strategy fx" in out and "1×3×56×56" in out and "multiply-adds" in out
    assert "30.03M" in out and "costliest 3 of" in out


def test_factory_instance_and_example_inputs(capsys):
    assert main([f"{NETS}:tiny_net", "--init", "num_classes=5", "--output-format", "json", "--exit-zero"]) == 0
    model = json.loads(capsys.readouterr().out)["models"][0]
    assert model["layers"][-1]["out_shapes"] == [[1, 5]]  # example_inputs() of the file: 1×3×56×56
    assert main([f"{NETS}:tiny_instance", "--output-format", "json", "--exit-zero"]) == 0
    assert json.loads(capsys.readouterr().out)["models"][0]["build"] == "given"
