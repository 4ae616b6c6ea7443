"""`archlint trace`: the streaming reader, the command's outputs, exit codes and bad input."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from archlint import cli
from archlint.trace import scan
from archlint.trace.read import read_trace
from tests.trace.scenarios import SCENARIOS
from tests.trace.synth import Trace

FIXTURES = Path(__file__).parent / "fixtures"


def run(argv, capsys):
    code = cli.main(["trace", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_streams_in_small_chunks_like_json_load(monkeypatch):
    path = FIXTURES / "sampled_training_rank0.json.gz"
    whole = json.load(gzip.open(path))
    monkeypatch.setattr(scan, "CHUNK_CHARS", 97)  # every event straddles chunk boundaries
    headers = {}
    events = list(scan.events(path, headers.__setitem__))
    assert events == whole["traceEvents"]
    assert headers == {k: v for k, v in whole.items() if k != "traceEvents"}


def test_header_after_the_events_is_read(tmp_path):
    t = SCENARIOS["AL509"](True)
    doc = t.document()
    text = json.dumps(
        {"traceEvents": doc["traceEvents"], "distributedInfo": {"rank": 3}, "deviceProperties": doc["deviceProperties"]}
    )
    (tmp_path / "r3.json").write_text(text)
    data = read_trace(tmp_path / "r3.json")
    assert data.rank == 3 and data.devices[0]["computeMajor"] == 8


def test_byte_order_mark_and_empty_event_list(tmp_path, capsys):
    path = tmp_path / "bom.json"
    path.write_text("\ufeff" + json.dumps(SCENARIOS["AL509"](True).document()), encoding="utf-8")
    assert read_trace(path).gpu_events == 3  # one kernel per step
    (tmp_path / "empty.json").write_text('{"traceEvents": []}')
    code, _, err = run([tmp_path / "empty.json"], capsys)
    assert code == 2 and "no GPU events" in err


def test_trace_cut_mid_write_keeps_what_came_before(tmp_path):
    full = json.dumps(SCENARIOS["AL509"](True).document())
    path = tmp_path / "cut.json"
    path.write_text(full[: int(len(full) * 0.8)])
    data = read_trace(path)
    assert data.truncated and 0 < data.gpu_events
    gz = tmp_path / "cut.json.gz"
    whole = (FIXTURES / "sampled_training_rank0.json.gz").read_bytes()
    gz.write_bytes(whole[: len(whole) // 2])  # a .gz cut mid-stream
    cut = read_trace(gz)
    assert cut.truncated and 0 < cut.events < 4855


def test_json_output_contract(tmp_path, capsys):
    SCENARIOS["AL501"](True).write(tmp_path / "rank0.json.gz")
    t1 = SCENARIOS["AL509"](False)
    t1.rank = 1
    t1.write(tmp_path / "rank1.json")
    code, out, _ = run([tmp_path, "--output-format", "json"], capsys)
    assert code == 1
    doc = json.loads(out)
    assert [t["rank"] for t in doc["traces"]] == [0, 1]
    t = doc["traces"][0]
    assert {"file", "rank", "device", "steps", "temporal_breakdown", "per_step", "kernels", "modules"} <= set(t)
    assert set(t["temporal_breakdown"]) == {"idle_us", "compute_us", "non_compute_us", "span_us"}
    assert t["steps"] == 3 and len(t["per_step"]) == 3 and t["device"] == "NVIDIA A100-SXM4-40GB"
    assert {d["code"] for d in doc["diagnostics"]} == {"AL501", "AL509"}
    assert all(d["price"]["basis"] == "estimated" and d["price"]["share_of"] == "step time" for d in doc["diagnostics"])
    # the findings' savings never add up to more than the step: each µs is claimed once
    waterfall = t["waterfall"]
    assert sum(d["price"]["saving_ms"] for d in doc["diagnostics"]) * 1000 <= waterfall["step_us"]
    assert sum(b["us"] for b in waterfall["buckets"]) == pytest.approx(waterfall["step_us"], rel=1e-6)


def test_select_ignore_and_exit_codes(tmp_path, capsys):
    path = SCENARIOS["AL501"](True).write(tmp_path / "t.json")
    code, out, _ = run([path, "--ignore", "AL501,AL509"], capsys)
    assert code == 0 and "All checks passed" in out
    code, out, _ = run([path, "--select", "AL509"], capsys)
    # AL509 on an input-bound trace claims no idle of its own (AL501's): info, shown with --show-info
    assert code == 0 and ": AL509 " not in out
    code, out, _ = run([path, "--select", "AL509", "--show-info"], capsys)
    assert ": AL509 (info)" in out and ": AL501 " not in out
    path = SCENARIOS["AL509"](True).write(tmp_path / "idle.json")  # idle the host causes: AL509's own
    code, out, _ = run([path, "--select", "AL509"], capsys)
    assert code == 1 and ": AL509 " in out and "Found 1 finding." in out
    assert run([path, "--exit-zero"], capsys)[0] == 0
    code, _, _ = run([path, "--option", "AL509.threshold=0.9", "--select", "AL509"], capsys)
    assert code == 0


def test_bad_options_and_selectors_are_one_line_as_for_the_other_commands(tmp_path, capsys):
    path = SCENARIOS["AL501"](True).write(tmp_path / "t.json")
    for argv, message in (
        (["--option", "AL509.threshold=abc"], "--option 'AL509.threshold=abc': AL509.threshold takes a number"),
        (["--option", "AL509"], "--option 'AL509' must look like CODE.NAME=VALUE, e.g. AL509.threshold=0.6"),
    ):
        code, out, err = run([path, *argv], capsys)
        assert (code, err.strip()) == (2, f"archlint: error: {message}") and out == ""
    code, _, err = run([path, "--select", "AL9"], capsys)
    assert code == 2 and err.count("\n") == 1 and "--select" in err


def test_sarif_has_the_trace_rules(tmp_path, capsys):
    path = SCENARIOS["AL503"](True).write(tmp_path / "t.json")
    code, out, _ = run([path, "--output-format", "sarif"], capsys)
    sarif = json.loads(out)
    result = sarif["runs"][0]["results"][0]
    assert result["ruleId"] == "AL503" and "estimated" in result["message"]["text"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("train.py")


def test_no_gpu_events_nor_steps_is_one_line_exit_2(tmp_path, capsys):
    t = Trace()
    t.host("cpu_op", "aten::mm", 10, 50)
    code, out, err = run([t.write(tmp_path / "cpu.json")], capsys)
    assert code == 2 and "no GPU events" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_cpu_only_trace_gets_the_hosts_report(tmp_path, capsys):
    """A CPU-only trace with steps was exit 2 with empty JSON; now the step is split into the
    DataLoader's and the rest of the host's time, as torch-tb-profiler's overview did."""
    t = Trace()
    for n in range(3):
        s = 1_000_000.0 + n * 10_000
        t.step(n + 1, s, 10_000)
        t.host("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", s + 10, 6_000)
        t.host("cpu_op", "aten::mm", s + 6_100, 3_800)
    code, out, err = run([t.write(tmp_path / "cpu.json"), "--output-format", "json"], capsys)
    doc = json.loads(out)
    assert code == 1 and not err
    trace = doc["traces"][0]
    assert trace["cpu_only"] and len(trace["per_step"]) == 3
    buckets = {b["name"]: b["us"] for b in trace["waterfall"]["buckets"]}
    assert buckets["idle_input"] == pytest.approx(6_000) and buckets["idle_host"] == pytest.approx(4_000)
    assert [d["code"] for d in doc["diagnostics"]] == ["AL501"]  # no "GPU idle" on a trace without a GPU
    assert "DataLoader" in doc["diagnostics"][0]["message"] and "CPU-only" in doc["diagnostics"][0]["message"]


@pytest.mark.parametrize("text", ["", "[1, 2]", '{"a": 1}', '{"traceEvents": [ {"ph": "X"}, garbage ]}'])
def test_not_a_trace_is_one_line_exit_2(tmp_path, capsys, text):
    path = tmp_path / "bad.json"
    path.write_text(text)
    code, _, err = run([path], capsys)
    assert code == 2 and err.startswith("archlint: error:") and "Traceback" not in err


def test_one_bad_file_keeps_the_others(tmp_path, capsys):
    SCENARIOS["AL509"](True).write(tmp_path / "good.json")
    (tmp_path / "bad.json").write_text("{")
    code, out, err = run([tmp_path / "good.json", tmp_path / "bad.json"], capsys)
    assert code == 2 and "AL509" in out and "bad.json" in err


def test_real_trace_text_report(capsys):
    code, out, _ = run([FIXTURES / "sampled_training_rank0.json.gz"], capsys)
    assert code == 1
    assert "temporal breakdown (as HTA): span 600.058 ms" in out and "AL507" in out and "AL509" in out


def test_reader_never_imports_torch():
    code = (
        "import sys; from archlint.trace.command import lint_trace; from archlint.config import Settings; "
        f"lint_trace(__import__('pathlib').Path({str(FIXTURES / 'mi250_minitoy_train.json.gz')!r}), Settings()); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


def test_diff_says_what_got_slower(tmp_path, capsys):
    base = SCENARIOS["AL509"](False).write(tmp_path / "base.json")
    new = SCENARIOS["AL509"](True).write(tmp_path / "new.json")
    code, out, _ = run([new, "--diff", base, "--output-format", "json"], capsys)
    d = json.loads(out)["diff"]
    assert code == 1 and d["breakdown"]["idle_us"]["base"] == 200 and d["breakdown"]["idle_us"]["new"] == 8100
    assert d["groups"][0]["name"] == "gemm" and d["groups"][0]["delta_us"] == -7900
    code, out, _ = run([new, "--diff", base], capsys)
    assert "idle per step 0.200 → 8.100 ms" in out and "AL509" in out


def test_html_has_a_step_timeline(tmp_path, capsys):
    path = SCENARIOS["AL501"](True).write(tmp_path / "t.json")
    html = tmp_path / "r.html"
    run([path, "--html", html], capsys)
    page = html.read_text()
    assert "Step timeline" in page and page.count("compute · non-compute · idle") == 1
    assert page.count("title='idle") >= 4 and "AL501" in page and "Code findings" not in page


def test_reads_archlints_own_trace(tmp_path, capsys):
    """`archlint model.py:Net --latency --trace DIR` writes a trace the same reader reads: its op ranges
    are annotations (GPU time per op on a CUDA run); a CPU run has no GPU events: one line, exit 2."""
    torch = pytest.importorskip("torch")
    from archlint.model.timing.profiler_trace import write_trace

    def once():
        with torch.profiler.record_function("conv1"):
            torch.ones(8, 8) @ torch.ones(8, 8)

    path = write_trace(once, torch.device("cpu"), tmp_path, "model.py:Net")
    assert "conv1" in {r.name for r in read_trace(path).annotations}
    code, _, err = run([tmp_path], capsys)
    assert code == 2 and "no GPU events" in err


TRAIN = """import torch


def train_step(model, opt, x, y):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    print(loss.item())


def train(model, opt, loader):
    for x, y in loader:
        train_step(model, opt, x.cuda(), y.cuda())
"""


def test_trace_and_code_finding_are_one(tmp_path, capsys):
    (tmp_path / "train.py").write_text(TRAIN)
    t = SCENARIOS["AL503"](True)  # its stack says the sync is in "train.py(12): train_step"
    for e in t.events:
        if e["name"] == "train.py(12): train_step":
            e["name"] = "/home/someone/project/train.py(4): train_step"  # as recorded on the training machine
    path = t.write(tmp_path / "t.json")
    code, out, _ = run([path, "--code", tmp_path / "train.py", "--output-format", "json"], capsys)
    diagnostics = json.loads(out)["diagnostics"]
    assert [d["code"] for d in diagnostics if d["code"] in ("AL401", "AL503")] == ["AL401"]
    al401 = next(d for d in diagnostics if d["code"] == "AL401")
    assert (
        al401["line"] == 8 and al401["price"]["basis"] == "estimated" and al401["evidence"]["trace"]["code"] == "AL503"
    )
    # elsewhere in the code: two findings
    (tmp_path / "train.py").write_text(
        TRAIN.replace("import torch\n", "import torch\n\n\n\ndef f():\n    pass\n")
    )  # line 4: f
    code, out, _ = run([path, "--code", tmp_path / "train.py", "--output-format", "json"], capsys)
    assert {"AL401", "AL503"} <= {d["code"] for d in json.loads(out)["diagnostics"]}


@pytest.mark.parametrize("chunk", [300, 1000, 4096])
def test_batched_decoding_never_cuts_inside_an_event(tmp_path, monkeypatch, chunk):
    """Element boundaries look like `}, {` — so do lists of objects and strings inside events: the
    batch decoder must fall back whenever its cut is not between two events."""
    import random

    rng = random.Random(chunk)
    events = []
    for i in range(400):
        e = {"ph": "X", "cat": "cpu_op", "name": f"op{i}", "ts": i, "dur": 1, "args": {}}
        if rng.random() < 0.3:
            e["args"]["list"] = [{"a": k}, {"b": "}, {"}] if (k := rng.randint(0, 9)) else []
        if rng.random() < 0.2:
            e["name"] = "tricky }, { name"
        events.append(e)
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events, "schemaVersion": 1}, indent=rng.choice([None, 1, 2])))
    monkeypatch.setattr(scan, "CHUNK_CHARS", chunk)
    monkeypatch.setattr(scan, "PIECE_CHARS", 128)
    monkeypatch.setattr(scan, "BATCH_MIN_CHARS", 100)
    assert list(scan.events(path, lambda k, v: None)) == events


def test_internal_error_on_one_file_is_one_line(tmp_path, capsys, monkeypatch):
    from archlint.trace import analyze as analyze_module

    real = analyze_module.analyze

    def flaky(data, **kw):
        if data.file.endswith("boom.json"):
            raise RuntimeError("boom")
        return real(data, **kw)

    monkeypatch.setattr(analyze_module, "analyze", flaky)
    SCENARIOS["AL509"](True).write(tmp_path / "good.json")
    SCENARIOS["AL509"](True).write(tmp_path / "boom.json")
    code, out, err = run([tmp_path / "good.json", tmp_path / "boom.json"], capsys)
    assert code == 2 and "AL509" in out
    assert (
        err.strip()
        == f"archlint: internal error: {tmp_path / 'boom.json'}: RuntimeError: boom (rerun with --debug for the traceback)"
    )


def test_baseline_grandfathers_known_findings(tmp_path, capsys):
    path = SCENARIOS["AL501"](True).write(tmp_path / "trace.json")
    baseline = tmp_path / "baseline.json"
    assert run([path, "--save-baseline", baseline], capsys)[0] == 0  # saved: what it holds is known
    assert {f["code"] for f in json.loads(baseline.read_text())["findings"]} == {"AL501", "AL509"}
    code, out, _ = run([path, "--baseline", baseline], capsys)
    assert code == 0 and "2 findings in the baseline not reported" in out
    SCENARIOS["AL503"](True).write(path)  # the next run: a new problem
    code, out, _ = run([path, "--baseline", baseline], capsys)
    assert code == 1 and "AL503" in out


def test_real_h200_trace_batch_norm_is_not_a_gemm(capsys):
    # cuDNN's batch-norm kernels once counted as fp32 GEMMs without tensor cores: AL504 fired on
    # a float32 ResNet-50 whose convolutions all ran on tensor cores (TF32, cuDNN's default)
    code, out, _ = run([FIXTURES / "h200_resnet50_fp32_inference.json.gz", "--output-format", "json"], capsys)
    doc = json.loads(out)
    trace = doc["traces"][0]
    assert "H200" in json.dumps(trace["device"])
    # launch gaps are AL505's; AL509 claims only the idle no other finding covers; no ProfilerStep: said (info)
    # and cuDNN's NCHW↔NHWC conversions (12% of the GPU's busy time) are said, with channels_last
    assert [d["code"] for d in doc["diagnostics"]] == ["AL505", "AL511", "AL509", "AL510"]
    assert trace["gemm_tensor_core_share"] > 0.95
    assert trace["kernel_groups"]["reduction"] > 1000  # µs: the batch norms (1.28 ms) are reductions
