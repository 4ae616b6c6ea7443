"""Is the run input-bound? The loader's samples/s against the model step's samples/s.

The model is loaded as `archlint MODEL` loads it (archlint.model.loading.load, real weights) and its step
is timed with archlint's timer (archlint.model.timing.timer.sample: warm-up, then the median of repeats):
a training step (forward, a sum of the outputs as the loss, backward, an SGD step) or an
inference step (forward under inference_mode). With `--device-spec` (a GPU the user does not
have) the step time is the device-spec estimate instead (`estimated_step`): the forward captured
and estimated as `archlint MODEL --device-spec` does it, the training step derived from it.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import torch

from archlint.config import ModelSpec, Settings
from archlint.errors import UsageError
from archlint.loader.result import LoaderResult, Verdict
from archlint.model.loading.load import load as load_model
from archlint.model.timing.timer import make_timer, sample

STEP_BUDGET_S = 3.0  # timed repeats of the model step stop at about this much time


@dataclass
class ModelStep:
    ms: float
    batch: int
    device: str
    basis: str  # measured | estimated
    notes: list[str]


def _loss(out) -> torch.Tensor | None:
    """A scalar to call backward on: the sum of the floating outputs."""
    if isinstance(out, torch.Tensor):
        return out.float().sum() if out.is_floating_point() and out.requires_grad else None
    values = (
        out.values()
        if isinstance(out, dict)
        else out
        if isinstance(out, (list, tuple))
        else getattr(out, "__dict__", {}).values()
    )
    parts = [p for p in (_loss(v) for v in values) if p is not None]
    return sum(parts) if parts else None


def measure_step(spec: ModelSpec, step: str) -> ModelStep:
    """Time one model step (batch = the first input's leading size) on spec.device."""
    settings = Settings(latency=True)  # real weights: the step runs
    loaded = load_model(spec, settings)
    model = loaded.model
    notes = list(loaded.notes)
    if loaded.build == "given" and step == "train":
        model = copy.deepcopy(model)  # the optimizer step changes weights: never the user's instance
    dev = torch.device(spec.device)
    try:
        model = model.to(dev)
        inputs = tuple(t.to(dev) if isinstance(t, torch.Tensor) else t for t in loaded.inputs)
    except (RuntimeError, AssertionError) as exc:
        raise UsageError(f"moving {spec.target} to {spec.device} failed: {exc}") from exc
    batch = int(inputs[0].shape[0]) if isinstance(inputs[0], torch.Tensor) and inputs[0].dim() else 1
    timer = make_timer(dev)

    if step == "train":
        model.train()
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.SGD(params, lr=0.0) if params else None  # lr 0: same work, weights kept
        no_grad: list[bool] = []

        def run() -> None:
            with timer.region("step"):
                loss = _loss(model(*inputs))
                if loss is not None:
                    loss.backward()
                elif not no_grad:
                    no_grad.append(True)
                    notes.append("the model's outputs need no gradient: the training step is timed as a forward pass")
                if optimizer is not None:
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)

    else:
        model.eval()

        def run() -> None:
            with torch.inference_mode(), timer.region("step"):
                model(*inputs)

    try:
        start = time.perf_counter()
        run()  # one untimed step sizes the repeats to the budget
        timer.collect()
        once = time.perf_counter() - start
        # warm-up and repeats fit the budget; a step slower than it is timed once after the probe
        warmup = 2 if once < STEP_BUDGET_S / 10 else 0
        repeat = int(max(1, min(30, STEP_BUDGET_S / max(once, 1e-6))))
        stats = sample([run], timer, warmup, repeat)[0].per_pass
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(
            f"the {step} step of {spec.target} failed: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}; "
            "check --input-shape (default: the loader's batch)"
        ) from exc
    notes.append(f"model step: median of {stats.n} {step} steps after {warmup + 1} untimed (archlint timer)")
    return ModelStep(stats.median, batch, str(dev), "measured", notes)


# Backward ≈ 2× the forward's work: a GEMM's backward is two GEMMs of its size (the gradients of
# its input and of its weight), an element-wise op's reads the saved input and the incoming
# gradient and writes one gradient. The usual 2:1 ratio (training ≈ 6·N·tokens FLOPs against
# 2·N for the forward: Kaplan et al. 2020, "Scaling Laws for Neural Language Models", §2.1).
BACKWARD_PER_FORWARD = 2.0


def estimated_step(spec: ModelSpec, device_spec: str, step: str) -> ModelStep:
    """The step's time on a device named by its spec (archlint.devices): the forward is captured in
    the step's mode (train: BatchNorm on batch statistics, dropout on) and estimated op by op by
    archlint.model.estimating.estimate; an eval step is that forward, a training step adds the backward
    (BACKWARD_PER_FORWARD × the forward) and the SGD update (weights and gradients read, weights
    written, at the spec's bandwidth), as measure_step times them."""
    from archlint.devices import resolve
    from archlint.model.costed import capture_and_cost
    from archlint.model.estimating.estimate import estimate_graph
    from archlint.model.runtime.sandbox import user_code

    device = resolve(device_spec)
    settings = Settings(mode="train" if step == "train" else "eval")
    with user_code(spec.target) as guard:
        loaded = load_model(spec, settings)  # no latency: built on meta where it can be, nothing runs
        guard.doing = "running its forward (capture)"
        graph, result = capture_and_cost(loaded, spec.target, device.name, settings)
    estimate = estimate_graph(graph, device)
    forward_ms = estimate["latency_ms"]
    notes = list(result.notes)
    shape = result.input_shapes[0] if result.input_shapes else []
    batch = int(shape[0]) if shape else 1
    if step == "train":
        update_bytes = 3 * result.totals.params * loaded.dtype.itemsize
        update_ms = update_bytes / device.bandwidth * 1e3
        ms = forward_ms * (1 + BACKWARD_PER_FORWARD) + update_ms
        notes.append(
            f"model step estimated for {device.name} (a spec-sheet estimate, not a measurement): forward "
            f"{forward_ms:.3g} ms + backward {BACKWARD_PER_FORWARD:g}× the forward (gradients of inputs and weights) "
            f"+ SGD update {update_ms:.3g} ms (weights and gradients read, weights written)"
        )
    else:
        ms = forward_ms
        notes.append(f"model step estimated for {device.name} (a spec-sheet estimate, not a measurement): the forward")
    notes += [f"estimate: {a}" for a in estimate["assumptions"]]
    return ModelStep(ms, batch, device.name, "estimated", notes)


def verdict(result: LoaderResult, model_target: str, step: ModelStep, step_kind: str) -> Verdict:
    model_sps = step.batch / (step.ms / 1e3)
    loader_sps = result.samples_per_s
    bound = "input" if loader_sps < model_sps else "model"
    factor = max(model_sps, loader_sps) / min(model_sps, loader_sps)
    on = f" on {step.device}" + (" (estimate)" if step.basis == "estimated" else "")
    consumes = "trains on" if step_kind == "train" else "infers on"
    message = (
        f"the loader delivers {loader_sps:,.0f} samples/s (num_workers={result.num_workers}), "
        f"the model {consumes} {model_sps:,.0f}{on}: "
        + (f"input-bound {factor:.1f}×" if bound == "input" else f"model-bound {factor:.1f}× (the loader keeps up)")
    )
    top = max(result.stages, key=lambda s: s.share, default=None)
    if bound == "input" and top is not None:
        message += f"; {top.share:.0%} of a sample's time is {top.name}"
    best = max(result.workers, key=lambda r: r.samples_per_s, default=None)
    v = Verdict(
        model=model_target,
        step=step_kind,
        device=step.device,
        basis=step.basis,
        model_batch=step.batch,
        model_step_ms=step.ms,
        model_samples_per_s=model_sps,
        loader_samples_per_s=loader_sps,
        bound=bound,
        factor=factor,
        message=message,
        notes=step.notes,
    )
    if best is not None:
        v.best_workers, v.best_samples_per_s = best.num_workers, best.samples_per_s
        if bound == "input" and best.num_workers != result.num_workers and best.samples_per_s > loader_sps * 1.05:
            still = "still input-bound" if best.samples_per_s < model_sps else "enough for the model"
            v.message += f"; num_workers={best.num_workers} gives {best.samples_per_s:,.0f} samples/s ({still})"
    return v
