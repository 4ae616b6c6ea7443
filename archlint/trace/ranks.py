"""Traces of several ranks of one distributed job, read together: stragglers and waiting.

Only when two or more traces say the same `distributedInfo.world_size` (≥ 2) and distinct ranks.
The ranks' clocks are not synchronised, so nothing here compares timestamps across traces; it
compares durations, as Holistic Trace Analysis's straggler and communication analyses do:

- steps are matched by their ProfilerStep number, using the steps complete and steady on every rank;
- a collective call is matched across ranks by its step, its kernel name (and its bytes, where the
  trace gives them) and its occurrence of that name within the step (the same program issues them in
  the same order on every rank);
- a CPU job's collectives are gloo's runs on its worker threads (trace/read.py host_collectives): a
  run starts when the rank's worker takes the op up and ends when the data has moved, as a GPU
  kernel does, so the same split applies; its compute is the host's (analysis.host_compute);
- a collective kernel starts when its rank reaches it and ends when the data has moved, which needs
  every peer: the rank that arrives last waits least, so the call's transfer time is the shortest
  duration among the ranks, and each rank's wait for its peers is its duration − that shortest;
- the rank with the shortest duration arrived last: it held the others back on that call.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from archlint.trace import kernels

# a call whose durations differ by less than this has no single last arrival (timer noise)
TIE_US = 1.0


@dataclass(frozen=True, slots=True)
class RankFigures:
    rank: int
    file: str
    step_us: float  # mean wall time of the matched steps
    compute_us: float  # mean compute time per matched step: the GPU's, or a CPU job's host compute
    comm_us: float  # collective kernel time per step: wait + transfer
    wait_us: float  # of it, waiting for peers, per step
    last_arrivals: int  # matched calls this rank reached last (alone)


@dataclass(frozen=True, slots=True)
class StepSpread:
    step: int | str
    median_us: float  # the ranks' median wall time of this step
    slowest_rank: int
    over_median_us: float  # the slowest rank's wall time − the median


@dataclass(frozen=True, slots=True)
class CollectiveSplit:
    name: str  # the kernel's short name
    calls_per_step: float
    transfer_us: float  # per step: the shortest duration among the ranks, summed over its calls
    wait_us: dict[int, float]  # rank → its wait for peers per step on this collective


@dataclass(frozen=True, slots=True)
class Straggler:
    rank: int
    last_arrivals: int  # of `calls` matched calls
    calls: int
    # per step, each other rank's wait on the calls this rank reached last; the smallest of them
    # is what the job's step loses to it (the others would still wait for the next slowest)
    others_wait_us: dict[int, float]
    caused_wait_us: float
    # how likely some rank is last this often were every rank equally likely to be last (scheduling
    # jitter on a busy host makes one rank or another last on most calls): a straggler is rarer
    chance: float = 1.0


@dataclass
class CrossRank:
    world_size: int
    ranks: list[int]
    files: list[str]
    steps: list[int | str]  # the matched steps
    per_rank: list[RankFigures]
    per_step: list[StepSpread]
    collectives: list[CollectiveSplit]
    straggler: Straggler | None
    notes: list[str] = field(default_factory=list)
    compute_on: str = "GPU"  # what compute_us is of: "GPU", or "host" (a CPU job's collectives, over gloo)

    def to_dict(self) -> dict[str, Any]:
        r = _round
        return {
            "world_size": self.world_size,
            "ranks": self.ranks,
            "compute_on": self.compute_on,
            "files": self.files,
            "steps": self.steps,
            "per_rank": [
                {
                    "rank": f.rank,
                    "file": f.file,
                    "step_us": r(f.step_us),
                    "compute_us": r(f.compute_us),
                    "comm_us": r(f.comm_us),
                    "wait_us": r(f.wait_us),
                    "transfer_us": r(f.comm_us - f.wait_us),
                    "last_arrivals": f.last_arrivals,
                }
                for f in self.per_rank
            ],
            "per_step": [
                {
                    "step": s.step,
                    "median_us": r(s.median_us),
                    "slowest_rank": s.slowest_rank,
                    "over_median_us": r(s.over_median_us),
                }
                for s in self.per_step
            ],
            "step_spread_us": r(self.step_spread_us),
            "collectives": [
                {
                    "name": c.name,
                    "calls_per_step": r(c.calls_per_step),
                    "transfer_us": r(c.transfer_us),
                    "wait_us": {str(k): r(v) for k, v in c.wait_us.items()},
                }
                for c in self.collectives
            ],
            "straggler": None
            if self.straggler is None
            else {
                "rank": self.straggler.rank,
                "last_arrivals": self.straggler.last_arrivals,
                "calls": self.straggler.calls,
                "others_wait_us": {str(k): r(v) for k, v in self.straggler.others_wait_us.items()},
                "caused_wait_us": r(self.straggler.caused_wait_us),
                "chance": float(f"{self.straggler.chance:.3g}"),
            },
            "notes": self.notes,
        }

    @property
    def step_spread_us(self) -> float:
        """The slowest rank's mean step − the fastest's."""
        times = [f.step_us for f in self.per_rank]
        return max(times) - min(times) if times else 0.0


def _round(v: float) -> float:
    return round(v, 3)


def jobs(traces: list) -> list[list]:
    """The groups of analyses that are ranks of one job: ≥ 2 traces with the same world_size
    (≥ 2) and distinct ranks, in rank order. Traces of other jobs, or a rank given twice, form none."""
    by_size: dict[int, list] = defaultdict(list)
    for t in traces:
        if t.world_size and t.world_size >= 2 and t.rank is not None:
            by_size[t.world_size].append(t)
    out = []
    for size in sorted(by_size):
        group = by_size[size]
        ranks = [t.rank for t in group]
        if len(group) >= 2 and len(set(ranks)) == len(ranks) and all(0 <= r < size for r in ranks):
            out.append(sorted(group, key=lambda t: t.rank))
    return out


def cross_rank(group: list) -> CrossRank | None:
    """The cross-rank report of one job's analyses (from `jobs`); None when they share no step
    that is complete and steady on every rank."""
    windows = [{s.step: s for s in t.windows} for t in group]
    common = [s for s in windows[0] if all(s in w for w in windows[1:])]
    if not common:
        return None
    ranks = [t.rank for t in group]
    notes = []
    # the matched calls: (step, name, bytes, occurrence) → rank → duration
    calls: dict[tuple, dict[int, float]] = defaultdict(dict)
    for t in group:
        for step in common:
            seen: Counter = Counter()
            for name, dur, nbytes in t.comm_calls.get(step, []):
                calls[(step, name, nbytes or 0, seen[name, nbytes])][t.rank] = dur
                seen[name, nbytes] += 1
    unmatched = [k for k, v in calls.items() if len(v) != len(group)]
    if unmatched:
        notes.append(
            f"{len(unmatched)} collective calls are not on every rank (by step, kernel name and order) and are "
            "left out of the wait/transfer split"
        )
    matched = {k: v for k, v in calls.items() if len(v) == len(group)}
    n = len(common)
    wait: dict[int, float] = defaultdict(float)
    comm: dict[int, float] = defaultdict(float)
    last: Counter = Counter()
    caused: dict[int, dict[int, float]] = defaultdict(lambda: defaultdict(float))  # last rank → other → µs
    by_name: dict[str, dict[str, Any]] = {}
    for (_step, name, _, _), durs in sorted(matched.items(), key=lambda kv: (str(kv[0][0]), *kv[0][1:])):
        transfer = min(durs.values())
        entry = by_name.setdefault(name, {"calls": 0, "transfer": 0.0, "wait": defaultdict(float)})
        entry["calls"] += 1
        entry["transfer"] += transfer
        for rank, dur in durs.items():
            comm[rank] += dur
            wait[rank] += dur - transfer
            entry["wait"][rank] += dur - transfer
        fastest = [r for r, d in durs.items() if d - transfer < TIE_US]
        if len(fastest) == 1:  # one rank alone arrived last: the others waited for it
            last[fastest[0]] += 1
            for rank, dur in durs.items():
                if rank != fastest[0]:
                    caused[fastest[0]][rank] += dur - transfer
    per_rank = [
        RankFigures(
            rank=t.rank,
            file=t.file,
            step_us=sum(w[s].wall_us for s in common) / n,
            compute_us=sum(t.host_compute.get(s, w[s].compute_us) for s in common) / n,
            comm_us=comm[t.rank] / n,
            wait_us=wait[t.rank] / n,
            last_arrivals=last[t.rank],
        )
        for t, w in zip(group, windows)
    ]
    per_step = []
    for s in common:
        walls = {t.rank: w[s].wall_us for t, w in zip(group, windows)}
        median = statistics.median(walls.values())
        slowest = max(walls, key=lambda r: (walls[r], -r))
        per_step.append(StepSpread(s, median, slowest, walls[slowest] - median))
    collectives = [
        CollectiveSplit(
            name=kernels.short_name(name),
            calls_per_step=e["calls"] / n,
            transfer_us=e["transfer"] / n,
            wait_us={r: e["wait"][r] / n for r in ranks},
        )
        for name, e in sorted(by_name.items(), key=lambda kv: (-kv[1]["transfer"] - sum(kv[1]["wait"].values()), kv[0]))
    ]
    straggler = None
    if last:  # the rank most often last to arrive; ties: the one that made the others wait longer
        rank = max(last, key=lambda r: (last[r], min(caused[r].values(), default=0.0), -r))
        others = {r: caused[rank].get(r, 0.0) / n for r in ranks if r != rank}
        chance = _chance_of_leading(last[rank], sum(last.values()), len(ranks))
        straggler = Straggler(rank, last[rank], len(matched), others, min(others.values()), chance)
    missing = sorted(set(range(group[0].world_size)) - set(ranks))
    if missing:
        notes.append(
            f"{len(ranks)} of {group[0].world_size} ranks given (missing: {', '.join(map(str, missing[:8]))}"
            f"{', …' if len(missing) > 8 else ''}): the split is over the ranks given; a missing rank may be "
            "the one that arrives last"
        )
    return CrossRank(
        world_size=group[0].world_size,
        ranks=ranks,
        files=[t.file for t in group],
        steps=common,
        per_rank=per_rank,
        per_step=per_step,
        collectives=collectives,
        straggler=straggler,
        notes=notes,
        compute_on="host" if all(t.host_compute for t in group) else "GPU",
    )


def _chance_of_leading(most: int, decided: int, ranks: int) -> float:
    """The probability that, of `ranks` ranks each equally likely to arrive last at each of `decided`
    calls, some rank is last on `most` or more of them (a one-sided binomial tail, times the ranks:
    any of them could have been the one)."""
    if decided == 0 or ranks < 2:
        return 1.0
    log_p, log_q = math.log(1 / ranks), math.log1p(-1 / ranks)
    log_ways = math.lgamma(decided + 1)
    tail = sum(
        math.exp(log_ways - math.lgamma(k + 1) - math.lgamma(decided - k + 1) + k * log_p + (decided - k) * log_q)
        for k in range(most, decided + 1)
    )
    return min(1.0, ranks * tail)
