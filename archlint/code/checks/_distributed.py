"""What the distributed-settings checks (AL409-AL415) share: the qualified names of DDP, FSDP
and their helpers, and the value a call passes for a keyword."""

from __future__ import annotations

from archlint.code import dataflow as df
from archlint.code.facts import CallSite, Facts

DDP = "torch.nn.parallel.DistributedDataParallel"
FSDP = (
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
)
FULLY_SHARD = (
    "torch.distributed.fsdp.fully_shard",
    "torch.distributed._composable.fsdp.fully_shard",
    "torch.distributed._composable.fsdp.fully_shard.fully_shard",
    "torch.distributed.fsdp._fully_shard.fully_shard",
    "torch.distributed.fsdp._fully_shard._fully_shard.fully_shard",
)
_CKPT = "torch.distributed.algorithms._checkpoint.checkpoint_wrapper"
CHECKPOINT_WRAPPER = (f"{_CKPT}.checkpoint_wrapper",)
APPLY_CHECKPOINTING = (f"{_CKPT}.apply_activation_checkpointing",)
CHECKPOINT_IMPL = f"{_CKPT}.CheckpointImpl"
CHECKPOINT = ("torch.utils.checkpoint.checkpoint",)


def flag(site: CallSite, name: str):
    """The literal a call passes for keyword `name` (True, False, an int, a string), MISSING when
    it passes none (the default applies), UNKNOWN when it cannot be seen (`**kwargs` from elsewhere,
    a variable)."""
    value = df.argument(site, name)
    if value is df.MISSING or value is df.UNKNOWN:
        return value
    return df.literal(value)


def ddp_calls(facts: Facts) -> list[CallSite]:
    return facts.calls_to(DDP)
