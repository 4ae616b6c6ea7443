"""Measure the what-ifs: each transformation applied to a copy of the model, called once (its
output compared with the baseline's on the same input; for torch.compile that call is the
compilation, timed apart), then all of them timed end to end in ONE interleaved sample with the
baseline (base, v1, v2, ..., base, v1, v2, ...) with archlint's timer, so every one sees the
same machine. Then the best applicable combination, timed as one against the baseline again.

The timed passes are bounded by a budget: the time of BUDGET × --repeat baseline passes
(MIN_BUDGET_S at least), shared by all runs (MIN_PASSES each at least), and a third of that for
the combination, so that --what-if adds about as much as --latency's own timing (which times
the per-op replay and the model, --repeat passes each), whatever the number of transformations.

torch.compile goes last, in a sample of its own (with the baseline again): compiling starts
worker threads and can change the process's thread settings, which made every other variant
timed after it slower (bf16 at 7.95 ms instead of 0.037 ms). The intra-op thread count is put
back after each compilation and at the end; no variant is timed after a compilation but the
compiled ones.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import os
import threading
import time
from collections import Counter
from dataclasses import replace

import torch
from torch import nn
from torch.utils._pytree import tree_leaves

from archlint import progress
from archlint.errors import UsageError
from archlint.model.runtime.sandbox import COMPILE_LOGGERS, quiet_torch_logs
from archlint.model.speedups import compile_record
from archlint.model.speedups.transforms import ORDER, NotApplicable, Variant, first_line, refused
from archlint.model.timing.roofline import resolve_device
from archlint.model.timing.timer import Stats, make_timer, sample
from archlint.result import WhatIf
from archlint.units import duration, significant
from archlint.whatif_names import NAMES, PRECISION

# The estimate said before the what-ifs start (expected_seconds) counts each what-if's making, its
# calls at the model's measured pass and compiling: a fixed part (importing inductor, its C++
# toolchain probe) and a part per op, measured with torch.compile on this 2-core CPU. Before it
# starts one what-if, the limit's check takes its first calls at their worst instead: EXTRA_CALLS
# passes, SLOWER × the model's (bf16 and int8 ran up to 3× slower on this CPU).
EXTRA_CALLS = 3
PREPARE_S = 0.5  # a transformation's own making (a deep copy, quantizing, an fx pass), times the load
SLACK_S = 10.0  # the what-ifs keep within twice their estimate, or this much more for a short one
SLOWER = 2.0
# A cold compile (inductor's on-disk cache empty) by a fixed part, a part per op and the machine's
# load per core to the power compile_record.LOAD_POWER (compiling runs its C++ builds in worker
# processes: it slows less than in proportion). Measured on this 2-core CPU, torch.compile's first call at
# 1×3×64×64: TinyNet (20 ops) 12.9 s at a load of 1.3 per core, 17.0 s at 3.5 (its what-ifs took
# 19 s, against 8 s from the old fit (3 s + 0.15 s an op, times the load), calibrated only at a load
# of 6); resnet18 (69 ops) 11.9-23.5 s at 1.0-1.1, 60 s at 5.5-6.5; mobilenet_v3_small (157 ops)
# 59.5 s at 2.6, 156 s at 6. This fit is within 1.6× of each.
COMPILE_FIXED_S = 8.0
COMPILE_PER_OP_S = 0.15
MIN_PASSES = 5  # a median of fewer passes is at the mercy of one stall on a shared machine
BUDGET = 1.5  # the single what-ifs' passes share the time of this many × --repeat baseline passes
MIN_BUDGET_S = 0.5  # small models get this much timing at least: their passes are too few otherwise
# A transformation joins the combination when its median speed-up is at least this and its
# per-pass speed-ups' lower quartile is above 1 (it beats the baseline beyond the noise).
MIN_GAIN = 1.03
COMPILING = ("compile",)  # what-ifs that compile: prepared and timed after all the others


def what_ifs(
    model: nn.Module,
    inputs,
    device: str,
    settings,
    names: list[str] | None = None,
    kwargs: dict | None = None,
    deadline: float | None = None,
    base_ms: float | None = None,
    ops: int = 0,
    target: str = "",
    graph_key: str = "",
) -> tuple[list[WhatIf], list[str]]:
    """The what-ifs for `model` on `device` (each requested name, in canonical order, then the
    combination), and notes on how they were timed. `model` is never changed: everything runs
    on a deep copy in eval mode. Before they start, how long they will take is estimated
    (`expected_seconds`, from `base_ms`, the model's measured time, else a first timed call, and
    `ops`, its size, or from its last compile here: `graph_key`, compile_record) and said on stderr
    (progress.say); they keep within twice that: past it, no more passes are timed and no what-if
    is started (each says so)."""
    dev = resolve_device(device)
    names = [n for n in NAMES if n in (names if names is not None else NAMES)]
    threads = torch.get_num_threads()
    warned: list[str] = []
    try:  # torch.compile's log lines (inductor, its C++ toolchain probe) become notes, not stderr
        with quiet_torch_logs(settings.debug, COMPILE_LOGGERS, warned), _quiet_notices(settings.debug):
            results, notes = _what_ifs(
                model, inputs, dev, settings, names, kwargs, deadline, threads, base_ms, ops, target, graph_key
            )
    finally:
        torch.set_num_threads(threads)
    counts = Counter(warned)
    notes += [f"torch.compile logged a warning: {text}" + (f" (×{n})" if n > 1 else "") for text, n in counts.items()]
    return results, notes


def machine_load() -> float:
    """The runnable processes per core over the last minute (os.getloadavg), at least 1: compiling
    is slower by about that on a shared machine (the model's passes, measured here, already are)."""
    try:
        return min(8.0, max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1)))
    except OSError:  # no load average on this platform
        return 1.0


def compile_seconds(ops: int, load: float = 1.0) -> float:
    return compile_record.at_load(COMPILE_FIXED_S + COMPILE_PER_OP_S * ops, 1.0, load)


def expected_seconds(
    base_s: float,
    names: list[str],
    repeat: int,
    warmup: bool,
    ops: int,
    load: float = 1.0,
    ruled_out: frozenset[str] = frozenset(),
    compile_s: float | None = None,
) -> float:
    """How long the what-ifs `names` take on a model whose pass takes `base_s` seconds and that has
    `ops` ops, counting what each will really do: the ones in `ruled_out` (their checks already
    say they do not apply) nothing; every other its making (PREPARE_S times the machine's `load`),
    its first call, and the warm-up and timed passes `_time` gives its group (every run, the
    baseline's included, taken at the model's own pass); compiling (COMPILE_FIXED_S +
    COMPILE_PER_OP_S per op, at the `load`: compile_record.at_load; or `compile_s` where it is known better: the model's
    last compile here, compile_record) and the compiled model's extra call; and the combination
    when two of them could combine. An estimate: said as one."""
    plain = [n for n in names if n not in COMPILING]
    share = (
        len(plain) / len(names) if names else 1.0
    )  # the budget is split over the requested names, as `_what_ifs` does
    total = base_s  # the first call of the baseline
    for group, budget in ((plain, BUDGET * share), ([n for n in names if n in COMPILING], BUDGET * (1 - share))):
        running = [n for n in group if n not in ruled_out]
        if not running:
            continue
        runs = 1 + len(running)  # the baseline is timed again with every group
        passes = _passes(budget, repeat, base_s, runs * base_s)
        total += (PREPARE_S * load + base_s) * len(running) + (passes + int(warmup)) * runs * base_s
        if any(n in COMPILING for n in running):
            compiling = compile_seconds(ops, load) if compile_s is None else compile_s
            total += compiling + base_s  # its first call compiles; it is called once more
    running = [n for n in names if n not in ruled_out]
    combinable = [n for n in running if n not in PRECISION] + [n for n in running if n in PRECISION][:1]
    if len(combinable) >= 2:  # the combination: made, called, timed on a third of the budget
        passes = _passes(BUDGET / 3, repeat, base_s, 2 * base_s)
        total += PREPARE_S * load + base_s + (passes + int(warmup)) * 2 * base_s
    return total


def _passes(budget: float, repeat: int, base_s: float, per_pass_s: float) -> int:
    """The interleaved passes `_time` gives runs that take `per_pass_s` together, on `budget`."""
    allowed = budget * max(repeat * base_s, MIN_BUDGET_S)
    return max(MIN_PASSES, min(repeat, math.floor(allowed / per_pass_s))) if per_pass_s > 0 else repeat


@contextlib.contextmanager
def _quiet_notices(debug: bool):
    """torch's notices about this machine's set-up that compiling prints (cpp_extension's "No CUDA
    runtime is found" on a CUDA build without a GPU): off for the block, unless --debug."""
    logger = logging.getLogger("torch.utils.cpp_extension")
    level = logger.level
    if not debug:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _what_ifs(
    model, inputs, dev, settings, names, kwargs, deadline, threads, base_ms=None, ops=0, target="", graph_key=""
) -> tuple[list[WhatIf], list[str]]:
    start = time.monotonic()
    base = Variant(
        _eval_copy(model, dev),
        _to(inputs, dev),
        dev,
        kwargs=dict(zip(kwargs or {}, _to(tuple((kwargs or {}).values()), dev))),
    )
    reference, first_s = _first_call(base)
    base = replace(base, first_s=first_s)
    base_s = base_ms / 1e3 if base_ms else first_s
    load = machine_load()
    ruled_out = frozenset(n for n in names if refused(n, base) is not None)  # checks that cost nothing
    compiling = any(n in COMPILING for n in names if n not in ruled_out)
    record = compile_record.recorded(graph_key) if compiling and graph_key else None
    compile_s, compile_basis = compile_record.expected(record, compile_seconds(ops, load), load)
    expected = expected_seconds(
        base_s, names, settings.repeat, bool(settings.warmup), ops, load, ruled_out, compile_s=compile_s
    )
    basis = (
        f"from the model's {'measured time' if base_ms else 'first call'} ({significant(base_s * 1e3, fixed=True)} ms a pass)"
        + (
            (
                f", compiling from {compile_basis}"
                if compile_basis
                else f" and its {ops} ops (compiling, at a load of {load:.1f} per core)"
            )
            if compiling
            else ""
        )
        + f" and the passes each what-if gets (--repeat {settings.repeat})"
        + (f", {len(ruled_out)} of them not applicable to this model" if ruled_out else "")
    )
    progress.say(
        f"archlint: --what-if{' on ' + target if target else ''}: {len(names)} transformation"
        f"{'s' if len(names) != 1 else ''}, about {duration(expected)} (an estimate {basis}; at most twice that, or {SLACK_S:g} s more)"
    )
    limit = start + max(2 * expected, expected + SLACK_S)  # the what-ifs keep within twice their estimate
    deadline = limit if deadline is None else min(deadline, limit)
    results: dict[str, WhatIf] = {}
    variants: dict[str, Variant] = {}
    notes: list[str] = []
    plain = [n for n in names if n not in COMPILING]
    share = len(plain) / len(names) if names else 1.0
    skipped = []
    for group, budget in ((plain, BUDGET * share), ([n for n in names if n in COMPILING], BUDGET * (1 - share))):
        timed: dict[str, Variant] = {}
        before = set(threading.enumerate())
        for name in group:
            cost = compile_s if name in COMPILING else EXTRA_CALLS * SLOWER * base_s + PREPARE_S * load
            if time.monotonic() + cost > limit:  # it would end past twice the estimate: not started
                results[name] = WhatIf(
                    name,
                    False,
                    f"not run: it would pass twice the what-ifs' estimated "
                    f"{duration(expected)} (--what-if {name} alone runs it)",
                )
                skipped.append(name)
                continue
            recording = name in COMPILING and bool(graph_key)  # for the next run's estimate
            cached = compile_record.files_in(compile_record.inductor_folder()) if recording else set()
            variant, outcome = _prepare(base, (name,), reference)
            torch.set_num_threads(threads)  # a compilation may have changed it
            if recording and variant is not None:
                added = compile_record.files_in(compile_record.inductor_folder()) - cached
                unrecorded = compile_record.remember(graph_key, variant.first_s, added, load)
                notes += [unrecorded] if unrecorded else []
            results[name] = outcome
            if variant is not None:
                timed[name] = variant
        notes += _time(base, timed, results, settings, budget=budget, deadline=deadline)
        variants.update(timed)
        if any(n in COMPILING for n in group):  # torch.compile's workers: archlint's doing, not the model's
            progress.own_threads(t for t in threading.enumerate() if t not in before)
    combo = _combination(results)
    if combo and time.monotonic() < limit:
        label = "combined: " + " + ".join(combo)
        variant, outcome = _prepare(base, combo, reference, label)
        torch.set_num_threads(threads)
        if variant is not None:  # timed the same way, on half the budget
            _time(base, {label: variant}, {label: outcome}, settings, budget=BUDGET / 3, deadline=deadline)
        results[label] = outcome
    elif combo:
        skipped.append("the combination")
    took = time.monotonic() - start
    notes.append(
        f"what-ifs: took {duration(took)} against {duration(expected)} estimated ({basis})"
        + (f"; not run, to keep within twice the estimate: {', '.join(skipped)}" if skipped else "")
    )
    if not combo and len([w for w in results.values() if w.applicable]) >= 2:
        results["combined"] = WhatIf(
            "combined",
            False,
            "fewer than two transformations that can go together beat the baseline beyond the "
            f"noise (at most one of {', '.join(PRECISION)}): nothing to combine",
        )
    if any(v.compiled for v in variants.values()):
        from torch import _dynamo

        _dynamo.reset()  # drop the compiled copies' caches
    return list(results.values()), notes


def _prepare(
    base: Variant, chain: tuple[str, ...], reference, label: str | None = None
) -> tuple[Variant | None, WhatIf]:
    """Apply `chain` to the baseline and call the result once; NotApplicable, or any failure
    of that first call, gives a "not applicable" result with its first line."""
    label = label or chain[0]
    try:
        variant = base
        for name in chain:
            variant = ORDER[name](variant)
        output, first_s = _first_call(variant)
        variant = replace(variant, first_s=first_s)
    except NotApplicable as why:
        return None, WhatIf(label, False, str(why))
    except UsageError:
        raise
    except Exception as exc:  # the transformation or its first run fails on this model: say so, go on
        return None, WhatIf(label, False, f"fails on this model: {first_line(exc)}")
    abs_diff, rel_diff = output_diff(reference, output)
    return variant, WhatIf(
        label,
        True,
        variant.detail,
        max_abs_diff=abs_diff,
        max_rel_diff=rel_diff,
        compile_s=round(first_s, 3) if variant.compiled else None,
    )


def _time(
    base: Variant,
    variants: dict[str, Variant],
    results: dict[str, WhatIf],
    settings,
    budget: float = BUDGET,
    deadline: float | None = None,
) -> list[str]:
    """Time the baseline and every variant interleaved in one sample; fill the results."""
    if not variants:
        return []
    timer = make_timer(base.device)
    runs = [base, *variants.values()]

    def timed(index: int, run: Variant):
        def call() -> None:
            with timer.region(str(index)):
                run()

        return call

    calls = [timed(i, v) for i, v in enumerate(runs)]
    # What a pass of each costs: its first call (an overestimate: one-time set-up included), but a
    # compiled one's first call is its compilation, so it is called once more for that.
    costs = [_seconds(v) if v.compiled else v.first_s for v in runs]
    passes = _passes(budget, settings.repeat, costs[0], sum(costs))
    warmup = 1 if settings.warmup else 0  # after its first call (a compiled one: two calls)
    with torch.no_grad():
        sampled = sample(
            calls,
            timer,
            warmup,
            passes,
            label=f"what-if: timing {', '.join(variants)} against the model",
            deadline=deadline,
        )
    baseline = sampled[0]
    for (name, _), s in zip(variants.items(), sampled[1:]):
        ratios = [b / t for b, t in zip(baseline.passes, s.passes) if t > 0]
        w = results[name]
        w.baseline_ms, w.transformed_ms = baseline.per_pass.median, s.per_pass.median
        # The median of the paired per-pass ratios: a stall that hits one pass moves one ratio,
        # where it can move either median of the two separate series.
        ratio = Stats.of(ratios) if ratios else None
        w.speedup, w.spread = (ratio.median, ratio.spread) if ratio else (None, None)
        w.passes = len(s.passes)
    cut = f" (--latency-budget reached after {len(baseline.passes)})" if len(baseline.passes) < passes else ""
    return [
        f"what-ifs timed end to end against a copy of the model: {passes} interleaved passes each{cut} after "
        f"{warmup + 1} warm-up call{'s' if warmup else ''} (the passes of all {len(runs)} runs share the time "
        f"of {budget:g} × --repeat {settings.repeat} baseline passes or {budget * MIN_BUDGET_S:g} s, whichever "
        f"is longer, {MIN_PASSES} passes at least; more --repeat, more passes); eval mode, torch.no_grad() "
        "unless inference-mode"
    ]


def _combination(results: dict[str, WhatIf]) -> tuple[str, ...]:
    """The transformations that beat the baseline beyond noise, the fastest of the precision
    ones only (autocast and int8 are alternatives), in canonical order; () unless ≥ 2."""
    winners = [
        n
        for n, w in results.items()
        if w.applicable and w.speedup and w.speedup >= MIN_GAIN and w.spread and w.spread[0] > 1.0
    ]
    precision = [n for n in winners if n in PRECISION]
    if len(precision) > 1:
        best = max(precision, key=lambda n: results[n].speedup or 0.0)  # winners: a speedup, never None
        winners = [n for n in winners if n not in PRECISION or n == best]
    return tuple(n for n in NAMES if n in winners) if len(winners) >= 2 else ()


def output_diff(reference, output) -> tuple[float | None, float | None]:
    """Largest |a − b| over the floating-point outputs, and that over the largest |a| (a
    relative difference that stays meaningful where single outputs are near zero). None when the
    outputs do not pair up tensor for tensor."""
    a = [t for t in tree_leaves(reference) if isinstance(t, torch.Tensor) and t.is_floating_point()]
    b = [t for t in tree_leaves(output) if isinstance(t, torch.Tensor) and t.is_floating_point()]
    if not a or len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return None, None
    a, b = [x for x in a if x.numel()], [y for y in b if y.numel()]
    if not a:  # only empty outputs (a zero-size input): nothing differs
        return 0.0, 0.0
    diff = max(float((x.double() - y.double()).abs().max()) for x, y in zip(a, b))
    scale = max(float(x.double().abs().max()) for x in a)
    return diff, (diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf))


def _first_call(variant: Variant):
    start = time.perf_counter()
    output = variant()
    _sync(variant.device)
    return output, time.perf_counter() - start


def _seconds(variant: Variant) -> float:
    start = time.perf_counter()
    variant()
    _sync(variant.device)
    return time.perf_counter() - start


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _eval_copy(model: nn.Module, dev: torch.device) -> nn.Module:
    copied = copy.deepcopy(model).to(dev)
    for m in copied.modules():  # set directly: an exported GraphModule refuses .eval()
        m.training = False
    return copied


def _to(inputs, dev: torch.device) -> tuple:
    inputs = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
    return tuple(t.to(dev) if isinstance(t, torch.Tensor) else t for t in inputs)
