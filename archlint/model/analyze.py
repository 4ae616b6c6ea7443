"""Orchestration: load → capture → cost (costed.py) → (measure) → checks, for one model spec."""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections import Counter

import networkx as nx
from torch import nn

from archlint import collector, progress
from archlint.config import ModelSpec, Settings
from archlint.diagnostics import Diagnostic
from archlint.errors import UsageError
from archlint.model import opgraph
from archlint.model.capture import CaptureFailed, capture
from archlint.model.costed import capture_and_cost, capture_graph, cost, fresh, traced_mode
from archlint.model.loading.created import recording
from archlint.model.loading.hf import is_hf_target
from archlint.model.loading.load import load
from archlint.model.loading.loaded import Loaded, dtype_of
from archlint.model.runtime import patches
from archlint.model.runtime.sandbox import preserved, user_code
from archlint.result import Estimate, ModelResult


def warning_notes(caught: list[warnings.WarningMessage]) -> list[str]:
    """One note per distinct warning raised while loading, capturing and timing: its first line."""
    counts = Counter(f"{w.category.__name__}: {(str(w.message).strip().splitlines() or [''])[0][:200]}" for w in caught)
    return [f"warning during analysis: {text}" + (f" (×{n})" if n > 1 else "") for text, n in counts.items()]


def analyze(spec: ModelSpec, settings: Settings) -> tuple[ModelResult, list[Diagnostic]]:
    with warnings.catch_warnings(record=True) as caught:  # torch's warnings become notes, not noise
        warnings.simplefilter("default")
        with user_code(spec.target, settings.timeout) as guard:
            # where each module is created in the user's code: findings point there (an hf: model
            # has none: archlint builds it from a config, so its findings point at the library class)
            with recording() if not is_hf_target(spec.target) else contextlib.nullcontext():
                loaded = load(spec, settings)
            guard.doing = "running its forward (capture)"
            graph, result = capture_and_cost(loaded, spec.target, spec.device, settings)
        patches.mark()  # what torch looks like now is the model's doing (imported, built, run once)
        report = None
        if settings.latency:
            from archlint.model.timing.measure import measure

            with user_code(spec.target, settings.timeout) as guard, preserved(loaded.model):
                guard.doing = "running its forward (latency)"
                inputs = fresh(loaded.real_inputs())  # makes the real keyword inputs too
                report = measure(graph, loaded.model, inputs, spec.device, settings, kwargs=fresh(loaded.kwargs))
            result.totals.latency_ms = report.end_to_end_ms
            result.totals.latency_ms_sum_of_ops = report.sum_of_ops_ms
            result.timing = report.method
            result.roofline = report.peaks
            result.notes.extend(report.notes)
        spec_name = spec.device_spec or settings.device_spec
        if spec_name:
            from archlint.devices import resolve
            from archlint.model.estimating.estimate import estimate_graph

            device_spec = resolve(spec_name, settings.root)
            result.estimate = Estimate.from_dict(estimate_graph(graph, device_spec))
            # a float32 model on a GPU spec: the same forward under torch.autocast beside it (what
            # AMP throughput tables measure; AL403's price, code/checks/autocast.py)
            from archlint.model.speedups.precision import autocast_estimate

            autocast = autocast_estimate(graph, device_spec)
            if autocast:
                result.estimate.autocast = autocast
        if settings.train:  # --train: backward, loss, optimizer and memory of the step (archlint.model.train)
            from archlint.model.stepped import analyze_step

            step_findings = analyze_step(graph, loaded, result, settings, device_spec if spec_name else None)
            if spec_name and result.estimate is not None and result.estimate.train:  # under autocast: AL403's price
                from archlint.model.speedups.precision import autocast_step_estimate

                step_autocast = autocast_step_estimate(graph, device_spec, result.estimate.train)
                if step_autocast:
                    result.estimate.train["autocast"] = step_autocast
            from archlint.model.checks.batch_does_not_fit import price_ways_to_fit

            step_findings = price_ways_to_fit(step_findings, graph, result.estimate, device_spec if spec_name else None)
        from archlint.model.checks import CheckContext, run_checks

        ctx = CheckContext(
            target=spec.target,
            settings=settings,
            pricer=report.pricer if report else None,
            estimate=result.estimate,
            train=result.totals.train,
            device_spec=device_spec if spec_name else None,
        )
        # Pricing a finding runs the model's forward (a fix timed end to end): guarded as the rest.
        with user_code(spec.target, settings.timeout if report else None) as guard:
            guard.doing = "running its forward (pricing findings)"
            with progress.task("checking rules and pricing findings" if report else "checking rules"):
                diagnostics = run_checks(graph, ctx)
                if settings.train:
                    diagnostics += step_findings  # the memory model's ways to fit (archlint.model.train)
        result.notes.extend(ctx.notes)
        result.notes.extend(_recheck_on_eager(loaded, spec.target, settings, graph, diagnostics))
        if settings.what_if is not None:  # after the pricing: torch.compile slows whatever is timed after it
            from archlint.model.speedups.compile_record import graph_key
            from archlint.model.speedups.run import what_ifs

            with user_code(spec.target, settings.timeout) as guard, preserved(loaded.model):
                guard.doing = "running its forward (what-if)"
                inputs = fresh(loaded.real_inputs())  # makes the real keyword inputs too
                result.what_if, notes = what_ifs(
                    loaded.model,
                    inputs,
                    spec.device,
                    settings,
                    settings.what_if,
                    kwargs=fresh(loaded.kwargs),
                    deadline=report.pricer.budget.deadline() if report else None,
                    base_ms=result.totals.latency_ms,
                    ops=sum(1 for _ in opgraph.ops(graph)),
                    target=spec.target,
                    graph_key=graph_key(graph, spec.device) if "compile" in settings.what_if else "",
                )
            result.notes.extend(notes)
        if report:
            result.notes.extend(report.pricer.budget.notes())
    result.notes.extend(warning_notes(caught))
    with collector.paused():  # a row per op: thousands of dicts, no cycles (the collector's passes grew with the model)
        result.layers = opgraph.to_layers(graph)
    if "transformers" in sys.modules:  # library code, however it was built: say so, and name the switch
        from archlint.model.hf_switches import annotate

        annotate(diagnostics, loaded.model, result.module_types, graph, hf_target=is_hf_target(spec.target))
    if result.what_if:
        from archlint.model.checks import judge_repriced
        from archlint.model.links import link

        link(diagnostics, result.what_if, spec.device)
        judge_repriced(graph, diagnostics, ctx)  # a measured fix decides the verdict as any price does
    _let_graph_go(graph)
    return result, diagnostics


def _let_graph_go(graph: nx.DiGraph) -> None:
    """networkx caches its views (graph.nodes, .degree) on the graph: a reference cycle, which kept
    what the graph holds (the replay's model, each op's real parameters) until the collector's
    next full pass after the user had let the model go; emptied, the cycle holds nothing."""
    replay = graph.graph.get("replay")
    if replay is not None:
        replay.release()
    graph.clear()


def _recheck_on_eager(
    loaded: Loaded, target: str, settings: Settings, graph: nx.DiGraph, diagnostics: list[Diagnostic]
) -> list[str]:
    """Warnings of rules that declare EAGER_RECHECK, found on a traced capture, checked again on
    the eager forward (archlint.model.eager); notes say what was done."""
    from archlint.model import eager
    from archlint.model.checks import CheckContext, check_modules, run_checks

    strategy = graph.graph["strategy"]
    suspects = eager.suspects(diagnostics, eager.recheck_codes(check_modules()), strategy)
    if not suspects:
        return []
    codes = sorted({d.code for d in suspects})
    again = eager.eager_settings(settings, set(codes))
    try:
        with user_code(target) as guard, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            guard.doing = "running its forward (eager re-check)"
            eager_graph, how = _eager_capture(loaded, target, again)
    except UsageError as exc:
        return [
            f"{', '.join(codes)} found under {strategy} could not be checked on the eager forward ({str(exc)[:150]}); "
            "they stand as captured"
        ]
    eager_graph.graph["mode"] = settings.mode
    cost(eager_graph, [])
    eager.recheck(suspects, run_checks(eager_graph, CheckContext(target, again)), strategy)
    _let_graph_go(eager_graph)  # as the analysis's own graph: the model goes with its last reference
    dropped = sum(1 for d in suspects if d.evidence.get("eager") == "absent")
    return [
        f"{len(suspects)} {', '.join(codes)} warning(s) found under {strategy} re-checked on the eager forward "
        f"(dispatch capture, {how}): {dropped} not there (info), {len(suspects) - dropped} confirmed"
    ]


def _eager_capture(loaded: Loaded, target: str, settings: Settings) -> tuple[nx.DiGraph, str]:
    """The dispatch recording of the eager forward: on the meta build as it is when that runs (no
    real weights needed: a 7B model is not built again for this), else as capture_graph does."""
    if loaded.on_meta:
        try:
            with preserved(loaded.model), traced_mode(loaded.model, settings.mode), collector.paused():
                return capture(loaded.model, loaded.inputs, "dispatch", loaded.kwargs)[0], "on the meta build"
        except CaptureFailed as failure:  # a forward that needs real values: built with real weights
            how = f"with real weights: the meta recording failed ({str(failure)[:80]})"
    else:
        how = "with real weights"
    with preserved(loaded.model):
        return capture_graph(loaded, target, settings), how


def analyze_model(
    model: nn.Module,
    inputs: tuple,
    settings: Settings | None = None,
    target: str = "<model>",
    kwargs: dict | None = None,
) -> tuple[nx.DiGraph, ModelResult]:
    """Analyze a prebuilt model (no checks, no latency): for tests, benchmarks and library use."""
    from archlint.model.loading.inputs import bind_inputs

    args, rest = bind_inputs(model, tuple(inputs), dict(kwargs or {}), "inputs")
    loaded = Loaded(model, args, "given", dtype_of(model), kwargs=rest)
    graph, result = capture_and_cost(loaded, target, "cpu", settings or Settings())
    with collector.paused():
        result.layers = opgraph.to_layers(graph)
    return graph, result
