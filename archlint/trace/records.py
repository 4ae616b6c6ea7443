"""The per-rule figures of one trace (TraceAnalysis's fields that rules and the waterfall read),
typed. `TraceMemory` and `TraceEvidence` are in the JSON (traces[].memory, traces[].evidence):
their `to_dict` writes the keys in the declared order, as the dicts they were had them."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


@dataclass
class PageableCopies:
    """Host-to-device copies from pageable memory (AL502): their GPU time, the host time of their
    calls, and their bytes over the copies whose size the trace gives (`bytes` / `sized_gpu_us`
    is the measured bandwidth); with large pinned copies in the trace, their bandwidth."""

    copies: int = 0
    gpu_us: float = 0.0
    host_us: float = 0.0
    bytes: int = 0
    sized_gpu_us: float = 0.0
    pinned_gbps: float | None = None


@dataclass
class DataParallel:
    """nn.DataParallel's signs (AL507): the GPUs with kernels, and its replication ops."""

    devices: list[int] = field(default_factory=list)
    replication_ops: int = 0


@dataclass
class TraceMemory:
    """The caching allocator's peaks the profiler recorded (profile_memory=True), on the device
    with the highest; capacity and peak_share when the trace or the device name gives its memory."""

    device: int
    peak_allocated: int | None
    peak_reserved: int | None
    capacity: int | None = None
    peak_share: float | None = None  # the higher peak over capacity

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "device": self.device,
            "peak_allocated": self.peak_allocated,
            "peak_reserved": self.peak_reserved,
        }
        if self.capacity:
            out |= {"capacity": self.capacity, "peak_share": self.peak_share}
        return out


@dataclass
class Collective:
    name: str
    calls_per_step: float
    median_bytes: int | None  # of the calls whose size the trace gives; None: none does


@dataclass
class TraceEvidence:
    """What the advice is chosen by (archlint.trace.evidence.gather, then the queue's and the
    locations' figures): code already compiled, the layout kernels' share, the collectives, how
    the trace was recorded, the DataLoader's workers, the sync idle by call, .item() calls."""

    compiled: bool
    triton_share: float
    compiled_host_ranges: int
    graph_launches: int
    layout_share: float
    collectives: list[Collective]
    with_stack: bool
    loader_workers: bool
    sync_idle_by_call: dict[str, float] = field(default_factory=dict)  # µs of sync idle by the call that caused it
    item_calls: dict[str, int] = field(default_factory=dict)  # {"gpu": .item() on a GPU tensor, "cpu": the rest}

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["collectives"] = [vars(c).copy() for c in self.collectives]
        return out
