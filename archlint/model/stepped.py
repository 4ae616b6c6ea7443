"""The --train step's analysis, in the order the pipeline runs it (archlint.model.analyze calls
`analyze_step`): the step's costs (archlint.model.train.step), the real step timed (--latency), the
step's estimate on a device spec (and under autocast, archlint.model.speedups.precision), its
memory over the step: one process's (archlint.model.train.memory, .fit, with the ways to fit of
rule AL610) or each rank's (archlint.model.distributed). It sits at the top of model/, above the
rooms it calls, so none of them imports another upward."""

from __future__ import annotations

import networkx as nx

from archlint import collector
from archlint.errors import UsageError
from archlint.model.train.optimizer import Optimizer
from archlint.model.train.step import DEFAULT_LOSS, cost_step, step_notes
from archlint.train_result import OWN_LOSS, StepMemory


def analyze_step(graph: nx.DiGraph, loaded, result, settings, device_spec=None) -> list:
    """--train: the step's costs on the graph's nodes and in `result` (phase, totals.train,
    estimate.train, memory, notes); returns the memory model's findings (the ways to fit).
    `loaded`: archlint.model.loading.load.Loaded (model and inputs)."""
    from archlint.model.train.optimizer import DEFAULT, parse

    optimizer = parse(settings.optimizer or DEFAULT)
    loss = settings.loss or DEFAULT_LOSS
    defaults = {k for k in ("optimizer", "loss") if getattr(settings, k) is None}
    said_at = len(result.notes)  # what the step runs is said first, once the costs know whose loss it takes
    result.phase = "train"
    cuda = str(result.device).startswith("cuda") or (device_spec is not None and device_spec.kind == "gpu")
    result.totals.train = cost_step(graph, loaded.model, optimizer, loss, result.notes, cuda)
    own = result.totals.train.loss["name"] == OWN_LOSS
    result.notes[said_at:said_at] = step_notes(optimizer, loss, defaults, own)
    if settings.latency:  # the real step on the machine at hand, beside the estimate
        from archlint.model.train.timing import time_step

        measured = time_step(
            loaded.real_model(),
            tuple(loaded.real_inputs()),
            dict(loaded.kwargs or {}),
            optimizer,
            loss,
            result.device,
            settings.warmup,
            settings.repeat,
        )
        measured["loss_ms"] = None  # inside forward_ms: the loss is timed with the forward
        result.totals.train.measured = measured
    if device_spec is not None and result.estimate is not None:
        from archlint.model.train.steptime import estimate_step

        result.estimate.train = estimate_step(graph, result.totals.train, device_spec, result.estimate.latency_ms)
        if settings.parallel is not None:  # the per-rank step's compute under bf16, and the plan's bf16 change
            from archlint.model.speedups.precision import autocast_step_estimate

            autocast = autocast_step_estimate(graph, device_spec, result.estimate.train)
            if autocast:
                result.estimate.train["autocast"] = autocast
    return _memory(loaded, result, settings, optimizer, loss, device_spec)


def _memory(loaded, result, settings, optimizer: Optimizer, loss: str, device_spec) -> list:
    """The memory model's one call site (archlint.model.train.memory and .fit): `memory` in the
    JSON and, with a budget (--memory-budget, or a GPU spec's memory), whether the step fits, the
    largest batch that does and the ways to fit (findings). Run with the cyclic collector off, as
    the capture is (archlint.collector): the meta step makes thousands of objects, a full collection
    walks every object of the process (a fifth of a second with torchvision, timm and
    transformers loaded), and the step's storages are freed by their reference counts."""
    with collector.paused():
        return _memory_report(loaded, result, settings, optimizer, loss, device_spec)


def _memory_report(loaded, result, settings, optimizer: Optimizer, loss: str, device_spec) -> list:
    try:
        return _model_step(loaded, result, settings, optimizer, loss, device_spec)
    except UsageError as exc:
        # the forward analysis builds the model again with real weights where meta cannot run it (a
        # value read from the weights: .item()); the step does the same, and says so
        if not (loaded.on_meta and loaded.factory is not None and "no real weights" in str(exc)):
            raise
        loaded.real_model()
        loaded.real_inputs()
        result.notes.append(f"memory: built again with real weights for the step's memory ({exc})")
        return _model_step(loaded, result, settings, optimizer, loss, device_spec)


def _model_step(loaded, result, settings, optimizer: Optimizer, loss: str, device_spec) -> list:
    """_memory_of, where the model's own code refusing the step (BatchNorm in train mode on one value
    per channel: a batch of 1) is the one-line error of that model, as a forward that fails is
    (costed.py), not a traceback that ends the run."""
    try:
        return _memory_of(loaded, result, settings, optimizer, loss, device_spec)
    except (ValueError, AssertionError, TypeError, IndexError, KeyError) as exc:
        message = " ".join(str(exc).split())[:300]
        raise UsageError(
            f"the training step of {result.target} failed: {type(exc).__name__}: {message}; check "
            "--input-shape (a batch of 1 cannot train BatchNorm) or the model's forward in train mode "
            "(rerun with --debug for the traceback)"
        ) from exc


def _memory_of(loaded, result, settings, optimizer: Optimizer, loss: str, device_spec) -> list:
    args, kwargs = tuple(loaded.inputs), dict(loaded.kwargs or {})
    if settings.parallel is not None:  # the step per rank (archlint.model.distributed), instead of one process's
        from archlint.model.distributed.run import distributed_report

        memory, result.distributed = distributed_report(
            loaded.model,
            args,
            kwargs,
            settings,
            optimizer=optimizer.label,
            loss=loss,
            device_spec=device_spec,
            estimate=result.estimate,
            layers=result.layers,
        )
        findings: list = []
    else:
        memory, findings = _fit_or_memory(loaded, result, settings, optimizer, loss, device_spec, args, kwargs)
    # the device the memory is for, named: the spec, or this machine's device without one
    memory["device"] = (
        device_spec.name if device_spec is not None else f"{result.device} (this machine; no --device-spec)"
    )
    result.memory = StepMemory.from_dict(memory)
    return findings


def _fit_or_memory(
    loaded, result, settings, optimizer: Optimizer, loss: str, device_spec, args, kwargs
) -> tuple[dict, list]:
    from archlint.model.train.memory import step_memory

    if settings.memory_budget is not None or (device_spec is not None and device_spec.kind == "gpu"):
        from archlint.model.checks import batch_does_not_fit
        from archlint.model.train.fit import fit_report

        try:
            memory = fit_report(
                loaded.model,
                args,
                kwargs,
                optimizer=optimizer.label,
                loss=loss,
                budget_bytes=settings.memory_budget,
                device_spec=device_spec,
            )
            findings = batch_does_not_fit.findings(  # AL610: each way to fit, when it does not
                loaded.model, args, kwargs, memory, optimizer=optimizer.label, loss=loss, device_spec=device_spec
            )
            for d in findings:
                d.target = d.target or result.target
            return memory, [d for d in findings if settings.enabled(d.code)]
        except UsageError as exc:  # a GPU spec that does not say its memory: the step's memory, no fit
            result.notes.append(f"memory: whether the step fits was not checked ({exc})")
    return step_memory(
        loaded.model,
        args,
        kwargs,
        optimizer=optimizer.label,
        loss=loss,
        budget_bytes=settings.memory_budget,
        device_spec=device_spec,
    ), []
