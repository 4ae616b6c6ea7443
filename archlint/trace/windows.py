"""Which stretches of a trace are steady-state steps, the only ones worth pricing.

A profiler trace often holds more than the loop the user wants to speed up: the CUDA context and
the cuDNN/cuBLAS handles being created (`cudaFree(0)`, `cudaStreamCreate`, a first
`cudaLaunchKernel` that loads a module lazily for seconds), warm-up iterations, the run's first
step (allocator growth, cuDNN autotuning). Idle time there is real but it is paid once: pricing it
as if every step paid it ("saves 12.9 s") sends the user after the wrong thing. Here each window
(a ProfilerStep, or the GPU span of a trace without steps) is marked steady or not, with the
reason, and the trace gets the warnings a practitioner would give about how it was recorded.
Pure functions of TraceData; no torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from archlint.trace.read import Range, TraceData
from archlint.units import significant

# Runtime calls that only ever take this long while the process sets the GPU up; any of them
# 10 ms or longer (read.SLOW_CALL_US) is start-up. cudaFree is cudaFree(0), the classic context init.
_STARTUP = re.compile(
    r"^(cuda|hip)(Free|FreeHost|HostAlloc|MallocHost|StreamCreate\w*|GetDevice\w*|DeviceGet\w*|SetDevice|"
    r"EventCreate\w*|Init|DriverGetVersion|RuntimeGetVersion|FuncGetAttributes|ModuleLoad\w*|"
    r"DeviceSetLimit|DeviceSetCacheConfig)$|^cu(Init|ModuleLoad\w*|CtxCreate\w*|DevicePrimaryCtx\w*|LibraryLoad\w*)",
    re.I,
)
# Calls that are start-up only when they take this long: a first launch loading its module (lazy
# loading), the first allocation of a fresh caching allocator.
_STARTUP_IF_LONG = re.compile(
    r"^(cuda|hip)(Malloc\w*|LaunchKernel\w*|ExtModuleLaunchKernel|ModuleLaunchKernel)$|^cuLaunch", re.I
)
LONG_STARTUP_US = 100_000.0
FIRST_STEP_RATIO = 1.3  # ProfilerStep#0 this much slower than the median of the others: the run's first
STARTUP_US = 10_000.0  # a set-up call (_STARTUP) this long is start-up, not the allocator's steady churn
# A kernel launch normally takes microseconds; one of a millisecond or more for the first kernel of
# its name is the driver loading its module (CUDA lazy loading, a HIP code object) on first use.
LAZY_LAUNCH_US = 1_000.0
# python_function events come from the Python tracer (with_stack / with_modules); a few are also
# written by hand-made or converted traces, so the overhead is said from this many on
WITH_STACK_EVENTS = 100
WITH_STACK_PER_STEP = 20
_WARMUP = re.compile(r"warm-?up", re.I)
RERECORD = (
    "record steady-state steps: torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=2, active=3), "
    "...) around the training loop with prof.step() once per iteration, without with_stack=True when timing matters"
)


@dataclass
class Window:
    """One stretch the per-step figures are over (µs, the trace's clock)."""

    name: int | str  # N of ProfilerStep#N; "trace" for a trace without steps; "start-up" for its set-up prefix
    start_us: float
    end_us: float
    steady: bool
    reason: str | None  # why it is not steady-state (None when it is)


@dataclass
class Recording:
    """What the trace says about how it was recorded, as a practitioner reads it."""

    startup: list[Range]  # start-up calls and warm-up ranges
    warnings: list[str]
    with_stack: bool
    graph_launches: int
    unmatched_share: float  # GPU events whose launch is not in the trace (sampled or partial trace)


def stacks_recorded(data: TraceData) -> bool:
    """The Python tracer ran (with_stack / with_modules): it writes every Python call, hundreds per
    step, where a trace without it has a few hand-made python_function ranges at most."""
    return data.python_events >= max(WITH_STACK_EVENTS, WITH_STACK_PER_STEP * len(data.steps))


def startup_events(data: TraceData, launch_at: dict[int, int]) -> list[Range]:
    """The runtime calls and annotations that are set-up or warm-up, not the steady loop."""
    out = [
        r
        for r in data.slow_calls
        if (_STARTUP.search(r.name) and r.dur >= STARTUP_US)
        or (_STARTUP_IF_LONG.search(r.name) and r.dur >= LONG_STARTUP_US)
    ]
    out += _lazy_launches(data, launch_at)
    out += [r for r in data.annotations if _WARMUP.search(r.name)]
    return sorted(out, key=lambda r: r.ts)


def windows(
    data: TraceData, numbered: list[tuple[int, Range]], gpu_span: tuple[float, float] | None, startup: list[Range]
) -> list[Window]:
    """The windows figures are computed over, each marked steady or not; `numbered` holds the
    steps as (N of ProfilerStep#N, range), by start."""
    steps = [r for _, r in numbered]
    if steps:
        out = []
        walls = sorted(r.dur for r in steps[1:])
        median = walls[len(walls) // 2] if walls else None
        for k, (name, r) in enumerate(numbered):
            inside = [e for e in startup if e.ts < r.end and e.end > r.ts]
            reason = None
            if inside:
                reason = "start-up inside it: " + _describe(inside)
            elif (
                k == 0 and name == 0 and median and (r.dur > FIRST_STEP_RATIO * median or _allocates_alone(data, steps))
            ):
                # ProfilerStep#0 is the profiler's first, which is the run's first only when profiling
                # began with the loop: said when the step shows it (slower, or the only one allocating)
                reason = (
                    f"the run's first step (ProfilerStep#0, {significant(r.dur / median, 2)}x the median step: allocator "
                    "growth, cuDNN autotuning, lazy initialisation)"
                )
            out.append(Window(name, r.ts, r.end, reason is None, reason))
        return out
    if gpu_span is None:
        return []
    lo, hi = gpu_span
    inside = [e for e in startup if e.end > lo and e.ts < hi]
    cut = max((e.end for e in inside), default=lo)
    if cut <= lo:
        return [Window("trace", lo, hi, True, None)]
    if cut >= hi:
        return [Window("trace", lo, hi, False, "start-up or warm-up to its end: " + _describe(inside))]
    return [
        Window("start-up", lo, cut, False, "start-up and warm-up: " + _describe(inside)),
        Window("trace", cut, hi, True, None),
    ]


def _allocates_alone(data: TraceData, steps: list[Range]) -> bool:
    """Whether the first step calls cudaMalloc and none of the later ones do (the caching allocator
    growing to its steady size)."""

    def mallocs(r: Range) -> int:
        return sum(1 for a in data.alloc_calls if r.ts <= a.ts < r.end and "alloc" in a.name.lower())

    return mallocs(steps[0]) > 0 and not any(mallocs(r) for r in steps[1:])


def recording(data: TraceData, launch_at: dict[int, int], startup: list[Range], has_steps: bool) -> Recording:
    warnings = []
    if data.gpu_events and not has_steps:
        warnings.append("no ProfilerStep ranges: the figures are over the traced GPU span, not per training step")
    if startup:
        longest = max(startup, key=lambda r: r.dur)
        warnings.append(
            f"start-up in the trace ({_describe(startup)}; longest {longest.name} {significant(longest.dur / 1e3)} ms): "
            "paid once per process, not per step; it is left out of every price"
        )
    with_stack = stacks_recorded(data)
    if with_stack:
        warnings.append(
            "recorded with with_stack=True: the Python tracer adds host time to every call (about 2x on a measured "
            "step), so host-side idle (launch, host) is overstated"
        )
    if data.graph_launches:
        warnings.append(
            f"{data.graph_launches} CUDA-graph replays: a replay's kernels run without host launches and their "
            "interiors are not attributed to the host; idle between them is the graph's, not launch overhead"
        )
    unmatched = sum(1 for c in data.gpu_corr if c not in launch_at) if data.launch_corr else data.gpu_events
    share = unmatched / data.gpu_events if data.gpu_events else 0.0
    if share > 0.2:
        warnings.append(
            f"{share:.0%} of the GPU events have no launch call in the trace (a sampled or partial trace): "
            "launch delays and queue depths are known only for the rest"
        )
    return Recording(startup, warnings, with_stack, data.graph_launches, share)


def _lazy_launches(data: TraceData, launch_at: dict[int, int]) -> list[Range]:
    """Launch calls of LAZY_LAUNCH_US or more that launched the first GPU event of its name."""
    long = {
        data.launch_corr[j] for j, d in enumerate(data.launch_dur) if d >= LAZY_LAUNCH_US and data.launch_is_kernel[j]
    }
    if not long:
        return []
    first: dict[int, float] = {}
    for i in range(data.gpu_events):
        n, ts = data.gpu_name[i], data.gpu_ts[i]
        if ts < first.get(n, float("inf")):
            first[n] = ts
    out = []
    for i in range(data.gpu_events):
        c = data.gpu_corr[i]
        if c in long and data.gpu_ts[i] == first[data.gpu_name[i]]:
            j = launch_at[c]
            out.append(
                Range("first launch (lazy module loading)", data.launch_ts[j], data.launch_dur[j], data.launch_tid[j])
            )
    return out


def _describe(events: list[Range]) -> str:
    counts: dict[str, int] = {}
    for e in events:
        counts[e.name] = counts.get(e.name, 0) + 1
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:4]
    more = len(counts) - len(top)
    return ", ".join(f"{n}×{c}" if c > 1 else n for n, c in top) + (f" and {more} more" if more > 0 else "")
