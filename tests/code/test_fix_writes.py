"""Issue 24 (1-3) and issue 25 (7): --fix never loses a byte. Each test makes a real write fail or
race (a file size limit, a read-only folder, an immutable file, an edit between read and write,
links out of the tree) and checks the original is byte for byte as it was, the warning names why,
and the summary does not claim the fix."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import archlint
from archlint import writeguard
from archlint.cli import main
from archlint.code import fix as fix_module
from archlint.code import writeback
from archlint.config import Settings

PACKAGE_ROOT = Path(archlint.__file__).resolve().parents[1]
FINDING = "import torch\nx = torch.zeros(3).cuda()\n"  # one AL402, fixed with 2 edits
FIXED = 'import torch\nx = torch.zeros(3, device="cuda")\n'


def cli(*args, cwd, preexec_fn=None, prefix=()):
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)}
    return subprocess.run(
        [*prefix, sys.executable, "-m", "archlint", *args, "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=preexec_fn,
    )


def _file_size_limit(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_file_size_limit_leaves_the_file_whole_and_claims_nothing(tmp_path):
    big = FINDING + "# padding to be past the limit\n" * 4000  # ~124 KB
    (tmp_path / "big.py").write_text(big)
    run = cli("big.py", "--fix", cwd=tmp_path, preexec_fn=_file_size_limit(40 * 1024))
    assert (tmp_path / "big.py").read_text() == big  # was: cut at 40 KB
    assert run.stderr.strip() == "archlint: warning: big.py: cannot write the fixes (File too large); left unchanged"
    assert run.stdout.splitlines()[-1] == "Fixed 0 findings (1 remaining)."  # was: "Fixed 1 finding"
    assert "more fixable with --fix --unsafe-fixes" not in run.stdout  # the left fix is a safe one
    assert run.returncode == 1
    assert [p.name for p in tmp_path.iterdir()] == ["big.py"]  # no temporary file left


def test_file_size_limit_keeps_an_existing_report_whole(tmp_path):
    (tmp_path / "a.py").write_text(FINDING + "\n".join(f"y{i} = torch.ones(1).cuda()" for i in range(200)) + "\n")
    old = "previous report\n"
    (tmp_path / "out.sarif").write_text(old)
    run = cli("a.py", "--output-format", "sarif", "-o", "out.sarif", cwd=tmp_path, preexec_fn=_file_size_limit(4096))
    assert run.returncode == 2
    assert run.stderr.strip().startswith("archlint: error: cannot write the report to out.sarif (File too large)")
    assert (tmp_path / "out.sarif").read_text() == old  # was: a cut report


def _without_dac_override() -> tuple[str, ...]:
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root, where permissions do not apply, and setpriv is missing")
    return (setpriv, "--bounding-set=-dac_override,-dac_read_search", "--")


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")
def test_read_only_folder_is_not_written(tmp_path):
    prefix = _without_dac_override()
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / "a.py").write_text(FINDING)
    folder.chmod(0o555)
    try:
        run = cli("ro/a.py", "--fix", cwd=tmp_path, prefix=prefix)
    finally:
        folder.chmod(0o755)
    assert (folder / "a.py").read_text() == FINDING
    assert run.stderr.strip() == (
        "archlint: warning: ro/a.py: cannot write the fixes (Permission denied); left unchanged"
    )
    assert run.stdout.splitlines()[-1] == "Fixed 0 findings (1 remaining)."


def test_immutable_file_is_not_written(tmp_path):
    target = tmp_path / "a.py"
    target.write_text(FINDING)
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(target)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here (needs root and a file system with the flag)")
    try:
        run = cli("a.py", "--fix", cwd=tmp_path)
    finally:
        subprocess.run([chattr, "-i", str(target)], check=True)
    assert target.read_text() == FINDING
    assert "a.py: cannot write the fixes (Permission denied); left unchanged" in run.stderr
    assert run.stdout.splitlines()[-1] == "Fixed 0 findings (1 remaining)."


def test_an_edit_between_read_and_write_is_kept(tmp_path, monkeypatch, capsys):
    target = tmp_path / "a.py"
    target.write_text(FINDING)
    saved = FINDING + "y = 1  # saved by the editor while archlint worked\n"
    real = fix_module.fix_text

    def slow_fix(text, path, settings, context=None):
        out = real(text, path, settings, context)
        target.write_text(saved)  # the editor's save lands after the read, before the write
        return out

    monkeypatch.setattr(fix_module, "fix_text", slow_fix)
    assert main([str(target), "--fix", "--no-cache"]) == 1
    assert target.read_text() == saved  # was: overwritten by the fix of the old text
    out, err = capsys.readouterr()
    assert "it changed since archlint read it" in err and "left unchanged" in err
    assert out.splitlines()[-1] == "Fixed 0 findings (1 remaining)."


def test_a_rename_between_read_and_write_is_seen(tmp_path, monkeypatch):
    """Another --fix run renamed its result over the file meanwhile (a new inode, new bytes)."""
    target = tmp_path / "a.py"
    target.write_text(FINDING)
    real = fix_module.fix_text

    def racing(text, path, settings, context=None):
        out = real(text, path, settings, context)
        (tmp_path / "other").write_text(FIXED)
        os.replace(tmp_path / "other", target)
        return out

    monkeypatch.setattr(fix_module, "fix_text", racing)
    remaining = fix_module.fix_files([target], Settings(root=tmp_path, fix=True, cache=False), paths=[tmp_path])
    assert remaining.fixed == 0 and target.read_text() == FIXED


def test_links_out_of_the_tree_are_not_written_through(tmp_path):
    outside = tmp_path / "outside"
    tree = tmp_path / "tree"
    (outside / "sub").mkdir(parents=True)  # the linked folder holds another file than the linked file
    tree.mkdir()
    (outside / "linked.py").write_text(FINDING)
    (outside / "sub" / "in_folder.py").write_text(FINDING)
    (tree / "own.py").write_text(FINDING)
    (tree / "link.py").symlink_to(outside / "linked.py")
    (tree / "folder").symlink_to(outside / "sub")
    run = cli("tree", "--fix", cwd=tmp_path)
    assert (outside / "linked.py").read_text() == FINDING  # was: fixed through the link
    assert (outside / "sub" / "in_folder.py").read_text() == FINDING  # was: fixed through the linked folder
    assert (tree / "link.py").is_symlink()
    assert (tree / "own.py").read_text() == FIXED
    assert (
        f"tree/link.py: fixes not written: it is a symbolic link to {outside / 'linked.py'}; archlint never writes "
        "through a link (it would replace the link's target): remove the link or give the real file's path; "
        "left unchanged"
    ) in run.stderr
    assert "tree/folder/in_folder.py: fixes not written: it lies outside the linted tree" in run.stderr
    assert run.stdout.splitlines()[-1].startswith("Fixed 1 finding with 2 edits (")


def test_a_link_inside_the_tree_is_not_replaced_by_a_copy(tmp_path):
    (tmp_path / "real.py").write_text(FINDING)
    (tmp_path / "alias.py").symlink_to(tmp_path / "real.py")
    cli(".", "--fix", cwd=tmp_path)
    assert (tmp_path / "alias.py").is_symlink()  # the link stays a link; real.py was fixed in its own right
    assert (tmp_path / "real.py").read_text() == FIXED


def test_mode_and_hard_links_are_respected(tmp_path):
    target = tmp_path / "a.py"
    target.write_text(FINDING)
    target.chmod(0o640)
    cli("a.py", "--fix", cwd=tmp_path)
    assert target.read_text() == FIXED and (target.stat().st_mode & 0o7777) == 0o640

    linked = tmp_path / "b.py"
    linked.write_text(FINDING)
    os.link(linked, tmp_path / "b_alias.txt")
    run = cli("b.py", "--fix", cwd=tmp_path)
    assert linked.read_text() == FINDING and (tmp_path / "b_alias.txt").read_text() == FINDING
    assert "b.py: fixes not written: it has 2 hard links" in run.stderr


def test_fixed_counts_fixes_written_and_their_edits(tmp_path):
    (tmp_path / "a.py").write_text(FINDING)
    run = cli("a.py", "--fix", cwd=tmp_path)
    assert run.stdout.splitlines()[-1] == "Fixed 1 finding with 2 edits (0 remaining)."
    (tmp_path / "b.py").write_text(FINDING)
    run = cli("b.py", "--diff", cwd=tmp_path)
    assert run.stderr == "Would fix 1 finding with 2 edits.\n"


def test_a_fix_goes_in_whole_or_waits(monkeypatch):
    """Two fixes whose edits overlap: the first one goes in, the second not even in part (a half
    fix can change what the code does); it is offered again on the re-linted text."""
    from archlint.diagnostics import Applicability, Diagnostic, Edit, Fix

    text = "import torch\nab = 1\n"
    first = Fix("f", Applicability.SAFE, (Edit(2, 1, 2, 3, "cd"),))
    second = Fix("s", Applicability.SAFE, (Edit(2, 6, 2, 7, "2"), Edit(2, 2, 2, 3, "X")))
    calls = []

    def lint(text, path, context=None):
        calls.append(text)
        if len(calls) == 1:
            return [
                Diagnostic("AL402", "m", file=path, line=2, column=1, fix=first),
                Diagnostic("AL402", "m", file=path, line=2, column=2, fix=second),
            ]
        return []

    monkeypatch.setattr(fix_module, "lint_text", lint)
    fixed, remaining = fix_module.fix_text(text, "t.py", Settings(fix=True))
    assert fixed == "import torch\ncd = 1\n"  # not "cd = 2": the second fix's other edit waits too
    assert (remaining.fixed, remaining.edits) == (1, 1)


def test_write_refuses_a_path_outside_the_trees(tmp_path):
    (tmp_path / "a.py").write_text(FINDING)
    with pytest.raises(writeback.Refused, match="outside the linted tree"):
        writeback.replace(tmp_path / "a.py", FINDING.encode(), FIXED.encode(), [str(tmp_path / "elsewhere")])
    assert (tmp_path / "a.py").read_text() == FINDING


# Issue 38 (16 and the internal errors) ------------------------------------------------------------

LOCKER = """\
import fcntl, sys, time
f = open(sys.argv[1], "rb")
fcntl.flock(f, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="flock is POSIX")
def test_a_file_another_process_keeps_locked_is_skipped_not_waited_for(tmp_path):
    (tmp_path / "a.py").write_text(FINDING)
    (tmp_path / "b.py").write_text(FINDING)
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(tmp_path / "b.py")], stdout=subprocess.PIPE, text=True)
    try:
        assert locker.stdout.readline() == "locked\n"
        run = cli("a.py", "b.py", "--fix", cwd=tmp_path)  # was: waited for the lock forever (timeout here)
    finally:
        locker.kill()
        locker.wait()
    assert (tmp_path / "a.py").read_text() == FIXED and (tmp_path / "b.py").read_text() == FINDING
    assert run.stderr == (
        "archlint: warning: b.py: fixes not written: another process holds a lock on it (flock) for "
        "more than 2 s; run --fix again when it is released; left unchanged\n"
    )
    assert run.returncode == 1 and run.stdout.splitlines()[-1] == "Fixed 1 finding with 2 edits (1 remaining)."
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "b.py"]  # no temporary file left


def test_a_255_byte_file_name_can_be_fixed(tmp_path):
    name = "字" * 84 + ".py"  # 84 × 3 + 3 = 255 bytes, legal; the temporary name was cut in characters
    assert len(name.encode()) == 255
    (tmp_path / name).write_text(FINDING)
    run = cli(name, "--fix", cwd=tmp_path)
    assert run.stderr == "" and (tmp_path / name).read_text() == FIXED  # was: File name too long, never fixed
    assert writeback.TEMP_SUFFIX in writeguard.temp_name(name) and len(os.fsencode(writeguard.temp_name(name))) == 255


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_killed_runs_temporary_file_is_removed_by_the_next_write(tmp_path):
    (tmp_path / "a.py").write_text(FINDING)
    dead, alive = _dead_pid(), os.getpid()
    stale = tmp_path / f".a.py.{dead}.0123abcd{writeback.TEMP_SUFFIX}"
    young = tmp_path / f".a.py.{dead}.4567abcd{writeback.TEMP_SUFFIX}"  # a writer in another pid namespace, maybe
    live = tmp_path / f".a.py.{alive}.89abcdef{writeback.TEMP_SUFFIX}"
    other = tmp_path / f".notes.{dead}.0123abcd.tmp"  # not archlint's: never touched
    for path in (stale, young, live, other):
        path.write_text("half a file")
    old = os.stat(stale).st_mtime - 3600
    for path in (stale, live, other):
        os.utime(path, (old, old))
    run = cli(".", "--fix", cwd=tmp_path)
    assert (tmp_path / "a.py").read_text() == FIXED and "temp" not in run.stderr
    assert not stale.exists()  # was: left for ever
    assert young.exists() and live.exists() and other.exists()

    os.utime(young, (old, old))
    (tmp_path / "r.json").write_text("{}")
    assert cli("a.py", "--output-format", "json", "-o", "r.json", cwd=tmp_path).returncode == 0
    assert not young.exists() and live.exists()  # the report writer cleans its folder too


STOPPED_MID_WRITE = """\
import os, signal, sys, time
from pathlib import Path
# Python's own Ctrl-C handler, whatever this child inherited (a background job started by a
# non-interactive shell ignores SIGINT, and an ignored signal stays ignored across exec)
signal.signal(signal.SIGINT, signal.default_int_handler)
real = os.fsync
def slow(fd):  # the temporary file is complete and about to be renamed: stop the run now
    print("writing", flush=True)
    time.sleep(1.5)
    return real(fd)
os.fsync = slow
folder = Path(sys.argv[2])
if sys.argv[1] == "fix":
    from archlint.code import writeback
    writeback.replace(folder / "a.py", (folder / "a.py").read_bytes(), b"fixed\\n", [str(folder)])
else:
    from archlint.outputs import write_text
    write_text(folder / "a.py", "a new report\\n")
print("survived", flush=True)
"""


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX signals")
@pytest.mark.parametrize("writer", ["fix", "report"])
@pytest.mark.parametrize("stop", ["SIGTERM", "SIGINT"])
def test_a_run_stopped_mid_write_leaves_no_temporary_file(tmp_path, writer, stop):
    """A CI job cancelled (SIGTERM) or Ctrl-C while a file is written: the write finishes or is
    undone, then the run stops; the folder holds the old file or the new one, nothing else."""
    (tmp_path / "a.py").write_text(FINDING)
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", STOPPED_MID_WRITE, writer, str(tmp_path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout.readline() == "writing\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(writeback.TEMP_SUFFIX)]  # mid-write indeed
    child.send_signal(getattr(signal, stop))
    out, _ = child.communicate(timeout=60)
    assert child.returncode != 0 and "survived" not in out  # the stop was not lost, only held
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py"]  # was: .a.py.XXXX.archlint.tmp left
    assert (tmp_path / "a.py").read_text() in (FINDING, "fixed\n", "a new report\n")
