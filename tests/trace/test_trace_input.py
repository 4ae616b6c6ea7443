"""`archlint trace` on input of any shape (issue 38): every torch release's categories, malformed
fields, hostile names, pathological sizes, standard input and FIFOs, --timeout, --diff's outputs."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest

from archlint import cli
from archlint.trace import kernels
from archlint.trace.analyze import analyze
from archlint.trace.read import read_trace
from tests.trace.scenarios import SCENARIOS
from tests.trace.synth import GEMM, RELEASES, STEP, Trace, release_trace, steps

ROOT = Path(__file__).parents[2]
FIXTURES = Path(__file__).parent / "fixtures"


def run(argv, capsys):
    code = cli.main(["trace", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def archlint(*argv, timeout=120, **kw):
    """`python -m archlint trace ...` in a fresh process: a real stdout, real signals."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "utf-8"}
    return subprocess.run(
        [sys.executable, "-m", "archlint", "trace", *map(str, argv)],
        capture_output=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
        **kw,
    )


def write(doc: dict, path: Path) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


# ── item 4: every torch release's category names ─────────────────────────────────────────────


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_every_release_gives_the_same_figures(tmp_path, release):
    """torch 1.8 wrote Operator/Runtime/Kernel/Memcpy/Memset (and GPU rows with a "stream N" tid):
    its steps, DataLoader waits, launches and syncs were lost (0 steps, every idle "host")."""
    ours = analyze(read_trace(write(release_trace(release), tmp_path / "t.json")))
    latest = analyze(read_trace(write(release_trace("2.x"), tmp_path / "latest.json")))
    assert ours.steps == 3
    assert [s.to_dict() for s in ours.per_step] == [s.to_dict() for s in latest.per_step]
    assert ours.temporal_breakdown == latest.temporal_breakdown
    step = ours.per_step[0]
    assert step.dataloader_us == 2000 and step.syncs == 1 and step.launch_us == 18 and step.kernels == 5
    # the sync began 440 µs before the GPU drained: the lead the host gave up (trace/queue.py)
    assert step.idle_causes["input"] == 2000 and step.idle_causes["sync"] == 440
    old = release.startswith("1.8")
    assert any("torch 1.8-1.10" in n for n in ours.notes) == old


def test_release_1_8_findings_as_today(tmp_path, capsys):
    path = write(release_trace("1.8"), tmp_path / "old.json")
    code, out, _ = run([path, "--output-format", "json"], capsys)
    doc = json.loads(out)
    new = json.loads(run([write(release_trace("2.x"), tmp_path / "new.json"), "--output-format", "json"], capsys)[1])
    assert code == 1 and [d["code"] for d in doc["diagnostics"]] == [d["code"] for d in new["diagnostics"]]
    assert {"AL501", "AL503"} <= {d["code"] for d in doc["diagnostics"]}


# ── item 5: negative durations, clock skew, overlapping steps ───────────────────────────────


def test_negative_duration_is_clamped_and_said(tmp_path):
    t = steps(lambda t, s: t.gpu(GEMM, s + 100, 9000, s + 50))
    t.gpu(GEMM, 1_005_000.0, -999_997_000.0, 1_004_990.0)  # the probe's kernel
    a = analyze(read_trace(t.write(tmp_path / "t.json")))
    b = a.temporal_breakdown
    assert b["compute_us"] >= 0 and 0 <= b["idle_us"] <= b["span_us"]
    assert all(0 <= s.idle_us <= s.wall_us and s.compute_us >= 0 and s.kernel_us >= 0 for s in a.per_step)
    assert any("1 events with a negative duration (down to -999997000 µs) counted as 0 µs" in n for n in a.notes)


def test_clock_skew_and_overlapping_steps_are_said(tmp_path):
    t = steps(lambda t, s: t.gpu(GEMM, s + 100, 9000, s + 50))
    t.gpu(GEMM, 1_000_000.0 + 9200, 10, 1_000_000.0 + 9350)  # starts 150 µs before its launch call
    t.step(4, 1_000_000.0 + 3 * STEP, STEP)
    t.events[0]["dur"] = STEP + 4000  # ProfilerStep#1 runs into step 2
    a = analyze(read_trace(t.write(tmp_path / "t.json")))
    assert any("1 GPU events start before the host call that launched them (by up to 150 µs)" in n for n in a.notes)
    assert any("1 ProfilerStep ranges ran past the start of the next step" in n for n in a.notes)
    assert a.per_step[0].wall_us == STEP
    assert sum(s.wall_us for s in a.per_step) <= 4 * STEP


# ── item 6: SARIF results always have a physical location ──────────────────────────────────


def test_sarif_without_stacks_points_at_the_trace_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    SCENARIOS["AL509"](True).write(tmp_path / "rank0.json")
    code, out, _ = run(["rank0.json", "--output-format", "sarif"], capsys)
    results = json.loads(out)["runs"][0]["results"]
    assert code == 1 and results
    for r in results:
        location = r["locations"][0]
        assert location["physicalLocation"]["artifactLocation"]["uri"] == "rank0.json"
        assert "with_stack=True" in r["properties"]["location"]


# ── item 7: --diff with every output option ─────────────────────────────────────────────────


@pytest.fixture
def pair(tmp_path):
    return SCENARIOS["AL509"](True).write(tmp_path / "new.json"), SCENARIOS["AL509"](False).write(
        tmp_path / "base.json"
    )


def test_diff_to_a_folder_is_one_line(tmp_path, capsys, pair):
    (tmp_path / "out").mkdir()
    for fmt in ("json", "text"):
        code, out, err = run([*pair[:1], "--diff", pair[1], "-o", tmp_path / "out", "--output-format", fmt], capsys)
        assert (
            code == 2 and "internal error" not in err and "it is a folder" in err and len(err.strip().splitlines()) == 1
        )


def test_diff_writes_its_outputs(tmp_path, capsys, pair):
    new, base = pair
    code, out, err = run(
        [
            new,
            "--diff",
            base,
            "-o",
            tmp_path / "d.json",
            "--output-format",
            "json",
            "--html",
            tmp_path / "d.html",
            "--save-baseline",
            tmp_path / "b.json",
        ],
        capsys,
    )
    assert code == 0 and out == ""  # the baseline just saved holds every finding
    doc = json.loads((tmp_path / "d.json").read_text())
    assert doc["diff"]["breakdown"]["idle_us"]["new"] == 8100 and len(doc["traces"]) == 2
    assert "Step timeline" in (tmp_path / "d.html").read_text()  # the new trace's report
    assert {f["code"] for f in json.loads((tmp_path / "b.json").read_text())["findings"]} == {"AL509"}
    code, out, _ = run([new, "--diff", base, "--baseline", tmp_path / "b.json"], capsys)
    assert code == 0 and "idle per step" in out and "in the baseline not reported" in out
    code, _, _ = run([new, "--diff", base, "-o", tmp_path / "d.txt"], capsys)
    assert code == 1 and "idle per step 0.200 → 8.100 ms" in (tmp_path / "d.txt").read_text()
    for fmt, marker in (("sarif", '"ruleId": "AL509"'), ("github", "::warning"), ("junit", "<testsuite")):
        code, out, _ = run([new, "--diff", base, "--output-format", fmt], capsys)
        assert code == 1 and marker in out, fmt


# ── item 13: linear in a long name; --timeout ───────────────────────────────────────────────


def test_long_names_take_linear_time(tmp_path):
    """A 345 KB name of repeated "DataLoader" took the reader 21 s (a backtracking regex)."""
    t = steps(lambda t, s: t.gpu(GEMM, s + 100, 9000, s + 50))
    t.host("python_function", "DataLoader" * 34_500, 1_000_100.0, 10)
    t.host("cpu_op", "DataLoader" * 34_500, 1_000_100.0, 10)
    t.gpu("softmax" * 50_000, 1_000_200.0, 1, 1_000_150.0)
    t.gpu("cudnn::" * 50_000, 1_000_300.0, 1, 1_000_250.0)
    path = t.write(tmp_path / "long.json")
    start = time.perf_counter()
    proc = archlint(path, "--output-format", "json")
    assert proc.returncode == 0 and proc.stderr == b"" and len(json.loads(proc.stdout)["traces"][0]["per_step"]) == 3
    assert time.perf_counter() - start < 20


def test_kernel_groups_without_the_backtracking_patterns():
    assert kernels.group("softmax_warp_forward then cutlass gemm") == "attention"
    assert kernels.group("cudnn::bn_fw_inf_1C11_kernel_NCHW") == "reduction"
    assert kernels.group("cudnn::cnn::conv2d_grouped_direct_kernel") == "gemm"
    assert kernels.group("cudnn::winograd_nonfused::x cudnn::bn_fw") == "reduction"  # the last cudnn:: decides


def test_timeout_on_a_fifo_nobody_writes(tmp_path):
    fifo = tmp_path / "never.json"
    os.mkfifo(fifo)
    good = SCENARIOS["AL509"](True).write(tmp_path / "good.json")
    start = time.perf_counter()
    proc = archlint(good, fifo, "--timeout", "1")
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "not read and analysed within --timeout 1 s" in err and "Traceback" not in err
    assert "AL509" in proc.stdout.decode() and time.perf_counter() - start < 60


def test_timeout_must_be_positive(tmp_path, capsys):
    path = SCENARIOS["AL509"](True).write(tmp_path / "t.json")
    for value in ("0", "-1", "nan"):
        code, _, err = run([path, "--timeout", value], capsys)
        assert code == 2 and "--timeout" in err and len(err.strip().splitlines()) == 1


# ── item 14: one huge string in a small .gz ─────────────────────────────────────────────────


def test_gzip_of_one_huge_string_fails_fast(tmp_path):
    """306 KB of gzip holding a 300M-character string: 392 s and 2.1 GB before the size error
    (the window re-joined and re-decoded per 1 MB chunk)."""
    path = tmp_path / "bomb.json.gz"
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip framing
    with open(path, "wb") as f:
        f.write(z.compress(b'{"traceEvents": [{"name": "'))
        block = b"a" * (1 << 20)
        for _ in range(300):
            f.write(z.compress(block))
        f.write(z.compress(b'"}]}') + z.flush())
    assert path.stat().st_size < 400_000
    start = time.perf_counter()
    proc = archlint(path)
    assert proc.returncode == 2 and "over 64 MB long" in proc.stderr.decode()
    assert time.perf_counter() - start < 60


def test_long_value_read_across_many_chunks(tmp_path, monkeypatch):
    """The doubling retries still decode a long value whole, at any chunk size."""
    from archlint.trace import scan

    monkeypatch.setattr(scan, "CHUNK_CHARS", 64)
    monkeypatch.setattr(scan, "PIECE_CHARS", 16)
    t = SCENARIOS["AL509"](True)
    t.host("user_annotation", "x" * 100_000, 1_000_100.0, 10)
    path = t.write(tmp_path / "t.json")
    assert list(scan.events(path, lambda k, v: None)) == t.events


# ── item 15: long step lists ────────────────────────────────────────────────────────────────


def test_long_step_list_is_summarised_in_text_only(tmp_path, capsys):
    t = steps(lambda t, s: t.gpu(GEMM, s + 100, 9000 if s != 1_000_000.0 + 77 * STEP else 100, s + 50), n=200)
    t.events[2 * 150]["dur"] = 3 * STEP  # ProfilerStep#151: the slowest, clamped to the next start...
    path = t.write(tmp_path / "t.json")
    code, out, _ = run([path], capsys)
    assert "of 200 steps shown: the first and last 10 and the 10 slowest" in out
    assert out.count("\n") < 120
    code, out, _ = run([path, "--output-format", "json"], capsys)
    assert len(json.loads(out)["traces"][0]["per_step"]) == 200


# ── malformed traces: one line, exit 2, or the odd event left out ───────────────────────────


def _base() -> Trace:
    return SCENARIOS["AL509"](True)


def _event(**fields) -> dict:
    e = {
        "ph": "X",
        "cat": "kernel",
        "name": GEMM,
        "pid": 0,
        "tid": 7,
        "ts": 1_000_500.0,
        "dur": 10.0,
        "args": {"stream": 7, "device": 0, "correlation": 1},
    }
    e.update(fields)
    return e


BIG = "9" * 5000
MALFORMED = {  # name → (text of one more event, exit 2 expected)
    "args a list": (json.dumps(_event(args=[1, 2])), False),
    "args a string": (json.dumps(_event(args="x")), False),
    "cat an int": (json.dumps(_event(cat=5)), False),
    "cat a list": (json.dumps(_event(cat=["kernel"])), False),
    "cat an object": (json.dumps(_event(cat={"a": 1})), False),
    "name a list": (json.dumps(_event(name=["x"])), False),
    "name an object": (json.dumps(_event(cat="cpu_op", name={"a": 1})), False),
    "ts a string": (json.dumps(_event(ts="1000500")), False),
    "dur a string": (json.dumps(_event(cat="cuda_runtime", name="cudaDeviceSynchronize", dur="5")), False),
    "ts NaN": (json.dumps(_event(ts=float("nan"))), False),
    "dur Infinity": (json.dumps(_event(dur=float("inf"))), False),
    "ts 1e400": (json.dumps(_event()).replace("1000500.0", "1e400"), False),
    "tid a list": (json.dumps(_event(cat="cuda_runtime", name="cudaDeviceSynchronize", tid=[1])), False),
    "ph a list": (json.dumps(_event(ph=["X"])), False),
    "correlation 2**70": (json.dumps(_event(args={"stream": 7, "correlation": 2**70})), False),
    "stream a float": (json.dumps(_event(args={"stream": 7.5})), False),
    "step number 5,000 digits": (json.dumps(_event(cat="user_annotation", name="ProfilerStep#" + BIG)), False),
    "memory args a list": (json.dumps({"ph": "i", "name": "[memory]", "ts": 1, "args": [1]}), False),
    "memory device 5,000-digit string": (
        json.dumps({"ph": "i", "name": "[memory]", "ts": 1, "args": {"Device Id": BIG, "Total Allocated": 1}}),
        False,
    ),
    "ts 5,000 digits": (json.dumps(_event()).replace("1000500.0", BIG), True),
    "deep nesting": (
        json.dumps(_event()).replace('"args": {', '"args": {"deep": ' + "[" * 100_000 + "]" * 100_000 + ", "),
        True,
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_event(tmp_path, capsys, case):
    text, fails = MALFORMED[case]
    doc = json.dumps(_base().document())
    bad = tmp_path / "bad.json"
    bad.write_text(doc.replace('"traceEvents": [', '"traceEvents": [' + text + ", ", 1))
    good = _base().write(tmp_path / "good.json")
    code, out, err = run([bad, good, "--output-format", "json"], capsys)
    assert "internal error" not in err and "Traceback" not in err
    traces = json.loads(out)["traces"]
    if fails:
        assert code == 2 and len(err.strip().splitlines()) == 1 and "bad.json: not a torch.profiler trace" in err
        assert [t["file"] for t in traces] == [str(good)]
    else:
        assert code == 1 and err == "" and len(traces) == 2


def test_odd_headers(tmp_path, capsys):
    doc = _base().document()
    doc["deviceProperties"] = [{"id": 0, "name": 5, "totalGlobalMem": "x"}, "junk"]
    doc["distributedInfo"] = {"rank": "abc", "world_size": [1]}
    code, out, err = run([write(doc, tmp_path / "t.json"), "--output-format", "json"], capsys)
    assert code == 1 and err == ""
    t = json.loads(out)["traces"][0]
    assert t["rank"] == 0 and t["device"] is None


def test_hostile_names_are_escaped_in_text(tmp_path):
    t = steps(lambda t, s: t.gpu("evil\x1b]0;pwned\x07\x1b[31m\u202e\x00kernel\udc80", s + 100, 1000, s + 50))
    t.host("user_annotation", "mod\x1b[2J", 1_000_050.0, 9000)
    t.devices[0] = {**t.devices[0], "name": "A100\x1b[5m"}
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(t.document()), encoding="utf-8")  # json.dumps writes \udc80 as an escape
    proc = archlint(path)
    out = proc.stdout.decode("utf-8")  # strict: a lone surrogate would not decode
    assert proc.returncode == 1 and "AL509" in out and "\nFound " in out, proc.stderr  # the report to its end
    assert "\x1b" not in out and "\x00" not in out and "\u202e" not in out and "\x07" not in out
    assert "evil\\x1b]0;pwned\\x07" in out and "\\u202e" in out and "\\x00kernel\\x80" in out


# ── minor: standard input, FIFOs, cut gzip, the same file twice ─────────────────────────────


def test_standard_input_plain_and_gzip(tmp_path):
    doc = json.dumps(_base().document()).encode()
    for data in (doc, gzip.compress(doc)):
        proc = archlint("-", "--output-format", "json", input=data)
        assert proc.returncode == 1, proc.stderr
        assert json.loads(proc.stdout)["traces"][0]["file"] == "<stdin>"


def test_fifo_is_read(tmp_path, capsys):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    doc = gzip.compress(json.dumps(_base().document()).encode())

    def feed():  # waits (30 s at most) for the reader to open the FIFO, then writes the trace
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: no reader yet
                time.sleep(0.02)
                continue
            os.set_blocking(fd, True)
            with open(fd, "wb") as f:
                f.write(doc)
            return

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    code, out, err = run([fifo, "--output-format", "json", "--timeout", "30"], capsys)
    writer.join(35)
    assert code == 1 and err == "" and json.loads(out)["traces"][0]["steps"] == 3


def test_cut_gzip_says_so(tmp_path, capsys):
    whole = gzip.compress(json.dumps(_base().document()).encode())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(whole[:12])
    code, _, err = run([path], capsys)
    assert code == 2 and "cut short" in err and "truncated or corrupt gzip" in err
    path.write_bytes(whole[:10] + b"\xff" * 40)
    code, _, err = run([path], capsys)
    assert code == 2 and "gzip" in err and "internal error" not in err


def test_same_file_twice_is_read_once(tmp_path, capsys):
    path = _base().write(tmp_path / "t.json")
    code, out, _ = run([path, path, tmp_path, "--output-format", "json"], capsys)
    assert code == 1 and len(json.loads(out)["traces"]) == 1


def test_garbage_early_in_a_long_file_is_said_at_once(tmp_path, capsys):
    """Malformed JSON is not mistaken for a value cut at the window's end (read on to the size limit)."""
    filler = json.dumps([_event(cat="cpu_op", name=f"op{i}") for i in range(40_000)])[1:-1]
    path = tmp_path / "bad.json"
    path.write_text('{"traceEvents": [{"ph": "X", "ts": tru, "x": 1}, ' + filler + "]}")
    code, _, err = run([path], capsys)
    assert code == 2 and "not valid JSON near character" in err and "MB long" not in err


def test_diff_with_code(tmp_path, capsys, pair):
    from tests.trace.test_trace_command import TRAIN

    (tmp_path / "train.py").write_text(TRAIN)
    code, out, _ = run([pair[0], "--diff", pair[1], "--code", tmp_path / "train.py", "--output-format", "json"], capsys)
    doc = json.loads(out)
    assert {"AL509", "AL401"} <= {d["code"] for d in doc["diagnostics"]} and "diff" in doc


@pytest.mark.parametrize("fmt", ["sarif", "github", "junit", "json", "text"])
def test_lone_surrogate_kernel_name_in_every_format(tmp_path, fmt):
    """A kernel name with a lone surrogate reaches the findings' evidence (AL504 lists the fp32
    kernels): SARIF's writer stopped with an internal error; every format writes it as an escape."""
    t = steps(lambda t, s: t.gpu("ampere_sgemm_128x64_tn\udc80\x1b[31m", s + 100, 9000, s + 50))
    path = tmp_path / "t.json"
    path.write_text(json.dumps(t.document()))
    proc = archlint(path, "--output-format", fmt)
    out = proc.stdout.decode("utf-8")
    assert proc.returncode == 1 and proc.stderr == b"" and "AL504" in out and "\x1b" not in out
    if fmt in ("sarif", "json"):
        doc = json.loads(out)
        assert json.dumps("ampere_sgemm_128x64_tn\udc80\x1b[31m") in json.dumps(doc)  # the name, as it was


def test_gzip_inside_gzip_says_so(tmp_path, capsys):
    path = tmp_path / "twice.json.gz"
    path.write_bytes(gzip.compress(gzip.compress(json.dumps(_base().document()).encode())))
    code, _, err = run([path], capsys)
    assert code == 2 and "compressed twice" in err
