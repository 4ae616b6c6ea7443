"""What the user asked of the distributed step: strategy, ranks, precision, offload (one typed object)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from archlint.errors import UsageError

STRATEGIES = ("ddp", "fsdp", "hsdp", "zero1", "zero2", "zero3", "zero1-torch")
# the strategies a fit plan and min_world_size weigh: zero1-torch (torch.distributed.optim's
# ZeroRedundancyOptimizer over DDP) is zero1 partitioned by whole parameters, asked for by name only
PLANNED = STRATEGIES[:6]
PRECISIONS = ("bf16", "fp16")
SHARDED_STATES = {
    "ddp": False,
    "zero1": True,
    "zero2": True,
    "zero3": True,
    "fsdp": True,
    "hsdp": True,
    "zero1-torch": True,
}
# torch.nn.parallel.DistributedDataParallel's defaults: bucket_cap_mb=25 and the first bucket of
# dist._DEFAULT_FIRST_BUCKET_BYTES (1 MiB) when bucket_cap_mb is left at its default
BUCKET_CAP_MB = 25
FIRST_BUCKET_BYTES = 1 << 20
# _broadcast_coalesced's chunk for DDP's buffer broadcast (distributed.py: self.broadcast_bucket_size)
BUFFER_BUCKET_BYTES = 250 * (1 << 20)


@dataclass(frozen=True)
class Parallel:
    """A data-parallel layout of the training step, per rank."""

    strategy: str
    world_size: int
    nodes: int = 1
    mixed_precision: str | None = None  # bf16 | fp16: compute copies of the weights, fp32 master and state
    cpu_offload: bool = False  # optimizer state (and master weights, FSDP's sharded params) on the host
    shard_unit: str | None = None  # FSDP/ZeRO-3 unit class; None: the repeated block found
    bucket_cap_mb: float = BUCKET_CAP_MB
    gradient_as_bucket_view: bool = False
    optimizer_bits: int = 32  # 8: an 8-bit optimizer's state (a fit plan's change, estimated)
    backend: str = "nccl"  # nccl on GPUs; gloo on the CPU (its reduce-scatter works on a clone of the input)

    @property
    def shard_group(self) -> int:
        """Ranks one shard is spread over: all of them, or (HSDP) the ranks of one node."""
        if self.strategy == "hsdp":
            return max(1, self.world_size // max(self.nodes, 1))
        return self.world_size if SHARDED_STATES[self.strategy] else 1

    @property
    def replicas(self) -> int:
        return self.world_size // self.shard_group if self.strategy == "hsdp" else 1

    def label(self) -> str:
        extra = [self.mixed_precision] if self.mixed_precision else []
        extra += ["cpu offload"] if self.cpu_offload else []
        extra += ["8-bit optimizer"] if self.optimizer_bits == 8 else []
        nodes = f" over {self.nodes} nodes" if self.nodes > 1 else ""
        return f"{self.strategy} × {self.world_size}{nodes}" + (f" ({', '.join(extra)})" if extra else "")

    def with_(self, **changes: Any) -> Parallel:
        return replace(self, **changes)


def parallel(strategy: str, world_size: int | None, nodes: int | None = None, **options: Any) -> Parallel:
    """A checked Parallel: one line naming what is wrong otherwise."""
    if strategy not in STRATEGIES:
        raise UsageError(f"unknown distributed strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
    world = 1 if world_size is None else int(world_size)
    nodes = 1 if nodes is None else int(nodes)
    if world < 1 or nodes < 1:
        raise UsageError("--world-size and --nodes must be at least 1")
    if world % nodes:
        raise UsageError(f"--world-size {world} is not a multiple of --nodes {nodes}: give as many ranks on each node")
    precision = options.get("mixed_precision")
    if precision is not None and precision not in PRECISIONS:
        raise UsageError(f"unknown --mixed-precision {precision!r}; use one of {', '.join(PRECISIONS)}")
    return Parallel(strategy, world, nodes, **options)
