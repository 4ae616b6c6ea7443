"""The distributed step's typed result and its one serializer (`to_json`: models[].distributed)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Collective:
    """Collectives of one kind in the step: `count` of them, each moving `bytes_per_rank` (the
    unsharded buffer: an all-gather's output, a reduce-scatter's input, an all-reduce's buffer)."""

    op: str  # all_reduce | all_gather | reduce_scatter | broadcast
    phase: str  # forward | backward | step
    count: int
    bytes_per_rank: int
    group_size: int
    what: str


@dataclass
class PerRank:
    """One rank's memory over the steady step (bytes). params/grads/optimizer: what the rank keeps
    (model states); activations: kept from the forward; comm_buffers and gathered_params: live at
    the peak."""

    peak_bytes: int
    params_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    comm_buffers_bytes: int
    gathered_params_bytes: int
    buffers_bytes: int
    inputs_bytes: int
    model_states_bytes: int
    optimizer_counters_bytes: int
    padding_bytes: int
    host_bytes: int
    at_peak: dict[str, int]
    at: str
    device_peak_bytes: int | None = None  # GPU spec: the caching allocator's reserved peak + the CUDA context
    budget_bytes: int | None = None
    budget_figure_bytes: int | None = None  # what the budget is held to (GPU: the allocator replayed under it)
    fits: bool | None = None  # budget_figure_bytes <= budget_bytes


@dataclass
class Distributed:
    strategy: str
    world_size: int
    nodes: int
    mixed_precision: str | None
    cpu_offload: bool
    shard_unit: str | None
    shard_unit_basis: str
    per_rank: PerRank
    collectives: list[Collective]
    comm_bytes_per_rank: int
    comm_basis: str
    buckets_bytes: list[int]
    estimate: dict[str, Any] | None = None  # with a device spec: comm_ms, exposed_comm_ms, step_ms, scaling_efficiency
    notes: list[str] = field(default_factory=list)
    basis: str = ""


def to_json(d: Distributed) -> dict[str, Any]:
    """models[].distributed as docs/design.md's JSON contract gives it."""
    out = asdict(d)
    if out["estimate"] is None:
        del out["estimate"]
    return out
