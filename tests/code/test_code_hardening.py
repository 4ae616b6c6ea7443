"""Issue 14: no input crashes, hangs or swamps the code linter, and one bad path never costs the
rest of the run its results. Each test goes through the command line and checks the exit code,
the one line about the bad path and that every other file's finding is still there."""

from __future__ import annotations

import faulthandler
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import archlint
from archlint.cli import main
from archlint.code import cache as cache_files
from archlint.code import lint

PACKAGE_ROOT = Path(archlint.__file__).resolve().parents[1]
FINDING = "import torch\nx = torch.zeros(3).cuda()\n"  # one AL402 on line 2
GOOD = [f"good{i}.py" for i in range(9)]  # with -j 2, enough files to use the worker processes


def cli(*args, cwd, timeout=120, prefix=()):
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)}
    return subprocess.run(
        [*prefix, sys.executable, "-m", "archlint", *args, "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def findings(stdout: str) -> dict[str, list[tuple[str, str, str]]]:
    """file name → [(code, severity, message)] from --output-format json."""
    out: dict[str, list] = {}
    for d in json.loads(stdout)["diagnostics"]:
        out.setdefault(os.path.basename(d["file"]), []).append((d["code"], d["severity"], d["message"]))
    return out


def good_files(folder: Path) -> None:
    for name in GOOD:
        (folder / name).write_text(FINDING)


def assert_good_kept(found: dict) -> None:
    for name in GOOD:
        assert [c for c, _, _ in found.get(name, [])] == ["AL402"], name


# 1. A crash that loses everyone's results -------------------------------------------------------


def test_deep_parentheses_are_one_finding_under_j2(tmp_path):
    (tmp_path / "deep.py").write_text("import torch\nx = " + "(" * 2000 + "1" + ")" * 2000 + "\n")
    good_files(tmp_path)
    run = cli(".", "-j", "2", "--output-format", "json", cwd=tmp_path)
    assert run.returncode == 1, run.stderr  # was: BrokenProcessPool, every finding lost
    assert "internal error" not in run.stderr
    found = findings(run.stdout)
    assert found["deep.py"] == [
        ("AL000", "error", "syntax error: too many nested parentheses; fix it so the file can be linted")
    ]
    assert_good_kept(found)
    alone = cli("deep.py", cwd=tmp_path)
    assert alone.returncode == 1, alone.returncode  # was: 139, SIGSEGV with no message
    assert "AL000 syntax error: too many nested parentheses" in alone.stdout


def test_a_dying_worker_costs_only_its_file(tmp_path, monkeypatch, capsys):
    (tmp_path / "crash.py").write_text(FINDING)
    good_files(tmp_path)
    real = lint._work

    def work(item):  # the worker process dies on this one file, as on a crash in the C parser
        if item[0].endswith("crash.py"):
            faulthandler.disable()  # no crash dump from pytest's handler in the test output
            os.kill(os.getpid(), signal.SIGSEGV)
        return real(item)

    monkeypatch.setattr(lint, "_work", work)  # the forked workers inherit it
    rc = main([str(tmp_path), "-j", "2", "--no-cache", "--output-format", "json"])
    out = capsys.readouterr()
    assert rc == 1, out.err
    found = findings(out.out)
    assert found["crash.py"] == [
        (
            "AL000",
            "error",
            "archlint internal error: the worker linting this file died "
            "(signal SIGSEGV); the other files were linted; please report it",
        )
    ]
    assert_good_kept(found)


# 3. Hangs: only regular files are read --------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
@pytest.mark.parametrize("fix", [False, True], ids=["lint", "fix"])
def test_fifo_and_device_files_are_refused_not_read(tmp_path, fix):
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "link.py").symlink_to(tmp_path / "pipe.py")
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    good_files(tmp_path)
    args = ["pipe.py", "link.py", "zero.py", "/dev/zero", *GOOD, "--output-format", "json"]
    run = cli(*args, *(["--fix"] if fix else []), cwd=tmp_path, timeout=60)  # was: blocked forever
    # named on the command line, each refusal is an error (issue 38: a path the user names that cannot
    # be linted fails the run, as an unreadable file does; it was info and exit 0 under --fix)
    assert run.returncode == 1, run.stderr
    found = findings(run.stdout)
    fifo = (
        "AL000",
        "error",
        "not a regular file (a FIFO); archlint reads only regular files; name a Python file or a folder",
    )
    device = (
        "AL000",
        "error",
        "not a regular file (a character device); archlint reads only regular files; name a Python file or a folder",
    )
    refused = sorted(d for name, ds in found.items() if name not in GOOD for d in ds)
    assert refused == [fifo, device]  # pipe.py (link.py names it too), zero.py (so does /dev/zero): each once
    if fix:
        assert all((tmp_path / name).read_text() != FINDING for name in GOOD)
    else:
        assert_good_kept(found)


# 4. Memory and time out of proportion ----------------------------------------------------------


def test_file_past_the_size_limit_is_skipped_with_an_info_finding(tmp_path):
    (tmp_path / "generated.py").write_text(FINDING + "TABLE = [\n" + "    1.0,\n" * 3000 + "]\n")  # ~30 KB
    good_files(tmp_path)
    run = cli(".", "--max-file-size", "0.02", "--output-format", "json", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    found = findings(run.stdout)
    [(code, severity, message)] = found["generated.py"]
    assert (code, severity) == ("AL000", "info")
    assert message.startswith("not analyzed: 0.0271 MB is past the size limit of 0.02 MB (generated code, usually)")
    assert_good_kept(found)
    # the limit raised: the file is linted (its one finding)
    (tmp_path / "pyproject.toml").write_text("[tool.archlint]\nmax-file-size = 1\n")
    run = cli("generated.py", "--output-format", "json", cwd=tmp_path)
    assert [c for c, _, _ in findings(run.stdout)["generated.py"]] == ["AL402"]
    # a skipped file can be ignored like a rule (a syntax error cannot)
    run = cli(".", "--max-file-size", "0.02", "--ignore", "AL000", cwd=tmp_path)
    assert "generated.py" not in run.stdout and run.returncode == 1


def test_long_operator_chains_finish_quickly(tmp_path):
    # 100,000 terms: CPython refuses it too (AL000); 2,000: valid, too deep to analyze (info)
    (tmp_path / "huge.py").write_text("import torch\nx = " + "+".join(["a"] * 100_000) + "\n")
    (tmp_path / "long.py").write_text("import torch\nx = " + "+".join(["a"] * 2_000) + "\n")
    good_files(tmp_path)
    run = cli(".", "-j", "2", "--output-format", "json", cwd=tmp_path, timeout=60)  # was: never finished
    assert run.returncode == 1, run.stderr
    found = findings(run.stdout)
    assert found["huge.py"] == [
        (
            "AL000",
            "error",
            "syntax error: Python cannot compile this file either "
            "(nesting too deep for its parser); split the expression",
        )
    ]
    [(code, severity, message)] = found["long.py"]
    assert (code, severity) == ("AL000", "info")
    assert message.startswith("not analyzed: too complex (syntax nested 2003 levels deep, the limit is 500)")
    assert_good_kept(found)


# 5. A bad path is one warning, the rest of the run completes ---------------------------------------


def test_directory_symlink_loop_is_a_warning(tmp_path):
    (tmp_path / "src" / "sub").mkdir(parents=True)
    (tmp_path / "src" / "sub" / "loop").symlink_to(tmp_path / "src")
    good_files(tmp_path / "src")
    run = cli("src", "--output-format", "json", cwd=tmp_path, timeout=60)
    assert run.returncode == 1, run.stderr
    assert run.stderr.strip() == (
        "archlint: warning: src/sub/loop: folder already walked (a symlink loop or a second link to it); skipped"
    )
    assert_good_kept(findings(run.stdout))


def _without_dac_override() -> tuple[str, ...]:
    """Run the CLI where permissions really apply: as root, without the capabilities that bypass them."""
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root, where chmod does not deny reads, and setpriv is missing to drop CAP_DAC_OVERRIDE")
    return (setpriv, "--bounding-set=-dac_override,-dac_read_search", "--")


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")
def test_unreadable_folders_and_read_only_fix_target(tmp_path):
    prefix = _without_dac_override()
    good_files(tmp_path)
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "inner.py").write_text(FINDING)
    (tmp_path / "readonly.py").write_text(FINDING)
    (tmp_path / "locked").chmod(0)
    (tmp_path / "readonly.py").chmod(0o444)
    try:
        run = cli(".", "--output-format", "json", cwd=tmp_path, prefix=prefix)
        assert run.returncode == 1, run.stderr  # was: internal error, rc 2
        found = findings(run.stdout)  # an error of the run, as an unreadable file (issue 38: was a warning)
        assert found["locked"] == [
            ("AL000", "error", "cannot list this folder (Permission denied); its files were not linted")
        ]
        assert_good_kept(found)
        assert [c for c, _, _ in found["readonly.py"]] == ["AL402"]

        run = cli("locked/inner.py", "good0.py", "--output-format", "json", cwd=tmp_path, prefix=prefix)
        assert run.returncode == 1, run.stderr
        found = findings(run.stdout)
        assert found["inner.py"] == [("AL000", "error", "cannot read file: Permission denied; check its permissions")]
        assert [c for c, _, _ in found["good0.py"]] == ["AL402"]

        run = cli("readonly.py", *GOOD, "--fix", "--output-format", "json", cwd=tmp_path, prefix=prefix)
        assert run.returncode == 1, run.stderr
        assert (
            run.stderr.strip()
            == "archlint: warning: readonly.py: cannot write the fixes (Permission denied); left unchanged"
        )
        assert [c for c, _, _ in findings(run.stdout)["readonly.py"]] == ["AL402"]
        assert (tmp_path / "readonly.py").read_text() == FINDING
        assert all((tmp_path / name).read_text() != FINDING for name in GOOD)  # the others were fixed
    finally:
        (tmp_path / "locked").chmod(0o755)


# 8. No markup or emoji in locations -----------------------------------------------------------


def test_text_locations_are_never_emoji(tmp_path):
    (tmp_path / "loc.py").write_text("import torch\n" + "\n" * 98 + "x = torch.zeros(3).cuda()\n")
    (tmp_path / "[bold]x.py").write_text(FINDING)
    run = cli("loc.py", "[bold]x.py", cwd=tmp_path)
    lines = run.stdout.splitlines()
    assert lines[0].startswith("[bold]x.py:2:5: AL402 ")
    assert lines[1].startswith("loc.py:100:5: AL402 ")  # was: loc.py💯5


# 9. No false parse errors ---------------------------------------------------------------------


@pytest.mark.parametrize("open_, close", [("[", "]"), ("(", ")"), ("f(", ")"), ("{1: ", "}")])
def test_nesting_cpython_accepts_is_linted(tmp_path, open_, close):
    source = "import torch\nx = " + open_ * 150 + "1" + close * 150 + "\n" + "y = torch.zeros(3).cuda()\n"
    compile(source, "nested.py", "exec")  # valid Python
    (tmp_path / "nested.py").write_text(source)
    run = cli("nested.py", "--output-format", "json", cwd=tmp_path, timeout=60)
    assert run.returncode == 1, run.stderr
    assert [c for c, _, _ in findings(run.stdout)["nested.py"]] == ["AL402"]  # was: AL000 nesting too deep


# 11. Cache robustness -------------------------------------------------------------------------


def _cached(tmp_path: Path, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "archlint", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )


def test_cache_entry_of_the_wrong_type_is_relinted(tmp_path):
    (tmp_path / "a.py").write_text(FINDING)
    assert _cached(tmp_path, "a.py").returncode == 1
    path = tmp_path / ".archlint_cache" / "code-v1.json"
    cache = json.loads(path.read_text())["entries"]
    [key] = cache
    cache[key][0][3] = "2"  # a string line number, in a cache signed as this user's (a version's bug)
    path.write_bytes(cache_files.dump(cache))
    run = _cached(tmp_path, "a.py", "--output-format", "sarif")
    assert run.returncode == 1  # was: internal error in the SARIF writer
    assert "malformed cache entry for a.py" in run.stderr
    region = json.loads(run.stdout)["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] == 2


def test_failed_cache_write_leaves_no_temp_file(tmp_path, monkeypatch, capsys):
    (tmp_path / "a.py").write_text(FINDING)
    real = os.fdopen

    class Full:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def write(self, data):
            self.handle.write(data[:1])
            raise OSError(28, "No space left on device")

    def full_disk(fd, mode="r", *args, **kwargs):
        handle = real(fd, mode, *args, **kwargs)
        return Full(handle) if mode == "wb" else handle

    monkeypatch.setattr(cache_files.os, "fdopen", full_disk)
    assert main([str(tmp_path / "a.py"), "--config", str(_pyproject(tmp_path))]) == 1
    assert "cannot write the cache" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / ".archlint_cache").iterdir() if p.suffix == ".tmp"] == []


def _pyproject(tmp_path: Path) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.archlint]\n")
    return path


def test_concurrent_runs_on_different_files_keep_each_others_entries(tmp_path):
    names = [f"f{i}.py" for i in range(6)]
    for name in names:
        (tmp_path / name).write_text(FINDING + f"# {name}\n")
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)}
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "archlint", name, "-j", "1"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in names
    ]
    for run in runs:
        assert run.wait(timeout=120) == 1, run.stderr.read()
    cache = json.loads((tmp_path / ".archlint_cache" / "code-v1.json").read_text())["entries"]
    assert len(cache) == len(names)  # was: the last writer's one entry
