"""The trace's diagnoses on real traces and on synthetic ones built to isolate one cause: queued
idle is not the host's, start-up is not priced, savings never overlap, advice follows the evidence."""

from __future__ import annotations

from pathlib import Path

import pytest

from archlint.config import Settings
from archlint.trace.command import lint_trace
from tests.trace.synth import A100, GEMM, STEP, Trace, busy, steps

FIXTURES = Path(__file__).parent / "fixtures"
V100 = {"id": 0, "name": "Tesla V100-SXM2-16GB", "totalGlobalMem": 16 * 2**30, "computeMajor": 7, "computeMinor": 0}
MI250 = {
    "id": 0,
    "name": "AMD Instinct MI250X",
    "totalGlobalMem": 64 * 2**30,
    "computeMajor": 9,
    "computeMinor": 0,
    "warpSize": 64,
}


def lint(path: Path):
    return lint_trace(path, Settings())


def findings(trace: Trace, tmp_path: Path):
    analysis, diagnostics = lint(trace.write(tmp_path / "t.json"))
    return analysis, {d.code: d for d in diagnostics}


def savings_fit(analysis, diagnostics) -> None:
    """Each µs claimed once: the per-step savings add up to at most the step, the buckets to the step."""
    wf = analysis.waterfall
    per_step = [d for d in diagnostics if d.price and d.price.whole in ("step time", "the traced GPU span")]
    assert sum(d.price.saving_ms for d in per_step) * 1000 <= wf.step_us + 1e-6
    assert sum(b.us for b in wf.buckets) == pytest.approx(wf.step_us, rel=1e-9, abs=1e-6)
    assert wf.expected_step_us == pytest.approx(wf.step_us - wf.saving_us)


# --- real traces -------------------------------------------------------------------------------


def test_alexnet_prices_the_pageable_copies_not_the_warm_up():
    analysis, diagnostics = lint(FIXTURES / "a100_alexnet_inference.json.gz")
    found = {d.code: d for d in diagnostics}
    # was: AL509 "saves 12.9 s" for the CUDA context, cuDNN start-up and warm-up, and no AL502
    assert all(d.price is None or d.price.saving_ms < 100 for d in diagnostics)
    assert found["AL510"].severity.value == "warning" and "schedule(wait=" in found["AL510"].message
    p = found["AL502"]
    assert "82% of the trace's GPU time" in p.message and "4.4 GB/s" in p.message
    assert p.price.whole.startswith("the trace's GPU time") and 40 < p.price.saving_ms < 50  # 55.5 ms × (1 − 4.4/24)
    assert [w.steady for w in analysis.per_step] == [False, True]
    # the steady window is the two measured forwards: the final synchronize after teardown does not stretch it
    assert analysis.per_step[1].wall_us < 100_000
    savings_fit(analysis, diagnostics)


def test_sampled_training_idle_with_work_queued_is_not_the_hosts():
    analysis, diagnostics = lint(FIXTURES / "sampled_training_rank0.json.gz")
    longest = analysis.idle_gaps[0]
    # 58.9 ms with the all_to_all's NCCL kernel already launched: the GPU waited, the host was ahead
    assert longest.cause == "queued" and longest.kind == "collective" and longest.queue_depth >= 1
    assert longest.launched_before_gap_us > 0 and "SendRecv" in longest.ended_by
    for s in analysis.windows:
        assert s.idle_causes["queued"] > 0.25 * s.idle_us
    found = {d.code: d for d in diagnostics}
    comm = found["AL507"]
    # the exposed collective is the embedding exchange: named, sized, and not advised as DDP buckets
    assert "all_to_all: 2 calls per step, median 400 MiB" in comm.message
    assert "TrainPipelineSparseDist" in comm.price.alternative and "bucket" not in comm.price.alternative
    assert "idle_queued" in found["AL509"].evidence["buckets"]
    savings_fit(analysis, diagnostics)


def test_mi250_first_step_with_lazy_loading_is_not_priced():
    analysis, diagnostics = lint(FIXTURES / "mi250_minitoy_train.json.gz")
    assert [d.code for d in diagnostics] == ["AL510"]  # was: AL509 and AL503 priced on the first step
    assert "lazy module loading" in diagnostics[0].message and "nothing is priced" in diagnostics[0].message
    assert not analysis.windows and analysis.waterfall.saving_us == 0


def test_h200_launch_gaps_are_claimed_once():
    analysis, diagnostics = lint(FIXTURES / "h200_resnet50_fp32_inference.json.gz")
    found = {d.code: d for d in diagnostics}
    assert found["AL505"].price.saving_ms > found["AL509"].price.saving_ms  # AL509 no longer re-prices launch idle
    assert found["AL509"].severity.value == "info"  # what it claims itself is immaterial: AL505 says the rest
    assert "idle_launch" not in found["AL509"].evidence["buckets"]
    savings_fit(analysis, diagnostics)
    gap = analysis.idle_gaps[0]
    assert gap.start_us > 0 and gap.ended_by and gap.launch_to_start_us is not None  # the drill-down, for Perfetto


# --- synthetic traces, one cause each -----------------------------------------------------------


def test_second_stream_waiting_on_the_first_is_queued_not_host(tmp_path):
    def build(t, s):
        t.gpu(GEMM, s + 100, 2_000, s + 50, stream=7)
        # launched at once, on stream 8, but held by an event wait until s + 7000 (the other stream's work)
        t.gpu(GEMM, s + 7_000, 2_900, s + 150, stream=8)

    analysis, found = findings(steps(build), tmp_path)
    causes = analysis.windows[0].idle_causes
    assert causes["queued"] == pytest.approx(4_900) and causes["host"] < 200
    assert analysis.windows[0].queued_kinds == {"event-wait": pytest.approx(4_900)}
    d = found["AL509"]
    assert d.evidence["cause"] == "queued" and "neither the host nor a sync" in d.message
    assert d.price.saving_ms == pytest.approx(0.3 * causes["host"] / 1000, abs=1e-6)  # queued idle is not priced


def test_launch_delayed_in_the_queue_splits_the_gap(tmp_path):
    def build(t, s):
        t.gpu(GEMM, s + 100, 2_000, s + 50)
        t.gpu(GEMM, s + 8_000, 1_900, s + 2_400)  # launched 300 µs into the gap, then waits 5.6 ms queued

    analysis, _ = findings(steps(build), tmp_path)
    causes = analysis.windows[0].idle_causes
    # the host was late until the launch returned (300 µs + the call); the step's last 100 µs are host too
    assert causes["queued"] == pytest.approx(8_000 - 2_404) and causes["host"] == pytest.approx(2_404 - 2_100 + 100)


def test_sync_is_charged_only_the_lead_it_gave_up(tmp_path):
    """The inclusive-boundary artefact: a synchronize returning just as the GPU drains, then long
    host work, charged all of the following idle to the sync."""

    def build(t, s):
        t.gpu(GEMM, s + 100, 2_900, s + 50)
        t.host("cuda_runtime", "cudaDeviceSynchronize", s + 2_990, 10)  # blocked 10 µs while the GPU still ran
        t.gpu(GEMM, s + 8_000, 1_900, s + 7_950)

    analysis, found = findings(steps(build), tmp_path)
    causes = analysis.windows[0].idle_causes
    assert causes["sync"] == pytest.approx(10) and causes["host"] == pytest.approx(4_990 + 100)  # + the step's tail
    assert "AL503" not in found


def test_item_on_a_cpu_tensor_is_no_sync(tmp_path):
    def build(t, s):
        busy(t, s)
        t.host("cpu_op", "aten::item", s + 5_000, 30)  # no copy or sync inside: a CPU tensor
        t.host("cpu_op", "aten::item", s + 6_000, 400)
        t.host("cuda_runtime", "cudaMemcpyAsync", s + 6_010, 380)
        t.gpu("Memcpy DtoH (Device -> Pageable)", s + 6_100, 10, s + 6_010, launch="cudaMemcpyAsync", cat="gpu_memcpy")

    analysis, _ = findings(steps(build), tmp_path)
    assert analysis.evidence.item_calls == {"gpu": 3, "cpu": 3}


@pytest.mark.parametrize(
    "device, says, never",
    [
        (V100, "GradScaler", ("dtype=torch.bfloat16", "allow_tf32")),  # 7.x: fp16 only
        (A100, "allow_tf32", ("GradScaler",)),
        (MI250, "dtype=torch.bfloat16", ("allow_tf32", "GradScaler")),
    ],
)
def test_precision_advice_follows_the_device(tmp_path, device, says, never):
    name = "Cijk_Ailk_Bljk_SB_MT64x64x8_SN" if device is MI250 else "volta_sgemm_128x64_nn"
    _, found = findings(steps(lambda t, s: busy(t, s, name=name), device=device), tmp_path)
    advice = found["AL504"].price.alternative
    assert says in advice and not any(w in advice for w in never)


def test_blocking_upload_is_a_copy_not_an_item(tmp_path):
    def build(t, s):
        t.gpu(GEMM, s + 100, 2_900, s + 50)
        t.gpu(
            "Memcpy HtoD (Pageable -> Device)",
            s + 3_010,
            100,
            s + 200,
            launch="cudaMemcpy",
            launch_dur=2_950,
            cat="gpu_memcpy",
        )  # a synchronous upload of the batch: blocks until the GEMM and the copy are done
        t.gpu(GEMM, s + 6_000, 3_900, s + 5_950)

    _, found = findings(steps(build), tmp_path)
    advice = found["AL503"].price.alternative
    assert "non_blocking" in advice and "pin_memory" in advice and ".item()" not in advice
    assert "blocking host-to-device copies" in found["AL503"].message


def test_no_compile_advice_on_compiled_code(tmp_path):
    def build(t, s):
        at = s + 100
        for _ in range(300):
            t.gpu("triton_poi_fused_add_relu_0", at + 8, 5, at)
            at += 20
        t.gpu(GEMM, at + 10, s + 9_900 - at - 10, at)

    _, found = findings(steps(build), tmp_path)
    advice = found["AL505"].price.alternative
    assert "already compiled" in advice and "torch.compile(" not in advice


def test_graph_replay_wait_is_queued_graph(tmp_path):
    def build(t, s):
        t.gpu(GEMM, s + 100, 2_000, s + 50, launch="cudaGraphLaunch")
        t.gpu(GEMM, s + 6_000, 3_900, s + 60, launch="cudaGraphLaunch")

    analysis, _ = findings(steps(build), tmp_path)
    assert analysis.windows[0].queued_kinds == {"graph": pytest.approx(3_900)}
    assert any("CUDA-graph replays" in w for w in analysis.warnings)


def test_run_from_its_first_step_prices_only_the_later_steps(tmp_path):
    t = Trace()
    for i in range(3):
        s = 1_000_000.0 + i * STEP * (1.5 if i else 1)
        t.step(i, s, STEP * (1.5 if i == 0 else 1))  # ProfilerStep#0: the run's first step, 1.5x as long
        busy(t, s, 100, 2_000 if i == 0 else 9_900)
        if i == 0:
            t.host("cuda_runtime", "cudaMalloc", s + 2_100, 500)
    analysis, found = findings(t, tmp_path)
    assert [s.steady for s in analysis.per_step] == [False, True, True]
    assert "AL509" not in found and found["AL510"].severity.value == "info"


def test_profilers_step_0_like_the_others_is_steady(tmp_path):
    """ProfilerStep#0 is the profiler's first step; when profiling began mid-run it is as steady as
    the rest, and nothing singles it out."""
    t = Trace()
    for i in range(3):
        s = 1_000_000.0 + i * STEP
        t.step(i, s, STEP)
        busy(t, s, 100, 2_000)
    analysis, found = findings(t, tmp_path)
    assert all(s.steady for s in analysis.per_step) and "AL510" not in found


def test_call_site_is_the_users_line_not_the_def(tmp_path):
    """With stacks, each Python call says the line it was made from (args.CallFrom): the sync is
    located at the line that called .item(), inside the user's function, past library frames."""

    def build(t, s):
        t.gpu(GEMM, s + 100, 2_900, s + 50)
        t._x("python_function", "train.py(20): train_step", s + 40, 3_000, CallFrom="train.py:41")
        t._x(
            "python_function", "<built-in method item of Tensor object at 0x7f>", s + 190, 2_830, CallFrom="train.py:24"
        )
        t._x("python_function", "multiprocessing/connection.py(200): recv", s + 195, 2_800, CallFrom="train.py:24")
        t.host("cuda_runtime", "cudaStreamSynchronize", s + 200, 2_810)
        t.gpu(GEMM, s + 6_000, 3_900, s + 5_950)

    analysis, found = findings(steps(build), tmp_path)
    assert analysis.locations["sync"] == ("train.py", 24, "train_step")
    assert (found["AL503"].file, found["AL503"].line) == ("train.py", 24)


@pytest.mark.parametrize(
    "frame, library",
    [
        ("multiprocessing/connection.py(200): recv", True),  # the standard library, written relative to sys.path
        ("threading.py(320): wait", True),
        ("transformers/models/bert/modeling_bert.py(100): forward", True),
        ("/usr/lib/python3.11/queue.py(180): get", True),
        ("train.py(12): train_step", False),
        ("/home/me/project/data/queue.py(3): get", False),  # an absolute path outside Python: the user's
    ],
)
def test_library_frames(frame, library):
    from archlint.trace.frames import is_library

    assert is_library(frame) is library


def test_loader_with_workers_is_not_told_to_add_workers(tmp_path):
    def build(t, s):
        t.host("user_annotation", "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", s + 10, 6_000)
        busy(t, s, 6_100, 9_900)

    _, found = findings(steps(build), tmp_path)
    d = found["AL501"]
    assert "workers do not keep up" in d.message and "num_workers > 0" not in d.price.alternative
    assert d.evidence["buckets"]["idle_input"]["basis"].startswith("the loader has workers already")


def test_with_stack_halves_what_host_side_fixes_return(tmp_path):
    def build(t, s, stack: bool):
        t.gpu(GEMM, s + 100, 2_000, s + 50)
        t.gpu(GEMM, s + 9_000, 900, s + 8_950)
        for k in range(60 if stack else 0):  # the Python tracer: every call a python_function event
            t._x("python_function", f"torch/nn/modules/module.py({k}): _call_impl", s + 2_100 + k * 100, 90)

    plain, _ = findings(steps(lambda t, s: build(t, s, False)), tmp_path)
    stacked, _ = findings(steps(lambda t, s: build(t, s, True)), tmp_path)
    host = plain.waterfall.bucket("idle_host")
    assert stacked.waterfall.bucket("idle_host").returns_us == pytest.approx(host.returns_us / 2)
    assert "with_stack" in stacked.waterfall.bucket("idle_host").basis


def test_host_idle_advice_follows_what_the_host_was_in(tmp_path):
    def build(t, s):
        t.gpu(GEMM, s + 100, 2_000, s + 50)
        t.host("user_annotation", "## backward ##", s + 2_000, 7_000)
        t.host("user_annotation", "Optimizer.step#AdamW.step", s + 3_000, 5_000)
        t.gpu(GEMM, s + 9_000, 900, s + 8_950)

    _, found = findings(steps(build), tmp_path)
    advice = found["AL509"].price.alternative
    assert "fused=True" in advice and "larger batch" not in advice  # the GPU is busy 29% of the step
