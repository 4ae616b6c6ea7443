"""Real traces of a CPU job over gloo, read by `archlint trace` (trace/read.py host_collectives,
analyze.py _host_lanes, ranks.py): the collectives, their exposed time, the wait/transfer split and the
straggler. The fixture is two ranks of benchmarks/distributed_traces.py --fixture: torchvision-free MLP
Linear(256, 512)-ReLU-Linear(512, 10) under DDP, 3 profiled steps, rank 1 doing 40 ms of extra
compute (matmuls, in record_function "extra_work") before each forward."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from archlint.config import Settings
from archlint.trace.command import lint_trace
from archlint.trace.ranks import cross_rank, jobs
from archlint.trace.read import read_trace

FIXTURE = Path(__file__).parents[1] / "fixtures" / "traces" / "gloo_ddp_mlp2_slow1"
# the MLP's parameters, fp32: DDP's one bucket (under the first bucket's 1 MiB) all-reduced once a step
PARAM_BYTES = (256 * 512 + 512 + 512 * 10 + 10) * 4


@pytest.fixture(scope="module")
def ranks():
    return [lint_trace(FIXTURE / f"rank{r}.json.gz", Settings())[0] for r in (0, 1)]


def test_gloo_collectives_are_read_with_their_bytes(ranks):
    for t in ranks:
        assert t.world_size == 2 and t.cpu_only
        (c,) = t.evidence.collectives
        assert (c.name, c.calls_per_step, c.median_bytes) == ("all_reduce", 1.0, PARAM_BYTES)
        assert t.communication_us > 0  # was 0: a CPU job's collectives were not read at all
        for step in t.comm_calls.values():
            assert [(name, nbytes) for name, _, nbytes in step] == [("gloo:all_reduce", PARAM_BYTES)]


def test_exposed_communication_is_carved_from_host_idle_and_buckets_add_up(ranks):
    for t in ranks:
        assert 0 < t.exposed_communication_us <= t.communication_us
        for s in t.windows:
            assert s.buckets["exposed_communication"] > 0
            assert sum(v for v in s.buckets.values()) == pytest.approx(s.wall_us)
            assert s.compute_us == 0.0  # the GPU's figure stays 0 on a CPU trace
    # rank 0 waits for rank 1 in every all-reduce: most of its step is exposed communication
    slow, fast = ranks[1], ranks[0]
    assert fast.exposed_communication_us > 3 * slow.exposed_communication_us


def test_straggler_is_the_slow_rank_with_its_wait_and_extra_compute(ranks):
    (group,) = jobs(ranks)
    r = cross_rank(group)
    assert r.compute_on == "host" and r.steps == [3, 4, 5]
    s = r.straggler
    assert s.rank == 1 and s.last_arrivals == s.calls == 3
    # the extra work is 40 ms of wall time a step: rank 0 waits for most of it (less its own compute)
    assert 30_000 < s.caused_wait_us < 60_000
    by_rank = {f.rank: f for f in r.per_rank}
    assert by_rank[1].compute_us - by_rank[0].compute_us > 30_000
    assert by_rank[1].wait_us == 0 and by_rank[0].wait_us == pytest.approx(s.caused_wait_us)
    (c,) = r.collectives
    assert c.name == "gloo:all_reduce" and c.calls_per_step == 1
    assert c.transfer_us == pytest.approx(by_rank[1].comm_us)  # the last to arrive waits for no one


def test_cli_names_the_straggler_with_al512(capsys):
    from archlint.cli import main

    main(["trace", str(FIXTURE), "--output-format", "json", "--exit-zero"])
    report = json.loads(capsys.readouterr().out)
    (al512,) = [d for d in report["diagnostics"] if d["code"] == "AL512"]
    assert al512["target"].endswith("rank1.json.gz")
    assert "rank 1 reaches the collectives last (3 of 3 calls" in al512["message"]
    assert "host compute per step" in al512["message"]
    for d in report["diagnostics"]:
        if d["code"] == "AL507":
            assert d["message"].startswith("collectives (gloo, on the host) run")
    (cross,) = report["ranks"]
    assert cross["straggler"]["rank"] == 1 and cross["compute_on"] == "host"


def _cpu_job(tmp_path: Path, events: list[dict]) -> Path:
    path = tmp_path / "rank0.json.gz"
    body = {"distributedInfo": {"backend": "gloo", "rank": 0, "world_size": 2}, "traceEvents": events}
    with gzip.open(path, "wt") as f:
        json.dump(body, f)
    return path


def _x(cat: str, name: str, ts: float, dur: float, tid: int = 1, **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def test_exposed_is_the_run_no_operator_of_another_thread_overlaps(tmp_path):
    """An annotation (a module range, record_function) spans the wait: no compute. Nor is the time a
    thread is blocked in a wait or a collective's own call, even inside an operator (a DDP hook's
    all-reduce blocks inside the autograd node that ran it: seen on the last rank to arrive, whose node
    once hid its whole transfer)."""
    events = [
        _x("user_annotation", "ProfilerStep#1", 0.0, 1000.0),
        _x("user_annotation", "phase:backward", 10.0, 900.0),  # spans the wait
        _x("cpu_op", "aten::mm", 20.0, 280.0),
        _x("cpu_op", "aten::mm", 30.0, 100.0),  # nested: merged into the one above
        _x("cpu_op", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 350.0, 350.0),
        _x("cpu_op", "c10d::allreduce_", 360.0, 330.0),  # blocked in the call, inside the node
        _x("cpu_op", "c10d::wait", 700.0, 50.0),
        _x(
            "user_annotation", "gloo:all_reduce", 200.0, 500.0, tid=9, **{"Input Dims": [[10]], "Input type": ["float"]}
        ),
        _x("cpu_op", "aten::add_", 600.0, 50.0, tid=9),  # on gloo's worker thread: not the rank's compute
    ]
    data = read_trace(_cpu_job(tmp_path, events))
    assert [(r.name, n) for r, n in data.host_collectives] == [("all_reduce", 40)]
    assert list(data.host_busy[1]) == [20.0, 300.0, 350.0, 700.0]
    assert list(data.host_blocked[1]) == [360.0, 690.0, 700.0, 750.0]
    t, _ = lint_trace(_cpu_job(tmp_path, events), Settings())
    # compute: 20-300, 350-360, 690-700; the run 200-700 overlaps 100 + 10 + 10 of it
    assert t.communication_us == 500.0 and t.exposed_communication_us == 380.0
    (s,) = t.per_step
    assert s.buckets["exposed_communication"] == 380.0
    assert t.host_compute[1] == 300.0


def test_a_gpu_trace_keeps_no_host_busy_time(tmp_path):
    from tests.trace.synth import GEMM, Trace

    t = Trace()
    t.host("cpu_op", "aten::mm", 1_000.0, 50.0)
    t.gpu(GEMM, 1_100.0, 200.0, 1_010.0)
    t.host("cpu_op", "aten::mm", 2_000.0, 50.0)
    data = read_trace(t.write(tmp_path / "t.json"))
    assert data.host_busy == {} and data.gpu_events == 1


def test_a_cpu_job_prices_no_idle_host(ranks):
    # no GPU to idle: the host's other work is the step's compute; AL509 does not fire, so its bucket
    # returns nothing (the step's "after the fixes" was 32% shorter on rank 1 by a finding never shown)
    for t in ranks:
        host = t.waterfall.bucket("idle_host")
        assert host.us > 0 and host.finding is None and host.returns_us == 0.0
        assert t.waterfall.saving_us == pytest.approx(t.waterfall.returns("AL507"))
