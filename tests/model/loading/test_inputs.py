"""Inputs of every kind, through the command line and the config file: integer and boolean dtypes
(per input or for all), keyword inputs, example_inputs() as a tuple, a dict or (args, kwargs);
the report shows every input's name, shape and dtype; token ids stay in the embedding's range;
strict parsing."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from archlint.cli import main

ROOT = Path(__file__).resolve().parents[3]
MODELS = ROOT / "tests" / "fixtures" / "models" / "token_models.py"


def run_json(capsys, *argv: str) -> dict:
    assert main([*argv, "--output-format", "json", "--exit-zero"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)["models"][0]


def error(capsys, *argv: str) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "argv",
    [
        ["--input-shape", "2,5:int64"],
        ["--input-shape", "2,5", "--input-dtype", "int64"],
        ["--input-shape", "2x5:long"],
    ],
)
def test_integer_token_inputs_from_the_command_line(capsys, argv):
    model = run_json(capsys, f"{MODELS}:TinyLM", *argv)
    assert model["inputs"] == [{"name": "input_ids", "shape": [2, 5], "dtype": "int64"}]
    assert model["totals"]["unknown_ops"] == 0
    assert model["totals"]["flops"] == 2 * 5 * 16 * 7  # the head; the lookup has no arithmetic


def test_keyword_inputs_and_the_header_shows_them(capsys):
    argv = [f"{MODELS}:TinyLM", "--input", "input_ids=2,5:int64", "--input", "attention_mask=2,5:bool"]
    model = run_json(capsys, *argv)
    assert model["inputs"] == [
        {"name": "input_ids", "shape": [2, 5], "dtype": "int64"},
        {"name": "attention_mask", "shape": [2, 5], "dtype": "bool"},
    ]
    assert any(layer["kind"] == "elementwise" for layer in model["layers"])  # the mask was used
    main([*argv, "--exit-zero"])
    assert "inputs input_ids 2×5 int64, attention_mask 2×5 bool" in capsys.readouterr().out


def test_token_ids_are_drawn_inside_the_smallest_embedding(capsys):
    # the dispatch strategy runs a real forward: an id ≥ 7 would raise in the embedding lookup
    model = run_json(capsys, f"{MODELS}:TinyLM", "--input-shape", "64,64:int64", "--strategy", "dispatch")
    assert model["strategy"] == "dispatch" and model["build"] == "real"
    model = run_json(
        capsys,
        f"{MODELS}:TinyLM",
        "--input-shape",
        "8,8:int32",
        "--input",
        "attention_mask=8,8:int64",
        "--strategy",
        "dispatch",
    )
    assert [i["dtype"] for i in model["inputs"]] == ["int32", "int64"]


def test_keyword_only_inputs_skip_fx(capsys):
    # keyword-only inputs: fx cannot take them; export runs instead, and says why fx did not
    model = run_json(capsys, f"{MODELS}:KeywordOnly", "--input", "input_ids=1,4:int64", "--input", "scale=1")
    assert model["strategy"] == "export"
    assert [i["name"] for i in model["inputs"]] == ["input_ids", "scale"]
    assert any(
        "keyword-only inputs (scale)" in note for note in model["details"]
    )  # why fx did not: --verbose, JSON details


@pytest.mark.parametrize(
    "name, inputs",
    [
        ("FromTuple", [("input_ids", [2, 5], "int64")]),
        ("FromDict", [("input_ids", [2, 5], "int64"), ("attention_mask", [2, 5], "float32")]),
        ("FromArgsKwargs", [("input_ids", [2, 5], "int64"), ("attention_mask", [2, 5], "float32")]),
    ],
)
def test_example_inputs_as_tuple_dict_or_args_kwargs(capsys, name, inputs):
    model = run_json(capsys, f"{MODELS}:{name}")
    assert [(i["name"], i["shape"], i["dtype"]) for i in model["inputs"]] == inputs


def test_inputs_in_the_config_file(tmp_path, capsys, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""
            [tool.archlint]
            [[tool.archlint.models]]
            target = "{MODELS.as_posix()}:TinyLM"
            input-shapes = ["3,4:int64"]
            inputs = {{ attention_mask = "3,4:bool" }}

            [[tool.archlint.models]]
            target = "{MODELS.as_posix()}:TinyLM"
            input-shapes = [[3, 6]]
            input-dtype = "int32"
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    assert main(["--models", "--output-format", "json", "--exit-zero"]) == 0
    first, second = json.loads(capsys.readouterr().out)["models"]
    assert [(i["name"], i["dtype"]) for i in first["inputs"]] == [("input_ids", "int64"), ("attention_mask", "bool")]
    assert second["inputs"] == [{"name": "input_ids", "shape": [3, 6], "dtype": "int32"}]


@pytest.mark.parametrize(
    "argv, expected",
    [
        (
            ["--input-shape", "1,4:int64", "--input-shape", "1", "--input-shape", "1,4", "--input-shape", "2"],
            "4 positional inputs given with --input-shape, but TinyLM.forward takes 3",
        ),
        (["--input-shape", "1,,3"], "'1,,3' is not a comma-separated list of positive integers"),
        (["--input-shape", "1,3,"], "'1,3,' is not a comma-separated list"),
        (["--input-shape", "1,3:int65"], "unknown input dtype 'int65'"),
        (["--dtype", "int64", "--input-shape", "1,3"], "--dtype int64 is for the weights"),
        (["--input", "tokens=1,3:int64"], "keyword input 'tokens': TinyLM.forward has no such parameter"),
        (["--input", "1,3"], "must look like NAME=SHAPE[:DTYPE]"),
        (["--input", "input_ids=1,3", "--input", "input_ids=1,4"], "--input input_ids=... is given twice"),
        (["--input-shape", "1,3:int64", "--input", "input_ids=1,3"], "given both by position and by name"),
    ],
)
def test_bad_inputs_are_one_line_errors(capsys, argv, expected):
    assert expected in error(capsys, f"{MODELS}:TinyLM", *argv)


def test_extra_input_shape_in_config_names_the_key(tmp_path, capsys, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.archlint]\n[[tool.archlint.models]]\ntarget = "{MODELS.as_posix()}:KeywordOnly"\n'
        'input-shapes = ["1,4:int64", [1, 4]]\n'
    )
    monkeypatch.chdir(tmp_path)
    line = error(capsys, "--models")
    assert "2 positional inputs given with input-shapes of [[tool.archlint.models]]" in line
    assert "KeywordOnly.forward takes 1 (input_ids)" in line


@pytest.mark.parametrize("name", ["DataclassOut", "DictOut"])
@pytest.mark.parametrize("strategy", ["fx", "export", "dispatch"])
def test_dataclass_and_dict_outputs(capsys, name, strategy):
    model = run_json(capsys, f"{MODELS}:{name}", "--input-shape", "2,5:int64", "--strategy", strategy)
    assert model["strategy"] == strategy and model["totals"]["unknown_ops"] == 0
    assert model["totals"]["flops"] == 2 * 5 * 16 * 7
