"""What trips a new user in the first hour (issue 15), through the CLI as a user types it:
exit codes and the exact first line of each message."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from archlint.cli import main

REPO = Path(__file__).resolve().parents[2]
NETS = str(REPO / "examples" / "nets.py")

TRAIN = (REPO / "tests" / "fixtures" / "code" / "cifar_train.py").read_text()
ONE_NET = textwrap.dedent(
    """
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 3)

        def forward(self, x):
            return self.conv(x)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()

        def forward(self, x):
            return self.block(x)
    """
)


def _run(capsys, argv) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def _error_line(capsys, argv) -> str:
    code, out, err = _run(capsys, argv)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and not out, (out, err)
    return lines[0]


# --- arguments in any order ------------------------------------------------------------------------


def test_paths_and_options_intermix(capsys, tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "train.py").write_text(TRAIN)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    code, out, err = _run(capsys, [a, "--select", "AL4", b, "--no-cache"])
    assert code == 1, err
    files = {line.split(":")[0] for line in out.splitlines() if "AL401" in line}
    assert files == {str(tmp_path / "a" / "train.py"), str(tmp_path / "b" / "train.py")}


def test_intermixed_option_values_still_bind_to_their_option(capsys, tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    code, out, _ = _run(capsys, ["--select", "AL2", str(tmp_path / "train.py"), "--no-cache"])
    assert (code, out.strip()) == (0, "All checks passed.")


def test_subcommands_keep_working(capsys):
    code, out, _ = _run(capsys, ["rule", "AL401"])
    assert code == 0 and out.startswith("# sync-in-training-loop (AL401)")


# --- model flags with no model -------------------------------------------------------------------


def test_model_flag_on_code_target_suggests_the_one_model(capsys, tmp_path):
    model = tmp_path / "model.py"
    model.write_text(ONE_NET)
    line = _error_line(capsys, [str(model), "--input-shape", "1,3,32,32"])
    assert line == (
        f"archlint: error: --input-shape applies to a model, but no model was named: "
        f"give PATH.py:NAME; did you mean {model}:Net?"
    )


def test_several_model_flags_and_several_models_listed(capsys):
    line = _error_line(capsys, [NETS, "--latency", "--init", "width=8"])
    assert line.startswith(
        "archlint: error: --init, --latency apply to a model, but no model was named: give PATH.py:NAME; "
        f"it defines {NETS}:TinyNet, {NETS}:Block,"
    )


def test_model_flag_on_a_folder(capsys, tmp_path):
    line = _error_line(capsys, [str(tmp_path), "--max-flops", "1e9"])
    assert line == (
        "archlint: error: --max-flops applies to a model, but no model was named: give PATH.py:NAME; e.g. model.py:Net"
    )


def test_code_flags_alone_still_lint(capsys, tmp_path):
    (tmp_path / "model.py").write_text(ONE_NET)
    code, out, err = _run(capsys, [str(tmp_path / "model.py"), "--select", "AL4", "--no-cache"])
    assert (code, out.strip(), err) == (0, "All checks passed.", "")


def test_model_flag_check_does_not_import_torch(tmp_path):
    (tmp_path / "model.py").write_text(ONE_NET)
    code = (
        "import sys\nfrom archlint.cli import main\n"
        "rc = main(sys.argv[1:])\nprint('TORCH', 'torch' in sys.modules, rc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "model.py"), "--input-shape", "1,3,8,8"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO)},
    )
    assert "TORCH False 2" in proc.stdout, proc.stdout + proc.stderr
    assert "did you mean" in proc.stderr


@pytest.mark.parametrize("name,meant", [("net", "Net"), ("NET", "Net"), ("Nett", "Net"), ("Blok", "Block")])
def test_mistyped_model_name(capsys, tmp_path, name, meant):
    model = tmp_path / "model.py"
    model.write_text(ONE_NET)
    line = _error_line(capsys, [f"{model}:{name}", "--input-shape", "1,3,8,8"])
    assert line == f"archlint: error: {model} has no {name!r}; did you mean {model}:{meant}?"


def test_mistyped_factory_name(capsys):
    line = _error_line(capsys, [f"{NETS}:tiny_nte"])
    assert line == f"archlint: error: {NETS} has no 'tiny_nte'; did you mean {NETS}:tiny_net?"


# --- findings point at the user's code ------------------------------------------------------------

LOCATED = textwrap.dedent(
    """\
    import torch
    import torchvision
    from torch import nn
    from torchvision.models import resnet18


    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(c)

        def forward(self, x):
            return torch.relu(self.bn(self.conv(x)))


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, padding=1)
            self.blocks = nn.Sequential(*[Block(8) for _ in range(2)])

        def forward(self, x):
            return self.blocks(self.stem(x))


    def resnet():
        return torchvision.models.resnet18(num_classes=10)
    """
)


def _annotations(tmp_path, target, fmt="github") -> str:
    (tmp_path / "model.py").write_text(LOCATED)
    env = {**__import__("os").environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "archlint",
            f"model.py:{target}",
            "--input-shape",
            "1,3,32,32",
            "--select",
            "AL205",
            "--show-info",
            "--output-format",
            fmt,
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr  # AL205 is info here: shown with --show-info, never a failure
    return proc.stdout


def test_library_submodule_located_where_the_user_created_it(tmp_path):
    out = _annotations(tmp_path, "Net")
    assert out.startswith("::notice file=model.py,line=10,title=archlint AL205::AL205 [blocks.0.conv] ")


def test_library_model_located_at_the_users_builder_call(tmp_path):
    out = _annotations(tmp_path, "resnet")
    assert out.startswith("::notice file=model.py,line=28,title=archlint AL205::AL205 [conv1] ")


def test_imported_library_model_located_at_the_import(tmp_path):
    out = _annotations(tmp_path, "resnet18")
    assert out.startswith("::notice file=model.py,line=4,title=archlint AL205::AL205 [conv1] ")


def test_sarif_location_in_user_file_and_module_in_message(tmp_path):
    import json

    (result,) = json.loads(_annotations(tmp_path, "Net", "sarif"))["runs"][0]["results"]
    where = result["locations"][0]["physicalLocation"]
    assert where["artifactLocation"]["uri"] == "model.py" and where["region"]["startLine"] == 10
    assert result["message"]["text"].startswith("[blocks.0.conv] ")


# --- output details ----------------------------------------------------------------------------------


def _train_file(tmp_path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    return path


def test_fix_ends_with_fixed_and_remaining(capsys, tmp_path):
    path = _train_file(tmp_path)
    code, out, _ = _run(capsys, [str(path), "--fix", "--no-cache", "--show-info"])
    # 2 pin_memory fixes, each also making its loader's copies non_blocking (4 copies): 6 edits
    assert code == 1 and out.splitlines()[-1] == "Fixed 2 findings with 6 edits (8 remaining)."
    assert out.splitlines()[-2] == "2 more fixable with --fix --unsafe-fixes."  # zero_grad, cudnn.benchmark
    code, out, _ = _run(capsys, [str(path), "--fix", "--no-cache"])
    assert out.splitlines()[-1] == "Fixed 0 findings (5 remaining)."  # the 3 info findings are hidden
    assert out.splitlines()[-2].startswith("3 info findings hidden")


def test_diff_prints_only_the_diff(capsys, tmp_path):
    path = _train_file(tmp_path)
    code, out, err = _run(capsys, [str(path), "--diff", "--no-cache"])
    assert code == 1 and out.startswith(f"--- {path}\n+++ {path}\n@@ ")
    assert all(line[:1] in "-+@ " for line in out.splitlines()), out
    assert err == "Would fix 2 findings with 6 edits.\n"
    assert path.read_text() == TRAIN


def test_statistics_prints_only_the_counts(capsys, tmp_path):
    path = _train_file(tmp_path)
    code, out, _ = _run(capsys, [str(path), "--statistics", "--no-cache", "--show-info"])
    lines = out.splitlines()
    assert code == 1 and lines[0] == "    2  AL301 [*]"
    assert all(__import__("re").fullmatch(r" *\d+  AL\d{3}( \[\*\])?", line) for line in lines), out
    assert sum(int(line.split()[0]) for line in lines) == 10
    code, out, _ = _run(capsys, [str(path), "--statistics", "--no-cache"])  # without the 3 info findings
    assert sum(int(line.split()[0]) for line in out.splitlines()) == 7


def test_top_minus_one_means_all(capsys):
    code, out, _ = _run(capsys, [f"{NETS}:TinyNet", "--input-shape", "1,3,32,32", "--top", "-1", "--select", "AL1"])
    assert "costliest 20 of 20 layers (by FLOPs)" in out


def test_top_below_minus_one_rejected(capsys):
    line = _error_line(capsys, [f"{NETS}:TinyNet", "--input-shape", "1,3,32,32", "--top", "-2"])
    assert line == "archlint: error: --top -2: give a number of layers, 0 for none or -1 for all"


WARNS = textwrap.dedent(
    """\
    import torch
    import torch.nn.functional as F
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            if x.sum() > 0:  # data-dependent: fx fails, export takes it
                x = x * 2
            return F.softmax(self.fc(x))  # no dim: torch warns
    """
)


def test_torch_warnings_become_notes_and_fx_error_is_one_line(tmp_path):
    import json

    (tmp_path / "warns.py").write_text(WARNS)
    env = {**__import__("os").environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "archlint", "warns.py:Net", "--input-shape", "2,8", "--output-format", "json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert proc.returncode in (0, 1) and "Warning" not in proc.stderr, proc.stderr
    model = json.loads(proc.stdout)["models"][0]
    notes = model["notes"]
    assert any(
        n.startswith("warning during analysis: UserWarning: Implicit dimension choice for softmax") for n in notes
    )
    (fx,) = [n for n in model["details"] if n.startswith("fx capture failed")]
    assert "\n" not in fx and len(fx) < 400


def test_html_evidence_reads_as_text():
    from archlint.report.html import _evidence_text

    assert _evidence_text([["conv", "relu"], ["relu_1", "add"]]) == "conv → relu, relu_1 → add"
    assert _evidence_text(list(range(9))) == "0, 1, 2, 3, 4, 5 … and 3 more"
    assert _evidence_text({"from": "a", "bytes": 0.5}) == "from a, bytes 0.5"


# --- safe means safe ------------------------------------------------------------------------------------

FACTORIES = textwrap.dedent(
    """\
    import torch

    device = torch.device("cuda")
    zeros = torch.zeros(4, 4).to(device)
    steps = torch.arange(10).cuda()
    noise = torch.randn(4, 4).to(device)
    ints = torch.randint(0, 9, (4,)).cuda()
    grid = torch.linspace(0, 1, 5).to(device)
    leaf = torch.zeros(3, requires_grad=True).to(device)
    """
)


def test_safe_fix_keeps_values_unsafe_ones_wait_for_the_flag(capsys, tmp_path):
    path = tmp_path / "make.py"
    path.write_text(FACTORIES)
    code, out, _ = _run(capsys, [str(path), "--fix", "--no-cache", "--select", "AL402"])
    lines = path.read_text().splitlines()
    assert lines[3:5] == ["zeros = torch.zeros(4, 4, device=device)", 'steps = torch.arange(10, device="cuda")']
    assert lines[5:] == FACTORIES.splitlines()[5:]  # random, linspace, requires_grad: untouched
    assert out.splitlines()[-2:] == [
        "4 more fixable with --fix --unsafe-fixes.",
        "Fixed 2 findings with 4 edits (4 remaining).",
    ]
    code, out, _ = _run(capsys, [str(path), "--fix", "--unsafe-fixes", "--no-cache", "--select", "AL402"])
    assert "noise = torch.randn(4, 4, device=device)" in path.read_text()
    assert (code, out.splitlines()[-1]) == (0, "Fixed 4 findings with 8 edits (0 remaining).")


def test_random_values_differ_when_created_on_another_generator():
    """Why random factories are unsafe, shown on the CPU: a different generator (as the device's
    would be) gives different numbers under the same seed."""
    import torch

    torch.manual_seed(0)
    before = torch.randn(4)
    other = torch.Generator().manual_seed(1)  # stands for the CUDA generator, seeded its own way
    assert not torch.equal(before, torch.randn(4, generator=other))


def test_cudnn_benchmark_fix_is_unsafe(capsys, tmp_path):
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    _run(capsys, [str(path), "--fix", "--no-cache", "--select", "AL303"])
    assert "cudnn.benchmark" not in path.read_text()
    _run(capsys, [str(path), "--fix", "--unsafe-fixes", "--no-cache", "--select", "AL303"])
    assert "torch.backends.cudnn.benchmark = True" in path.read_text()


# --- module tree ------------------------------------------------------------------------------------------


def _tree_row(out: str, label: str) -> list[str]:
    """The cells of the tree row whose module cell ends with `label` (tree glyphs are │ too)."""
    for line in out.splitlines():
        cells = [c.strip() for c in __import__("re").split(r" │ |^│ | │$", line)]
        while cells and not cells[-1]:
            cells.pop()
        for i in range(len(cells)):
            if cells[i].endswith(label) and cells[i].split("─ ")[-1] == label and i + 1 < len(cells):
                return cells[i:]
    raise AssertionError(f"no row {label!r} in\n{out}")


def test_tree_sums_match_torch_and_totals(capsys):
    import torch

    from archlint.units import human_count

    code, out, _ = _run(capsys, [f"{NETS}:TinyNet", "--input-shape", "1,3,56,56", "--tree", "--select", "AL2"])
    assert "module tree (depth 3; sums of the ops inside each module)" in out
    sys.path.insert(0, str(REPO / "examples"))
    try:
        import nets
    finally:
        sys.path.remove(str(REPO / "examples"))
    model = nets.TinyNet()
    for name in ("stem", "block1", "fc"):
        assert _tree_row(out, name)[3] == human_count(sum(p.numel() for p in getattr(model, name).parameters()))
    assert _tree_row(out, "(model)")[:5] == [
        "(model)",
        "TinyNet",
        "1×10",
        human_count(sum(p.numel() for p in model.parameters())),
        "30.03M",
    ]
    assert _tree_row(out, "block1")[1:3] == ["Block", "1×32×28×28"]
    assert _tree_row(out, "conv1")[1] == "Conv2d"
    assert torch.Size([1, 10]) == model(torch.randn(1, 3, 56, 56)).shape


def test_tree_sums_every_op_once():
    from archlint.report.tree import build
    from archlint.result import Layer, ModelResult, Totals

    layers = [
        Layer("a", "conv", "nn.Conv2d", "body.0.conv", flops=10, mac_bytes=5, params=3, out_shapes=[[1, 2]]),
        Layer("b", "activation", "F.relu", "body.0", flops=2, mac_bytes=4, out_shapes=[[1, 2]]),
        Layer("c", "other", "torch.fft", "body.1", flops=0, known=False, out_shapes=[[1, 3]]),
        Layer("d", "linear", "nn.Linear", "head", flops=7, mac_bytes=1, params=4, out_shapes=[[1, 9]]),
    ]
    root = build(ModelResult("m", "fx", "cpu", "float32", [], Totals(), layers), depth=1)
    assert (root.flops, root.mac_bytes, root.params, root.ops, root.unknown) == (19, 10, 7, 4, 1)
    body = root.children["body"]
    assert (body.flops, body.params, body.ops, body.unknown, body.out_shapes) == (12, 3, 3, 1, [[1, 3]])
    assert not body.children and root.out_shapes == [[1, 9]]


def test_tree_depth_folds_children(capsys):
    code, out, _ = _run(capsys, [f"{NETS}:TinyNet", "--input-shape", "1,3,56,56", "--depth", "1", "--select", "AL2"])
    assert "module tree (depth 1; sums of the ops inside each module)" in out
    assert _tree_row(out, "block1")[-1] == "7"  # two convs, two norms, the relus and the add of its forward
    assert "conv1" not in out


def test_tree_flag_errors(capsys, tmp_path):
    assert _error_line(capsys, [f"{NETS}:TinyNet", "--input-shape", "1,3,8,8", "--depth", "-1"]) == (
        "archlint: error: --depth -1: give the levels of the tree to show, 0 or more"
    )
    (tmp_path / "model.py").write_text(ONE_NET)
    line = _error_line(capsys, [str(tmp_path / "model.py"), "--tree"])
    assert line.startswith("archlint: error: --tree applies to a model, but no model was named")


# --- one name per op ----------------------------------------------------------------------------------


def test_one_display_name_per_op_in_text_and_json(capsys):
    import json

    argv = [f"{NETS}:TinyNet", "--input-shape", "1,3,56,56", "--select", "AL205"]
    code, out, _ = _run(capsys, argv + ["--top", "-1"])
    code, js, _ = _run(capsys, argv + ["--output-format", "json"])
    layers = json.loads(js)["models"][0]["layers"]
    names = [layer["display"] for layer in layers]
    assert len(set(names)) == len(names)  # unique: two F.relu in block1 no longer read alike
    assert {"block1.conv1", "block1:relu", "block1:relu_1", "block1:add", "flatten"} <= set(names)
    ids = {layer["display"]: layer["name"] for layer in layers}
    assert ids["block1.conv1"] == "block1_conv1"  # the node id stays, as the secondary key
    for name in names:
        assert f"│ {name} " in out  # the text table shows the same names


def test_html_shows_display_names(tmp_path, capsys):
    import json
    import re

    html = tmp_path / "r.html"
    _run(capsys, [f"{NETS}:TinyNet", "--input-shape", "1,3,56,56", "--select", "AL205", "--html", str(html)])
    page = html.read_text()
    data = re.search(r'<script type="application/json" id="archlint-data">(.*?)</script>', page, re.S).group(1)
    layers = json.loads(data.replace("\\u003c", "<"))["models"][0]["layers"]
    assert {"block1:relu", "block1.conv1"} <= {layer["display"] for layer in layers}
