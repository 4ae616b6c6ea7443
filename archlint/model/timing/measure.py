"""Measured latency: every op of the OpGraph timed on the real device, and the model end to end.

Per op: the captured fx graph is replayed node by node (its generated code, with a timer region
inserted around each op), interleaved pass for pass with the original model's plain forward,
which gives the end-to-end figure; both under torch.no_grad(), in eval mode, with the user's
inputs. Where capture could not produce a replayable graph (the dispatch-recording fallback),
each leaf module is timed with forward hooks instead and the report says so. Every op with a
latency is then placed on the device's roofline (roofline.py).

`measure()` is called by analyze() with --latency; its `Pricer` is the what-if interface the
rules use (`ctx.pricer`), so they price alternatives with the same timer, device and dtype.
"""

from __future__ import annotations

import copy
import math
import os
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx
import torch
import torch.fx as fx

from archlint import progress
from archlint.errors import UsageError
from archlint.model.capture.common import let_go
from archlint.model.opgraph import display_names, ops
from archlint.model.runtime import allocator
from archlint.model.timing import roofline
from archlint.model.timing.budget import TIMING_SHARE, Budget, seconds
from archlint.model.timing.timer import MIN_PASSES, Stats, Timer, load_average, make_timer, sample
from archlint.units import duration

_CALLS = ("call_module", "call_function", "call_method")
NOISY_SPREAD = 0.2  # interquartile range / median of the end-to-end passes above which we warn
BEATEN_PEAK = 1.1  # roofline efficiency of a compute-bound op above which the peaks are called low


@dataclass
class Pricer:
    """Prices what-ifs for the rules: `time_modules(*cases)` times small modules, each case a
    (module, inputs) pair (the module copied and moved to this device and dtype; the caller's
    stays untouched), under no_grad in eval mode with the ops' timer, and returns each one's
    median latency in ms. The cases run interleaved pass for pass, so an original and its
    alternative see the same machine; a what-if is a difference of two such medians, priced with
    half the ops' warm-up and repeats each."""

    device: torch.device
    dtype: torch.dtype
    end_to_end_ms: float
    warmup: int
    repeat: int
    # The model and its inputs on the device: what archlint.model.speedups.fix_timing edits (a copy of) and
    # times end to end.
    model: torch.nn.Module | None = None
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    budget: Budget = field(default_factory=lambda: Budget(None))  # --latency-budget, shared by every stage
    end_to_end_spread_ms: tuple = ()  # (q1, q3) of the end-to-end passes: how far a share can move

    def time_modules(self, *cases: tuple[torch.nn.Module, tuple]) -> list[float]:
        return [s.median for s in self.time_modules_stats(*cases)]

    def time_modules_stats(self, *cases: tuple[torch.nn.Module, tuple]) -> list[Stats]:
        """Like time_modules, with each case's spread: what a what-if needs to tell a saving
        from the noise."""
        timer = make_timer(self.device)
        runs = [self._run(timer, str(i), module, inputs) for i, (module, inputs) in enumerate(cases)]
        repeat = math.ceil(self.repeat / 2)
        with torch.no_grad(), _clear_oom(self.device, "timing a what-if alternative"):
            sampled = sample(
                runs,
                timer,
                math.ceil(self.warmup / 2),
                repeat,
                label="pricing findings: a layer against its alternative",
                deadline=self.budget.deadline(self.budget.pricing_share),
            )
        if sampled[0].per_pass.n < repeat:
            self.budget.cut("layer what-ifs timed on fewer passes")
        return [s.regions[str(i)] for i, s in enumerate(sampled)]

    def _run(self, timer: Timer, name: str, module: torch.nn.Module, inputs) -> Callable[[], None]:
        module = copy.deepcopy(module).to(self.device, self.dtype).eval()
        args = _to_device(inputs, self.device, self.dtype)

        def run() -> None:
            with timer.region(name):
                module(*args)

        return run


@dataclass
class LatencyReport:
    end_to_end_ms: float
    end_to_end_spread_ms: list[float]
    sum_of_ops_ms: float  # the sum of the per-op medians
    per_pass_sum_of_ops_ms: float  # the median over passes of each pass's summed op times
    method: str  # how it was timed, in words
    peaks: dict | None  # the roofline peaks used (roofline.measure_peaks)
    notes: list[str]
    pricer: Pricer
    # The hook fallback only: median ms of each leaf module, by dotted path.
    module_latency_ms: dict[str, float] = field(default_factory=dict)
    trace_file: Path | None = None


def measure(
    graph: nx.DiGraph, model: torch.nn.Module, inputs, device: str, settings, kwargs: dict | None = None
) -> LatencyReport:
    """Time `model` on `device` op by op and end to end; set latency_ms, latency_spread_ms and
    roofline on every timed node of `graph`. The model is returned to its device and mode.
    `kwargs`: keyword inputs, passed to every pass (the export replay takes them as the model does)."""
    dev = roofline.resolve_device(device)
    budget = Budget(seconds(settings), what_ifs=settings.what_if is not None)
    origin = _device_of(model)
    replay = graph.graph.get("replay")
    gm = getattr(replay, "graph_module", None)
    if gm is not None and any(t.device.type == "meta" for t in (*gm.parameters(), *gm.buffers())):
        raise RuntimeError("the replay graph was captured on a meta-built model; capture the real model to time it")
    # Every module's own flag (a model may keep some submodules in eval), the GraphModule's too.
    flags = [(m, m.training) for m in (*model.modules(), *(gm.modules() if gm is not None else ()))]
    try:
        with _clear_oom(dev, f"timing {graph.graph.get('target', 'the model')} with inputs {_shapes(inputs)}"):
            model.to(dev)
            if gm is not None:
                gm.to(dev)  # moves attributes the GraphModule holds itself (shared ones are moved already)
            for m, _ in flags:  # eval mode; set directly: an exported GraphModule refuses .eval()
                m.training = False
            args = _to_device(inputs, dev, None)
            kw = dict(zip(kwargs or {}, _to_device(tuple((kwargs or {}).values()), dev, None)))
            dtype = _dtype_of(model, (*args, *kw.values()))
            with torch.no_grad():
                if gm is not None:
                    report = _measure_replay(graph, model, gm, args, dev, settings, kw, budget)
                else:
                    report = _measure_hooks(graph, model, args, dev, settings, kw, budget)
            p, cached = roofline.peaks(dev, dtype)
    finally:
        if gm is not None:
            gm.to(origin)
        model.to(origin)
        for m, training in flags:
            m.training = training
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    report.peaks = p
    if dev.type == "cpu":
        report.method += "; " + allocator.keep_warm()
    report.notes += _noise_notes(report, dev, load_average(), os.cpu_count() or 1)
    if not cached:
        report.notes.append(f"roofline peaks measured now and cached ({roofline.cache_dir() / roofline.CACHE_FILE})")
    for _name, d in ops(graph):
        if d.get("latency_ms") is not None and d.get("known", True):
            d["roofline"] = roofline.place(int(d.get("flops", 0)), int(d.get("mac_bytes", 0)), d["latency_ms"], p)
    report.notes += _stale_peak_note(graph, p, cached)
    report.pricer = Pricer(
        dev,
        dtype,
        report.end_to_end_ms,
        settings.warmup,
        settings.repeat,
        model,
        args,
        kw,
        budget,
        end_to_end_spread_ms=tuple(report.end_to_end_spread_ms or ()),
    )
    return report


def timed_replay(
    gm: fx.GraphModule, timer: Timer, timed: set[str], ranges: bool = False, labels: dict[str, str] | None = None
) -> fx.GraphModule:
    """A GraphModule that runs `gm`'s graph (on the same parameters) with a timer region, and for a
    trace a profiler range, named after each timed node opened right before that node's call and
    closed right after it (the range takes the op's display name from `labels`, as every report
    does). It is generated code, like the model's own forward: replaying costs no interpreter work
    per op, and the region holds the op's call only."""
    labels = labels or {}

    def open_region(name: str):
        rng = torch.profiler.record_function(labels.get(name, name)) if ranges else None
        if rng is not None:  # the profiler range opens outside the timed region and closes after it
            rng.__enter__()
        region = timer.region(name)
        region.__enter__()
        return region, rng

    def close_region(opened, _result) -> None:  # takes the op's result: it runs after the op
        region, rng = opened
        region.__exit__(None, None, None)
        if rng is not None:
            rng.__exit__(None, None, None)

    graph = copy.deepcopy(gm.graph)  # keeps the graph's codegen (export's pytree calling convention)
    for node in list(graph.nodes):
        if node.name in timed:
            with graph.inserting_before(node):
                opened = graph.call_function(open_region, (node.name,))
            with graph.inserting_after(node):
                graph.call_function(close_region, (opened, node))
    return fx.GraphModule(gm, graph)


def _timed(runs, timer: Timer, settings, budget: Budget, label: str, target: str = ""):
    """The per-op (or per-module) run and the model's forward, interleaved, within the budget's
    timing share; the number of timed passes, cut short by the budget or not. How long that takes
    is said first, from a timed warm-up round of the runs (`forecast`; none with --warmup 0)."""
    warmup = math.ceil(settings.warmup / 2)
    rounds = min(2, warmup)  # the first is cold (one-time set-up): the second, where there is one, is timed
    for _ in range(rounds):  # warm-up rounds, the last timed: what a pass costs on this machine now
        start = time.monotonic()
        for run in runs:
            run()
        timer.collect()
    if rounds:  # --warmup 0: every pass is timed as asked, none is spent on the forecast
        forecast(time.monotonic() - start, warmup - rounds, settings.repeat, budget, target)
    per_op, e2e = sample(
        runs, timer, max(0, warmup - rounds), settings.repeat, label=label, deadline=budget.deadline(TIMING_SHARE)
    )
    if e2e.per_pass.n < settings.repeat:
        budget.cut(f"per-op timing stopped after {e2e.per_pass.n} of --repeat {settings.repeat} passes")
    return per_op, e2e


def forecast(round_s: float, warmup: int, repeat: int, budget: Budget, target: str = "") -> float:
    """Say how long timing each op and the model will take, from one round of them (`round_s`, a
    first call: an overestimate): the warm-up and --repeat rounds. Where that passes the budget's
    timing share, say where it will stop and what gives a figure sooner: the static estimate
    (--device-spec, no timing) or fewer --repeat; the same goes into the report's notes."""
    expected = round_s * (max(0, warmup) + repeat)
    what = f"archlint: --latency{' on ' + target if target else ''}: "
    progress.say(
        what + f"{repeat} timed passes of its ops and of the whole model, about {duration(expected)} "
        f"(an estimate from a first timed pass of {round_s * 1e3:.0f} ms)"
    )
    if budget.seconds is None or expected <= TIMING_SHARE * budget.seconds:
        return expected
    allowed = TIMING_SHARE * budget.seconds
    fits = math.floor(allowed / round_s) - max(0, warmup)
    stops = min(repeat, max(MIN_PASSES, fits))  # a deadline never cuts a sample below MIN_PASSES
    instead = (
        f"--repeat {fits} to fit the budget"
        if fits >= MIN_PASSES
        else f"fewer --warmup/--repeat cannot fit it ({MIN_PASSES} passes at least)"
    )
    advice = (
        f"at about {duration(expected)} it would pass the {duration(allowed)} that --latency-budget "
        f"{budget.seconds:g} s gives timing, so it stops after about {stops} of --repeat {repeat} passes "
        f"(each {round_s * 1e3:.0f} ms on this machine now, about {duration(round_s * (max(0, warmup) + stops))}); "
        f"for a figure without timing, the static estimate: --device-spec NAME (no --latency); or {instead}; "
        "or a larger --latency-budget"
    )
    progress.say("archlint: " + advice)
    budget.said(f"--latency: {advice}")
    return expected


def _measure_replay(graph, model, gm, args, dev, settings, kwargs: dict, budget: Budget) -> LatencyReport:
    fx_names = {n.name for n in gm.graph.nodes if n.op in _CALLS}
    names = [name for name, _ in ops(graph)]
    timed = {n for n in names if n in fx_names}
    timer = make_timer(dev)
    replay = timed_replay(gm, timer, timed)

    def replay_pass() -> None:
        replay(*args, **kwargs)

    def model_pass() -> None:
        with timer.region("model"):
            model(*args, **kwargs)

    # Warm-up passes alternate between the two runs: the same modules, shapes and kernels warm up.
    try:
        per_op, e2e = _timed(
            [replay_pass, model_pass],
            timer,
            settings,
            budget,
            "timing each op and the model end to end",
            str(graph.graph.get("target") or ""),
        )
    finally:
        let_go(replay)  # it shares the model's modules
    for name in timed:
        _set_latency(graph.nodes[name], per_op.regions[name])
    clock = _clock(dev)
    notes = []
    missing = len(names) - len(timed)
    if missing:
        notes.append(f"{missing} op(s) of the graph have no node in the replayed fx graph and were not timed")
    report = LatencyReport(
        end_to_end_ms=e2e.per_pass.median,
        end_to_end_spread_ms=e2e.per_pass.spread,
        sum_of_ops_ms=sum(per_op.regions[n].median for n in timed),
        per_pass_sum_of_ops_ms=per_op.per_pass.median,
        method=f"per op: {graph.graph.get('strategy', 'fx')} graph replayed node by node as generated code, "
        f"{clock} around each op; end to end: the original forward, {clock}; median of {e2e.per_pass.n} "
        f"passes after {settings.warmup} warm-up passes, per-op and end-to-end passes interleaved; "
        "eval mode, torch.no_grad()",
        peaks=None,
        notes=notes,
        pricer=None,  # type: ignore[arg-type]  # set by measure() once the peaks are known
    )
    if settings.trace_dir is not None:
        traced = timed_replay(gm, make_timer(dev), timed, ranges=True, labels=display_names(graph))
        try:
            report.trace_file = _write_trace(lambda: traced(*args, **kwargs), dev, settings.trace_dir, graph)
        finally:
            let_go(traced)
        report.notes.append(f"trace of one per-op pass written to {report.trace_file}")
    return report


def _measure_hooks(graph, model, args, dev, settings, kwargs: dict, budget: Budget) -> LatencyReport:
    """The dispatch fallback: a region around each leaf module's forward, via hooks."""
    timer = make_timer(dev)
    leaves = {path: m for path, m in model.named_modules() if path and not any(True for _ in m.children())}
    state = {"on": False, "ranges": False}
    open_regions: dict[str, list] = {}

    def pre(path):
        def hook(_module, _inputs):
            if state["on"]:  # the profiler range opens outside the timed region, closes after it
                rng = torch.profiler.record_function(path) if state["ranges"] else None
                if rng is not None:
                    rng.__enter__()
                region = timer.region(path)
                region.__enter__()
                open_regions.setdefault(path, []).append((region, rng))

        return hook

    def post(path):
        def hook(_module, _inputs, _output):
            if state["on"] and open_regions.get(path):
                region, rng = open_regions[path].pop()
                region.__exit__(None, None, None)
                if rng is not None:
                    rng.__exit__(None, None, None)

        return hook

    handles = []
    for path, m in leaves.items():
        handles += [m.register_forward_pre_hook(pre(path)), m.register_forward_hook(post(path))]
    try:

        def hooked_pass() -> None:
            state["on"] = True
            try:
                model(*args, **kwargs)
            finally:
                state["on"] = False

        def model_pass() -> None:
            with timer.region("model"):
                model(*args, **kwargs)

        per_mod, e2e = _timed(
            [hooked_pass, model_pass],
            timer,
            settings,
            budget,
            "timing each module and the model end to end",
            str(graph.graph.get("target") or ""),
        )
        mod_stats = per_mod.regions
        trace_file = None
        if settings.trace_dir is not None:
            state["ranges"] = True
            trace_file = _write_trace(hooked_pass, dev, settings.trace_dir, graph)
    finally:
        for h in handles:
            h.remove()
    by_module: dict[str, list[str]] = {}
    for name, d in ops(graph):
        by_module.setdefault(d.get("module") or "", []).append(name)
    single = 0
    for path, stats in mod_stats.items():
        owned = by_module.get(path, [])
        if len(owned) == 1:  # the module's time is that op's time; otherwise it cannot be split
            _set_latency(graph.nodes[owned[0]], stats)
            single += 1
    clock = _clock(dev)
    notes = [
        f"timed per module with forward hooks: the {graph.graph.get('strategy', 'captured')} graph cannot be "
        "replayed op by op; "
        f"per-op latency is given for the {single} op(s) that are alone in their module, module "
        f"latencies for {len(mod_stats)} leaf module(s)"
    ]
    report = LatencyReport(
        end_to_end_ms=e2e.per_pass.median,
        end_to_end_spread_ms=e2e.per_pass.spread,
        sum_of_ops_ms=sum(s.median for s in mod_stats.values()),
        per_pass_sum_of_ops_ms=per_mod.per_pass.median,
        method=f"per module: forward hooks around each leaf module, {clock}; end to end: the original forward; "
        f"median of {e2e.per_pass.n} passes after {settings.warmup} warm-up passes, interleaved; "
        "eval mode, torch.no_grad()",
        peaks=None,
        notes=notes,
        pricer=None,  # type: ignore[arg-type]
        module_latency_ms={path: s.median for path, s in mod_stats.items()},
        trace_file=trace_file,
    )
    if trace_file is not None:
        report.notes.append(f"trace of one per-module pass written to {trace_file} (ranges named by module path)")
    return report


def _noise_notes(report: LatencyReport, dev: torch.device, load: float | None, cores: int) -> list[str]:
    """Say so when the figures are likely disturbed: a busy CPU, end-to-end passes that spread
    widely (the machine's speed changed while timing: a shared or throttled host does that even
    when idle), or per-op medians whose sum falls well short of the passes they came from (rare,
    large stalls: a median drops them per op, but almost every whole pass contains one)."""
    notes = []
    if dev.type == "cpu" and load is not None and load > cores:
        notes.append(
            f"the machine was busy while timing (load average {load:.1f} on {cores} cores): latencies are noisy"
        )
    q1, q3 = report.end_to_end_spread_ms
    width = (q3 - q1) / report.end_to_end_ms if report.end_to_end_ms > 0 else 0.0
    if width > NOISY_SPREAD:
        notes.append(
            f"the end-to-end passes spread over {q1:.3f}–{q3:.3f} ms (interquartile range, {width:.0%} of the "
            "median): the device's speed varied while timing, so another run may give another figure; "
            "more --repeat spans more of that variation"
        )
    per_pass, summed = report.per_pass_sum_of_ops_ms, report.sum_of_ops_ms
    if per_pass > 0 and abs(summed / per_pass - 1) > 0.1:
        notes.append(
            f"the per-op medians sum to {summed:.3f} ms but the ops of one pass took {per_pass:.3f} ms "
            "(median over passes): the timings vary from pass to pass; compare end to end with the latter"
        )
    return notes


def _stale_peak_note(graph, peaks: dict, cached: bool) -> list[str]:
    """A compute-bound op cannot beat the peak matmul throughput by much; if ops do, the peaks
    are low (measured on a busy machine, say) and every efficiency is inflated. (Memory-bound ops
    may legitimately beat the copy bandwidth: their data can stay in cache.)"""
    beaten = [
        d["roofline"]["efficiency"]
        for _, d in ops(graph)
        if d.get("roofline") and d["roofline"]["bound"] == "compute" and d["roofline"]["efficiency"] > BEATEN_PEAK
    ]
    if not beaten:
        return []
    when = f"cached at {peaks.get('measured_at', '?')}" if cached else "measured just now"
    return [
        f"{len(beaten)} compute-bound op(s) ran faster than the roofline's peak allows (up to {max(beaten):.0%}): "
        f"the peaks ({when}) are low, so efficiencies are overstated; run `archlint calibrate` on a quiet machine"
    ]


def _set_latency(node: dict, stats: Stats) -> None:
    node["latency_ms"] = stats.median
    node["latency_spread_ms"] = stats.spread


def _clock(dev: torch.device) -> str:
    if dev.type == "cuda":
        return "CUDA events in stream order, one synchronize per pass"
    return "time.perf_counter_ns"


def _write_trace(run_once: Callable[[], object], dev: torch.device, trace_dir: Path, graph) -> Path:
    from archlint.model.timing.profiler_trace import write_trace

    return write_trace(run_once, dev, Path(trace_dir), str(graph.graph.get("target", "model")))


_OOM_MARKERS = ("out of memory", "can't allocate memory", "cannot allocate memory")


@contextmanager
def _clear_oom(dev: torch.device, doing: str):
    """Out-of-memory while timing → a UsageError that suggests a smaller batch."""
    try:
        yield
    except (torch.OutOfMemoryError, MemoryError, RuntimeError) as exc:
        text = str(exc).lower()
        if not isinstance(exc, (torch.OutOfMemoryError, MemoryError)) and not any(m in text for m in _OOM_MARKERS):
            raise
        where = "GPU" if dev.type == "cuda" else "CPU"
        raise UsageError(
            f"ran out of {where} memory on {dev} while {doing}; try a smaller batch "
            "(the first number of --input-shape) or a smaller --dtype"
        ) from None


def _device_of(model: torch.nn.Module) -> torch.device:
    tensors = [*model.parameters(), *model.buffers()]
    if any(t.device.type == "meta" for t in tensors):
        raise UsageError(
            "latency needs a model built with real weights, got one on the meta device; build it "
            "with real weights or leave latency off"
        )
    return tensors[0].device if tensors else torch.device("cpu")


def _dtype_of(model: torch.nn.Module, args: tuple) -> torch.dtype:
    for t in (*model.parameters(), *args):
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            return t.dtype
    return torch.float32


def _to_device(inputs, dev: torch.device, dtype: torch.dtype | None) -> tuple:
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)

    def move(t):
        if not isinstance(t, torch.Tensor):
            return t
        if dtype is not None and t.is_floating_point():
            return t.to(dev, dtype)
        return t.to(dev)

    return tuple(move(t) for t in inputs)


def _shapes(inputs) -> str:
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    return ", ".join("x".join(map(str, t.shape)) for t in inputs if isinstance(t, torch.Tensor)) or "()"
