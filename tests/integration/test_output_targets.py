"""Issue 38 (data loss 1-2, minor "named twice"): a report, an HTML page or a baseline never replaces
a file the run reads (a linted file, the model's file, a trace, the config, the baseline compared
with), by any spelling, link or hard link; never writes through a symbolic link; two outputs never
name one file. Each refusal is one line naming the file and what to do, exit code 2, and the input
byte for byte as it was. Run in-process (archlint.cli.main), except where a model is analyzed."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from archlint import outputs, writeguard
from archlint.cli import main
from archlint.errors import UsageError

FINDING = "import torch\nx = torch.zeros(3).cuda()\n"
TRACE = Path(__file__).resolve().parents[1] / "trace" / "fixtures" / "sampled_training_rank0.json.gz"
FLAGS = (("-o", "the report"), ("--html", "the HTML report"), ("--save-baseline", "the baseline"))


def archlint(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(FINDING)
    return tmp_path


@pytest.mark.parametrize("flag, what", FLAGS)
def test_an_output_onto_the_linted_file_is_refused(project, capsys, flag, what):
    os.link(project / "train.py", project / "hard.txt")
    for spelling in ("train.py", "./train.py", str(project / "train.py"), "hard.txt"):
        code, _, err = archlint(capsys, "train.py", "--no-cache", "--output-format", "json", flag, spelling)
        assert (project / "train.py").read_text() == FINDING, spelling  # was: replaced by the report
        assert code == 2 and len(err.splitlines()) == 1, (spelling, err)
        assert err.startswith(f"archlint: error: cannot write {what} to "), err
        assert "it is a linted file" in err and "that this run reads" in err and "give another file name" in err


def test_a_linted_file_found_in_a_folder_is_refused_at_the_write(project, capsys):
    (project / "src").mkdir()
    (project / "src" / "model_code.py").write_text(FINDING)
    code, _, err = archlint(capsys, "src", "--no-cache", "--output-format", "sarif", "-o", "src/model_code.py")
    assert (project / "src" / "model_code.py").read_text() == FINDING
    assert code == 2 and err == (
        "archlint: error: cannot write the report to src/model_code.py: it is a linted file "
        "that this run reads, and the report would replace it; give another file name\n"
    )


def test_the_config_and_the_baseline_read_are_inputs(project, capsys):
    config = '[tool.archlint]\nselect = ["AL4"]\n'
    (project / "pyproject.toml").write_text(config)
    code, _, err = archlint(capsys, "train.py", "--no-cache", "--html", "pyproject.toml")
    assert code == 2 and (project / "pyproject.toml").read_text() == config
    assert "it is the config file that this run reads" in err

    assert archlint(capsys, "train.py", "--no-cache", "--save-baseline", "base.json")[0] == 0
    saved = (project / "base.json").read_bytes()
    for flag in ("-o", "--save-baseline"):
        code, _, err = archlint(capsys, "train.py", "--no-cache", "--baseline", "base.json", flag, "./base.json")
        assert code == 2 and (project / "base.json").read_bytes() == saved, err
        assert "to base.json: it is the baseline that this run reads" in err


def test_two_outputs_naming_one_file_are_refused(project, capsys):
    code, _, err = archlint(
        capsys, "train.py", "--no-cache", "--output-format", "json", "-o", "r.json", "--html", "./r.json"
    )
    assert code == 2 and err == "archlint: error: -o and --html name the same file (r.json); give each its own file\n"
    assert not (project / "r.json").exists()


@pytest.mark.parametrize("flag, what", FLAGS)
def test_an_output_never_writes_through_a_link(project, capsys, flag, what):
    outside = project.parent / f"{project.name}-outside"
    outside.mkdir()
    victim = outside / "x"
    victim.write_text("somebody's file\n")
    (project / "archlint.sarif").symlink_to(victim)
    (project / "dangling.json").symlink_to(outside / "new")
    for name, target in (("archlint.sarif", victim), ("dangling.json", outside / "new")):
        code, _, err = archlint(capsys, "train.py", "--no-cache", "--output-format", "sarif", flag, name)
        assert code == 2, err
        assert err == (
            f"archlint: error: cannot write {what}: {name} is a symbolic link to {target}; archlint never "
            "writes through a link (it would replace the link's target): remove the link or give the real "
            "file's path\n"
        )
        assert (project / name).is_symlink()
    assert victim.read_text() == "somebody's file\n"  # was: replaced by the report
    assert not (outside / "new").exists()  # was: created outside the project
    shutil.rmtree(outside)


def test_a_stream_is_still_written(project, capsys):
    code, _, err = archlint(capsys, "train.py", "--no-cache", "--output-format", "json", "-o", "/dev/stdout")
    assert code == 1 and err.startswith("archlint: wrote json to /dev/stdout"), err


def test_a_link_swapped_in_during_the_write_is_not_followed(tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    report = tmp_path / "report.json"
    report.write_text("old report\n")
    real_fsync = os.fsync
    swapped = []

    def swap_then_fsync(fd):  # the temporary file is complete: the name becomes a link now
        if not swapped:
            report.unlink()
            report.symlink_to(victim)
            swapped.append(True)
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", swap_then_fsync)
    with pytest.raises(UsageError, match="report.json is a symbolic link"):
        outputs.write_text(report, "new report\n")
    assert victim.read_text() == "keep me\n" and report.is_symlink()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(writeguard.TEMP_SUFFIX)] == []


def test_a_255_byte_report_name_is_written(tmp_path):
    name = "字" * 84 + ".js"  # 84 × 3 + 3 = 255 bytes: legal; the temporary name was not
    assert len(name.encode()) == 255
    outputs.write_text(tmp_path / name, "{}\n")
    assert (tmp_path / name).read_text() == "{}\n"


def test_the_same_file_named_twice_is_linted_once(project, capsys):
    os.symlink("train.py", project / "alias.py")
    code, out, _ = archlint(
        capsys, "train.py", "./train.py", str(project / "train.py"), "alias.py", "--no-cache", "--output-format", "json"
    )
    data = json.loads(out)
    assert code == 1
    assert [d["code"] for d in data["diagnostics"]] == ["AL402"]  # was: one per spelling
    assert data["files_checked"] == 1 and data["diagnostics"][0]["file"] == "train.py"


# Traces --------------------------------------------------------------------------------------------


@pytest.fixture
def traces(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    shutil.copy(TRACE, tmp_path / "new.json.gz")
    shutil.copy(TRACE, tmp_path / "base.json.gz")
    return tmp_path


@pytest.mark.parametrize("flag", ["-o", "--html", "--save-baseline"])
def test_a_trace_report_never_replaces_a_trace(traces, capsys, flag):
    before = (traces / "new.json.gz").read_bytes()
    code, _, err = archlint(capsys, "trace", "new.json.gz", "--output-format", "json", flag, "new.json.gz")
    assert code == 2 and (traces / "new.json.gz").read_bytes() == before
    assert err.endswith("it is a trace that this run reads, and the report would replace it; give another file name\n")


def test_trace_diff_writes_through_the_one_writer(traces, capsys):
    before = (traces / "base.json.gz").read_bytes()
    code, _, err = archlint(
        capsys, "trace", "new.json.gz", "--diff", "base.json.gz", "--output-format", "json", "-o", "base.json.gz"
    )
    assert code == 2 and (traces / "base.json.gz").read_bytes() == before, err  # was: replaced by the diff
    (traces / "folder").mkdir()
    code, _, err = archlint(
        capsys, "trace", "new.json.gz", "--diff", "base.json.gz", "--output-format", "json", "-o", "folder"
    )
    assert code == 2 and "internal error" not in err and err.endswith("it is a folder; give a file name\n"), err
    code, _, err = archlint(
        capsys, "trace", "new.json.gz", "--diff", "base.json.gz", "--output-format", "json", "-o", "diff.json"
    )
    assert code in (0, 1) and set(json.loads((traces / "diff.json").read_text())) >= {"diff", "traces"}, err


def test_the_same_trace_named_twice_is_read_once(traces, capsys):
    code, out, err = archlint(
        capsys, "trace", "new.json.gz", "./new.json.gz", str(traces / "new.json.gz"), "--output-format", "json"
    )
    assert code in (0, 1) and len(json.loads(out)["traces"]) == 1, err  # was: 3


# A model --------------------------------------------------------------------------------------------


def test_a_report_never_replaces_the_model_file(tmp_path, capsys, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    model = "import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
    (tmp_path / "model.py").write_text(model)
    for flag in ("-o", "--html", "--save-baseline"):
        code, _, err = archlint(
            capsys, "model.py:Net", "--input-shape", "1,4", "--output-format", "json", flag, "model.py"
        )
        assert code == 2 and (tmp_path / "model.py").read_text() == model, err  # was: exit 0, model.py a report
        assert "it is the model's file that this run reads" in err


def test_a_stream_onto_an_input_is_refused(project):
    """`-o /dev/stdout >> train.py`: opening /dev/stdout again would truncate train.py."""
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with open(project / "train.py", "ab") as appended:
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "archlint",
                "train.py",
                "--no-cache",
                "--output-format",
                "json",
                "-o",
                "/dev/stdout",
            ],
            stdout=appended,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=project,
            timeout=120,
            check=False,
        )
    assert run.returncode == 2 and (project / "train.py").read_text() == FINDING  # was: the report, alone
    assert run.stderr == (
        "archlint: error: cannot write the report to /dev/stdout: it is a linted file (train.py) "
        "that this run reads, and the report would replace it; give another file name\n"
    )
