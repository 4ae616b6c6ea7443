"""Why the GPU is idle: each idle stretch's cause, from the queue the GPU had when it went idle.

For each gap in the GPU's busy union, the GPU event that ends it is linked to its launch call (the
correlation id, as the trace's ac2g flows do). Its launch→start delay and the queue depth (GPU
events launched but not started) at the gap say who was late:

- queued: the event that ends the gap was launched before the gap began (its launch call had
  returned). The host was ahead and the queue was not empty, so neither the host nor a sync
  emptied it: the GPU waited on a dependency — another stream or an event (`cudaStreamWaitEvent`),
  a collective's peers, a CUDA-graph replay. As Nsight's and HTA's queue-length analyses do, this
  idle gets its own cause (with what it waited on: an event on another stream, a collective, a graph).
- otherwise the host was late, and the gap is split: the part the host spent in
  `DataLoader.__next__` is input; after a synchronisation (or blocking copy) that returned as the
  GPU drained, sync is charged with at most the time the host was blocked in it (the lead it gave
  up: without the sync it would have reached the next launch that much earlier — a sync is charged
  only for idle where the host then falls behind); the rest is launch (a short gap: issuing kernels
  is slower than running them) or host (other host work).

Pure functions of TraceData; no torch.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass

from archlint.trace import intervals, kernels
from archlint.trace.read import GRAPH_LAUNCH, Range, TraceData

CAUSES = ("input", "sync", "queued", "launch", "host")
LAUNCH_GAP_US = 100.0  # a host-late gap this short is launch overhead; longer is other host work
HOST_RANGE_MIN_US = 50.0  # shorter host ranges (and idle stretches) are not worth naming
HOST_RANGES_PER_GAP = 60  # the latest-starting ranges looked at per idle stretch (nesting is shallower)
EDGE_US = 1.0  # clock rounding between the host's and the GPU's timestamps
# From a launch call's return to its kernel's start on an idle GPU: tens of µs at most (AMD's is the
# longer); a kernel that starts later than this after its launch waited with work queued.
QUEUE_LATENCY_US = 50.0
TOP_GAPS = 10


@dataclass
class Gap:
    """One idle stretch of the GPU, for the drill-down (times in the trace's µs: open it in Perfetto
    at start_us)."""

    window: int | str
    steady: bool
    start_us: float
    dur_us: float
    cause: str  # the cause most of it went to
    causes: dict[str, float]  # µs per cause
    kind: str | None  # for queued: what the queue waited on: collective | graph | event-wait
    ended_by: str | None  # the GPU event that ended it
    stream: int | None
    launch_to_start_us: float | None  # ended_by's launch call → its start on the GPU
    launched_before_gap_us: float | None  # > 0: launched (call returned) that long before the gap began
    queue_depth: int  # GPU events whose launch call began before the gap and that started after it
    host: list[str]  # the innermost named host ranges the gap fell in, most time first

    def to_dict(self) -> dict:
        r = lambda v: None if v is None else round(v, 3)  # noqa: E731
        return {
            "window": self.window,
            "steady": self.steady,
            "start_us": round(self.start_us, 3),
            "dur_us": round(self.dur_us, 3),
            "cause": self.cause,
            "causes": {k: round(v, 3) for k, v in self.causes.items() if v},
            "kind": self.kind,
            "ended_by": self.ended_by,
            "stream": self.stream,
            "launch_to_start_us": r(self.launch_to_start_us),
            "launched_before_gap_us": r(self.launched_before_gap_us),
            "queue_depth": self.queue_depth,
            "host": self.host,
        }


@dataclass
class WindowIdle:
    causes: dict[str, float]
    queued_kinds: dict[str, float]
    host_idle_in: dict[str, float]


class Queue:
    """The GPU's queue over time, built once per trace; `classify` then runs per window."""

    def __init__(
        self,
        data: TraceData,
        merged: list[tuple[float, float]],
        launch_at: dict[int, int],
        launch_gap_us: float = LAUNCH_GAP_US,
    ) -> None:
        self.data, self.merged, self.launch_at, self.launch_gap_us = data, merged, launch_at, launch_gap_us
        self.order = sorted(range(data.gpu_events), key=data.gpu_ts.__getitem__)
        self.start_ts = [data.gpu_ts[i] for i in self.order]
        # matched events only: the queue depth compares their launches with their starts
        # (a launch call begins before its event starts: the difference of the two counts at a time is
        # the number launched and not yet started)
        launched, starts = [], []
        launch_ts = data.launch_ts
        for c, ts in zip(data.gpu_corr, data.gpu_ts):
            j = launch_at.get(c)
            if j is not None:
                launched.append(launch_ts[j])
                starts.append(ts)
        launched.sort()
        starts.sort()
        self.launch_starts, self.matched_starts = launched, starts
        self.dataloader = intervals.union((r.ts, r.end) for r in data.dataloader)
        copies = {n: name[7:11] for n, name in enumerate(data.names) if name.startswith("Memcpy ")}  # HtoD, DtoH…
        to_pageable_names = {
            n for n, name in enumerate(data.names) if name.startswith("Memcpy DtoH") and "Pageable" in name
        }
        copy_dir, to_pageable = {}, set()
        if copies:
            for n, c in zip(data.gpu_name, data.gpu_corr):
                if n in copies:
                    copy_dir[c] = copies[n]
                    if n in to_pageable_names:
                        to_pageable.add(c)
        # Blocking calls: synchronisations, cudaMemcpy, and async copies to pageable host memory (.item(),
        # .cpu()), which the driver completes before returning.
        blocking = [(r, "synchronize") for r in data.syncs] + [
            (r, f"blocking copy {copy_dir.get(c, '').strip() or '(direction unknown)'}")
            for r, c in data.memcpy_calls
            if "Async" not in r.name or c in to_pageable
        ]
        blocking.sort(key=lambda rk: rk[0].end)
        self.blocking_calls = [r for r, _ in blocking]
        self.blocking_kinds = [k for _, k in blocking]
        self.blocking_ends = [r.end for r in self.blocking_calls]
        self.sync_charged: dict[str, float] = defaultdict(float)  # steady windows' sync idle by what blocked
        # what the host can be doing while the GPU idles: annotations, module ranges, the user's frames,
        # and the runtime calls that block it (allocator misses, start-up calls)
        named = data.annotations + data.frames + data.alloc_calls + data.slow_calls
        self.host_ranges = sorted((r for r in named if r.dur >= HOST_RANGE_MIN_US), key=lambda r: r.ts)
        self.host_starts = [r.ts for r in self.host_ranges]
        self.gaps: list[Gap] = []

    def classify(self, name: int | str, steady: bool, lo: float, hi: float) -> WindowIdle:
        """The idle of window [lo, hi) by cause; each gap is kept for the drill-down."""
        causes = dict.fromkeys(CAUSES, 0.0)
        kinds: dict[str, float] = defaultdict(float)
        host_in: dict[str, float] = defaultdict(float)
        for g0, g1 in intervals.gaps(self.merged, lo, hi):
            gap = self._gap(name, steady, g0, g1, g1 < hi)
            for c, us in gap.causes.items():
                causes[c] += us
            if gap.kind:
                kinds[gap.kind] += gap.causes["queued"]
            if gap.causes["host"] >= HOST_RANGE_MIN_US:
                host_ranges(self.host_ranges, self.host_starts, g0, g1, host_in)
            self.gaps.append(gap)
        top_host = dict(sorted(host_in.items(), key=lambda kv: (-kv[1], kv[0]))[:3])
        return WindowIdle(causes, dict(kinds), top_host)

    def _gap(self, name, steady, g0: float, g1: float, ended: bool) -> Gap:
        data = self.data
        causes = dict.fromkeys(CAUSES, 0.0)
        ender = ended_by = stream = delay = before = None
        if ended:  # the GPU event that starts at g1 ends the gap (g1 < hi: inside the window)
            k = bisect.bisect_left(self.start_ts, g1 - 1e-6)
            if k < len(self.order):
                ender = self.order[k]
        j = self.launch_at.get(data.gpu_corr[ender]) if ender is not None else None
        kind = None
        if ender is not None:
            ended_by = kernels.short_name(data.names[data.gpu_name[ender]])
            stream = data.gpu_stream[ender] if len(data.gpu_stream) > ender else None
        if j is not None:
            launch_end = data.launch_ts[j] + data.launch_dur[j]
            delay = data.gpu_ts[ender] - data.launch_ts[j]
            before = g0 - launch_end
        depth = max(0, bisect.bisect_right(self.launch_starts, g0) - bisect.bisect_right(self.matched_starts, g0))
        # launched after the gap began, yet started long after its launch: the host was late only
        # until the launch; from there the GPU waited with the work queued
        waited = 0.0
        if before is not None and before < -EDGE_US and g1 - (g0 - before) > QUEUE_LATENCY_US:
            waited = g1 - (g0 - before)
        if before is not None and before >= -EDGE_US:
            depth = max(depth, 1)  # the event that ends the gap was in the queue
            causes["queued"] = g1 - g0
            kind = self._queued_kind(ender, j)
        else:
            if waited:
                causes["queued"] = waited
                kind = self._queued_kind(ender, j)
            rest = g1 - g0 - waited
            late_end = g1 - waited  # the host-late part of the gap: [g0, late_end)
            input_us = intervals.overlap([(g0, late_end)], intervals.clip(self.dataloader, g0, late_end))
            causes["input"] = input_us
            rest -= input_us
            blocked, what = self._blocked_lead(g0)
            charged = min(rest, blocked)
            causes["sync"] = charged
            if steady and charged:
                self.sync_charged[what] += charged
            rest -= charged
            late = j is not None and data.launch_ts[j] >= g0 - EDGE_US
            causes["launch" if late and late_end - g0 <= self.launch_gap_us else "host"] += rest
        cause = max(CAUSES, key=lambda c: causes[c])
        return Gap(name, steady, g0, g1 - g0, cause, causes, kind, ended_by, stream, delay, before, depth, [])

    def _blocked_lead(self, g0: float) -> tuple[float, str]:
        """The host's time blocked in a synchronising call that returned as the GPU drained (it
        began before g0 and ended within EDGE_US of it, or later): the lead the host gave up. A
        call that began at or after g0 blocked on an already idle GPU and drained nothing."""
        k = bisect.bisect_left(self.blocking_ends, g0 - EDGE_US)
        lead, what = 0.0, ""
        for r, kind in zip(
            self.blocking_calls[k : k + 8], self.blocking_kinds[k : k + 8]
        ):  # the calls ending around g0
            if r.ts < g0 and r.end >= g0 - EDGE_US and min(r.end, g0) - r.ts > lead:
                lead, what = min(r.end, g0) - r.ts, kind
        return lead, what

    def _queued_kind(self, ender: int, j: int) -> str:
        """What a queue that did not run waited on: a graph replay, a collective (its peers or its
        stream's dependency), else an event wait (cudaStreamWaitEvent on another stream's work)."""
        data = self.data
        if data.launch_is_kernel[j] == GRAPH_LAUNCH:
            return "graph"
        if kernels.group(data.names[data.gpu_name[ender]]) == "communication":
            return "collective"
        return "event-wait"

    def top_gaps(self, n: int = TOP_GAPS) -> list[Gap]:
        """The longest gaps, steady windows first, with what the host was doing during each."""
        chosen = sorted(self.gaps, key=lambda g: (not g.steady, -g.dur_us, g.start_us))[:n]
        for g in chosen:
            into: dict[str, float] = defaultdict(float)
            host_ranges(self.host_ranges, self.host_starts, g.start_us, g.start_us + g.dur_us, into, minimum=0.0)
            g.host = [k for k, _ in sorted(into.items(), key=lambda kv: (-kv[1], kv[0]))[:3]]
        return chosen


def host_ranges(
    ranges: list[Range],
    starts: list[float],
    g0: float,
    g1: float,
    into: dict[str, float],
    minimum: float = HOST_RANGE_MIN_US,
) -> None:
    """Add to `into` the part of the idle stretch [g0, g1) each named host range explains: each
    piece of the stretch goes to the innermost (latest-starting) range covering it, so an outer
    range that holds everything does not hide what ran inside it."""
    if g1 - g0 < minimum:
        return
    k = bisect.bisect_right(starts, g1)
    covering = [r for r in ranges[max(0, k - 200) : k] if r.end > g0][-HOST_RANGES_PER_GAP:]
    cuts = sorted({g0, g1} | {max(g0, r.ts) for r in covering} | {min(g1, r.end) for r in covering})
    for a, b in zip(cuts, cuts[1:]):
        inner = max((r for r in covering if r.ts <= a and r.end >= b), key=lambda r: r.ts, default=None)
        if inner is not None:
            into[inner.name] += b - a
