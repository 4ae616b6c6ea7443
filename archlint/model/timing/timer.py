"""The one way archlint times work on a device.

A `Timer` measures named regions of one *repeat* (one forward pass, say) and hands back their
durations when the repeat ends:

    timer = make_timer(device)
    for _ in range(repeat):
        with timer.region("conv1"):
            ...
        with timer.region("relu"):
            ...
        durations = timer.collect()   # {"conv1": ms, "relu": ms}

`CpuTimer` reads `time.perf_counter_ns` at both ends of a region. `CudaTimer` records a CUDA
event in stream order at both ends and reads them after ONE synchronize per repeat (in
`collect`), so the device time of each region is measured without stalling the host per region.
Per-op timing, end-to-end timing and the rules' what-if prices all go through `sample`, so they
measure the same way.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from archlint import progress
from archlint.model.runtime import allocator


@dataclass(frozen=True)
class Stats:
    """Summary of one region's repeats, in milliseconds."""

    median: float
    q1: float
    q3: float
    n: int

    @classmethod
    def of(cls, samples: list[float]) -> Stats:
        if len(samples) == 1:
            return cls(samples[0], samples[0], samples[0], 1)
        q1, q2, q3 = statistics.quantiles(samples, n=4, method="inclusive")
        return cls(q2, q1, q3, len(samples))

    @property
    def spread(self) -> list[float]:
        return [self.q1, self.q3]


class CpuTimer:
    """Host clock around each region; right for CPU ops, which run synchronously."""

    def __init__(self) -> None:
        self.device = torch.device("cpu")
        self._spans: list[tuple[str, int, int]] = []

    def region(self, name: str) -> _CpuRegion:
        return _CpuRegion(self._spans, name)

    def collect(self) -> dict[str, float]:
        out = _accumulate((name, (end - start) / 1e6) for name, start, end in self._spans)
        self._spans.clear()
        return out


class _CpuRegion:
    """A plain class, not a generator context manager: its own cost inside the region is one
    clock read, which matters for ops of a few microseconds."""

    __slots__ = ("spans", "name", "start")

    def __init__(self, spans: list, name: str) -> None:
        self.spans, self.name = spans, name

    def __enter__(self) -> None:
        self.start = time.perf_counter_ns()

    def __exit__(self, *exc) -> None:
        self.spans.append((self.name, self.start, time.perf_counter_ns()))


class CudaTimer:
    """CUDA events recorded on the current stream around each region, read after one
    synchronize per repeat: device time, in stream order, without a host sync per region."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._pool: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self._spans: list[tuple[str, torch.cuda.Event, torch.cuda.Event]] = []

    def region(self, name: str) -> _CudaRegion:
        i = len(self._spans)
        if i == len(self._pool):  # events are reused across repeats; make more only when needed
            self._pool.append((torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)))
        start, end = self._pool[i]
        self._spans.append((name, start, end))  # reserved now, so nested regions get their own pair
        return _CudaRegion(start, end, torch.cuda.current_stream(self.device))

    def collect(self) -> dict[str, float]:
        torch.cuda.synchronize(self.device)
        out = _accumulate((name, start.elapsed_time(end)) for name, start, end in self._spans)
        self._spans.clear()
        return out


class _CudaRegion:
    __slots__ = ("start", "end", "stream")

    def __init__(self, start, end, stream) -> None:
        self.start, self.end, self.stream = start, end, stream

    def __enter__(self) -> None:
        self.start.record(self.stream)

    def __exit__(self, *exc) -> None:
        self.end.record(self.stream)


Timer = CpuTimer | CudaTimer


def _accumulate(pairs) -> dict[str, float]:
    """A region entered twice in one repeat (a module called twice) counts its total time."""
    out: dict[str, float] = {}
    for name, ms in pairs:
        out[name] = out.get(name, 0.0) + ms
    return out


def load_average() -> float | None:
    """The 1-minute load average, None where the platform has none: a CPU timing taken while it
    exceeds the core count is disturbed by other work."""
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):  # not on this platform
        return None


def make_timer(device: torch.device | str) -> Timer:
    device = torch.device(device)
    if device.type == "cuda":
        return CudaTimer(device)
    if device.type == "cpu":
        return CpuTimer()
    raise ValueError(f"no timer for device type {device.type!r}")


def median_ms(fn, device: torch.device | str, repeat: int, warmup: int = 3) -> float:
    """The median ms of `repeat` timed calls of `fn` after `warmup` untimed ones (one kernel's
    microbenchmark: CUDA events on a GPU, perf_counter on the CPU)."""
    timer = make_timer(device)
    for _ in range(warmup):
        fn()
    timer.collect()
    times = []
    for _ in range(repeat):
        with timer.region("x"):
            fn()
        times.append(timer.collect()["x"])
    return statistics.median(times)


@dataclass(frozen=True)
class Sampled:
    """What `sample` measured for one callable: each region's Stats, and the Stats of the sum
    of all its regions per pass (a median of sums; the sum of the medians can be smaller when
    the noise is rare and large, as on a busy machine)."""

    regions: dict[str, Stats]
    per_pass: Stats
    passes: tuple[float, ...] = ()  # each timed pass's sum, in order (paired with the other runs' passes)


MIN_PASSES = 8  # a deadline never cuts a sample below this many timed passes of each run


def sample(
    runs: Sequence[Callable[[], object]],
    timer: Timer,
    warmup: int,
    repeat: int,
    alternate: bool = False,
    label: str = "timing passes",
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> list[Sampled]:
    """Run each callable `warmup` times untimed, then `repeat` times, interleaved (run 0, run 1,
    run 0, ...) so that all of them see the same machine conditions. Each callable marks its own
    regions on `timer`. `alternate`: every other pass runs them in reverse order, so that none
    always runs right after another (which leaves caches warm with the weights they share).
    `deadline` (a `clock` reading): no more passes once it is past, MIN_PASSES at least (an even
    number with `alternate`, so both orders stay equal); `label` names the stage in the progress
    display. On the CPU, the host allocator is kept warm first (see allocator)."""
    if isinstance(timer, CpuTimer):
        allocator.keep_warm()
    with progress.task(label, total=(warmup + repeat) * len(runs)) as advance:
        for _ in range(warmup):
            for run in runs:
                run()
                timer.collect()
                advance()
        samples: list[dict[str, list[float]]] = [{} for _ in runs]
        totals: list[list[float]] = [[] for _ in runs]
        for i in range(repeat):
            if deadline is not None and i >= MIN_PASSES and not (alternate and i % 2) and clock() >= deadline:
                break
            order = list(zip(runs, samples, totals))
            for run, acc, total in reversed(order) if alternate and i % 2 else order:
                run()
                durations = timer.collect()
                total.append(sum(durations.values()))
                for name, ms in durations.items():
                    acc.setdefault(name, []).append(ms)
                advance()
    return [
        Sampled({name: Stats.of(values) for name, values in acc.items()}, Stats.of(total), tuple(total))
        for acc, total in zip(samples, totals)
    ]
