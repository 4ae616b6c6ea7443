"""Is the run input-bound? The loader's samples/s against the model step's samples/s.

The model is loaded as `archlint MODEL` loads it (archlint.model.load, real weights) and its step
is timed with archlint's timer (archlint.model.timer.sample: warm-up, then the median of repeats):
a training step (forward, a sum of the outputs as the loss, backward, an SGD step) or an
inference step (forward under inference_mode). `--device-spec` would take the step time from
the device-spec estimate instead; that estimate is not in this build (see `estimated_step_ms`).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import torch

from archlint.config import ModelSpec, Settings
from archlint.errors import UsageError
from archlint.loader.result import LoaderResult, Verdict
from archlint.model.load import load as load_model
from archlint.model.timer import make_timer, sample

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
    values = out.values() if isinstance(out, dict) else out if isinstance(out, (list, tuple)) else getattr(out, "__dict__", {}).values()
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


def estimated_step_ms(spec: ModelSpec, device_spec: str, step: str) -> ModelStep:
    """The hook for the device-spec estimate (a GPU the user does not have). Not in this build:
    say so rather than guess."""
    raise UsageError(
        f"--device-spec {device_spec}: this build has no device-spec estimate; "
        "drop --device-spec to time the model on this machine (--device cuda for a GPU you have)"
    )


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
        model=model_target, step=step_kind, device=step.device, basis=step.basis, model_batch=step.batch,
        model_step_ms=step.ms, model_samples_per_s=model_sps, loader_samples_per_s=loader_sps,
        bound=bound, factor=factor, message=message, notes=step.notes,
    )
    if best is not None:
        v.best_workers, v.best_samples_per_s = best.num_workers, best.samples_per_s
        if bound == "input" and best.num_workers != result.num_workers and best.samples_per_s > loader_sps * 1.05:
            still = "still input-bound" if best.samples_per_s < model_sps else "enough for the model"
            v.message += f"; num_workers={best.num_workers} gives {best.samples_per_s:,.0f} samples/s ({still})"
    return v
