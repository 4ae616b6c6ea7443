"""[tool.archlint] found by walking up; CLI flags override it; bad config exits 2 with one line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from archlint import config
from archlint.cli import main
from archlint.errors import UsageError
from archlint.registry import catalog


def write(root: Path, body: str) -> Path:
    path = root / "pyproject.toml"
    path.write_text("[project]\nname = 'demo'\n\n" + textwrap.dedent(body))
    return path


@pytest.fixture
def some_code() -> str:
    """A rule with a `threshold` option (the bad-value tests set it negative)."""
    assert "AL101" in catalog()
    return "AL101"


def test_config_is_found_by_walking_up_from_a_subdirectory(tmp_path, monkeypatch, some_code):
    write(
        tmp_path,
        f"""
        [tool.archlint]
        ignore = ["{some_code}"]
        tolerance = {{ flops = 0.05, latency-ms = 0.5 }}

        [tool.archlint.per-file-ignores]
        "tests/*" = ["AL3"]

        [tool.archlint.module-ignores]
        al1 = ["backbone.layer3.*"]

        [[tool.archlint.models]]
        target = "nets.py:Net"
        input-shapes = [[1, 3, 32, 32], "1,10"]
        dtype = "bfloat16"
        device = "cuda:1"
        init = {{ num_classes = 10 }}
        budgets = {{ max-flops = 3e8, max-params = 1e6 }}
    """,
    )
    deep = tmp_path / "src" / "pkg"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    s = config.load()
    assert s.root == tmp_path.resolve()
    assert s.ignore == [some_code] and not s.enabled(some_code)
    assert s.tolerance == {"flops": 0.05, "latency_ms": 0.5}
    assert s.per_file_ignores == {"tests/*": ["AL3"]} and s.module_ignores == {"AL1": ["backbone.layer3.*"]}
    assert s.module_ignored("AL101", "backbone.layer3.0.conv1") and not s.module_ignored("AL201", "backbone.layer3.0")
    (m,) = s.models
    # Targets in the file are relative to the project root; archlint runs them from the cwd.
    assert (m.target, m.input_shapes, m.dtype, m.device) == (
        "../../nets.py:Net",
        [[1, 3, 32, 32], [1, 10]],
        "bfloat16",
        "cuda:1",
    )
    assert m.init == {"num_classes": 10} and m.budgets == {"max-flops": 3e8, "max-params": 1e6}


def test_a_pyproject_without_the_table_is_skipped(tmp_path, monkeypatch):
    write(tmp_path, '[tool.archlint]\nselect = ["ALL"]\n')
    inner = tmp_path / "sub"
    inner.mkdir()
    (inner / "pyproject.toml").write_text("[tool.other]\nx = 1\n")
    monkeypatch.chdir(inner)
    assert config.load().root == tmp_path.resolve()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('[tool.archlint]\nselct = ["AL1"]\n', "unknown key [tool.archlint] 'selct'"),
        ('[tool.archlint]\nselect = ["AL999"]\n', "[tool.archlint] select: unknown rule code 'AL999'"),
        ('[tool.archlint]\nignore = ["XYZ"]\n', "[tool.archlint] ignore: unknown rule code 'XYZ'"),
        (
            '[tool.archlint.per-file-ignores]\n"tests/*" = ["AL998"]\n',
            "per-file-ignores 'tests/*': unknown rule code 'AL998'",
        ),
        ("[tool.archlint.rules.AL997]\nthreshold = 0.2\n", "[tool.archlint.rules]: unknown rule code 'AL997'"),
        ('[tool.archlint.module-ignores]\nAL996 = ["a.*"]\n', "module-ignores: unknown rule code 'AL996'"),
        ('[tool.archlint.module-ignores]\nAL1 = "a.*"\n', "module-ignores.AL1 must be a list of module-path globs"),
        ("[tool.archlint.rules.{code}]\nthreshold = -0.5\n", "{code}.threshold must be ≥ 0, got -0.5"),
        ("[tool.archlint]\ntolerance = {{ flops = -1 }}\n", "tolerance: flops must be a non-negative fraction"),
        ("[tool.archlint]\ntolerance = {{ speed = 0.1 }}\n", "tolerance: unknown metric 'speed'"),
        ('[tool.archlint]\nmode = "training"\n', "[tool.archlint] mode must be one of eval, train"),
        ("[[tool.archlint.models]]\ninput-shape = [1, 3]\n", "entry 1 needs a 'target'"),
        ('[[tool.archlint.models]]\ntarget = "nets.py"\n', "entry 1: target 'nets.py' must look like"),
        ('[[tool.archlint.models]]\ntarget = "n.py:Net"\nshape = [1]\n', "entry 1: unknown key 'shape'"),
        (
            '[[tool.archlint.models]]\ntarget = "n.py:Net"\ninput-shapes = [[1, 0]]\n',
            "'n.py:Net': input shape [1, 0] must be positive",
        ),
        ('[[tool.archlint.models]]\ntarget = "n.py:Net"\ndtype = "int8"\n', "'n.py:Net': dtype must be one of"),
        ('[[tool.archlint.models]]\ntarget = "n.py:Net"\ndevice = "gpu"\n', "'n.py:Net': device must be cpu, cuda"),
        (
            '[[tool.archlint.models]]\ntarget = "n.py:Net"\nbudgets = {{ max-flops = -3 }}\n',
            "budget max-flops must be a finite number ≥ 0",
        ),
        ('[[tool.archlint.models]]\ntarget = "n.py:Net"\nbudgets = {{ flops = 3 }}\n', "unknown budget 'flops'"),
        ("[tool.archlint\n", "not valid TOML"),
    ],
)
def test_bad_config_exits_2_with_one_line_naming_the_key(tmp_path, monkeypatch, capsys, body, expected, some_code):
    write(tmp_path, body.format(code=some_code))
    (tmp_path / "train.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    assert main(["train.py"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("archlint: error: ") and "Traceback" not in err
    assert expected.format(code=some_code) in err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--select", "AL999"], "--select: unknown rule code 'AL999'"),
        (["--ignore", "AL1,BOGUS"], "--ignore: unknown rule code 'BOGUS'"),
        (["--option", "{code}.threshold=-2"], "--option: {code}.threshold must be ≥ 0, got -2"),
        (["--baseline", "missing.json"], "baseline file missing.json does not exist; create it with --save-baseline"),
    ],
)
def test_bad_flags_exit_2_with_one_line(tmp_path, monkeypatch, capsys, argv, expected, some_code):
    (tmp_path / "train.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    assert main(["train.py", *[a.format(code=some_code) for a in argv]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected.format(code=some_code) in err


def test_models_flag_without_models_in_config(tmp_path, monkeypatch, capsys):
    """Nothing configured passes, saying so (as a pre-commit hook with no files to check; issue 39)."""
    monkeypatch.chdir(tmp_path)
    assert main(["--models"]) == 0
    err = capsys.readouterr().err
    assert "no pyproject.toml with a [tool.archlint] table" in err and "nothing to analyze" in err


def test_flags_override_the_config(tmp_path, monkeypatch, some_code):
    from archlint.cli import _settings, build_parser

    write(tmp_path, f'[tool.archlint]\nselect = ["{some_code}"]\noutput-format = "json"\n')
    monkeypatch.chdir(tmp_path)
    s = _settings(build_parser().parse_args(["x.py", "--select", "ALL", "--output-format", "sarif"]))
    assert s.select == ["ALL"] and s.output_format == "sarif"


def test_unknown_option_name_is_reported_by_the_rule(some_code):
    s = config.Settings(rule_options={some_code: {"treshold": 1}})
    with pytest.raises(UsageError, match=f"unknown option 'treshold' for {some_code}; it takes: threshold"):
        s.options(some_code, {"threshold": 0.5})


def test_options_documented_on_rule_pages_match_what_model_checks_take():
    """Config validates option names against each rule page's Options table: the pages must
    list exactly what the checks read, or a valid option would be refused."""
    import importlib
    import pkgutil

    pytest.importorskip("torch")
    import archlint.model.checks as checks
    from archlint.model.checks._verdict import with_floor

    compared = 0
    for info in pkgutil.iter_modules(checks.__path__):
        module = importlib.import_module(f"{checks.__name__}.{info.name}")
        code = getattr(module, "CODE", None)
        if code is None or code not in catalog():
            continue
        documented = config.documented_options(catalog()[code].body)
        # every model rule run_checks runs also takes the materiality floor (archlint/model/checks/_verdict.py);
        # one another part of archlint finds (FOUND_BY: AL610, the step's memory model) takes its own options
        options = getattr(module, "OPTIONS", {})
        assert documented == set(options if getattr(module, "FOUND_BY", None) else with_floor(options)), code
        compared += 1
    assert compared >= 5


def test_unknown_option_for_a_rule_without_options(tmp_path, monkeypatch, capsys):
    no_options = [c for c, r in catalog().items() if config.documented_options(r.body) == set()]
    if not no_options:
        pytest.skip("every rule takes options")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("x = 1\n")
    assert main(["train.py", "--option", f"{no_options[0]}.level=3"]) == 2
    assert f"unknown option 'level' for {no_options[0]}; it takes none" in capsys.readouterr().err
