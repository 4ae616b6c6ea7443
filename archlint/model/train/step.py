"""One training step (`--train`): zero_grad, the forward in train mode, the loss, backward and
optimizer.step(), costed from the captured forward graph.

The forward is the capture's (in train mode); the backward is costed op by op from each op's own
formula (archlint.model.train.backward) where autograd runs one (archlint.model.train.grad); the
optimizer from the trainable parameters the forward reads (archlint.model.train.optimizer). The
memory over the step is archlint.model.train.memory's, when that module is there.

JSON (ModelResult): `phase: "train"`; `totals.train` = {loss, optimizer, forward_flops,
backward_flops, loss_flops, optimizer_flops, step_flops, and the same in *_mac_bytes,
trainable_params, frozen_params, backward_unknown_ops}; layers carry `flops_backward`,
`mac_bytes_backward` and `backward_terms`; with a device spec `estimate.train` = the step's time
split and its MFU; with --latency `totals.train.measured` = the real step timed.
"""

from __future__ import annotations

from collections import Counter

import networkx as nx
from torch import nn

from archlint.errors import UsageError
from archlint.model.cost import numel
from archlint.model.costed import no_gc
from archlint.model.train import backward, grad
from archlint.model.train.optimizer import Optimizer, step_cost

DEFAULT_LOSS = "mean"


def loss_cost(graph: nx.DiGraph, sources: list[str], loss: str) -> dict:
    """The loss over the model's outputs: each reduced (mean or sum) and the results added. mean:
    forward one add per element, backward one divide per element (the gradient 1/N written out);
    sum: backward a broadcast view of the gradient (no kernel)."""
    elements = sum(sum(numel(s) for s in graph.nodes[n]["out_shapes"][:1]) for n in sources)
    out_bytes = sum(numel(graph.nodes[n]["out_shapes"][0]) * int(graph.nodes[n].get("itemsize", 4)) for n in sources)
    return {
        "name": loss,
        "outputs": len(sources),
        "forward_flops": elements + max(0, len(sources) - 1),
        "forward_mac_bytes": out_bytes,
        "backward_flops": elements if loss == "mean" else 0,
        "backward_mac_bytes": out_bytes if loss == "mean" else 0,
    }


def trainable_params(graph: nx.DiGraph, model: nn.Module) -> tuple[int, int, int, int]:
    """(trainable elements, trainable tensors, frozen elements, bytes per element) of the
    parameters the forward reads: an unread parameter gets no gradient and the optimizer skips it."""
    unused = set(graph.graph.get("unused_params") or ())
    train = tensors = frozen = 0
    itemsize = 4
    for name, p in model.named_parameters():
        if name in unused:
            continue
        if p.requires_grad:
            train, tensors, itemsize = train + p.numel(), tensors + 1, p.element_size()
        else:
            frozen += p.numel()
    return train, tensors, frozen, itemsize


def param_split(model: nn.Module) -> tuple[int, int]:
    """(trainable, frozen) elements as torch counts them: every parameter of model.parameters(), a
    shared one once, by requires_grad, whether the forward reads it or not."""
    trainable = frozen = 0
    for p in model.parameters():
        if p.requires_grad:
            trainable += p.numel()
        else:
            frozen += p.numel()
    return trainable, frozen


def cost_step(graph: nx.DiGraph, model: nn.Module, optimizer: Optimizer, loss: str, notes: list[str],
              cuda: bool = False) -> dict:
    """Backward on every op node (flops_backward, ...) and the step's totals (`totals.train`)."""
    sources = grad.propagate(graph, model)
    if not sources:
        notes.append("--train: no output of the model carries a gradient (no trainable parameter reaches it): "
                     "backward and optimizer cost nothing")
    unknown = backward.cost_backward(graph)
    if unknown:
        ops = Counter(graph.nodes[n]["op"] for n in unknown)
        listed = ", ".join(f"{op} ×{c}" if c > 1 else op for op, c in ops.most_common(8))
        notes.append(f"{len(unknown)} ops have no backward formula and are left out of the backward totals: {listed}")
    fwd_flops = fwd_mac = bwd_flops = bwd_mac = 0
    for _, d in _ops(graph):
        if d.get("known", True):
            fwd_flops += int(d.get("flops", 0))
            fwd_mac += int(d.get("mac_bytes", 0))
        bwd_flops += int(d.get("flops_backward", 0))
        bwd_mac += int(d.get("mac_bytes_backward", 0))
    lc = loss_cost(graph, sources, loss)
    elements, tensors, _, itemsize = trainable_params(graph, model)
    opt = step_cost(optimizer, elements, tensors, itemsize, cuda)
    trainable, frozen = param_split(model)
    return {
        "loss": lc,
        "optimizer": opt,
        "forward_flops": fwd_flops,
        "backward_flops": bwd_flops,
        "loss_flops": lc["forward_flops"] + lc["backward_flops"],
        "optimizer_flops": opt["flops"],
        "step_flops": fwd_flops + bwd_flops + lc["forward_flops"] + lc["backward_flops"] + opt["flops"],
        "forward_mac_bytes": fwd_mac,
        "backward_mac_bytes": bwd_mac,
        "loss_mac_bytes": lc["forward_mac_bytes"] + lc["backward_mac_bytes"],
        "optimizer_mac_bytes": opt["mac_bytes"],
        "step_mac_bytes": fwd_mac + bwd_mac + lc["forward_mac_bytes"] + lc["backward_mac_bytes"] + opt["mac_bytes"],
        "trainable_params": trainable,  # torch's count, as totals.params
        "frozen_params": frozen,
        # of the trainable, those the forward reads: they get a gradient and the optimizer updates them
        "updated_params": elements,
        "backward_unknown_ops": len(unknown),
    }


def _ops(graph: nx.DiGraph):
    for name, d in graph.nodes(data=True):
        if d["kind"] not in ("input", "output"):
            yield name, d


def step_notes(optimizer: Optimizer, loss: str, defaults: set[str]) -> list[str]:
    said = []
    for what, value, default in (("optimizer", optimizer.label, "optimizer"), ("loss", loss, "loss")):
        said.append(f"{what} {value}{' (the default; --' + what + ' to change)' if default in defaults else ''}")
    return [
        "training step (--train): zero_grad (set_to_none: no kernel), forward in train mode, "
        f"{', '.join(said)} of the outputs, backward, optimizer.step(); backward costed per op from its own formula"
    ]


def analyze_step(graph: nx.DiGraph, loaded, result, settings, device_spec=None) -> list:
    """--train: the step's costs on the graph's nodes and in `result` (phase, totals.train,
    estimate.train, memory, notes); returns the memory model's findings (the ways to fit).
    `loaded`: archlint.model.loading.load.Loaded (model and inputs)."""
    from archlint.model.train.optimizer import DEFAULT, parse

    optimizer = parse(settings.optimizer or DEFAULT)
    loss = settings.loss or DEFAULT_LOSS
    defaults = {k for k in ("optimizer", "loss") if getattr(settings, k) is None}
    result.notes.extend(step_notes(optimizer, loss, defaults))
    result.phase = "train"
    cuda = str(result.device).startswith("cuda") or getattr(device_spec, "kind", "") == "gpu"
    result.totals.train = cost_step(graph, loaded.model, optimizer, loss, result.notes, cuda)
    if settings.latency:  # the real step on the machine at hand, beside the estimate
        from archlint.model.train.timing import time_step

        train = result.totals.train
        train["measured"] = time_step(
            loaded.real_model(), tuple(loaded.real_inputs()), dict(loaded.kwargs or {}), optimizer, loss,
            result.device, settings.warmup, settings.repeat,
        )
        train["measured"]["loss_ms"] = None  # inside forward_ms: the loss is timed with the forward
    if device_spec is not None and result.estimate is not None:
        from archlint.model.train.steptime import estimate_step

        result.estimate["train"] = estimate_step(graph, result.totals.train, device_spec, result.estimate)
        if settings.parallel is not None:  # the per-rank step's compute under bf16, and the plan's bf16 change
            from archlint.model.speedups.precision import autocast_step_estimate

            autocast = autocast_step_estimate(graph, device_spec, result.estimate["train"])
            if autocast:
                result.estimate["train"]["autocast"] = autocast
    return _memory(loaded, result, settings, optimizer, loss, device_spec)


def _memory(loaded, result, settings, optimizer: Optimizer, loss: str, device_spec) -> list:
    """The memory model's one call site (archlint.model.train.memory and .fit): `memory` in the
    JSON and, with a budget (--memory-budget, or a GPU spec's memory), whether the step fits, the
    largest batch that does and the ways to fit (findings). Run with the cyclic collector off, as
    the capture is (costed.no_gc): the meta step makes thousands of objects, a full collection
    walks every object of the process (a fifth of a second with torchvision, timm and
    transformers loaded), and the step's storages are freed by their reference counts."""
    with no_gc():
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
            "(rerun with --debug for the traceback)") from exc


def _memory_of(loaded, result, settings, optimizer: Optimizer, loss: str, device_spec) -> list:
    args, kwargs = tuple(loaded.inputs), dict(loaded.kwargs or {})
    if settings.parallel is not None:  # the step per rank (archlint.model.distributed), instead of one process's
        from archlint.model.distributed.run import distributed_report

        result.memory, result.distributed = distributed_report(
            loaded.model, args, kwargs, settings, optimizer=optimizer.label, loss=loss, device_spec=device_spec,
            estimate=result.estimate, layers=result.layers)
        findings = []
    else:
        findings = _fit_or_memory(loaded, result, settings, optimizer, loss, device_spec, args, kwargs)
    # the device the memory is for, named: the spec, or this machine's device without one
    result.memory["device"] = (device_spec.name if device_spec is not None else
                               f"{result.device} (this machine; no --device-spec)")
    return findings


def _fit_or_memory(loaded, result, settings, optimizer: Optimizer, loss: str, device_spec, args, kwargs) -> list:
    from archlint.model.train.memory import step_memory

    if settings.memory_budget is not None or getattr(device_spec, "kind", "") == "gpu":
        from archlint.model.train.fit import fit_report

        try:
            result.memory, findings = fit_report(
                loaded.model, args, kwargs, optimizer=optimizer.label, loss=loss,
                budget_bytes=settings.memory_budget, device_spec=device_spec,
            )
            for d in findings:
                d.target = d.target or result.target
            return [d for d in findings if settings.enabled(d.code)]
        except UsageError as exc:  # a GPU spec that does not say its memory: the step's memory, no fit
            result.notes.append(f"memory: whether the step fits was not checked ({exc})")
    result.memory = step_memory(loaded.model, args, kwargs, optimizer=optimizer.label, loss=loss,
                                budget_bytes=settings.memory_budget, device_spec=device_spec)
    return []
