"""Issue 24, model analyzer: numbers that were silently 0 (quantized and spectral-normed layers),
AL201 on what one recorded path cannot judge, the user's process left as it was after
`archlint.analyze`, and the user's mistakes or hostile code as one line and exit 2 (never exit 0
with no report, a JSON report broken by a print, a report written where a constructor chdir'ed)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

import archlint
from archlint.cli import main
from archlint.errors import UsageError

PACKAGE_ROOT = Path(archlint.__file__).resolve().parents[1]


def write(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def cli(*args, cwd=None, timeout=180):
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "archlint", *args], env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd
    )


def strict_json(text: str):
    """A parser that, like every one but Python's, rejects NaN and Infinity."""

    def reject(name):
        raise ValueError(f"{name} in JSON")

    return json.loads(text, parse_constant=reject)


# 7. Real work never counted as 0 ------------------------------------------------------------------

QUANTIZED = """
import torch
from torch import nn
import torch.ao.quantization as tq

class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant, self.conv, self.dequant = tq.QuantStub(), nn.Conv2d(3, 16, 3), tq.DeQuantStub()

    def forward(self, x):
        return self.dequant(self.conv(self.quant(x)))

def static_conv():
    torch.backends.quantized.engine = "fbgemm" if "fbgemm" in torch.backends.quantized.supported_engines else "qnnpack"
    m = Conv().eval()
    m.qconfig = tq.get_default_qconfig(torch.backends.quantized.engine)
    prepared = tq.prepare(m)
    prepared(torch.randn(1, 3, 16, 16))
    return tq.convert(prepared)

class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(32, 64)

    def forward(self, x):
        return self.lstm(x)[0]

def dynamic_lstm():
    return tq.quantize_dynamic(Recurrent().eval(), {nn.LSTM}, dtype=torch.qint8)

class Spectral(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.utils.spectral_norm(nn.Conv2d(3, 16, 3))

    def forward(self, x):
        return self.conv(x)
"""


@pytest.mark.parametrize(
    "name,shape,flops",
    [
        ("static_conv", "1,3,16,16", 16 * 3 * 3 * 3 * 14 * 14),
        ("dynamic_lstm", "5,1,32", 5 * (4 * 64 * 32 + 4 * 64 * 64 + 64 * 13)),
        ("Spectral", "1,3,16,16", 16 * 3 * 3 * 3 * 14 * 14),
    ],
)
def test_quantized_and_spectral_normed_layers_are_counted(tmp_path, capsys, name, shape, flops):
    if name != "Spectral" and not torch.backends.quantized.supported_engines:
        pytest.skip("no quantized engine")
    target = write(tmp_path, "quantized", QUANTIZED) + f":{name}"
    main([target, "--input-shape", shape, "--output-format", "json", "--top", "0", "--select", "AL104"])
    out = capsys.readouterr()
    (model,) = json.loads(out.out)["models"]
    assert model["totals"]["flops"] == flops  # was: 0 (and no op listed as unknown)
    heavy = [layer for layer in model["layers"] if layer["kind"] in ("conv", "recurrent")]
    assert heavy and all(layer["flops"] > 0 for layer in heavy)


def test_a_conv_with_no_weight_to_count_is_unknown_not_zero():
    import networkx as nx

    from archlint.model.cost import cost_graph

    graph = nx.DiGraph(mode="eval")
    graph.add_node(
        "conv",
        kind="conv",
        key="Conv2d",
        op="nn.Conv2d",
        in_shapes=[(1, 3, 8, 8)],
        out_shapes=[(1, 4, 6, 6)],
        param_shapes={},
        attrs={},
        itemsize=4,
        in_bytes=768,
    )
    assert cost_graph(graph) == ["conv"]  # was: counted, as 0 FLOPs
    assert graph.nodes["conv"]["known"] is False and "no weight" in graph.nodes["conv"]["unknown_reason"]


# 8. AL201 on what one recorded path cannot judge ----------------------------------------------------

BRANCHES = """
import torch
from torch import nn

class Branches(nn.Module):
    def __init__(self):
        super().__init__()
        self.pos, self.neg = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        if x.sum() > 0:
            return self.pos(x)
        return self.neg(x)

class MadeInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)

    def forward(self, x):
        self.extra = nn.Linear(8, 8)
        return self.extra(self.a(x))

class Unused(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.spare = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        return self.a(x)
"""


@pytest.mark.parametrize("name,fires", [("Branches", False), ("MadeInForward", False), ("Unused", True)])
def test_al201_only_on_modules_the_recording_can_judge(tmp_path, capsys, name, fires):
    target = write(tmp_path, "branches", BRANCHES) + f":{name}"
    main([target, "--input-shape", "1,8", "--select", "AL201", "--output-format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert bool([d for d in report["diagnostics"] if d["code"] == "AL201"]) == fires  # was: AL201 on all three
    if name == "Branches":
        (note,) = [n for n in report["models"][0]["notes"] if n.startswith("AL201 not checked")]
        assert "at line" in note and "may run in a branch this capture did not take" in note


# 10. The user's model, inputs and process are left as they were -------------------------------------


class Meddler(nn.Module):
    """A forward that changes everything it can reach."""

    def __init__(self, folder: str):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.calls, self.cache, self.seen, self.folder = 0, {}, [], folder

    def forward(self, x, mask=None):
        self.calls += 1
        self.batch = x.shape[0]  # under fx: a Proxy
        self.cache["x"] = x
        self.seen.append(1)
        mask.mul_(2)
        x.add_(1)
        torch.rand(3)
        random.random()
        os.chdir(self.folder)
        y = self.conv(x) * torch.tensor([2.0])  # fx keeps the constant as _tensor_constant0
        torch.set_grad_enabled(False)
        torch.set_default_dtype(torch.float64)
        return y * mask.sum()


def _process_state():
    numpy = pytest.importorskip("numpy")
    return (
        torch.random.get_rng_state().clone(),
        random.getstate(),
        numpy.random.get_state()[1].copy(),
        torch.is_grad_enabled(),
        torch.get_default_dtype(),
        os.getcwd(),
    )


@pytest.mark.parametrize(
    "extra",
    [{}, {"strategy": "export"}, {"strategy": "dispatch"}, {"latency": True, "warmup": 1, "repeat": 2}],
    ids=["auto", "export", "dispatch", "latency"],
)
def test_analyze_leaves_the_model_inputs_and_process_as_they_were(tmp_path, extra):
    model = Meddler(str(tmp_path))
    x, mask = torch.randn(1, 3, 8, 8), torch.ones(1, 1, 6, 6)
    x0, mask0 = x.clone(), mask.clone()
    attributes = dict(model.__dict__)
    before = _process_state()
    analysis = archlint.analyze(model, x, {"mask": mask}, select=[], **extra)
    assert analysis.totals.flops > 0
    after = _process_state()
    assert torch.equal(before[0], after[0]) and before[1] == after[1] and (before[2] == after[2]).all()
    assert before[3:] == after[3:]  # grad mode, default dtype, cwd (was: grad off, float64, tmp_path)
    assert torch.equal(x, x0) and torch.equal(mask, mask0)  # was: ×2 per run (×256 under latency)
    assert model.__dict__.keys() == attributes.keys()  # was: batch (a Proxy), _tensor_constant0
    assert model.calls == 0 and model.cache == {} and model.seen == []


def test_a_constructor_that_changes_the_process(tmp_path, capsys):
    target = (
        write(
            tmp_path,
            "ctor",
            f"""
        import os, torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(1234)
                torch.set_grad_enabled(False)
                os.chdir({str(tmp_path / "elsewhere")!r})
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return self.fc(x)
        """,
        )
        + ":Net"
    )
    (tmp_path / "elsewhere").mkdir()
    before = (torch.random.get_rng_state().clone(), torch.is_grad_enabled(), os.getcwd())
    assert archlint.analyze(target, input_shape=(1, 4), select=[]).totals.flops == 16 + 0  # Linear 4×4
    assert torch.equal(before[0], torch.random.get_rng_state()) and before[1:] == (torch.is_grad_enabled(), os.getcwd())


# 11, 12, 13. Gates that passed, JSON that broke, reports that moved ------------------------------------

EXITS = """
import os
from torch import nn

class AtForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        os._exit(0)
"""


def test_os_exit_in_model_code_is_an_error_not_a_passing_gate(tmp_path):
    target = write(tmp_path, "exits", EXITS) + ":AtForward"
    report = tmp_path / "report.json"
    run = cli(target, "--input-shape", "1,4", "-o", str(report), "--output-format", "json")
    assert run.returncode == 2, (run.returncode, run.stderr)  # was: 0, no report
    assert (
        run.stderr.strip()
        .splitlines()[-1]
        .startswith(f"archlint: error: {target}: the model's code called os._exit(0) while running its forward")
    )
    at_import = write(tmp_path, "exits_import", "import os\nos._exit(0)\n") + ":Net"
    run = cli(at_import, "--input-shape", "1,4")
    assert run.returncode == 2 and "called os._exit(0) while importing or building it" in run.stderr


CHATTY = """
import os
import torch
from torch import nn

print("importing")

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        print("building")
        os.chdir("/")
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        print("forward", x.shape)
        return self.fc(x)
"""


def test_prints_and_chdir_in_model_code_leave_the_reports_whole_and_in_place(tmp_path):
    target = write(tmp_path, "chatty", CHATTY) + ":Net"
    run = cli(
        target,
        "--input-shape",
        "1,4",
        "--output-format",
        "json",
        "--latency",
        "--warmup",
        "0",
        "--repeat",
        "1",
        "--html",
        "page.html",
        cwd=tmp_path,
    )
    assert run.returncode in (0, 1), run.stderr
    (model,) = strict_json(run.stdout)["models"]  # was: "importing\nbuilding\nforward ..." before the JSON
    assert model["totals"]["flops"] == 16
    assert "building" in run.stderr and "forward" in run.stderr
    assert (tmp_path / "page.html").stat().st_size > 0  # was: written to /page.html
    run = cli(target, "--input-shape", "1,4", "-o", "out.json", "--output-format", "json", cwd=tmp_path)
    assert run.returncode in (0, 1) and strict_json((tmp_path / "out.json").read_text())["models"]


def test_prints_in_a_dataset_leave_the_loader_json_whole(tmp_path, capsys):
    target = (
        write(
            tmp_path,
            "data",
            """
        import torch
        from torch.utils.data import DataLoader, Dataset

        class Loud(Dataset):
            def __len__(self):
                return 64

            def __getitem__(self, i):
                print("item", i)
                return torch.zeros(4)

        loader = DataLoader(Loud(), batch_size=8)
        """,
        )
        + ":loader"
    )
    assert (
        main(
            [
                "loader",
                target,
                "--workers",
                "0",
                "--batches",
                "2",
                "--seconds",
                "1",
                "--stage-items",
                "4",
                "--output-format",
                "json",
            ]
        )
        == 0
    )
    out = capsys.readouterr()
    assert strict_json(out.out)["loaders"] and "item 0" in out.err  # was: "item 0" … on stdout


# 15. JSON never holds NaN or Infinity --------------------------------------------------------------------


def test_json_and_sarif_write_null_for_numbers_that_are_not_finite():
    from archlint.report import json as json_report
    from archlint.report import sarif

    analysis = archlint.analyze(nn.Linear(4, 4), (1, 4), select=[])
    model = analysis.model
    model.totals.latency_ms = float("nan")
    model.roofline = {"peak_flops_per_s": float("inf"), "bandwidth_bytes_per_s": -float("inf")}
    document = strict_json(json_report.render(analysis.result, analysis.settings))
    assert document["models"][0]["totals"]["latency_ms"] is None
    assert document["non_finite"] == {
        "models[0].totals.latency_ms": "NaN",
        "models[0].roofline.peak_flops_per_s": "Infinity",
        "models[0].roofline.bandwidth_bytes_per_s": "-Infinity",
    }
    strict_json(sarif.render(analysis.result, analysis.settings))
    assert analysis.to_dict()["non_finite"]


def test_roofline_cache_with_bad_numbers_is_measured_again(tmp_path, monkeypatch):
    from archlint.model.timing import roofline

    monkeypatch.setenv("ARCHLINT_CACHE_DIR", str(tmp_path))
    key = roofline.device_key(torch.device("cpu"), torch.float32)
    measured = {
        "peak_flops_per_s": 1e11,
        "bandwidth_bytes_per_s": 1e10,  # what measure_peaks returns
        "cache_bandwidth_bytes_per_s": 5e10,
        "cache_bytes": 2**24,
    }
    monkeypatch.setattr(roofline, "measure_peaks", lambda device, dtype: dict(measured))
    for bad in (float("nan"), 0, -1.0, "fast", None, True):
        (tmp_path / roofline.CACHE_FILE).write_text(json.dumps({key: {**measured, "peak_flops_per_s": bad}}))
        assert roofline.peaks(torch.device("cpu"), torch.float32) == (measured, False), (
            bad
        )  # was: the bad entry, cached
    assert roofline.peaks(torch.device("cpu"), torch.float32) == (measured, True)


# 16. The user's mistakes: one line, exit 2 ------------------------------------------------------------------


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_bad_budget_numbers_are_one_line(capsys, value):
    net = str(PACKAGE_ROOT / "examples" / "nets.py") + ":TinyNet"
    assert main([net, "--input-shape", "1,3,56,56", "--max-flops", value]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"archlint: error: --max-flops must be a finite number ≥ 0, got {float(value)!r}"
    with pytest.raises(UsageError, match="max_params= must be a finite number ≥ 0"):
        archlint.analyze(nn.Linear(4, 4), (1, 4), max_params=float(value))


def test_a_budget_of_zero_fails_without_dividing_by_it(capsys):
    from archlint.testing import assert_budget

    analysis = archlint.analyze(nn.Linear(4, 4), (1, 4), max_flops=0, select=[])  # was: ZeroDivisionError
    (gate,) = analysis.result.gate
    assert not gate.passed and gate.message == "16 FLOPs exceeds budget 0 FLOPs"
    with pytest.raises(AssertionError, match="exceeds budget 0 params"):
        assert_budget(nn.Linear(4, 4), (1, 4), max_params=0)
    net = str(PACKAGE_ROOT / "examples" / "nets.py") + ":TinyNet"
    assert main([net, "--input-shape", "1,3,56,56", "--max-flops", "0", "--select", "AL1", "--top", "0"]) == 1
    assert "exceeds budget 0 FLOPs" in capsys.readouterr().out


MALFORMED_BASELINES = {
    "not json": "{models",
    "list": "[]",
    "wrong version": '{"archlint_baseline": 9, "models": {}, "findings": []}',
    "missing keys": '{"archlint_baseline": 1}',
    "model not a dict": '{"archlint_baseline": 1, "models": {"m.py:Net": [1, 2]}, "findings": []}',
    "metric a string": '{"archlint_baseline": 1, "models": {"m.py:Net": {"flops": "many"}}, "findings": []}',
    "NaN": '{"archlint_baseline": 1, "models": {"m.py:Net": {"flops": NaN}}, "findings": []}',
    "overflow": '{"archlint_baseline": 1, "models": {"m.py:Net": {"flops": 1e999}}, "findings": []}',
    "finding not a dict": '{"archlint_baseline": 1, "models": {}, "findings": [3]}',
}


@pytest.mark.parametrize("text", MALFORMED_BASELINES.values(), ids=MALFORMED_BASELINES.keys())
def test_malformed_baselines_are_one_line(tmp_path, capsys, text):
    baseline = tmp_path / "baseline.json"
    baseline.write_text(text)
    net = str(PACKAGE_ROOT / "examples" / "nets.py") + ":TinyNet"
    assert main([net, "--input-shape", "1,3,56,56", "--baseline", str(baseline), "--top", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"archlint: error: baseline file {baseline} ") and "\n" not in err, err
    assert "recreate it with --save-baseline" in err


# Minor: torch's capture logs, and one failing model among several ------------------------------------------


def test_a_data_dependent_model_leaves_stderr_to_archlint(tmp_path):
    target = write(tmp_path, "branches", BRANCHES) + ":Branches"
    run = cli(target, "--input-shape", "1,8", "--top", "0", "-q")
    assert run.returncode in (0, 1), run.stderr
    assert run.stderr.strip() == "", run.stderr  # was: torch's "Unable to find user code corresponding to {u0}"


def test_one_failing_model_costs_the_others_nothing(tmp_path):
    good = write(tmp_path, "good", "from torch import nn\n\ndef net():\n    return nn.Linear(4, 4)\n")
    bad = write(tmp_path, "bad", "from torch import nn\n\ndef net():\n    raise ValueError('no weights here')\n")
    (tmp_path / "pyproject.toml").write_text(
        '[[tool.archlint.models]]\ntarget = "bad.py:net"\ninput-shapes = ["1,4"]\n\n'
        '[[tool.archlint.models]]\ntarget = "good.py:net"\ninput-shapes = ["1,4"]\n'
        "[tool.archlint.models.budgets]\nmax-flops = 100\n"
    )
    run = cli("--models", "--output-format", "json", cwd=tmp_path)
    assert run.returncode == 2  # non-zero: a model could not be analyzed
    report = strict_json(run.stdout)  # was: no report at all
    assert [m["target"] for m in report["models"]] == ["good.py:net"] and report["models"][0]["totals"]["flops"] == 16
    assert [g["check"] for g in report["gate"]] == ["max-flops"] and report["gate"][0]["passed"]
    assert len(report["errors"]) == 1 and report["errors"][0].startswith("building net() raised ValueError")
    assert run.stderr.strip().splitlines()[-1] == f"archlint: error: {report['errors'][0]}"
    del good, bad


def test_an_uninitialised_lazy_instance_is_one_line(tmp_path, capsys):
    target = write(
        tmp_path,
        "lazy",
        """
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.LazyLinear(4)

            def forward(self, x):
                return self.fc(x)

        net = Net()
        """,
    )
    assert main([f"{target}:net", "--input-shape", "1,8"]) == 2  # was: internal error: ValueError
    err = capsys.readouterr().err.strip()
    assert err == (
        f"archlint: error: {target}:net has lazy modules not initialised yet (fc), and no capture could "
        "initialise them: run one forward on a real batch before analyzing it, or name the class or a "
        "factory so archlint builds it"
    )
    assert main([f"{target}:Net", "--input-shape", "1,8", "--output-format", "json"]) == 0  # the class is built
    assert json.loads(capsys.readouterr().out)["models"][0]["totals"]["flops"] == 32


def test_zero_size_inputs_with_what_if(tmp_path, capsys):
    target = (
        write(
            tmp_path,
            "empty",
            """
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 4)

            def forward(self, x):
                return self.fc(x)

        def example_inputs():
            return torch.empty(0, 8)
        """,
        )
        + ":Net"
    )
    rc = main([target, "--what-if", "bf16", "--warmup", "0", "--repeat", "1", "--output-format", "json"])
    out = capsys.readouterr()
    assert rc in (0, 1), out.err  # was: internal error: RuntimeError: max(): Expected reduction dim ...
    (model,) = strict_json(out.out)["models"]
    assert model["totals"]["flops"] == 0 and [w["name"] for w in model["what_if"]] == ["bf16"]


@pytest.mark.parametrize(
    "config,message",
    [
        ("n_embd=abc", "hf:gpt2: --config n_layer=1, n_embd=abc: StrictDataclassFieldValidationError"),
        (
            "n_head=7",
            "hf:gpt2: building the model with --config n_layer=1, n_head=7 failed: ValueError: `embed_dim` must be divisible",
        ),
    ],
)
def test_invalid_hf_configs_are_one_line(capsys, config, message):
    pytest.importorskip("transformers")
    assert main(["hf:gpt2", "--config", "n_layer=1", "--config", config, "--top", "0"]) == 2  # was: internal error
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"archlint: error: {message}") and "\n" not in err, err


def test_decode_that_would_not_fit_in_memory_stops_first(capsys, monkeypatch):
    pytest.importorskip("transformers")
    from archlint.model import decode

    sized = {}

    def needed(model, batch, cache_length):
        sized["bytes"], parts = real_needed(model, batch, cache_length)
        return sized["bytes"], parts

    real_needed = decode.needed_bytes
    monkeypatch.setattr(decode, "needed_bytes", needed)
    monkeypatch.setattr(decode, "available_bytes", lambda: 10**6)  # 1 MB: the 2-layer config needs far more
    argv = [
        "hf:gpt2",
        "--config",
        "n_layer=2",
        "--config",
        "n_embd=64",
        "--config",
        "n_head=2",
        "--decode",
        "256",
        "--top",
        "0",
    ]
    assert main(argv) == 2  # was: real weights built whatever their size (a 20B config tried ~80 GB)
    err = capsys.readouterr().err.strip()
    # weights: wte 50257·64 + wpe 1024·64 + 2 blocks + ln_f (float32); cache: 2 · 2 layers · 1 · 256 tokens · 64 · 4 B
    assert sized["bytes"] == (
        50257 * 64 + 1024 * 64 + 2 * (4 * 64 + 64 * 192 + 192 + 64 * 64 + 64 + 64 * 256 + 256 + 256 * 64 + 64) + 2 * 64
    ) * 4 + 2 * 2 * 256 * 64 * 4 + _buffers_bytes(argv)
    assert err.startswith(
        "archlint: error: --decode 256 builds hf:gpt2 with real weights and runs it: that needs about "
    )
    assert err.endswith(
        "more than the 0.0 GB of memory available; analyze a smaller config (e.g. --config "
        "num_hidden_layers=2) or a shorter cache, or leave out --decode"
    )


def _buffers_bytes(argv) -> int:
    from archlint.model.loading.hf import model_class
    from archlint.model.loading.loaded import meta_build

    config, cls = model_class("gpt2", {"n_layer": 2, "n_embd": 64, "n_head": 2})
    model, _ = meta_build(lambda: cls(config), {})
    return sum(b.numel() * b.element_size() for b in model.buffers())
