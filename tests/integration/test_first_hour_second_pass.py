"""What a new user still tripped over in the second pass (issue 25), through the CLI as typed:
exit codes and the lines a user reads."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from archlint import __version__
from archlint.cli import main

REPO = Path(__file__).resolve().parents[2]

# A CUDA training script whose only findings by default rules are AL303 and AL403 (both info).
ADVICE_ONLY = textwrap.dedent(
    """\
    import torch
    from torch import nn

    model = nn.Conv2d(3, 3, 3).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(range(10), batch_size=4, pin_memory=True, num_workers=4)
    for x in loader:
        x = x.cuda(non_blocking=True)
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    """
)
# Adds warnings (AL401 .item() every step, AL402 with a safe fix) and AL407 (info), whose fix is unsafe.
WITH_WARNINGS = ADVICE_ONLY.replace(
    "    loss = model(x).sum()\n",
    "    loss = model(x).sum() + torch.zeros(1).cuda()\n    print(loss.item())\n",
).replace("opt.zero_grad()", "opt.zero_grad(set_to_none=False)")
assert WITH_WARNINGS != ADVICE_ONLY


def _run(capsys, argv) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(ADVICE_ONLY)
    (tmp_path / "warned.py").write_text(WITH_WARNINGS)
    return tmp_path


# --- 1. info findings are advice: hidden, counted, never failing ------------------------------------


def test_code_info_findings_are_hidden_counted_and_never_fail(capsys, project):
    code, out, _ = _run(capsys, ["train.py", "--no-cache"])
    assert code == 0, out
    assert "AL303" not in out and "AL403" not in out
    assert out.strip().splitlines()[-1] == (
        "All checks passed; 2 info findings hidden (advice, never fails the run; --show-info shows them)."
    )
    code, out, _ = _run(capsys, ["train.py", "--no-cache", "--show-info"])
    assert code == 0 and "AL303 (info)" in out and "AL403 (info)" in out
    assert out.strip().splitlines()[-1] == "Found 2 findings."
    # JSON and SARIF keep them, with their severity, for tools that filter on their own
    code, out, _ = _run(capsys, ["train.py", "--no-cache", "--output-format", "json"])
    assert code == 0 and {d["severity"] for d in json.loads(out)["diagnostics"]} == {"info"}
    code, out, _ = _run(capsys, ["train.py", "--no-cache", "--output-format", "sarif"])
    levels = {r["level"] for r in json.loads(out)["runs"][0]["results"]}
    assert code == 0 and levels == {"note"}


def test_a_warning_still_fails_and_the_summary_counts_the_hidden(capsys, project):
    code, out, _ = _run(capsys, ["warned.py", "--no-cache"])
    assert code == 1 and "AL401" in out and "AL303" not in out
    assert out.strip().splitlines()[-1] == (
        "Found 2 findings (1 fixable with --fix); 3 info findings hidden "
        "(advice, never fails the run; --show-info shows them)."
    )


def test_a_file_not_analyzed_is_said_without_show_info(capsys, project):
    (project / "big.py").write_text("import torch\n" + "x = 1\n" * 200_000)
    code, out, _ = _run(capsys, ["big.py", "--no-cache", "--max-file-size", "0.5"])
    assert code == 0 and "big.py:1:1: AL000 (info) not analyzed" in out and "All checks passed" not in out


# --- 5. --config KEY=VALUE is a settings override ---------------------------------------------------


@pytest.mark.parametrize("override", ["select=AL4", 'select=["AL4"]', "ignore=AL3"])
def test_config_key_value_overrides_a_setting(capsys, project, override):
    code, out, _ = _run(capsys, ["train.py", "--no-cache", "--show-info", "--config", override])
    assert code == 0 and "AL403" in out and "AL303" not in out, out


def test_config_dotted_rule_option_and_pyproject_merge(capsys, project):
    (project / "pyproject.toml").write_text('[tool.archlint]\nignore = ["AL403"]\n')
    code, out, _ = _run(capsys, ["train.py", "--no-cache", "--show-info"])
    assert "AL403" not in out and "AL303" in out
    code, out, _ = _run(capsys, ["train.py", "--no-cache", "--show-info", "--config", "ignore=[]"])
    assert "AL403" in out and "AL303" in out  # the override replaces the file's list
    code, _, err = _run(capsys, ["train.py", "--config", "rules.AL101.nonsense=1"])
    assert code == 2 and err.startswith("archlint: error: --config rules.AL101.nonsense=1: ")


@pytest.mark.parametrize(
    "item, message",
    [
        ("n_layer=4", "'n_layer' is not a [tool.archlint] setting ("),
        ("select=AL9", "unknown rule code 'AL9'"),
    ],
)
def test_config_that_sets_nothing_is_an_error(capsys, project, item, message):
    code, out, err = _run(capsys, ["train.py", "--config", item])
    assert code == 2 and not out and len(err.splitlines()) == 1 and message in err, err


# --- 9. command-line conventions ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, hint",
    [
        (["train.py", "--lantency"], "unrecognized arguments: --lantency; did you mean --latency?"),
        (["x.py:Net", "--input-shap", "1,3"], "unrecognized arguments: --input-shap 1,3; did you mean --input-shape?"),
        (["train.py", "--output-format", "html"], "for html use --html FILE"),
    ],
)
def test_option_typos_get_a_hint_and_no_abbreviation(capsys, project, argv, hint):
    code, out, err = _run(capsys, argv)
    assert code == 2 and not out and len(err.splitlines()) == 1 and hint in err, err


def test_star_marks_only_safe_fixes(capsys, project):
    code, out, _ = _run(capsys, ["warned.py", "--no-cache", "--show-info"])
    (unsafe,) = [line for line in out.splitlines() if ": AL407" in line]
    (safe,) = [line for line in out.splitlines() if ": AL402" in line]
    assert "[*]" not in unsafe and "[*]" in safe  # [*]: what plain --fix would do, as ruff
    assert "(1 fixable with --fix)" in out and "(1 more with --fix --unsafe-fixes)" in out, out
    code, out, _ = _run(capsys, ["warned.py", "--no-cache", "--show-info", "--statistics"])
    assert re.search(r"1\s+AL407\n", out) and re.search(r"1\s+AL402 \[\*\]\n", out), out


def test_one_finding_is_singular_in_the_baseline_note(capsys, project):
    (project / "one.py").write_text(WITH_WARNINGS.replace("    print(loss.item())\n", ""))
    _run(capsys, ["one.py", "--no-cache", "--select", "AL402", "--save-baseline", "base.json"])
    code, out, _ = _run(capsys, ["one.py", "--no-cache", "--select", "AL402", "--baseline", "base.json"])
    assert code == 0 and "baseline: 1 finding in the baseline not reported" in out, out


def test_readme_pre_commit_rev_is_a_commit():
    """Issue 39 replaced `rev: v{version}` (a tag no clone has) by a commit of the clone."""
    readme = (REPO / "README.md").read_text()
    (rev,) = re.findall(r"^\s+rev: (\S+)", readme, flags=re.MULTILINE)
    assert re.fullmatch(r"[0-9a-f]{40}", rev) and rev != f"v{__version__}"


CONTROL_FLOW = textwrap.dedent(
    """\
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            if x.sum() > 0:  # data-dependent: fx cannot trace it
                x = x * 2
            return self.fc(x)
    """
)


def test_a_failed_capture_says_which_was_used_and_why_only_with_verbose(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flow.py").write_text(CONTROL_FLOW)
    code, out, _ = _run(capsys, ["flow.py:Net", "--input-shape", "2,8", "--exit-zero"])
    assert re.search(
        r"note: captured with (export|dispatch): fx (and export )?could not capture this model "
        r"\(--verbose says why\)",
        out,
    ), out
    assert "fx capture failed" not in out
    code, out, _ = _run(capsys, ["flow.py:Net", "--input-shape", "2,8", "--exit-zero", "--verbose"])
    assert "detail: fx capture failed: " in out


# --- 4. hf: findings point at the library class and name the switch --------------------------------


def test_hf_findings_point_at_the_library_class_and_name_the_switch(tmp_path):
    import inspect
    import os
    import subprocess
    import sys

    transformers = pytest.importorskip("transformers")
    from transformers.activations import NewGELUActivation

    # a console-script launcher, as pip writes bin/archlint: its line is not where GPT-2's modules come from
    launcher = tmp_path / "bin" / "archlint"
    launcher.parent.mkdir()
    launcher.write_text("import sys\nfrom archlint.cli import main\nif __name__ == '__main__':\n    sys.exit(main())\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    base = [
        sys.executable,
        str(launcher),
        "hf:gpt2",
        "--config",
        "n_layer=1",
        "--input-shape",
        "1,32:int64",
        "-q",
        "--top",
        "0",
        "--exit-zero",
    ]
    text = subprocess.run(base, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    (line,) = [x for x in text.stdout.splitlines() if ": AL110 " in x]
    source = Path(inspect.getsourcefile(NewGELUActivation)).resolve().as_posix()
    class_line = inspect.getsourcelines(NewGELUActivation)[1]
    lines = inspect.getsourcelines(NewGELUActivation)[0]
    class_line += next(i for i, t in enumerate(lines) if t.lstrip().startswith("class "))
    assert line.startswith(f"{source}:{class_line} [transformer.h.0.mlp.act]: AL110"), line
    assert "library code" in line and "--config activation_function=gelu_pytorch_tanh" in line
    assert line.count("library code") == 1
    assert "bin/archlint" not in text.stdout
    sarif = subprocess.run(
        [*base, "--output-format", "sarif"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600
    )
    results = json.loads(sarif.stdout)["runs"][0]["results"]
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results}
    assert uris and all(u.startswith("file:///") and "/transformers/" in u for u in uris), uris
    assert transformers.__version__


# --- 3. notebooks are linted by cell; --fix changes only code cells' source --------------------------


def _notebook(path: Path) -> bytes:
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Training, café\n", "notes"]},
        {
            "cell_type": "code",
            "execution_count": None,
            "metadata": {},
            "outputs": [],
            "source": ["%matplotlib inline\n", "!pip install torch\n", "import torch\n", "from torch import nn"],
        },
        {
            "cell_type": "code",
            "execution_count": 3,
            "metadata": {"tags": ["x"]},
            "outputs": [{"output_type": "stream", "name": "stdout", "text": ["hi\n"]}],
            "source": [
                "model = nn.Conv2d(3, 3, 3).cuda()\n",
                "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n",
                "loader = torch.utils.data.DataLoader(range(10), batch_size=4)\n",
            ],
        },
        {
            "cell_type": "code",
            "execution_count": None,
            "metadata": {},
            "outputs": [],
            "source": ["%%bash\n", "ls -l\n"],
        },
        {
            "cell_type": "code",
            "execution_count": None,
            "metadata": {},
            "outputs": [],
            "source": [
                "for x in loader:\n",
                "    x = torch.zeros(4).cuda()\n",
                "    files = !ls\n",
                "    loss = model(x).sum()\n",
                "    print(loss.item())\n",
                "    opt.zero_grad()\n",
                "    loss.backward()\n",
                "    opt.step()",
            ],
        },
    ]
    nb = {"cells": cells, "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    data = (json.dumps(nb, indent=1, ensure_ascii=False) + "\n").encode()
    path.write_bytes(data)
    return data


def test_a_notebook_is_linted_by_cell(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _notebook(tmp_path / "bad.ipynb")
    code, out, _ = _run(capsys, ["bad.ipynb", "--no-cache"])
    assert code == 1 and "All checks passed" not in out
    lines = set(out.splitlines())
    assert (
        "bad.ipynb:cell 5:5:11: AL401 .item() on every training step waits for the GPU to finish: keep the value on "
        "the GPU (accumulate with .detach()) and read it every N steps or once per epoch" in lines
    )
    assert any(line.startswith("bad.ipynb:cell 3:3:10: AL301 [*]") for line in lines), out
    assert any(line.startswith("bad.ipynb:cell 5:2:9: AL402 [*]") for line in lines), out
    code, out, _ = _run(capsys, [".", "--no-cache", "--output-format", "json"])  # found in folders too
    found = json.loads(out)["diagnostics"]
    assert {(d["code"], d["cell"], d["line"]) for d in found} >= {("AL401", 5, 5), ("AL301", 3, 3)}
    code, out, _ = _run(capsys, ["bad.ipynb", "--no-cache", "--output-format", "sarif"])
    result = next(r for r in json.loads(out)["runs"][0]["results"] if r["ruleId"] == "AL401")
    assert result["locations"][0]["physicalLocation"] == {"artifactLocation": {"uri": "bad.ipynb"}}
    assert result["properties"]["notebook"] == {"cell": 5, "line": 5, "column": 11}


def test_fix_writes_back_only_the_code_cells(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = _notebook(tmp_path / "bad.ipynb")
    code, out, _ = _run(capsys, ["bad.ipynb", "--no-cache", "--diff"])
    assert "--- bad.ipynb:cell 5" in out and '+    x = torch.zeros(4, device="cuda")' in out
    assert "    files = !ls" in out and "archlint: magic" not in out
    assert (tmp_path / "bad.ipynb").read_bytes() == before
    code, out, _ = _run(capsys, ["bad.ipynb", "--no-cache", "--fix"])
    after = (tmp_path / "bad.ipynb").read_bytes()
    expected = before.replace(b'batch_size=4)\\n"', b'batch_size=4, pin_memory=True)\\n"').replace(
        b"torch.zeros(4).cuda()", b'torch.zeros(4, device=\\"cuda\\")'
    )
    assert after == expected  # only the two edited source lines differ: layout, outputs, magics as they were
    code, out, _ = _run(capsys, ["bad.ipynb", "--no-cache"])
    assert "AL301" not in out and "AL402" not in out and "AL401" in out


def test_a_broken_notebook_is_an_error_not_a_pass(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "broken.ipynb").write_text("{ not json")
    code, out, _ = _run(capsys, ["broken.ipynb", "--no-cache"])
    assert code == 1 and "broken.ipynb:1:1: AL000 not a readable notebook (invalid JSON" in out
