"""Issue 39 item 3: every output is byte-identical whatever PYTHONHASHSEED (the same run on the same
files never gives different findings). Each case runs archlint in fresh processes under several
hash seeds and compares the bytes it printed and wrote."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SEEDS = ("0", "1", "2", "3")


def _run(args: list[str], seed: str, cwd: Path, outputs: list[Path] = ()) -> bytes:
    # SOURCE_DATE_EPOCH: the HTML report's "written" time, the one thing meant to change between runs
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO), "SOURCE_DATE_EPOCH": "1700000000"}
    for out in outputs:
        out.unlink(missing_ok=True)
    done = subprocess.run([sys.executable, "-m", "archlint", *args], cwd=cwd, env=env, capture_output=True, timeout=600)
    assert done.returncode in (0, 1), done.stderr.decode()[-2000:]
    return done.stdout + b"\0" + b"\0".join(out.read_bytes() for out in outputs)


def _same_for_every_seed(args: list[str], cwd: Path, seeds=SEEDS, outputs: list[Path] = ()) -> bytes:
    first = _run(args, seeds[0], cwd, outputs)
    for seed in seeds[1:]:
        other = _run(args, seed, cwd, outputs)
        at = next((i for i, (a, b) in enumerate(zip(first, other)) if a != b), min(len(first), len(other)))
        assert other == first, (
            f"output differs between PYTHONHASHSEED={seeds[0]} and {seed}: {args}\n"
            f"{first[max(0, at - 300) : at + 100]!r}\n{other[max(0, at - 300) : at + 100]!r}"
        )
    return first


def _package_and_module(root: Path) -> Path:
    """`from data import AudioDataLoader` where `src/data/` is a package holding a module `data.py`
    too, imported by a file outside the project's folder: resolved through the project's roots."""
    project = root / "proj"
    (project / "src" / "data").mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    (project / "src" / "data" / "__init__.py").write_text(
        "from torch.utils.data import DataLoader\n\n\nclass AudioDataLoader(DataLoader):\n    pass\n"
    )
    (project / "src" / "data" / "data.py").write_text("def AudioDataLoader(dataset, **kwargs):\n    return dataset\n")
    (root / "tools").mkdir()
    (root / "tools" / "train.py").write_text(
        "import torch\nfrom data import AudioDataLoader\n\n\ndef main(ds):\n"
        "    loader = AudioDataLoader(ds, batch_size=32)\n    model = torch.nn.Linear(3, 4).cuda()\n"
        "    for x in loader:\n        x = x.cuda()\n        model(x).sum().backward()\n"
    )
    return project


def test_a_package_beside_a_module_of_its_name_resolves_alike_for_every_seed(tmp_path):
    project = _package_and_module(tmp_path)
    args = ["../tools/train.py", "src/data", "--no-cache", "-j", "1", "--output-format", "json", "--show-info", "-q"]
    out = _same_for_every_seed(args, project, seeds=("0", "1", "2", "3", "4", "5", "6", "7"))
    # Python's answer: `data` is the package src/data (the project's src/ root), whose AudioDataLoader
    # is a DataLoader subclass, so its call is linted as a DataLoader
    assert b"AL304" in out and b"AL301" in out


def test_package_wins_over_module_of_the_same_name_in_one_folder(tmp_path):
    """Python's order inside one folder: `data/__init__.py` before `data.py`."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "__init__.py").write_text(
        "from torch.utils.data import DataLoader\n\n\nclass AudioDataLoader(DataLoader):\n    pass\n"
    )
    (tmp_path / "data.py").write_text("def AudioDataLoader(dataset, **kwargs):\n    return dataset\n")
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.py").write_text(
        "import torch\nfrom data import AudioDataLoader\n\n\ndef main(ds):\n"
        "    loader = AudioDataLoader(ds, batch_size=32)\n    model = torch.nn.Linear(3, 4).cuda()\n"
        "    for x in loader:\n        x = x.cuda()\n        model(x).sum().backward()\n"
    )
    out = _run(["train.py", "--no-cache", "-j", "1", "--output-format", "json", "-q"], "0", tmp_path)
    assert b"AL304" in out


def test_code_linter_on_the_evaluation_projects_and_examples(tmp_path):
    html = tmp_path / "report.html"
    sarif = tmp_path / "report.sarif"
    cwd = REPO / "benchmarks" / "eval_data"
    targets = [
        "training_projects",
        "../../examples",
        "../../tests/fixtures/code",
        "--no-cache",
        "-j",
        "1",
        "--show-info",
        "-q",
    ]
    out = _same_for_every_seed(
        [*targets, "--output-format", "json", "--html", str(html)], cwd, seeds=SEEDS[:3], outputs=[html]
    )
    assert out.count(b'"code": "AL') > 100  # the projects were linted, not skipped
    _same_for_every_seed(
        [*targets, "--output-format", "sarif", "-o", str(sarif)], cwd, seeds=SEEDS[:2], outputs=[sarif]
    )
    _same_for_every_seed([*targets, "--statistics"], cwd, seeds=SEEDS[:2])


def test_each_evaluation_project_from_its_own_folder():
    """As a user runs `archlint .` in a checkout: each project's own roots."""
    projects = sorted(p for p in (REPO / "benchmarks" / "eval_data" / "training_projects").iterdir() if p.is_dir())
    assert len(projects) > 20
    for project in projects:
        _same_for_every_seed([".", "--no-cache", "-j", "1", "--show-info", "-q"], project, seeds=SEEDS[:2])


def test_model_analyzer_and_trace_reader(tmp_path):
    html = tmp_path / "model.html"
    args = [
        str(REPO / "examples" / "nets.py") + ":TinyNet",
        "--input-shape",
        "2,3,32,32",
        "--show-info",
        "-q",
        "--tree",
        "--device-spec",
        "a100-sxm",
        "--output-format",
        "json",
        "--html",
        str(html),
    ]
    out = _same_for_every_seed(args, tmp_path, seeds=SEEDS[:3], outputs=[html])
    assert b'"flops"' in out
    trace = REPO / "tests" / "trace" / "fixtures" / "a100_alexnet_inference.json.gz"
    trace_html = tmp_path / "trace.html"
    _same_for_every_seed(
        ["trace", str(trace), "--output-format", "json", "--html", str(trace_html)],
        tmp_path,
        seeds=SEEDS[:3],
        outputs=[trace_html],
    )
    _same_for_every_seed(["trace", str(trace)], tmp_path, seeds=SEEDS[:3])


def test_trace_diff():
    """Rows of equal change were in set order (`--diff` of two traces differed between seeds)."""
    fixtures = REPO / "tests" / "trace" / "fixtures"
    args = [
        "trace",
        str(fixtures / "h200_resnet50_fp32_inference.json.gz"),
        "--diff",
        str(fixtures / "a100_alexnet_inference.json.gz"),
        "--output-format",
        "json",
    ]
    _same_for_every_seed(args, REPO, seeds=("0", "1", "2", "3", "4", "5"))


@pytest.mark.parametrize("variant", ["train"])
def test_train_step_analysis(tmp_path, variant):
    args = [
        str(REPO / "examples" / "nets.py") + ":TinyNet",
        "--input-shape",
        "2,3,32,32",
        "--train",
        "--device-spec",
        "l4",
        "--output-format",
        "json",
        "-q",
    ]
    _same_for_every_seed(args, tmp_path, seeds=SEEDS[:2])
