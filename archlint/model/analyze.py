"""Orchestration: load → capture → cost → (measure) → checks, for one model spec."""

from __future__ import annotations

import contextlib
import gc
import warnings
from collections import Counter

import networkx as nx
import torch
from torch import nn

from archlint import progress
from archlint.config import ModelSpec, Settings
from archlint.diagnostics import Diagnostic
from archlint.errors import UsageError
from archlint.model import opgraph
from archlint.model.capture import STRATEGIES, CaptureFailed, capture
from archlint.model.cost import cost_graph
from archlint.model.created import recording
from archlint.model.hf import is_hf_target
from archlint.model.load import Loaded, load
from archlint.model.sandbox import preserved, quiet_export, quiet_torch_logs, user_code
from archlint.result import ModelResult


@contextlib.contextmanager
def traced_mode(model: nn.Module, mode: str):
    """Put the model in eval/train for the capture; give every module its own flag back after."""
    flags = [(m, m.training) for m in model.modules()]
    model.train(mode == "train")
    try:
        yield
    finally:
        for m, training in flags:
            m.training = training


@contextlib.contextmanager
def _no_gc():
    """Capture makes many small objects and no cycles worth collecting mid-way: the cyclic
    collector's passes cost ~30% of the time on a 1,000-layer model. Freed by refcount anyway."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def capture_graph(loaded: Loaded, target: str, settings: Settings) -> nx.DiGraph:
    """The first strategy that works (or the one forced by settings.strategy); notes say why."""
    order = [settings.strategy] if getattr(settings, "strategy", None) else list(STRATEGIES)
    failures: list[CaptureFailed] = []
    notes: list[str] = []
    for strategy in order:
        if strategy not in STRATEGIES:
            raise UsageError(f"unknown capture strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
        model = loaded.model
        if strategy == "dispatch" and loaded.on_meta:
            model = loaded.real_model()
            notes.append("built again with real weights: the dispatch recording runs one real forward pass")
        # fx runs on meta copies (any inputs do); export runs the real model on real inputs unless
        # it was built on meta; dispatch always runs one real forward: real inputs only then.
        inputs = loaded.inputs if strategy == "fx" or (strategy == "export" and loaded.on_meta) else loaded.real_inputs()
        try:
            quiet = quiet_export(settings.debug) if strategy == "export" else contextlib.nullcontext()
            with traced_mode(model, settings.mode), preserved(model), _no_gc(), quiet_torch_logs(settings.debug), quiet:
                graph, _ = capture(model, fresh(inputs), strategy, fresh(loaded.kwargs))
        except CaptureFailed as failure:
            failures.append(failure)
            continue
        if failures:  # the report says which capture was used; why the others failed is for --verbose
            tried = " and ".join(f.strategy for f in failures)
            notes.append(f"captured with {strategy}: {tried} could not capture this model (--verbose says why)")
        graph.graph["notes"] = notes + graph.graph.get("notes", [])
        graph.graph["details"] = [f"{f.strategy} capture failed: {' '.join(str(f).split())[:500]}" for f in failures]
        return graph
    last = failures[-1]
    lazy = [path or type(m).__name__ for path, m in loaded.model.named_modules()
            if isinstance(m, nn.modules.lazy.LazyModuleMixin) and m.has_uninitialized_params()]
    if lazy:
        raise UsageError(
            f"{target} has lazy modules not initialised yet ({', '.join(lazy[:3])}{' …' if len(lazy) > 3 else ''}), "
            "and no capture could initialise them: run one forward on a real batch before analyzing it, "
            "or name the class or a factory so archlint builds it"
        ) from last
    raise UsageError(
        f"the forward of {target} failed ({last.strategy} capture): {last}; check --input-shape/--dtype "
        "or the model's forward (rerun with --debug for the traceback)"
    ) from last


def fresh(value):
    """A copy of the inputs for one run: a forward that changes an input in place (`mask.mul_(2)`)
    changes neither the user's tensor nor what the next capture or measurement is given."""
    if isinstance(value, torch.Tensor):
        if value.device.type == "meta":
            return value
        copy = value.detach().clone()
        return copy.requires_grad_() if value.requires_grad else copy
    if isinstance(value, (tuple, list)) and type(value) in (tuple, list):
        return type(value)(fresh(v) for v in value)
    if type(value) is dict:
        return {k: fresh(v) for k, v in value.items()}
    return value


def cost(graph: nx.DiGraph, notes: list[str]) -> None:
    """Costs on every op; a note lists the ops without a formula (left out of the totals)."""
    unknown = cost_graph(graph)
    if unknown:
        ops = Counter(graph.nodes[n]["op"] for n in unknown)
        listed = ", ".join(f"{op} ×{c}" if c > 1 else op for op, c in ops.most_common(8))
        notes.append(f"{len(unknown)} ops have no cost formula and are left out of the totals: {listed}")


def _capture_and_cost(loaded: Loaded, target: str, device: str, settings: Settings) -> tuple[nx.DiGraph, ModelResult]:
    graph = capture_graph(loaded, target, settings)
    described = [
        {"name": n, "shape": list(d["out_shapes"][0]), "dtype": d["dtype"]}
        for n, d in graph.nodes(data=True) if d["kind"] == "input"
    ]
    inputs = [i["shape"] for i in described]
    notes = loaded.notes + graph.graph["notes"]
    dtype = str(loaded.dtype).removeprefix("torch.")
    graph.graph.update(
        target=target, mode=settings.mode, build=loaded.build, dtype=dtype, input_shapes=inputs, notes=notes
    )
    cost(graph, notes)
    result = ModelResult(
        target=target, strategy=graph.graph["strategy"], device=device, dtype=dtype, input_shapes=inputs,
        totals=opgraph.totals(graph), layers=[], mode=settings.mode, build=loaded.build, notes=notes,
        inputs=described, details=graph.graph["details"],
    )
    result.module_types = {path: info["type"] for path, info in graph.graph.get("modules", {}).items()}
    return graph, result  # layers are filled by the caller, once the graph is complete


def warning_notes(caught: list[warnings.WarningMessage]) -> list[str]:
    """One note per distinct warning raised while loading, capturing and timing: its first line."""
    counts = Counter(
        f"{w.category.__name__}: {(str(w.message).strip().splitlines() or [''])[0][:200]}" for w in caught
    )
    return [f"warning during analysis: {text}" + (f" (×{n})" if n > 1 else "") for text, n in counts.items()]


def analyze(spec: ModelSpec, settings: Settings) -> tuple[ModelResult, list[Diagnostic]]:
    with warnings.catch_warnings(record=True) as caught:  # torch's warnings become notes, not noise
        warnings.simplefilter("default")
        with user_code(spec.target, getattr(settings, "timeout", None)) as guard:
            # where each module is created in the user's code: findings point there (an hf: model
            # has none: archlint builds it from a config, so its findings point at the library class)
            with recording() if not is_hf_target(spec.target) else contextlib.nullcontext():
                loaded = load(spec, settings)
            guard.doing = "running its forward (capture)"
            graph, result = _capture_and_cost(loaded, spec.target, spec.device, settings)
        report = None
        if settings.latency:
            from archlint.model.measure import measure

            with user_code(spec.target, getattr(settings, "timeout", None)) as guard, preserved(loaded.model):
                guard.doing = "running its forward (latency)"
                inputs = fresh(loaded.real_inputs())  # makes the real keyword inputs too
                report = measure(graph, loaded.model, inputs, spec.device, settings, kwargs=fresh(loaded.kwargs))
            result.totals.latency_ms = report.end_to_end_ms
            result.totals.latency_ms_sum_of_ops = report.sum_of_ops_ms
            result.timing = report.method
            result.roofline = report.peaks
            result.notes.extend(report.notes)
        spec_name = getattr(spec, "device_spec", None) or getattr(settings, "device_spec", None)
        if spec_name:
            from archlint.devices import resolve
            from archlint.model.estimate import estimate_graph

            device_spec = resolve(spec_name, getattr(settings, "root", None))
            result.estimate = estimate_graph(graph, device_spec)
            if settings.what_if is not None:  # the 16-bit estimate beside it: AL403's price (speedups/links.py)
                from archlint.model.speedups.precision import autocast_estimate

                autocast = autocast_estimate(graph, device_spec)
                if autocast:
                    result.estimate["autocast"] = autocast
        if settings.train:  # --train: backward, loss, optimizer and memory of the step (archlint.model.train)
            from archlint.model.train.step import analyze_step

            step_findings = analyze_step(graph, loaded, result, settings, device_spec if spec_name else None)
        from archlint.model.checks import CheckContext, run_checks

        ctx = CheckContext(
            target=spec.target, settings=settings, pricer=report.pricer if report else None, estimate=result.estimate
        )
        # Pricing a finding runs the model's forward (a fix timed end to end): guarded as the rest.
        with user_code(spec.target, getattr(settings, "timeout", None) if report else None) as guard:
            guard.doing = "running its forward (pricing findings)"
            with progress.task("checking rules and pricing findings" if report else "checking rules"):
                diagnostics = run_checks(graph, ctx)
                if settings.train:
                    diagnostics += step_findings  # the memory model's ways to fit (archlint.model.train)
        result.notes.extend(ctx.notes)
        result.notes.extend(_recheck_on_eager(loaded, spec.target, settings, graph, diagnostics))
        if settings.what_if is not None:  # after the pricing: torch.compile slows whatever is timed after it
            from archlint.model.speedups.run import what_ifs

            with user_code(spec.target, getattr(settings, "timeout", None)) as guard, preserved(loaded.model):
                guard.doing = "running its forward (what-if)"
                inputs = fresh(loaded.real_inputs())  # makes the real keyword inputs too
                result.what_if, notes = what_ifs(
                    loaded.model, inputs, spec.device, settings, settings.what_if, kwargs=fresh(loaded.kwargs),
                    deadline=report.pricer.budget.deadline() if report else None,
                )
            result.notes.extend(notes)
        if report:
            result.notes.extend(report.pricer.budget.notes())
    result.notes.extend(warning_notes(caught))
    result.layers = opgraph.to_layers(graph)
    if is_hf_target(spec.target):  # library code: say so, and name the switch the user has
        from archlint.model.hf_switches import annotate

        annotate(diagnostics, loaded.model, result.module_types)
    if result.what_if:
        from archlint.model.checks import judge_repriced
        from archlint.model.speedups.links import link

        link(diagnostics, result.what_if, spec.device)
        judge_repriced(graph, diagnostics, ctx)  # a measured fix decides the verdict as any price does
    return result, diagnostics


def _recheck_on_eager(loaded: Loaded, target: str, settings: Settings, graph: nx.DiGraph,
                      diagnostics: list[Diagnostic]) -> list[str]:
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
        return [f"{', '.join(codes)} found under {strategy} could not be checked on the eager forward ({str(exc)[:150]}); "
                "they stand as captured"]
    eager_graph.graph["mode"] = settings.mode
    cost(eager_graph, [])
    eager.recheck(suspects, run_checks(eager_graph, CheckContext(target, again)), strategy)
    dropped = sum(1 for d in suspects if d.evidence.get("eager") == "absent")
    return [f"{len(suspects)} {', '.join(codes)} warning(s) found under {strategy} re-checked on the eager forward "
            f"(dispatch capture, {how}): {dropped} not there (info), {len(suspects) - dropped} confirmed"]


def _eager_capture(loaded: Loaded, target: str, settings: Settings) -> tuple[nx.DiGraph, str]:
    """The dispatch recording of the eager forward: on the meta build as it is when that runs (no
    real weights needed: a 7B model is not built again for this), else as capture_graph does."""
    if loaded.on_meta:
        try:
            with traced_mode(loaded.model, settings.mode), preserved(loaded.model), _no_gc():
                return capture(loaded.model, loaded.inputs, "dispatch", loaded.kwargs)[0], "on the meta build"
        except CaptureFailed as failure:  # a forward that needs real values: built with real weights
            how = f"with real weights: the meta recording failed ({str(failure)[:80]})"
    else:
        how = "with real weights"
    with preserved(loaded.model):
        return capture_graph(loaded, target, settings), how


def analyze_model(
    model: nn.Module, inputs: tuple, settings: Settings | None = None, target: str = "<model>",
    kwargs: dict | None = None,
) -> tuple[nx.DiGraph, ModelResult]:
    """Analyze a prebuilt model (no checks, no latency): for tests, benchmarks and library use."""
    from archlint.model.load import bind_inputs

    args, rest = bind_inputs(model, tuple(inputs), dict(kwargs or {}), "inputs")
    loaded = Loaded(model, args, "given", _dtype_of(model), kwargs=rest)
    graph, result = _capture_and_cost(loaded, target, "cpu", settings or Settings())
    result.layers = opgraph.to_layers(graph)
    return graph, result


def _dtype_of(model: nn.Module) -> torch.dtype:
    for p in model.parameters():
        if p.is_floating_point():
            return p.dtype
    return torch.float32
