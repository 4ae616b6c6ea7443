"""The real training step timed on the machine at hand (--train --latency): forward (with the
loss), backward and optimizer.step() each timed between device synchronisations, on a copy of the
model (the user's weights, buffers and gradients are left as they were)."""

from __future__ import annotations

import copy
import statistics
import time

import torch
from torch import nn

from archlint.model.capture.common import stepped_own_loss
from archlint.model.train.memory import make_optimizer, step_loss
from archlint.model.train.optimizer import Optimizer
from archlint.train_result import OWN_LOSS, loss_phrase

MAX_WARMUP, MAX_REPEAT = 3, 20  # a step costs ~3 forwards: fewer runs than the forward's timing


def _to(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (tuple, list)):
        return type(value)(_to(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    return value


def time_step(
    model: nn.Module, args: tuple, kwargs: dict, optimizer: Optimizer, loss: str, device: str, warmup: int, repeat: int
) -> dict:
    """Medians in ms of forward + loss, backward, optimizer.step() and the whole step."""
    net = copy.deepcopy(model).to(device).train()
    args, kwargs = _to(args, device), _to(kwargs, device)
    params = [p for p in net.parameters() if p.requires_grad]
    opt = make_optimizer(optimizer.label, params)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    warmup, repeat = min(max(warmup, 1), MAX_WARMUP), min(max(repeat, 1), MAX_REPEAT)
    parts: dict[str, list[float]] = {"forward_ms": [], "backward_ms": [], "optimizer_ms": [], "step_ms": []}
    for i in range(warmup + repeat):
        opt.zero_grad(set_to_none=True)
        sync()
        t0 = time.perf_counter()
        out = net(*args, **kwargs)
        own = stepped_own_loss(out) is not None  # as step_loss (output_tensors) takes it
        total = step_loss(out, loss)
        del out
        sync()
        t1 = time.perf_counter()
        total.backward()
        sync()
        t2 = time.perf_counter()
        opt.step()
        sync()
        t3 = time.perf_counter()
        if i >= warmup:
            for key, value in (
                ("forward_ms", t1 - t0),
                ("backward_ms", t2 - t1),
                ("optimizer_ms", t3 - t2),
                ("step_ms", t3 - t0),
            ):
                parts[key].append(value * 1e3)
    del net, opt
    return {
        **{k: statistics.median(v) for k, v in parts.items()},
        "device": device,
        "runs": repeat,
        "warmup": warmup,
        "method": f"median of {repeat} real steps after {warmup} warm-up steps on a copy of the model "
        f"({optimizer.label}, {loss_phrase(OWN_LOSS if own else loss)}); the forward includes the loss; "
        "each part timed between device synchronisations",
    }
