"""The figures of one trace: pure functions from TraceData to TraceAnalysis (no I/O, no torch).

Temporal breakdown, as Holistic Trace Analysis defines it (hta/analyzers/breakdown_analysis.py,
get_temporal_breakdown): over the GPU events of a rank (every complete event with a stream:
kernels, memcpy, memset, sync waits), span = end of the last − start of the first; idle = span −
their union; compute = the union of the computation kernels; non-compute = the rest (memcpy,
memset, communication, sync waits). Like HTA, when the trace has two or more ProfilerStep ranges,
GPU events launched at or after the start of the last one are left out (the last step is often
cut short by the profiler's stop), and fractional timestamps are rounded inward to whole µs (start
up, end down) as HTA's parser does.

Per step (each `ProfilerStep#N`): the step's wall time, and over that wall time the GPU's busy,
compute, non-compute and idle time; the GPU kernel time of the work launched in the step; and on
the host the time in the DataLoader, in synchronisation and in kernel launches. Each idle stretch
of the GPU gets a cause: input (the host was in DataLoader.__next__), sync (the host was blocked
in a synchronisation or a blocking copy, so the queue drained), launch (the next GPU event was
issued only after the GPU went idle: the host could not keep up), or host (other host work).
"""

from __future__ import annotations

import bisect
import math
import re
import statistics
from array import array
from collections import defaultdict
from dataclasses import dataclass, field, fields
from typing import Any

from archlint.trace import evidence as evidence_mod
from archlint.trace import intervals, kernels, waterfall
from archlint.trace import locations as locations_mod
from archlint.trace import windows as windows_mod
from archlint.trace.queue import CAUSES, LAUNCH_GAP_US, Gap, Queue
from archlint.trace.read import Range, TraceData
from archlint.trace.records import DataParallel, PageableCopies, TraceEvidence, TraceMemory
from archlint.trace.waterfall import Waterfall

__all__ = ["CAUSES", "LAUNCH_GAP_US", "StepFigures", "TraceAnalysis", "analyze"]
_DEPTHWISE = re.compile(r"depthwise|dwconv|dw_conv", re.I)
_FRAME = re.compile(r"^(?P<file>.+?\.py)\((?P<line>\d+)\): (?P<func>.+)$")


@dataclass(slots=True)
class StepFigures:
    step: int | str  # N of ProfilerStep#N; "trace" when the trace has no steps (the whole GPU span)
    start_us: float
    wall_us: float
    complete: bool
    gpu_busy_us: float
    compute_us: float
    non_compute_us: float
    idle_us: float
    kernel_us: float  # summed durations of the GPU events launched in the step
    kernels: int
    dataloader_us: float
    sync_us: float
    syncs: int  # synchronising calls (cuda*Synchronize, blocking cudaMemcpy) in the step
    alloc_us: float  # host time in cudaMalloc/cudaFree (the caching allocator's misses)
    launch_us: float  # host time in kernel-launch calls
    idle_causes: dict[str, float]
    host_idle_in: dict[
        str, float
    ]  # the host ranges (annotations, modules, user functions) most of the "host" idle fell in
    median_kernel_us: float | None
    steady: bool = True  # a steady-state step (not start-up, warm-up or the run's first step)
    unsteady_reason: str | None = None
    queued_kinds: dict[str, float] = field(default_factory=dict)  # "queued" idle by what the queue waited on
    buckets: dict[str, float] = field(default_factory=dict)  # the waterfall's buckets (add up to wall_us)

    def to_dict(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in values.items()} | {
            "idle_causes": {k: round(v, 3) for k, v in self.idle_causes.items()},
            "host_idle_in": {k: round(v, 3) for k, v in self.host_idle_in.items()},
            "queued_kinds": {k: round(v, 3) for k, v in self.queued_kinds.items()},
            "buckets": {k: round(v, 3) for k, v in self.buckets.items()},
        }


@dataclass
class TraceAnalysis:
    file: str
    rank: int | None
    device: str | None
    device_memory: int | None
    compute_capability: str | None
    vendor: str | None  # nvidia | amd | None
    steps: int
    truncated: bool
    temporal_breakdown: dict[str, float]
    per_step: list[StepFigures]
    kernels: list[dict[str, Any]]  # top kernels by time
    groups: dict[str, float]  # kernel group → µs (all GPU events in the breakdown window)
    gemm_tensor_core_share: float | None
    fp32_gemm_us: float  # gemm-group time in kernels that are not tensor-core kernels
    fp32_gemm_kernels: list[str]
    modules: list[dict[str, Any]]
    communication_us: float
    exposed_communication_us: float
    pageable_h2d: PageableCopies
    data_parallel: DataParallel
    memory: TraceMemory | None  # None: the trace recorded no memory events
    locations: dict[str, tuple[str, int, str]]  # what → (file, line, function) in the user's code
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # how the trace was recorded, where it misleads
    rerecord: str | None = None  # how to record a representative trace, when this one is not
    idle_gaps: list[Gap] = field(default_factory=list)  # the longest idle stretches (the drill-down)
    waterfall: Waterfall | None = None
    evidence: TraceEvidence | None = None  # what the advice is chosen by (compiled, layout, collectives)
    cpu_only: bool = False
    world_size: int | None = None  # distributedInfo.world_size (None: not said)
    # per window name: its communication kernels (raw name, µs) in GPU start order, for the
    # cross-rank report (trace/ranks.py); not serialized per trace
    comm_calls: dict[int | str, list[tuple[str, float, int | None]]] = field(default_factory=dict)
    # per window name: a CPU job's host compute (its busy time off the collectives' threads), for the
    # cross-rank report; empty for a GPU trace
    host_compute: dict[int | str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "rank": self.rank,
            "device": self.device,
            "device_memory": self.device_memory,
            "compute_capability": self.compute_capability,
            "steps": self.steps,
            "truncated": self.truncated,
            "temporal_breakdown": {k: round(v, 3) for k, v in self.temporal_breakdown.items()},
            "per_step": [s.to_dict() for s in self.per_step],
            "kernels": self.kernels,
            "kernel_groups": {k: round(v, 3) for k, v in self.groups.items()},
            "gemm_tensor_core_share": self.gemm_tensor_core_share,
            "modules": self.modules,
            "communication_us": round(self.communication_us, 3),
            "exposed_communication_us": round(self.exposed_communication_us, 3),
            "memory": self.memory.to_dict() if self.memory is not None else {},
            "locations": {k: {"file": f, "line": line, "function": fn} for k, (f, line, fn) in self.locations.items()},
            "notes": self.notes,
            "warnings": self.warnings,
            "rerecord": self.rerecord,
            "idle_gaps": [g.to_dict() for g in self.idle_gaps],
            "waterfall": self.waterfall.to_dict() if self.waterfall else None,
            "evidence": self.evidence.to_dict() if self.evidence is not None else {},
            "cpu_only": self.cpu_only,
        }

    @property
    def windows(self) -> list[StepFigures]:
        """The complete steady-state steps (or steady whole-trace window), the ones findings are
        priced on; none when the trace holds no steady state (nothing is priced then)."""
        complete = [s for s in self.per_step if s.complete and s.steady]
        if complete or any(s.complete for s in self.per_step):
            return complete
        return [s for s in self.per_step if s.steady]  # only a cut window (a truncated file): what there is

    @property
    def unit(self) -> str:
        """What the figures are per: a step, or the traced GPU span of a trace without steps."""
        return "step" if self.steps else "traced span"

    def mean_step_us(self) -> float:
        w = self.windows
        return sum(s.wall_us for s in w) / len(w) if w else 0.0


def analyze(data: TraceData, top: int = 15, launch_gap_us: float = LAUNCH_GAP_US) -> TraceAnalysis:
    notes = []
    if data.truncated:
        notes.append(
            f"the file ends inside the event array (cut while written): {data.events} events read before the cut"
        )
    if data.rank is None:
        notes.append("no distributedInfo.rank in the trace: rank 0, as HTA assumes")
    notes += _input_notes(data)
    steps = _steps(data, notes)
    launch_at = {c: i for i, c in enumerate(data.launch_corr)}  # correlation → launch call
    kind = [kernels.hta_kind(n) for n in data.names]
    group = [kernels.group(n) for n in data.names]
    breakdown = _temporal_breakdown(data, _breakdown_window(data, [r for _, r in data.steps], launch_at, notes), kind)
    if not steps and data.gpu_events:
        notes.append("no ProfilerStep ranges in the trace: figures are over the whole GPU span (one window)")
    table = _kernel_table(data, group, top)
    # Per-step figures and the rules read every GPU event of the trace (the breakdown's window is HTA's).
    every = range(data.gpu_events)
    # one pass, by name index: the lanes each GPU event belongs to (most belong to none but busy)
    lane_of: list[tuple[list, ...]] = []
    spans: dict[str, list[tuple[float, float]]] = {
        k: [] for k in ("busy", "compute", "comm", "fp32_gemm", "pageable_copy", "layout_conversion")
    }
    fp32 = set(table["fp32_names"])
    for n, name in enumerate(data.names):
        lane_of.append(
            tuple(
                spans[k]
                for k, member in (
                    ("busy", True),
                    ("compute", kind[n] == kernels.COMPUTE),
                    ("comm", group[n] == "communication"),
                    ("fp32_gemm", n in fp32),
                    ("pageable_copy", _pageable_h2d(name)),
                    ("layout_conversion", kind[n] == kernels.COMPUTE and evidence_mod.LAYOUT.search(name) is not None),
                )
                if member
            )
        )
    ts, dur, names = data.gpu_ts, data.gpu_dur, data.gpu_name
    for i in every:
        pair = (ts[i], ts[i] + dur[i])
        for lane in lane_of[names[i]]:
            lane.append(pair)
    busy, compute, comm = (intervals.union(spans[k]) for k in ("busy", "compute", "comm"))
    lanes = {k: intervals.union(spans[k]) for k in ("fp32_gemm", "pageable_copy", "layout_conversion")}
    del spans
    host = _host_lanes(data)
    if host is not None:  # a CPU job: its collectives run on the host, beside the host's own work
        comm, compute = host
        notes.append(
            f"collectives on the host ({len(data.host_collectives)} gloo runs, on gloo's worker threads): "
            "communication = their union, exposed = the part no host op on another thread overlaps"
        )
    device, memory_total, cc, vendor = _device(data)
    startup = windows_mod.startup_events(data, launch_at)
    recording = windows_mod.recording(data, launch_at, startup, bool(steps))
    queue = Queue(data, busy, launch_at, launch_gap_us)
    comm_calls: dict[int | str, list[tuple[str, float, int | None]]] = {}
    host_compute: dict[int | str, float] = {}
    per_step = _per_step(
        data,
        steps,
        busy,
        compute,
        comm,
        lanes,
        queue,
        startup,
        launch_at,
        kind,
        notes,
        (group, comm_calls, host_compute),
    )
    analysis = TraceAnalysis(
        file=data.file,
        rank=0 if data.rank is None else data.rank,
        device=device,
        device_memory=memory_total,
        compute_capability=cc,
        vendor=vendor,
        steps=len(steps),
        truncated=data.truncated,
        temporal_breakdown=breakdown,
        per_step=per_step,
        kernels=table["top"],
        groups=table["groups"],
        gemm_tensor_core_share=table["tensor_core_share"],
        fp32_gemm_us=table["fp32_us"],
        fp32_gemm_kernels=table["fp32_kernels"],
        modules=_modules(data, every),
        communication_us=intervals.length(comm),
        exposed_communication_us=intervals.length(comm) - intervals.overlap(comm, compute),
        pageable_h2d=_pageable(data, every, launch_at),
        data_parallel=_data_parallel(data, every),
        memory=_memory(data, memory_total),
        locations={},
        notes=notes,
        warnings=recording.warnings,
        idle_gaps=queue.top_gaps(),
        cpu_only=not data.gpu_events,
        world_size=data.world_size,
        comm_calls=comm_calls,
        host_compute=host_compute,
    )
    analysis.evidence = evidence = evidence_mod.gather(data, steps)
    evidence.sync_idle_by_call = {k: round(v, 3) for k, v in sorted(queue.sync_charged.items())}
    items = locations_mod.gpu_items(data, queue.blocking_calls)
    evidence.item_calls = {"gpu": len(items), "cpu": len(data.item_calls) - len(items)}
    analysis.locations = locations_mod.locations(data, queue.blocking_calls, items)
    steady = analysis.windows
    unsteady = [s for s in per_step if not s.steady]
    if unsteady:
        reasons = sorted({s.unsteady_reason for s in unsteady if s.unsteady_reason})
        analysis.warnings.append(
            f"{len(unsteady)} of {len(per_step)} windows are not steady state and are not priced: " + "; ".join(reasons)
        )
    if not steady and per_step:
        analysis.warnings.append("no steady-state window in the trace: nothing is priced")
    if analysis.cpu_only and per_step:
        # as torch-tb-profiler's overview did: the step is host time, split into the DataLoader's and the rest
        analysis.notes.append(
            "CPU-only trace (no GPU events): each step's time is the host's, split into DataLoader (idle: input)"
            + (", exposed communication (the host waiting in its collectives)" if data.host_collectives else "")
            + " and other host work (idle: host)"
        )
    if unsteady or not steps or recording.with_stack:
        analysis.rerecord = windows_mod.RERECORD
    analysis.waterfall = waterfall.build(
        [s.buckets | {"wall": s.wall_us} for s in steady],
        evidence_mod.returns(analysis),
        note=None if steady else "no steady-state window: nothing priced",
    )
    return analysis


def _temporal_breakdown(data: TraceData, kept: list[int], kind: list[str]) -> dict[str, float]:
    """HTA's temporal breakdown over the GPU events `kept` (see the module doc)."""
    merged = intervals.union(_whole_us(data.gpu_ts[i], data.gpu_dur[i]) for i in kept)
    if not merged:
        return {"idle_us": 0.0, "compute_us": 0.0, "non_compute_us": 0.0, "span_us": 0.0}
    compute = intervals.union(
        _whole_us(data.gpu_ts[i], data.gpu_dur[i]) for i in kept if kind[data.gpu_name[i]] == kernels.COMPUTE
    )
    span = merged[-1][1] - merged[0][0]
    busy, compute_us = intervals.length(merged), intervals.length(compute)
    return {"idle_us": span - busy, "compute_us": compute_us, "non_compute_us": busy - compute_us, "span_us": span}


def _kernel_table(data: TraceData, group: list[str], top: int) -> dict[str, Any]:
    """GPU time by kernel name and group, the top kernels, and how much GEMM/conv time runs on
    tensor cores (the rest, depthwise convolutions aside, is what AL504 prices)."""
    by_name: dict[int, list[float]] = defaultdict(lambda: [0, 0.0])
    for i in range(data.gpu_events):
        entry = by_name[data.gpu_name[i]]
        entry[0] += 1
        entry[1] += data.gpu_dur[i]
    groups: dict[str, float] = defaultdict(float)
    gemm_us = tc_us = 0.0
    fp32 = []
    for n, (_, total) in by_name.items():
        name = data.names[n]
        groups[group[n]] += total
        if group[n] == "gemm":
            gemm_us += total
            if kernels.tensor_core(name):
                tc_us += total
            elif not _DEPTHWISE.search(name):  # depthwise convolutions do not use tensor cores in any precision
                fp32.append((total, name, n))
    total_gpu = sum(groups.values()) or 1.0
    rows = []
    for n, (count, total) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:top]:
        row = {
            "name": kernels.short_name(data.names[n]),
            "group": group[n],
            "count": count,
            "total_us": round(total, 3),
            "share": round(total / total_gpu, 4),
        }
        if group[n] == "gemm":
            row["tensor_core"] = kernels.tensor_core(data.names[n])
        rows.append(row)
    return {
        "top": rows,
        "groups": dict(sorted(groups.items(), key=lambda kv: -kv[1])),
        "tensor_core_share": round(tc_us / gemm_us, 4) if gemm_us else None,
        "fp32_us": sum(us for us, _, _ in fp32),
        "fp32_kernels": [kernels.short_name(name) for _, name, _ in sorted(fp32, reverse=True)[:5]],
        "fp32_names": [n for _, _, n in fp32],
    }


def _whole_us(ts: float, dur: float) -> tuple[float, float]:
    """An event rounded inward to whole µs, as HTA's parser does with fractional (ns-resolution)
    timestamps (round_down_time_stamps: start up, end down), so the breakdowns agree."""
    return float(math.ceil(ts)), float(math.floor(ts + dur))


def _input_notes(data: TraceData) -> list[str]:
    """What the reader set right in the file, said (never silently)."""
    notes = []
    if data.categories_seen:
        notes.append(
            f"event categories of torch 1.8-1.10 ({', '.join(sorted(data.categories_seen))}) read as their "
            "later names (cpu_op, cuda_runtime, kernel, gpu_memcpy, gpu_memset)"
        )
    if data.skipped:
        notes.append(f"{data.skipped} complete events left out: their ts or dur is not a finite number")
    if data.negative:
        notes.append(
            f"{data.negative} events with a negative duration (down to {_us(data.negative_min_us)} µs) counted "
            "as 0 µs: the profiler recorded their end before their start"
        )
    return notes


def _us(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _steps(data: TraceData, notes: list[str]) -> list[tuple[int, Range]]:
    """One (N, range) per ProfilerStep#N (the outermost when a step is recorded on several
    threads), by start. A step that runs past the start of the next one (clock skew between
    threads, or ranges the profiler closed late) ends where the next begins: steps never overlap,
    so no time counts twice."""
    by_n: dict[int, Range] = {}
    for n, r in data.steps:
        if n not in by_n or r.dur > by_n[n].dur:
            by_n[n] = r
    ordered = sorted(by_n.items(), key=lambda nr: (nr[1].ts, nr[0]))
    clamped = 0
    for k in range(len(ordered) - 1):
        n, r = ordered[k]
        after = ordered[k + 1][1].ts
        if r.ts + r.dur > after:
            ordered[k] = (n, Range(r.name, r.ts, after - r.ts, r.tid))
            clamped += 1
    if clamped:
        notes.append(
            f"{clamped} ProfilerStep ranges ran past the start of the next step: each ends where the next begins"
        )
    return ordered


def _breakdown_window(data: TraceData, steps: list[Range], launch_at: dict[int, int], notes: list[str]) -> list[int]:
    """Indices of the GPU events the temporal breakdown counts (HTA's filter, see the module doc)."""
    every = range(data.gpu_events)
    if len({r.name for r in steps}) < 2:
        return list(every)
    last_start = math.ceil(max(r.ts for r in steps))  # whole µs, as HTA compares them
    kept = []
    for i in every:
        j = launch_at.get(data.gpu_corr[i])
        if j is not None and math.ceil(data.launch_ts[j]) < last_start:
            kept.append(i)
    if len(kept) < data.gpu_events:
        notes.append(
            f"temporal breakdown leaves out the {data.gpu_events - len(kept)} GPU events launched in the last "
            "ProfilerStep or with no launch in the trace, as HTA does"
        )
    return kept


def _per_step(
    data, steps, merged, compute, comm, lanes, queue: Queue, startup, launch_at, kind, notes, calls_out=None
) -> list[StepFigures]:
    span = (merged[0][0], merged[-1][1] if steps else _work_end(data, kind, merged[-1][1])) if merged else None
    wins = windows_mod.windows(data, steps, span, startup)
    if not wins:
        return []
    dataloader = intervals.union((r.ts, r.end) for r in data.dataloader)
    blocking = intervals.union((r.ts, r.end) for r in queue.blocking_calls)
    allocs = intervals.union((r.ts, r.end) for r in data.alloc_calls)
    launch_ts = data.launch_ts
    # (columns as arrays: 8 bytes an entry where a list of Python numbers takes 32-36)
    kernel_launches = sorted((j for j in range(len(launch_ts)) if data.launch_is_kernel[j]), key=launch_ts.__getitem__)
    launch_starts = array("d", (launch_ts[j] for j in kernel_launches))
    launch_sums = array("d", [0.0])  # prefix sums of the kernel launches' host time, in start order
    for j in kernel_launches:
        launch_sums.append(launch_sums[-1] + data.launch_dur[j])
    del kernel_launches
    # the GPU events launched in each window (by their launch call's start)
    by_step: list[array] = [array("q") for _ in wins]
    window_starts = [w.start_us for w in wins]
    skew, skew_us = 0, 0.0  # GPU events that start before the host call that launched them
    for i in range(data.gpu_events):
        j = launch_at.get(data.gpu_corr[i])
        if j is not None:
            at = launch_ts[j]
            if data.gpu_ts[i] < at:
                skew += 1
                skew_us = max(skew_us, at - data.gpu_ts[i])
            k = bisect.bisect_right(window_starts, at) - 1
            if k >= 0 and at < wins[k].end_us:
                by_step[k].append(i)
    if skew:
        notes.append(
            f"{skew} GPU events start before the host call that launched them (by up to {_us(skew_us)} µs): the "
            "host and GPU clocks disagree; a GPU event is placed in the step its launch call started in"
        )
    sync_starts = sorted(r.ts for r in queue.blocking_calls)
    out = []
    last_index = len(wins) - 1
    walls = sorted(w.end_us - w.start_us for w in wins[:-1])
    typical = walls[len(walls) // 2] if walls else None
    for k, w in enumerate(wins):
        lo, hi = w.start_us, w.end_us
        wall = hi - lo
        busy = intervals.clip(merged, lo, hi)
        busy_us = intervals.length(busy)
        comp = intervals.clip(compute, lo, hi)
        comp_us = intervals.length(comp)
        idle = queue.classify(w.name, w.steady, lo, hi)
        in_step = by_step[k] if steps else [i for i in range(data.gpu_events) if lo <= data.gpu_ts[i] < hi]
        host_exposed = None
        if not data.gpu_events:  # a CPU job (_host_lanes): the lanes are the host's, the GPU's figures stay 0
            host_exposed = intervals.length(intervals.clip(comm, lo, hi)) - intervals.overlap(
                intervals.clip(comm, lo, hi), comp
            )
            host_comp_us, comp, comp_us = comp_us, [], 0.0
        durs = [data.gpu_dur[i] for i in in_step if kind[data.gpu_name[i]] == kernels.COMPUTE]
        if calls_out is not None:  # (group, out, host): the window's collectives in start order: name, µs, bytes
            group, calls, host_compute = calls_out
            if data.gpu_events:
                calls[w.name] = [
                    (data.names[data.gpu_name[i]], data.gpu_dur[i], None)
                    for i in sorted(in_step, key=lambda i: (data.gpu_ts[i], i))
                    if group[data.gpu_name[i]] == "communication"
                ]
            elif data.host_collectives:  # a CPU job: gloo's runs that start in the window
                calls[w.name] = [
                    ("gloo:" + r.name, r.dur, nbytes)
                    for r, nbytes in sorted(data.host_collectives, key=lambda c: (c[0].ts, c[0].name))
                    if lo <= r.ts < hi
                ]
                host_compute[w.name] = host_comp_us
        buckets = _buckets(
            busy_us, comp, [] if host_exposed is not None else intervals.clip(comm, lo, hi), lanes, lo, hi, idle.causes
        )
        if host_exposed:  # the host waiting in a collective is not host work: it leaves idle "host"
            host_exposed = min(host_exposed, buckets.get("idle_host", 0.0))
            buckets["exposed_communication"] = host_exposed
            buckets["idle_host"] -= host_exposed
        a, b = bisect.bisect_left(launch_starts, lo), bisect.bisect_left(launch_starts, hi)
        out.append(
            StepFigures(
                step=w.name,
                start_us=lo,
                wall_us=wall,
                # The last step is cut when the file is, or when the profiler stopped inside it (far
                # shorter than the steps before it).
                complete=not (
                    k == last_index and steps and (data.truncated or (typical is not None and wall < typical / 2))
                ),
                gpu_busy_us=busy_us,
                compute_us=comp_us,
                non_compute_us=busy_us - comp_us,
                idle_us=wall - busy_us,
                kernel_us=sum(data.gpu_dur[i] for i in in_step),
                kernels=len(in_step),
                dataloader_us=intervals.length(intervals.clip(dataloader, lo, hi)),
                sync_us=intervals.length(intervals.clip(blocking, lo, hi)),
                syncs=bisect.bisect_left(sync_starts, hi) - bisect.bisect_left(sync_starts, lo),
                alloc_us=intervals.length(intervals.clip(allocs, lo, hi)),
                launch_us=launch_sums[b] - launch_sums[a],
                idle_causes=idle.causes,
                host_idle_in=idle.host_idle_in,
                median_kernel_us=statistics.median(durs) if durs else None,
                steady=w.steady,
                unsteady_reason=w.reason,
                queued_kinds=idle.queued_kinds,
                buckets=buckets,
            )
        )
    return out


def _host_lanes(data: TraceData) -> tuple[list, list] | None:
    """A CPU job's (communication, compute) lanes: the union of its collectives' runs (gloo's worker
    threads), and the union of the host ops of every other thread (its compute: what can overlap the
    collectives). None for a GPU trace, or one with no collectives on the host."""
    if data.gpu_events or not data.host_collectives:
        return None
    comm = intervals.union((r.ts, r.end) for r, _ in data.host_collectives)
    workers = {r.tid for r, _ in data.host_collectives}
    compute = intervals.union(
        span for tid, spans in data.host_busy.items() if tid not in workers for span in _unblocked(data, tid, spans)
    )
    return comm, compute


def _unblocked(data: TraceData, tid: Any, spans: array) -> list[tuple[float, float]]:
    """A thread's busy time less the time it spent blocked in a wait or a collective's call (a DDP hook's
    all-reduce blocks inside the autograd node that ran it: the node's range is no compute then)."""
    busy = intervals.union((spans[k], spans[k + 1]) for k in range(0, len(spans), 2))
    raw = data.host_blocked.get(tid)
    if not raw:
        return busy
    blocked = intervals.union((raw[k], raw[k + 1]) for k in range(0, len(raw), 2))
    return [gap for s, e in busy for gap in intervals.gaps(blocked, s, e)]


def _work_end(data: TraceData, kind: list[str], end: float) -> float:
    """Where a trace without steps stops working: the end of its last kernel or copy. Sync waits
    after it (the host's final synchronize, teardown) are not work and do not stretch the window."""
    work = {n for n, k in enumerate(kind) if k != kernels.OTHER}
    last = max((t + d for t, d, n in zip(data.gpu_ts, data.gpu_dur, data.gpu_name) if n in work), default=end)
    return min(end, last)


def _buckets(busy_us, comp, comm, lanes, lo, hi, causes) -> dict[str, float]:
    """The window's wall time cut into the waterfall's non-overlapping buckets (see waterfall.py):
    compute less its fp32 GEMMs and layout conversions, those two, communication no computation overlaps, pageable
    host-to-device copies nothing else overlaps, the rest of the busy time, idle by cause."""
    comp_us = intervals.length(comp)
    fp32_lane = intervals.clip(lanes["fp32_gemm"], lo, hi)
    fp32 = intervals.length(fp32_lane)
    layout_lane = intervals.clip(lanes["layout_conversion"], lo, hi)
    layout = intervals.length(layout_lane) - intervals.overlap(layout_lane, fp32_lane)  # both are compute
    comm_exposed = intervals.length(comm) - intervals.overlap(comm, comp)
    pageable = intervals.clip(lanes["pageable_copy"], lo, hi)
    pageable_exposed = intervals.length(pageable) - intervals.overlap(pageable, intervals.union(comp + comm))
    out = {
        "compute": comp_us - fp32 - layout,
        "fp32_gemm": fp32,
        "layout_conversion": layout,
        "exposed_communication": comm_exposed,
        "pageable_copy": pageable_exposed,
        "other_non_compute": max(0.0, busy_us - comp_us - comm_exposed - pageable_exposed),
    }
    out |= {f"idle_{c}": us for c, us in causes.items()}
    return out


def _pageable_h2d(name: str) -> bool:
    return name.startswith("Memcpy HtoD") and "Pageable" in name


def _modules(data: TraceData, kept: list[int]) -> list[dict[str, Any]]:
    """GPU time of the work launched inside each annotation (nn.Module range, record_function),
    on the launching thread: inclusive (nested ranges too) and self (innermost range only)."""
    if not data.annotations:
        return []
    by_tid: dict[Any, list[Range]] = defaultdict(list)
    for r in data.annotations:
        by_tid[r.tid].append(r)
    gpu_by_corr: dict[int, float] = defaultdict(float)
    for i in kept:
        gpu_by_corr[data.gpu_corr[i]] += data.gpu_dur[i]
    launches: dict[Any, list[tuple[float, float]]] = defaultdict(list)
    for j, c in enumerate(data.launch_corr):
        us = gpu_by_corr.get(c)
        if us:
            launches[data.launch_tid[j]].append((data.launch_ts[j], us))
    inclusive: dict[str, float] = defaultdict(float)
    self_us: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    for tid, ranges in by_tid.items():
        ranges.sort(key=lambda r: (r.ts, -r.dur))
        for r in ranges:
            calls[r.name] += 1
        stack: list[Range] = []
        k = 0
        for ts, us in sorted(launches.get(tid, [])):
            while k < len(ranges) and ranges[k].ts <= ts:
                while stack and stack[-1].end <= ranges[k].ts:
                    stack.pop()
                stack.append(ranges[k])
                k += 1
            while stack and stack[-1].end <= ts:
                stack.pop()
            open_ranges = [r for r in stack if r.ts <= ts < r.end]
            if not open_ranges:
                continue
            for name in {r.name for r in open_ranges}:
                inclusive[name] += us
            self_us[open_ranges[-1].name] += us
    rows = [
        {"name": name, "calls": calls[name], "gpu_us": round(us, 3), "self_gpu_us": round(self_us.get(name, 0.0), 3)}
        for name, us in inclusive.items()
    ]
    return sorted(rows, key=lambda r: (-r["gpu_us"], r["name"]))[:50]  # ties by name: one order on every run


def _pageable(data: TraceData, kept: list[int], launch_at: dict[int, int]) -> PageableCopies:
    """Host-to-device copies from pageable memory: GPU time, the host time of their calls, their
    bytes (of the copies whose size the trace gives: `bytes` and `gpu_us` are over those, so their
    ratio is the measured bandwidth) and, when the trace has large pinned copies, their bandwidth."""
    gpu_us = host_us = sized_us = 0.0
    count = nbytes = 0
    pinned_bytes, pinned_us = 0, 0.0
    for i in kept:
        name = data.names[data.gpu_name[i]]
        if not name.startswith("Memcpy HtoD"):
            continue
        size = data.gpu_bytes[i] if len(data.gpu_bytes) > i else -1
        if "Pageable" in name:
            count += 1
            gpu_us += data.gpu_dur[i]
            if size > 0:
                nbytes += size
                sized_us += data.gpu_dur[i]
            j = launch_at.get(data.gpu_corr[i])
            if j is not None:
                host_us += data.launch_dur[j]
        elif "Pinned" in name and size >= 1 << 20:  # small copies are latency, not bandwidth
            pinned_bytes += size
            pinned_us += data.gpu_dur[i]
    return PageableCopies(
        copies=count,
        gpu_us=gpu_us,
        host_us=host_us,
        bytes=nbytes,
        sized_gpu_us=sized_us,
        pinned_gbps=round(pinned_bytes / pinned_us / 1e3, 3) if pinned_us else None,
    )


def _data_parallel(data: TraceData, kept: list[int]) -> DataParallel:
    devices = sorted({data.gpu_device[i] for i in kept if data.gpu_device[i] >= 0})
    return DataParallel(devices=devices, replication_ops=data.data_parallel_ops)


def _memory(data: TraceData, total: int | None) -> TraceMemory | None:
    if not data.peak_allocated and not data.peak_reserved:
        return None
    device = max(
        data.peak_reserved or data.peak_allocated, key=lambda d: (data.peak_reserved or data.peak_allocated)[d]
    )
    out = TraceMemory(
        device=device, peak_allocated=data.peak_allocated.get(device), peak_reserved=data.peak_reserved.get(device)
    )
    cap = _capacity(data, device) or total
    if cap:
        out.capacity = cap
        out.peak_share = round(max(out.peak_allocated or 0, out.peak_reserved or 0) / cap, 4)
    return out


def _capacity(data: TraceData, device: int) -> int | None:
    for d in data.devices:
        if d.get("id") == device and isinstance(d.get("totalGlobalMem"), int):
            return d["totalGlobalMem"]
    return None


def _device(data: TraceData) -> tuple[str | None, int | None, str | None, str | None]:
    used = sorted({data.gpu_device[i] for i in range(min(data.gpu_events, 10000)) if data.gpu_device[i] >= 0})
    props = next((d for d in data.devices if used and d.get("id") == used[0]), None)
    props = props or (data.devices[0] if data.devices else None)
    if props is None:
        return None, None, None, None
    name = props.get("name") if isinstance(props.get("name"), str) else None  # a header is outside input too
    major, minor = props.get("computeMajor"), props.get("computeMinor")
    cc = (
        f"{major}.{minor}"
        if type(major) is int and type(minor) is int and 0 <= major < 100 and 0 <= minor < 100
        else None
    )
    vendor = (
        "amd"
        if (name and ("AMD" in name or "Radeon" in name or "Instinct" in name)) or props.get("warpSize") == 64
        else "nvidia"
    )
    memory = props.get("totalGlobalMem") if isinstance(props.get("totalGlobalMem"), int) else None
    return name, memory, cc, vendor
