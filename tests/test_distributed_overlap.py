"""The overlap model of a distributed step (archlint.model.distributed.comm.estimate_step) against what
real steps do (benchmarks/distributed_traces.py, gloo traces of 2 and 4 ranks): the optimizer step
waits for every gradient collective, and the events the recording has after the backward's last
gradient (frees) are no compute that could hide one."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from archlint.devices import resolve
from archlint.model.distributed.comm import estimate_step
from archlint.model.distributed.step import distributed_step
from archlint.model.distributed.strategy import parallel

SPEC = resolve(str(Path(__file__).parents[1] / "benchmarks" / "this_cpu_gloo.toml"))


@pytest.fixture(scope="module")
def mlp_ddp():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).train()
    par = parallel("ddp", 2)
    _, rec, units = distributed_step(m, (torch.randn(16, 256),), {}, par, optimizer="adam", loss="mean")
    return rec, units, par


def _train(fwd: float, bwd: float, opt: float) -> dict:
    return {"forward_ms": fwd, "backward_ms": bwd, "optimizer_ms": opt, "step_ms": fwd + bwd + opt}


def test_gradient_all_reduce_does_not_hide_behind_the_optimizer_step(mlp_ddp):
    """The MLP's one DDP bucket is ready with its last gradient: a long optimizer step once hid it all."""
    est = estimate_step(*mlp_ddp, SPEC, _train(0.3, 0.1, 50.0))
    assert est["comm_ms"] > 1.0
    assert est["exposed_comm_ms"] == pytest.approx(est["comm_ms"], rel=0.1)
    assert est["step_ms"] == pytest.approx(est["compute_ms"] + est["exposed_comm_ms"])


def test_the_backward_ends_with_its_last_gradient(mlp_ddp):
    """The bucket holds the first layer's gradient, made last: only the backward's compute after it
    (none: what the recording has after it is frees) can hide the all-reduce. It was placed at 3/4 of
    the backward, so a 4 ms backward hid 1 ms of it."""
    est = estimate_step(*mlp_ddp, SPEC, _train(0.3, 4.0, 0.0))
    assert est["exposed_comm_ms"] > 0.8 * est["comm_ms"]
