"""Issue 38, code linter: gates that passed on failure (a notebook skipped for its plot, a folder
that could not be listed, a FIFO named on the command line) and notebooks with odd but valid JSON
that ended the whole run. Each goes through the command line (`python -m archlint`, this tree)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import archlint

PACKAGE_ROOT = Path(archlint.__file__).resolve().parents[1]
FINDING = "import torch\nx = torch.zeros(3).cuda()\n"  # one AL402 on line 2


def cli(*args, cwd, timeout=120):
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "archlint", *args, "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def findings(stdout: str) -> dict[str, list[tuple[str, str, str]]]:
    out: dict[str, list] = {}
    for d in json.loads(stdout)["diagnostics"]:
        out.setdefault(os.path.basename(d["file"]), []).append((d["code"], d["severity"], d["message"]))
    return out


def notebook(cells: list[dict], metadata=None) -> dict:
    """nbformat 4's shape, as Jupyter writes it."""
    return {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python", "version": "3.11.7"},
        }
        if metadata is None
        else metadata,
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def code_cell(source: list[str], outputs=()) -> dict:
    return {
        "cell_type": "code",
        "execution_count": 1,
        "id": "c1",
        "metadata": {},
        "outputs": list(outputs),
        "source": source,
    }


def png_output(megabytes: float) -> dict:
    """A matplotlib figure as Jupyter stores it: base64 PNG lines of 76 characters."""
    data = base64.encodebytes(os.urandom(int(megabytes * 1e6 * 3 / 4))).decode()
    return {
        "output_type": "display_data",
        "metadata": {},
        "data": {"image/png": data, "text/plain": ["<Figure size 640x480 with 1 Axes>"]},
    }


def write_notebook(path: Path, nb: dict) -> None:
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


# 9. A notebook's size is its code, not its plots ---------------------------------------------------------


def test_a_notebook_with_a_3_mb_plot_is_linted(tmp_path):
    cells = [
        code_cell(["import torch\n", "import matplotlib.pyplot as plt\n"]),
        code_cell(["x = torch.zeros(3).cuda()\n", "plt.plot(x.cpu())"], [png_output(3.0)]),
    ]
    write_notebook(tmp_path / "plots.ipynb", notebook(cells))
    assert (tmp_path / "plots.ipynb").stat().st_size > 3_000_000
    run = cli("plots.ipynb", "--output-format", "json", cwd=tmp_path)
    assert run.returncode == 1, run.stderr  # was: 0, skipped "past the size limit (generated code)"
    assert [c for c, _, _ in findings(run.stdout)["plots.ipynb"]] == ["AL402"]
    # the limit still holds for the code cells themselves, and a bound for the file: each said as such
    write_notebook(tmp_path / "code.ipynb", notebook([code_cell(["x = 1\n" * 100])]))
    run = cli("code.ipynb", "plots.ipynb", "--max-file-size", "0.0005", "--output-format", "json", cwd=tmp_path)
    found = findings(run.stdout)
    [(code, severity, message)] = found["code.ipynb"]
    assert (code, severity) == (
        "AL000",
        "info",
    ) and "0.0006 MB of code cells is past the size limit of 0.0005 MB" in message
    [(code, severity, message)] = found["plots.ipynb"]
    assert (code, severity) == (
        "AL000",
        "info",
    ) and "MB of notebook file, outputs included (its limit is 64 × " in message


# Internal errors: odd but valid notebook JSON is that notebook's AL000, the others are linted ------------

ODD = {
    "surrogate_output": notebook(
        [
            code_cell(
                ["import torch\n", "x = torch.zeros(3).cuda()\n"],
                [{"output_type": "stream", "name": "stdout", "text": ["\ud800\n"]}],
            )
        ]
    ),
    "metadata_list": notebook([code_cell(["x = 1\n"])], metadata=[]),
    "language_info_string": notebook([code_cell(["x = 1\n"])], metadata={"language_info": "python"}),
    "source_ints": notebook([code_cell([1, 2, 3])]),
    "surrogate_source": notebook([code_cell(["s = '\ud800'\n"])]),
}


def test_odd_notebooks_are_one_line_each_and_the_rest_is_linted(tmp_path):
    for name, nb in ODD.items():  # ensure_ascii: the lone surrogates as JSON escapes, as json.dumps writes them
        (tmp_path / f"{name}.ipynb").write_text(json.dumps(nb, indent=1) + "\n", encoding="ascii")
    (tmp_path / "good.py").write_text(FINDING)
    run = cli(".", "--output-format", "json", cwd=tmp_path)
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr  # was: an internal error, exit 2
    found = findings(run.stdout)
    assert [c for c, _, _ in found["good.py"]] == ["AL402"]
    # a surrogate in an output is not code: the notebook is linted (and fixed, its output kept)
    assert [c for c, _, _ in found["surrogate_output.ipynb"]] == ["AL402"]
    expected = {
        "metadata_list.ipynb": 'its "metadata" is a list, not an object',
        "language_info_string.ipynb": "metadata.language_info is a string, not an object",
        "source_ints.ipynb": 'cell 1: its "source" is not text',
        "surrogate_source.ipynb": "cell 1: its source holds '\\ud800', a lone surrogate",
    }
    for name, text in expected.items():
        [(code, severity, message)] = found[name]
        assert (code, severity) == ("AL000", "error") and text in message, (name, message)
        assert "\n" not in message
    run = cli("surrogate_output.ipynb", "--fix", cwd=tmp_path)
    assert run.returncode == 0 and "Fixed 1 finding" in run.stdout, run.stderr
    fixed = (tmp_path / "surrogate_output.ipynb").read_text(encoding="ascii")
    assert '"\\ud800\\n"' in fixed and 'torch.zeros(3, device=\\"cuda\\")' in fixed  # the output kept, escaped


# 10. A folder that cannot be listed fails the run ----------------------------------------------------------


def test_a_folder_past_path_max_is_an_error_not_a_pass(tmp_path):
    (tmp_path / "clean.py").write_text("x = 1\n")
    fd = os.open(tmp_path, os.O_RDONLY)
    try:  # 22 folders of 200 characters: the walk's path passes PATH_MAX (4096) on the way down
        for _ in range(22):
            os.mkdir("d" * 200, dir_fd=fd)
            inner = os.open("d" * 200, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        with open(os.open("deep.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
            f.write(FINDING)
    finally:
        os.close(fd)
    run = cli(".", "--output-format", "json", cwd=tmp_path)
    assert run.returncode == 1, run.stderr  # was: 0, "All checks passed." and a warning on stderr
    errors = [(code, severity, message) for ds in findings(run.stdout).values() for code, severity, message in ds]
    assert len(errors) == 1
    code, severity, message = errors[0]
    assert (code, severity) == ("AL000", "error") and "(File name too long); its files were not linted" in message
    text = cli(".", cwd=tmp_path)
    assert text.returncode == 1 and "All checks passed" not in text.stdout


# 12. A path the user names that cannot be linted fails the run ---------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_named_on_the_command_line_fails_and_one_found_in_a_folder_is_info(tmp_path):
    os.mkfifo(tmp_path / "train.py")
    (tmp_path / "clean.py").write_text("x = 1\n")
    run = cli("train.py", "clean.py", "--output-format", "json", cwd=tmp_path, timeout=60)
    assert run.returncode == 1, run.stderr  # was: info AL000 and exit 0
    assert findings(run.stdout)["train.py"] == [
        (
            "AL000",
            "error",
            "not a regular file (a FIFO); archlint reads only regular files; name a Python file or a folder",
        )
    ]
    run = cli(".", "--output-format", "json", cwd=tmp_path, timeout=60)  # found by the walk: said, not failing
    assert run.returncode == 0, run.stderr
    assert [s for _, s, _ in findings(run.stdout)["train.py"]] == ["info"]
