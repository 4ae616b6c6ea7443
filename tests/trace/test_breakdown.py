"""The temporal breakdown equals Holistic Trace Analysis's on real GPU traces (within 1% of span).

Pinned: HTA 0.5.0's figures (tests/trace/fixtures/README.md), so this fails without HTA too. With
HTA installed (the dev extra), it is also run on the same files and compared live.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from archlint.trace.analyze import analyze
from archlint.trace.read import read_trace
from archlint.trace.records import DataParallel

FIXTURES = Path(__file__).parent / "fixtures"
# file → HTA's (idle, compute, non-compute, span) in µs
HTA_050 = {
    "a100_alexnet_inference": (12_929_684, 10_637, 55_690, 12_996_011),
    "sampled_training_rank0": (321_378, 106_252, 172_428, 600_058),
    "mi250_minitoy_train": (8_780, 96, 35, 8_911),
}
KEYS = ("idle_us", "compute_us", "non_compute_us", "span_us")


def breakdown(name: str) -> dict:
    return analyze(read_trace(FIXTURES / f"{name}.json.gz")).temporal_breakdown


@pytest.mark.parametrize("name", sorted(HTA_050))
def test_breakdown_matches_hta_pinned(name):
    ours = breakdown(name)
    span = HTA_050[name][3]
    for key, theirs in zip(KEYS, HTA_050[name]):
        assert abs(ours[key] - theirs) <= 0.01 * span, f"{key}: {ours[key]} vs HTA {theirs}"


@pytest.mark.parametrize("name", sorted(HTA_050))
def test_breakdown_matches_hta_live(name, tmp_path):
    hta = pytest.importorskip(
        "hta.trace_analysis", reason="HolisticTraceAnalysis is not installed (pip install -e '.[dev]')"
    )
    shutil.copy(FIXTURES / f"{name}.json.gz", tmp_path)
    logging.disable(logging.WARNING)
    try:
        df = hta.TraceAnalysis(trace_dir=str(tmp_path)).get_temporal_breakdown(visualize=False)
    finally:
        logging.disable(logging.NOTSET)
    row = df.iloc[0]
    theirs = (row["idle_time(us)"], row["compute_time(us)"], row["non_compute_time(us)"], row["kernel_time(us)"])
    ours = breakdown(name)
    for key, value in zip(KEYS, theirs):
        assert abs(ours[key] - value) <= 0.01 * theirs[3], f"{key}: {ours[key]} vs HTA {value}"


@pytest.mark.parametrize("name", sorted(HTA_050))
def test_exact_to_the_microsecond(name):
    """Also where timestamps have fractions of a µs (the MI250 trace): rounded inward as HTA does."""
    assert breakdown(name) == dict(zip(KEYS, map(float, HTA_050[name])))


def test_steps_and_rank():
    a = analyze(read_trace(FIXTURES / "sampled_training_rank0.json.gz"))
    assert (a.rank, a.steps, [s.step for s in a.per_step]) == (0, 2, [551, 552])
    amd = analyze(read_trace(FIXTURES / "mi250_minitoy_train.json.gz"))
    assert amd.steps == 2 and amd.device == "AMD Radeon Graphics" and amd.vendor == "amd"
    assert amd.rank == 0 and any("rank 0, as HTA assumes" in n for n in amd.notes)  # no distributedInfo
    assert [s.complete for s in amd.per_step] == [True, False]  # ProfilerStep#2: 49 µs, the profiler stopped in it


def test_modules_on_a_real_training_rank():
    """GPU time per annotation (record_function ranges of a DDP job); DDP is not DataParallel."""
    a = analyze(read_trace(FIXTURES / "sampled_training_rank0.json.gz"))
    modules = {m["name"]: m for m in a.modules}
    assert modules["DistributedDataParallel.forward"]["calls"] == 2
    assert (
        modules["DistributedDataParallel.forward"]["gpu_us"]
        >= modules["DistributedDataParallel.forward"]["self_gpu_us"]
        > 0
    )
    assert a.data_parallel == DataParallel(devices=[0], replication_ops=0)
    assert a.groups["communication"] > a.groups["gemm"] and 0.8 < a.gemm_tensor_core_share <= 1
