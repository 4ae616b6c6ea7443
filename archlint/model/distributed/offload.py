"""The time CPU offload adds to a rank's step: the copies over the host link and the host's optimizer step.

ZeRO-Offload (DeepSpeed) and FSDP2's CPUOffloadPolicy keep the optimizer state on the host and run
the optimizer step there. Per step and rank:

- device → host: the rank's gradient partition (its shard, in the dtype the gradients are reduced
  in), once;
- host → device: ZeRO-1/2/3 copy the updated partition of the parameters back (the compute dtype);
  FSDP2 keeps its sharded parameters on the host and copies each unit's shard to the device for every
  all-gather of it (the forward's and the backward's; in fp32 under mixed precision, cast on the
  device), so the host → device bytes are the all-gathers' payloads over the group;
- the optimizer step on the host: Adam streams, per fp32 parameter of the partition, the parameter,
  gradient and two moments in and the parameter and moments out (7 × 4 bytes), at the host's memory
  rate HOST_STEP_GBS (an assumption stated in the basis: the specs give the GPU, not the host CPU).

Each copy at the spec's `[interconnect] host-gbs` (PCIe or C2C, each way). Not overlapped with the
step's compute: an upper bound (ZeRO-Offload overlaps the gradient copies with the backward, and its
delayed parameter update the host step with the next forward; neither is modelled).
"""

from __future__ import annotations

from dataclasses import dataclass

from archlint.model.distributed.layout import Layout
from archlint.model.distributed.strategy import Parallel
from archlint.model.train.memory import StepRecording

# A streaming Adam on a server CPU: about the memory bandwidth one socket sustains (8 DDR5 channels
# ≈ 300 GB/s peak; a vectorised CPU Adam reaches about a third of it). An assumption, not a spec figure.
HOST_STEP_GBS = 100.0
ADAM_BYTES_PER_PARAM = 7 * 4  # fp32 parameter, gradient, exp_avg, exp_avg_sq read; parameter and moments written


@dataclass(frozen=True)
class OffloadTime:
    to_host_bytes: int
    to_device_bytes: int
    copies_ms: float  # both directions over the host link, one after the other
    host_step_ms: float
    basis: str

    @property
    def ms(self) -> float:
        return self.copies_ms + self.host_step_ms


def offload_time(rec: StepRecording, par: Parallel, lay: Layout, spec) -> OffloadTime | None:
    """The offloaded step's added device time (module docstring); None when the spec gives no host link."""
    net = getattr(spec, "interconnect", None) or {}
    if "host-gbs" not in net:
        return None
    host_bps = float(net["host-gbs"]) * 1e9
    share = 1.0 / max(par.shard_group, 1)
    trainable = [(shape, size) for shape, size, t in rec.params.values() if t]
    elems = sum(_numel(shape) for shape, _ in trainable)
    grad_size = (
        4
        if (par.mixed_precision and par.strategy in ("fsdp", "hsdp"))
        else max((size for _, size in trainable), default=4)
    )
    to_host = int(elems * share * grad_size)
    if par.strategy in ("fsdp", "hsdp"):
        widen = 4 / max((size for _, size in trainable), default=4) if par.mixed_precision else 1.0
        to_device = int(sum(c.nbytes / c.group for c in lay.issued if c.op == "all_gather") * widen)
    else:
        to_device = int(elems * share * max((size for _, size in trainable), default=4))
    copies = (to_host + to_device) / host_bps * 1e3
    host_step = elems * share * ADAM_BYTES_PER_PARAM / (HOST_STEP_GBS * 1e9) * 1e3
    basis = (
        f"estimated: {to_host / 1e6:,.1f} MB of gradients to the host and {to_device / 1e6:,.1f} MB of parameters "
        f"back at the spec's host link ({net['host-gbs']:g} GB/s each way), not overlapped; the optimizer step on "
        f"the host at an assumed {HOST_STEP_GBS:g} GB/s of host memory traffic ({ADAM_BYTES_PER_PARAM} bytes a "
        "parameter for Adam's fp32 state), in place of the device's"
    )
    return OffloadTime(to_host, to_device, copies, host_step, basis)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
