"""--fix / --diff: safe fixes only unless --unsafe-fixes, formatting kept, result compiles, idempotent."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from archlint.cli import main
from archlint.code.engine import lint_text
from archlint.code.fix import apply_edits, fix_text
from archlint.config import Settings
from archlint.diagnostics import Edit

FIXTURES = Path(__file__).parents[1] / "fixtures" / "code"


def fixed(source: str, unsafe: bool = False) -> str:
    return fix_text(source, "t.py", Settings(fix=True, unsafe_fixes=unsafe))[0]


def test_add_pin_memory_keeps_layout_and_comments():
    src = (
        "import torch\n"
        "from torch.utils.data import DataLoader\n"
        "loader = DataLoader(\n"
        "    dataset,  # the data\n"
        "    batch_size=64,\n"
        "    num_workers=4,\n"
        ")\n"
        "for x, y in loader:\n"
        "    x = x.to('cuda')  # copy\n"
    )
    assert fixed(src) == (
        "import torch\n"
        "from torch.utils.data import DataLoader\n"
        "loader = DataLoader(\n"
        "    dataset,  # the data\n"
        "    batch_size=64,\n"
        "    num_workers=4,\n"
        "    pin_memory=True,\n"
        ")\n"
        "for x, y in loader:\n"
        "    x = x.to('cuda', non_blocking=True)  # copy\n"
    )


def test_move_into_device_argument():
    src = "import torch\na = torch.zeros(3, 4).cuda()\nb = torch.ones(2).to(device)\nc = torch.eye(2).cuda(1)\n"
    assert fixed(src) == (
        'import torch\na = torch.zeros(3, 4, device="cuda")\nb = torch.ones(2, device=device)\n'
        'c = torch.eye(2, device="cuda:1")\n'
    )


def test_cudnn_benchmark_inserted_after_imports():
    src = (
        '"""Doc."""\nimport torch  # the lib\nimport torchvision.models as models\n\n'
        "def main():\n    m = models.resnet18().cuda()\n"
        "    for x, y in train_loader:\n        m(x)\n\n"
        'if __name__ == "__main__":\n    main()\n'
    )
    assert fixed(src) == src  # unsafe: benchmark mode may change results in the last bits
    out = fixed(src, unsafe=True)
    assert out.splitlines()[3] == "torch.backends.cudnn.benchmark = True"
    assert out.replace("torch.backends.cudnn.benchmark = True\n", "") == src


def test_unsafe_fix_needs_flag():
    src = "import torch\nopt.zero_grad(set_to_none=False)\n"
    assert fixed(src) == src
    assert fixed(src, unsafe=True) == "import torch\nopt.zero_grad(set_to_none=True)\n"


def test_overlapping_edits_first_wins():
    text, applied = apply_edits("abcdef", [Edit(1, 2, 1, 4, "X"), Edit(1, 3, 1, 5, "Y"), Edit(1, 6, 1, 6, "!")])
    assert (text, applied) == ("aXde!f", 2)


@pytest.mark.parametrize("script", sorted(FIXTURES.glob("*.py")), ids=lambda p: p.stem)
def test_fixtures_fix_compiles_and_second_fix_is_noop(tmp_path, script, capsys):
    target = tmp_path / script.name
    shutil.copy(script, target)
    original = target.read_text()
    assert main([str(target), "--diff", "--no-cache", "--unsafe-fixes"]) in (0, 1)
    diff = capsys.readouterr().out
    assert target.read_text() == original  # --diff writes nothing
    main([str(target), "--fix", "--unsafe-fixes", "--no-cache"])
    once = target.read_text()
    ast.parse(once)
    if once != original:
        assert f"--- {target}" in diff
    comments = [line.split("#", 1)[1] for line in original.splitlines() if "#" in line]
    assert all(c in once for c in comments)  # comments kept
    main([str(target), "--fix", "--unsafe-fixes", "--no-cache"])
    assert target.read_text() == once
    remaining = {d.code for d in lint_text(once, "t.py") if d.fix}
    assert not remaining


def test_fix_on_cifar_trainer(tmp_path):
    target = tmp_path / "cifar_train.py"
    shutil.copy(FIXTURES / "cifar_train.py", target)
    main([str(target), "--fix", "--no-cache"])
    text = target.read_text()
    assert "DataLoader(trainset, batch_size=batch_size, shuffle=True, pin_memory=True)" in text
    assert "inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)" in text
    assert "set_to_none=False" in text  # unsafe: not without --unsafe-fixes


def test_crlf_file_keeps_its_line_endings():
    src = (
        "import torch\r\nfrom torch.utils.data import DataLoader\r\n"
        "loader = DataLoader(\r\n    dataset,\r\n    num_workers=4,\r\n)\r\nx = torch.ones(1).cuda()\r\n"
    )
    out = fixed(src)
    assert "pin_memory=True" in out and 'device="cuda"' in out
    assert out.count("\n") == out.count("\r\n") == src.count("\r\n") + 1


def test_fix_that_breaks_the_file_is_not_written(tmp_path, monkeypatch, capsys):
    from archlint.code import fix as fix_module
    from archlint.diagnostics import Applicability, Diagnostic, Fix

    target = tmp_path / "t.py"
    target.write_text("import torch\nx = 1\n")
    bad = Diagnostic(
        "AL402",
        "m",
        file=str(target),
        line=2,
        column=1,
        fix=Fix("break it", Applicability.SAFE, (Edit(2, 1, 2, 1, "("),)),
    )
    monkeypatch.setattr(fix_module, "lint_text", lambda text, path: [bad])
    fix_module.fix_files([target], Settings(fix=True))
    assert target.read_text() == "import torch\nx = 1\n"
    assert "fixes not applied, the result would not parse" in capsys.readouterr().err


def test_a_copy_two_batch_loops_see_is_fixed_by_one_edit():
    """The validation loop nested in the training loop reuses its batch names: both loops see the
    copies, which are still one finding and one edit each (issue 31: the same copy was reported twice
    with the same edit)."""
    bad = (FIXTURES / "nested_validation.py").read_text()
    good = (FIXTURES / "nested_validation_ok.py").read_text()
    text, done = fix_text(bad, "nested_validation.py", Settings(fix=True))
    assert (done.fixed, done.edits, done.remaining) == (2, 2, [])
    assert text.split('"""')[2] == good.split('"""')[2]  # all but the docstring
