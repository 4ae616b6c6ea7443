"""Linting never imports or runs the linted code, and never imports torch."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SENTINEL_SCRIPT = textwrap.dedent(
    """
    import pathlib
    pathlib.Path({sentinel!r}).write_text("executed")
    import torch
    from torch.utils.data import DataLoader
    loader = DataLoader(ds)
    x = torch.zeros(3).cuda()
    if __name__ == "__main__":
        pathlib.Path({sentinel!r}).write_text("executed")
    """
)


def test_linted_code_is_never_executed(tmp_path):
    sentinel = tmp_path / "sentinel.txt"
    script = tmp_path / "evil.py"
    script.write_text(SENTINEL_SCRIPT.format(sentinel=str(sentinel)))
    (tmp_path / "conftest.py").write_text(f"open({str(sentinel)!r}, 'w').write('x')\nimport torch\n")
    proc = subprocess.run(
        [sys.executable, "-m", "archlint", str(tmp_path), "--no-cache"], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 1, proc.stderr
    assert "AL402" in proc.stdout  # the file was really linted
    assert not sentinel.exists()


def _modules_after(args: list[str], cwd) -> set[str]:
    code = (
        "import sys\nfrom archlint.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "print('MODULES', ' '.join(sorted(sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("MODULES"))
    return set(line.split()[1:])


def test_torch_not_imported_by_version_or_lint(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\nfrom torch.utils.data import DataLoader\nDataLoader(ds).cuda()\n")
    for args in (["--version"], [str(script), "--no-cache"], [str(script), "--diff"]):
        loaded = _modules_after(args, tmp_path)
        assert "torch" not in loaded, args
        assert "archlint.model" not in loaded
    assert "libcst" in _modules_after([str(script), "--no-cache"], tmp_path)  # it did parse
