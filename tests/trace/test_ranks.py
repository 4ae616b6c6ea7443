"""Several ranks of one job read together (archlint/trace/ranks.py, AL512): the wait/transfer split
of each collective, the straggler, its price; equal ranks and traces of different jobs."""

from __future__ import annotations

import json

import pytest

from archlint.config import Settings
from archlint.result import RunResult
from archlint.trace.checks import straggler
from archlint.trace.command import lint_trace
from archlint.trace.ranks import cross_rank, jobs
from tests.trace.synth import GEMM, STEP, Trace

ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
TRANSFER = 1_000.0


def rank_trace(rank: int, world: int, compute: list[float], n: int = 4, clock: float = 0.0) -> Trace:
    """One rank of a data-parallel job: per step, compute[rank] µs of GEMM, then a gradient
    all-reduce that ends, on every rank, TRANSFER µs after the slowest rank reached it (lockstep);
    `clock` shifts this rank's timestamps (the ranks' clocks are not synchronised)."""
    t = Trace(rank=rank, world_size=world)
    slowest = max(compute)
    for i in range(n):
        s = clock + 1_000_000.0 + i * STEP
        t.step(i + 1, s, STEP)
        t.gpu(GEMM, s + 100, compute[rank], s + 50)
        arrive = s + 100 + compute[rank]
        t.gpu(ALL_REDUCE, arrive, (s + 100 + slowest + TRANSFER) - arrive, arrive - 10, stream=20)
    return t


def analyses(tmp_path, traces: list[Trace]):
    out = []
    for k, t in enumerate(traces):
        analysis, _ = lint_trace(t.write(tmp_path / f"rank{k}.json"), Settings())
        out.append(analysis)
    return out


def report_of(tmp_path, traces):
    groups = jobs(analyses(tmp_path, traces))
    assert len(groups) == 1
    return cross_rank(groups[0]), groups[0]


def test_slow_rank_is_named_and_the_wait_split_from_transfer(tmp_path):
    compute = [4_000.0, 4_000.0, 6_000.0, 4_500.0]  # rank 2 computes 2 ms longer before the all-reduce
    r, group = report_of(tmp_path, [rank_trace(k, 4, compute, clock=k * 123_457.0) for k in range(4)])
    assert r.ranks == [0, 1, 2, 3] and r.world_size == 4 and len(r.steps) >= 2
    (c,) = r.collectives
    assert c.calls_per_step == 1 and c.transfer_us == pytest.approx(TRANSFER)  # the last to arrive waits for no one
    assert c.wait_us == pytest.approx({0: 2_000.0, 1: 2_000.0, 2: 0.0, 3: 1_500.0})
    by_rank = {f.rank: f for f in r.per_rank}
    assert by_rank[0].comm_us == pytest.approx(3_000.0) and by_rank[0].wait_us == pytest.approx(2_000.0)
    assert by_rank[2].last_arrivals == len(r.steps) and by_rank[0].last_arrivals == 0
    s = r.straggler
    assert s.rank == 2 and s.last_arrivals == s.calls == len(r.steps)
    # rank 3 would still be waited for: the step shortens by the smallest of the others' waits
    assert s.others_wait_us == pytest.approx({0: 2_000.0, 1: 2_000.0, 3: 1_500.0})
    assert s.caused_wait_us == pytest.approx(1_500.0)
    (d,) = straggler.check(r, group, straggler.OPTIONS)
    assert d.code == "AL512" and d.node == "rank 2" and d.target == group[2].file
    assert d.price.saving_ms == pytest.approx(1.5) and d.price.saving_share == pytest.approx(0.15)
    assert "rank 2 reaches the collectives last" in d.message and "at least 1.5 ms (15% of the step;" in d.message
    assert "2 ms over the fastest rank's" in d.message


def test_equal_ranks_have_no_straggler(tmp_path):
    r, group = report_of(tmp_path, [rank_trace(k, 2, [5_000.0, 5_000.0]) for k in range(2)])
    (c,) = r.collectives
    assert c.transfer_us == pytest.approx(TRANSFER) and c.wait_us == pytest.approx({0: 0.0, 1: 0.0})
    assert r.straggler is None and straggler.check(r, group, straggler.OPTIONS) == []


def test_small_wait_is_below_the_threshold(tmp_path):
    r, group = report_of(tmp_path, [rank_trace(k, 2, [5_000.0, 5_200.0]) for k in range(2)])
    assert r.straggler.rank == 1 and r.straggler.caused_wait_us == pytest.approx(200.0)
    assert straggler.check(r, group, straggler.OPTIONS) == []  # 2% of the step: under min_share


def delayed_trace(rank: int, delays: list[list[float]]) -> Trace:
    """One of two ranks with equal compute (4 ms a step) whose all-reduce starts delays[step][rank] µs
    late (a host that was not scheduled: no compute of its own explains it)."""
    t = Trace(rank=rank, world_size=2)
    for i, late in enumerate(delays):
        s = 1_000_000.0 + i * STEP
        t.step(i + 1, s, STEP)
        t.gpu(GEMM, s + 100, 4_000.0, s + 50)
        arrive, last = s + 4_100 + late[rank], s + 4_100 + max(late)
        t.gpu(ALL_REDUCE, arrive, last + TRANSFER - arrive, arrive - 10, stream=20)
    return t


def test_jitter_is_no_straggler_and_a_rank_late_on_every_call_is(tmp_path):
    # scheduling jitter: rank 1 late on 5 of 8 calls and rank 0 on 3, by 1.5 ms (15% of the step):
    # any rank is last that often by chance, and no compute of its own explains the wait
    jitter = [[0.0, 1_500.0] if i % 3 else [1_500.0, 0.0] for i in range(8)]
    r, group = report_of(tmp_path, [delayed_trace(k, jitter) for k in range(2)])
    assert r.straggler.rank == 1 and r.straggler.last_arrivals == 5 and r.straggler.chance > 0.5
    assert straggler.check(r, group, straggler.OPTIONS) == []
    # late on all 8 calls: rare by chance (2 × 2⁻⁸), a straggler though its compute equals the others'
    late = [[0.0, 1_500.0] for _ in range(8)]
    r, group = report_of(tmp_path, [delayed_trace(k, late) for k in range(2)])
    assert r.straggler.chance == pytest.approx(2 / 2**8)
    (d,) = straggler.check(r, group, straggler.OPTIONS)
    assert d.node == "rank 1" and d.evidence["chance"] == pytest.approx(0.00781)


def test_traces_of_different_jobs_are_not_compared(tmp_path):
    one = analyses(tmp_path, [rank_trace(0, 2, [4_000.0, 6_000.0]), rank_trace(1, 4, [4_000.0, 6_000.0])])
    assert jobs(one) == []  # world sizes 2 and 4
    twice = analyses(tmp_path, [rank_trace(0, 2, [4_000.0, 6_000.0]), rank_trace(0, 2, [6_000.0, 4_000.0])])
    assert jobs(twice) == []  # rank 0 twice: two runs
    alone = analyses(tmp_path, [rank_trace(k, 1, [4_000.0, 6_000.0]) for k in range(2)])
    assert jobs(alone) == []  # world_size 1: each trace is a job of its own


def test_json_and_text_of_the_command(tmp_path, capsys):
    from archlint.trace.command import trace_command

    folder = tmp_path / "run"
    folder.mkdir()
    for k in range(2):
        rank_trace(k, 2, [4_000.0, 6_000.0]).write(folder / f"rank{k}.json")
    out = tmp_path / "out.json"
    assert trace_command([str(folder), "--output-format", "json", "-o", str(out)]) == 1
    doc = json.loads(out.read_text())
    (job,) = doc["ranks"]
    assert job["ranks"] == [0, 1] and job["straggler"]["rank"] == 1
    assert job["collectives"][0]["wait_us"] == {"0": 2000.0, "1": 0.0}
    assert job["per_rank"][0]["transfer_us"] == 1000.0
    assert [d["code"] for d in doc["diagnostics"]].count("AL512") == 1
    trace_command([str(folder), "--exit-zero"])
    text = capsys.readouterr().out
    assert "Across ranks" in text and "rank 1 holds the others back" in text


def test_one_rank_alone_changes_nothing(tmp_path):
    path = rank_trace(0, 2, [4_000.0, 6_000.0]).write(tmp_path / "rank0.json")
    result = RunResult(traces=[lint_trace(path, Settings())[0]])
    assert jobs(result.traces) == [] and "ranks" not in result.to_dict()


def test_a_call_not_on_every_rank_is_left_out_and_said(tmp_path):
    traces = [rank_trace(k, 2, [4_000.0, 6_000.0]) for k in range(2)]
    s = 1_000_000.0 + STEP  # step 2 of rank 1: one more collective the other rank never ran
    traces[1].gpu(
        "ncclDevKernel_Broadcast_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", s + 9_500, 100, s + 9_400, stream=20
    )
    r, _ = report_of(tmp_path, traces)
    assert [c.name for c in r.collectives] == ["ncclDevKernel_AllReduce_Sum_f32_RING_LL"]
    assert any("1 collective calls are not on every rank" in n for n in r.notes)
    assert r.straggler.rank == 1 and r.straggler.caused_wait_us == pytest.approx(2_000.0)


def test_missing_ranks_are_said(tmp_path):
    r, _ = report_of(tmp_path, [rank_trace(k, 4, [4_000.0, 6_000.0, 4_000.0, 4_000.0]) for k in range(2)])
    assert r.ranks == [0, 1] and any("2 of 4 ranks given (missing: 2, 3)" in n for n in r.notes)


def test_al507_on_a_waiting_rank_leaves_the_wait_to_al512(tmp_path):
    """AL512 owns the others' wait for the straggler; each waiting rank's AL507 prices the rest of its
    exposed communication (before: AL507 on rank 0 priced the 2 ms wait as well, twice with AL512)."""
    from archlint.trace.command import trace_command

    folder = tmp_path / "run"
    folder.mkdir()
    compute = [4_000.0, 4_000.0, 6_000.0, 4_500.0]
    for k in range(4):
        rank_trace(k, 4, compute).write(folder / f"rank{k}.json")
    out = tmp_path / "out.json"
    trace_command([str(folder), "--output-format", "json", "-o", str(out), "--exit-zero"])
    doc = json.loads(out.read_text())
    by_rank = {d["node"]: d for d in doc["diagnostics"] if d["code"] == "AL507"}
    (al512,) = [d for d in doc["diagnostics"] if d["code"] == "AL512"]
    assert al512["node"] == "rank 2"
    waits = doc["ranks"][0]["straggler"]["others_wait_us"]
    for trace in doc["traces"]:
        rank = trace["rank"]
        buckets = {b["name"]: b for b in trace["waterfall"]["buckets"]}
        if rank == 2:  # the straggler waits for no one: nothing carved
            assert "peer_wait" not in buckets
            continue
        wait = waits[str(rank)]
        assert buckets["peer_wait"]["us"] == pytest.approx(wait) and buckets["peer_wait"]["returns_us"] == 0
        assert buckets["peer_wait"]["finding"] == "AL512"
        # exposed communication that is left: the transfer only; AL507 prices half of it, as before
        assert buckets["exposed_communication"]["us"] == pytest.approx(TRANSFER)
        d = by_rank[f"rank {rank}"]
        assert d["price"]["saving_ms"] == pytest.approx(TRANSFER * 0.5 / 1000)
        assert "waiting for a slower rank, priced by AL512" in d["message"]
        # the buckets still add up to the step
        assert sum(b["us"] for b in buckets.values()) == pytest.approx(trace["waterfall"]["step_us"])
