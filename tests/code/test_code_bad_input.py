"""Bad input never crashes a run: it becomes one diagnostic (or exit 2 for a missing path)."""

from __future__ import annotations

import codecs
import os
import subprocess
import sys

import pytest

from archlint.cli import main
from archlint.code import lint
from archlint.config import Settings

FINDING = "import torch\nx = torch.zeros(3).cuda()\n"  # one AL402 on line 2


def run(tmp_path, *paths, **kw):
    settings = Settings(root=tmp_path, cache=False, **kw)
    run = lint.lint_paths([tmp_path / p for p in paths], settings)
    diagnostics, n = run.diagnostics, run.files_checked
    return [(os.path.basename(d.file), d.line, d.code) for d in diagnostics], n


def test_syntax_error_is_one_diagnostic_and_others_still_linted(tmp_path):
    (tmp_path / "broken.py").write_text("import torch\n\ndef f(:\n    pass\n")
    (tmp_path / "good.py").write_text(FINDING)
    found, n = run(tmp_path, ".")
    assert n == 2
    assert found == [("broken.py", 3, "AL000"), ("good.py", 2, "AL402")]
    diagnostics = lint.lint_paths([tmp_path / "broken.py"], Settings(root=tmp_path, cache=False)).diagnostics
    assert diagnostics[0].message.startswith("syntax error: invalid syntax")


def test_non_utf8_file(tmp_path):
    (tmp_path / "latin.py").write_bytes(b"import torch\n# caf\xe9\n")
    (tmp_path / "declared.py").write_bytes(
        b"# -*- coding: latin-1 -*-\nimport torch\n# caf\xe9\nx = torch.zeros(3).cuda()\n"
    )
    found, _ = run(tmp_path, ".")
    assert found == [("declared.py", 4, "AL402"), ("latin.py", 1, "AL000")]


def test_bom_crlf_and_empty(tmp_path):
    (tmp_path / "bom.py").write_bytes(codecs.BOM_UTF8 + FINDING.encode())
    (tmp_path / "crlf.py").write_bytes(FINDING.replace("\n", "\r\n").encode())
    (tmp_path / "empty.py").write_bytes(b"")
    found, n = run(tmp_path, ".")
    assert n == 3
    assert found == [("bom.py", 2, "AL402"), ("crlf.py", 2, "AL402")]


def test_bom_and_crlf_survive_fix(tmp_path):
    (tmp_path / "bom.py").write_bytes(codecs.BOM_UTF8 + FINDING.replace("\n", "\r\n").encode())
    found, _ = run(tmp_path, "bom.py", fix=True)
    assert found == []
    data = (tmp_path / "bom.py").read_bytes()
    assert data == codecs.BOM_UTF8 + b'import torch\r\nx = torch.zeros(3, device="cuda")\r\n'


def test_unreadable_file(tmp_path, monkeypatch):
    (tmp_path / "secret.py").write_text(FINDING)
    (tmp_path / "good.py").write_text(FINDING)
    real = lint._read

    def fake(path, *rest):
        if path.name == "secret.py":
            raise PermissionError(13, "Permission denied")
        return real(path, *rest)

    monkeypatch.setattr(lint, "_read", fake)
    found, _ = run(tmp_path, ".")
    assert found == [("good.py", 2, "AL402"), ("secret.py", 1, "AL000")]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root can read mode-000 files")
def test_unreadable_file_for_real(tmp_path):
    path = tmp_path / "secret.py"
    path.write_text(FINDING)
    path.chmod(0)
    found, _ = run(tmp_path, "secret.py")
    assert found == [("secret.py", 1, "AL000")]


def test_nonexistent_path_exits_2_with_one_line(tmp_path, capsys):
    assert main([str(tmp_path / "nope.py"), "--no-cache"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope.py: no such file or directory" in err[0]


def test_exit_codes(tmp_path):
    clean = tmp_path / "clean.py"
    clean.write_text("import torch\nx = torch.zeros(3, device='cuda')\n")
    dirty = tmp_path / "dirty.py"
    dirty.write_text(FINDING)

    def code(*args):
        return subprocess.run(
            [sys.executable, "-m", "archlint", *args, "--no-cache"], cwd=tmp_path, capture_output=True, text=True
        ).returncode

    assert code("clean.py") == 0
    assert code("dirty.py") == 1
    assert code("dirty.py", "--exit-zero") == 0
    assert code("dirty.py", "--ignore", "AL4") == 0
    assert code("missing.py") == 2
    assert code("dirty.py", "--jobs", "x") == 2


def test_a_failing_check_is_reported_and_others_still_run(monkeypatch):
    from archlint.code.checks import zero_grad
    from archlint.code.engine import lint_text

    def broken(facts):
        raise ValueError("boom")
        yield

    monkeypatch.setattr(zero_grad, "check", broken)
    found = lint_text(FINDING, "t.py")
    assert [(d.code, d.line) for d in found] == [("AL000", 1), ("AL402", 2)]
    assert "internal error in check 'zero_grad'" in found[0].message and "boom" in found[0].message


def test_a_reader_that_leaves_early_gets_no_traceback_and_no_error_line():
    """`archlint ... | head`: output to a closed pipe ends the run quietly, exit 2."""
    script = (
        "import os, sys\n"
        "r, w = os.pipe(); os.close(r); os.dup2(w, 1)\n"
        "from archlint.cli import main\n"
        "sys.exit(main(['rule', 'AL101']))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == ""
