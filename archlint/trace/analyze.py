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

from archlint.trace import intervals, kernels
from archlint.trace.read import Range, TraceData

CAUSES = ("input", "sync", "launch", "host")
# An idle stretch this short, ended by a GPU event launched only after it began, is launch
# overhead (the host issues kernels slower than the GPU runs them); a longer one is other host work.
LAUNCH_GAP_US = 100.0
HOST_RANGE_MIN_US = 50.0  # shorter host ranges (and idle stretches) are not worth naming
HOST_RANGES_PER_GAP = 60  # the latest-starting ranges looked at per idle stretch (nesting is shallower)
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
    host_idle_in: dict[str, float]  # the host ranges (annotations, modules, user functions) most of the "host" idle fell in
    median_kernel_us: float | None

    def to_dict(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in values.items()} | {
            "idle_causes": {k: round(v, 3) for k, v in self.idle_causes.items()},
            "host_idle_in": {k: round(v, 3) for k, v in self.host_idle_in.items()},
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
    pageable_h2d: dict[str, Any]
    data_parallel: dict[str, Any]
    memory: dict[str, Any]
    locations: dict[str, tuple[str, int, str]]  # what → (file, line, function) in the user's code
    notes: list[str] = field(default_factory=list)

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
            "memory": self.memory,
            "locations": {k: {"file": f, "line": line, "function": fn} for k, (f, line, fn) in self.locations.items()},
            "notes": self.notes,
        }

    @property
    def windows(self) -> list[StepFigures]:
        """The complete steps (or the one whole-trace window), the ones findings are priced on."""
        complete = [s for s in self.per_step if s.complete]
        return complete or self.per_step

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
        notes.append(f"the file ends inside the event array (cut while written): {data.events} events read before the cut")
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
    span = lambda i: (data.gpu_ts[i], data.gpu_ts[i] + data.gpu_dur[i])  # noqa: E731
    busy = intervals.union(span(i) for i in every)
    compute = intervals.union(span(i) for i in every if kind[data.gpu_name[i]] == kernels.COMPUTE)
    comm = intervals.union(span(i) for i in every if group[data.gpu_name[i]] == "communication")
    device, memory_total, cc, vendor = _device(data)
    return TraceAnalysis(
        file=data.file,
        rank=0 if data.rank is None else data.rank,
        device=device,
        device_memory=memory_total,
        compute_capability=cc,
        vendor=vendor,
        steps=len(steps),
        truncated=data.truncated,
        temporal_breakdown=breakdown,
        per_step=_per_step(data, steps, busy, compute, launch_at, kind, launch_gap_us, notes),
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
        locations=_locations(data),
        notes=notes,
    )


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
                fp32.append((total, name))
    total_gpu = sum(groups.values()) or 1.0
    rows = []
    for n, (count, total) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:top]:
        row = {"name": kernels.short_name(data.names[n]), "group": group[n], "count": count,
               "total_us": round(total, 3), "share": round(total / total_gpu, 4)}
        if group[n] == "gemm":
            row["tensor_core"] = kernels.tensor_core(data.names[n])
        rows.append(row)
    return {
        "top": rows,
        "groups": dict(sorted(groups.items(), key=lambda kv: -kv[1])),
        "tensor_core_share": round(tc_us / gemm_us, 4) if gemm_us else None,
        "fp32_us": sum(us for us, _ in fp32),
        "fp32_kernels": [kernels.short_name(n) for _, n in sorted(fp32, reverse=True)[:5]],
    }


def _whole_us(ts: float, dur: float) -> tuple[float, float]:
    """An event rounded inward to whole µs, as HTA's parser does with fractional (ns-resolution)
    timestamps (round_down_time_stamps: start up, end down), so the breakdowns agree."""
    return float(math.ceil(ts)), float(math.floor(ts + dur))


def _input_notes(data: TraceData) -> list[str]:
    """What the reader set right in the file, said (never silently)."""
    notes = []
    if data.categories_seen:
        notes.append(f"event categories of torch 1.8-1.10 ({', '.join(sorted(data.categories_seen))}) read as their "
                     "later names (cpu_op, cuda_runtime, kernel, gpu_memcpy, gpu_memset)")
    if data.skipped:
        notes.append(f"{data.skipped} complete events left out: their ts or dur is not a finite number")
    if data.negative:
        notes.append(f"{data.negative} events with a negative duration (down to {_us(data.negative_min_us)} µs) counted "
                     "as 0 µs: the profiler recorded their end before their start")
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
        notes.append(f"{clamped} ProfilerStep ranges ran past the start of the next step: each ends where the next begins")
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


def _per_step(data, steps, merged, compute, launch_at, kind, launch_gap_us, notes) -> list[StepFigures]:
    if steps:
        windows = [(n, r.ts, r.end) for n, r in steps]
    elif merged:
        windows = [("trace", merged[0][0], merged[-1][1])]
    else:
        return []
    dataloader = intervals.union((r.ts, r.end) for r in data.dataloader)
    # Blocking calls: synchronisations, cudaMemcpy, and async copies to pageable host memory (.item(),
    # .cpu()), which the driver completes before returning.
    to_pageable = {
        data.gpu_corr[i] for i in range(data.gpu_events)
        if data.names[data.gpu_name[i]].startswith("Memcpy DtoH") and "Pageable" in data.names[data.gpu_name[i]]
    }
    blocking_calls = [r for r in data.syncs] + [r for r, c in data.memcpy_calls if "Async" not in r.name or c in to_pageable]
    blocking = intervals.union((r.ts, r.end) for r in blocking_calls)
    blocking_starts = [s for s, _ in blocking]
    allocs = intervals.union((r.ts, r.end) for r in data.alloc_calls)
    # next GPU event after each idle stretch: was it launched before the GPU went idle?
    # (columns as arrays: 8 bytes an entry where a list of Python numbers takes 32-36)
    starts = array("q", sorted(range(data.gpu_events), key=data.gpu_ts.__getitem__))
    start_ts = array("d", (data.gpu_ts[i] for i in starts))
    launch_ts = data.launch_ts
    kernel_launches = sorted((j for j in range(len(launch_ts)) if data.launch_is_kernel[j]), key=launch_ts.__getitem__)
    launch_starts = array("d", (launch_ts[j] for j in kernel_launches))
    launch_sums = array("d", [0.0])  # prefix sums of the kernel launches' host time, in start order
    for j in kernel_launches:
        launch_sums.append(launch_sums[-1] + data.launch_dur[j])
    del kernel_launches
    # the GPU events launched in each step (by their launch call's start)
    by_step: list[array] = [array("q") for _ in windows]
    window_starts = [w[1] for w in windows]
    skew, skew_us = 0, 0.0  # GPU events that start before the host call that launched them
    for i in range(data.gpu_events):
        j = launch_at.get(data.gpu_corr[i])
        if j is not None:
            at = launch_ts[j]
            if data.gpu_ts[i] < at:
                skew += 1
                skew_us = max(skew_us, at - data.gpu_ts[i])
            k = bisect.bisect_right(window_starts, at) - 1
            if k >= 0 and at < windows[k][2]:
                by_step[k].append(i)
    if skew:
        notes.append(f"{skew} GPU events start before the host call that launched them (by up to {_us(skew_us)} µs): the "
                     "host and GPU clocks disagree; a GPU event is placed in the step its launch call started in")
    sync_starts = sorted(r.ts for r in blocking_calls)
    # named host ranges long enough to explain an idle stretch: what the host was doing meanwhile
    host_ranges = sorted(
        (r for r in data.annotations + data.frames if r.dur >= HOST_RANGE_MIN_US), key=lambda r: r.ts
    )
    host_in: dict[str, float] = defaultdict(float)
    out = []
    last_index = len(windows) - 1
    walls = sorted(e - s for _, s, e in windows[:-1])
    typical = walls[len(walls) // 2] if walls else None
    for k, (n, lo, hi) in enumerate(windows):
        wall = hi - lo
        busy = intervals.clip(merged, lo, hi)
        busy_us = intervals.length(busy)
        comp_us = intervals.length(intervals.clip(compute, lo, hi))
        causes = dict.fromkeys(CAUSES, 0.0)
        for g0, g1 in intervals.gaps(merged, lo, hi):
            gap = [(g0, g1)]
            input_us = intervals.overlap(gap, intervals.clip(dataloader, g0, g1))
            rest = (g1 - g0) - input_us
            causes["input"] += input_us
            # the GPU ran dry while the host was blocked: the sync (or blocking copy) emptied the queue
            b = bisect.bisect_right(blocking_starts, g0) - 1
            if b >= 0 and blocking[b][0] <= g0 <= blocking[b][1]:
                causes["sync"] += rest
                continue
            # the GPU event that ends the gap: launched after the gap began → the host was late
            nxt = bisect.bisect_left(start_ts, g1)
            late = False
            if nxt < len(starts):
                j = launch_at.get(data.gpu_corr[starts[nxt]])
                late = j is not None and launch_ts[j] >= g0
            cause = "launch" if late and g1 - g0 <= launch_gap_us else "host"
            causes[cause] += rest
            if cause == "host":
                _host_ranges(host_ranges, g0, g1, host_in)
        top_host = dict(sorted(host_in.items(), key=lambda kv: -kv[1])[:3])
        host_in.clear()
        in_step = by_step[k] if steps else range(data.gpu_events)
        durs = [data.gpu_dur[i] for i in in_step if kind[data.gpu_name[i]] == kernels.COMPUTE]
        a, b = bisect.bisect_left(launch_starts, lo), bisect.bisect_left(launch_starts, hi)
        out.append(StepFigures(
            step=n,
            start_us=lo,
            wall_us=wall,
            # The last step is cut when the file is, or when the profiler stopped inside it (far
            # shorter than the steps before it).
            complete=not (k == last_index and (data.truncated or (typical is not None and wall < typical / 2))),
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
            idle_causes=causes,
            host_idle_in=top_host,
            median_kernel_us=statistics.median(durs) if durs else None,
        ))
    return out


def _host_ranges(ranges: list[Range], g0: float, g1: float, into: dict[str, float]) -> None:
    """Add to `into` the part of the idle stretch [g0, g1) each named host range explains: each
    piece of the stretch goes to the innermost (latest-starting) range covering it, so an outer
    range that holds everything does not hide what ran inside it."""
    if g1 - g0 < HOST_RANGE_MIN_US:
        return
    k = bisect.bisect_right(ranges, g1, key=lambda r: r.ts)
    covering = [r for r in ranges[max(0, k - 200):k] if r.end > g0][-HOST_RANGES_PER_GAP:]
    cuts = sorted({g0, g1} | {max(g0, r.ts) for r in covering} | {min(g1, r.end) for r in covering})
    for a, b in zip(cuts, cuts[1:]):
        inner = max((r for r in covering if r.ts <= a and r.end >= b), key=lambda r: r.ts, default=None)
        if inner is not None:
            into[inner.name] += b - a


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


def _pageable(data: TraceData, kept: list[int], launch_at: dict[int, int]) -> dict[str, Any]:
    """Host-to-device copies from pageable memory: GPU time and the host time of their calls."""
    gpu_us = host_us = 0.0
    count = 0
    nbytes = 0
    for i in kept:
        name = data.names[data.gpu_name[i]]
        if name.startswith("Memcpy HtoD") and "Pageable" in name:
            count += 1
            gpu_us += data.gpu_dur[i]
            j = launch_at.get(data.gpu_corr[i])
            if j is not None:
                host_us += data.launch_dur[j]
    return {"copies": count, "gpu_us": gpu_us, "host_us": host_us, "bytes": nbytes}


def _data_parallel(data: TraceData, kept: list[int]) -> dict[str, Any]:
    devices = sorted({data.gpu_device[i] for i in kept if data.gpu_device[i] >= 0})
    return {"devices": devices, "replication_ops": data.data_parallel_ops}


def _memory(data: TraceData, total: int | None) -> dict[str, Any]:
    if not data.peak_allocated and not data.peak_reserved:
        return {}
    device = max(data.peak_reserved or data.peak_allocated, key=lambda d: (data.peak_reserved or data.peak_allocated)[d])
    out: dict[str, Any] = {
        "device": device,
        "peak_allocated": data.peak_allocated.get(device),
        "peak_reserved": data.peak_reserved.get(device),
    }
    cap = _capacity(data, device) or total
    if cap:
        out["capacity"] = cap
        out["peak_share"] = round(max(out["peak_allocated"] or 0, out["peak_reserved"] or 0) / cap, 4)
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
    cc = f"{major}.{minor}" if type(major) is int and type(minor) is int and 0 <= major < 100 and 0 <= minor < 100 else None
    vendor = "amd" if (name and ("AMD" in name or "Radeon" in name or "Instinct" in name)) or props.get("warpSize") == 64 else "nvidia"
    memory = props.get("totalGlobalMem") if isinstance(props.get("totalGlobalMem"), int) else None
    return name, memory, cc, vendor


def _locations(data: TraceData) -> dict[str, tuple[str, int, str]]:
    """For each host event kind a finding points at (sync, dataloader, item, memcpy), the user's
    innermost Python frame around its longest occurrence, when the trace has stacks."""
    if not data.frames:
        return {}
    by_tid: dict[Any, list[Range]] = defaultdict(list)
    for f in data.frames:
        by_tid[f.tid].append(f)
    for frames in by_tid.values():
        frames.sort(key=lambda r: r.ts)
    starts = {tid: [f.ts for f in frames] for tid, frames in by_tid.items()}
    kinds = {
        "sync": data.syncs + [r for r, _ in data.memcpy_calls if "Async" not in r.name] + data.item_calls,
        "dataloader": data.dataloader,
        "memcpy": [r for r, _ in data.memcpy_calls],
    }
    out = {}
    for what, ranges in kinds.items():
        votes: dict[tuple[str, int, str], float] = defaultdict(float)
        for r in ranges:
            frames = by_tid.get(r.tid)
            if not frames:
                continue
            k = bisect.bisect_right(starts[r.tid], r.ts)
            for f in reversed(frames[max(0, k - 200):k]):  # innermost: the latest start that contains it
                if f.end >= r.end:
                    m = _FRAME.match(f.name)
                    if m:
                        votes[(m["file"], int(m["line"]), m["func"])] += r.dur
                    break
        if votes:
            out[what] = max(votes, key=votes.get)
    return out
