"""One non-overlapping waterfall per step: where the step's wall time goes, and what each fix returns.

The step's wall time is cut into buckets that never overlap, so they add up to the step: the GPU's
compute (fp32 GEMMs apart), its exposed communication and pageable copies, its other non-compute
work, and its idle time by cause (archlint.trace.queue). Each bucket names the finding that
covers it and what that fix can realistically return: a stated fraction of the bucket, never all
of it, with its basis. Each microsecond is claimed by one finding only, so the findings' savings
add up to at most the step, and the expected step after all fixes is the step less their sum.
Pure functions of figures; no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Bucket → (finding, fix, share of the bucket the fix returns, basis). The shares are estimates,
# each stated in the report; they are deliberately below 1: a fix rarely removes all of its bucket.
RETURNS: dict[str, tuple[str | None, str | None, float, str]] = {
    "compute": (None, None, 0.0, "the model's own work: not a finding"),
    "fp32_gemm": (
        "AL504",
        "tensor-core precision",
        0.5,
        "tensor-core GEMMs run 2x or more faster than fp32 SIMT ones (A100: 156 TF32 vs 19.5 fp32 TFLOPS "
        "peak); half the time is assumed back",
    ),
    "layout_conversion": (
        "AL511",
        "channels_last",
        0.7,
        "with channels_last tensors cuDNN's NHWC kernels take them as they are: the nchwToNhwc/"
        "nhwcToNchw conversions go, but for ops without NHWC kernels; 70% assumed back",
    ),
    "exposed_communication": (
        "AL507",
        "overlap communication with computation",
        0.5,
        "overlap hides about half of it; the last buckets still wait for the last gradients",
    ),
    "pageable_copy": (
        "AL502",
        "pinned memory + non_blocking copies",
        0.5,
        "pinned copies run at about twice the pageable bandwidth (no staging buffer)",
    ),
    "other_non_compute": (None, None, 0.0, "copies, memsets and sync waits the findings do not cover"),
    "idle_input": (
        "AL501",
        "a prefetching DataLoader",
        0.9,
        "workers overlap loading with the step; what remains is handing the batch over",
    ),
    "idle_sync": (
        "AL503",
        "no host syncs in the step",
        0.8,
        "the charged idle is at most the host's time blocked in the sync (the lead it gave up); 80% assumed back",
    ),
    "idle_launch": (
        "AL505",
        "CUDA graphs / fused kernels",
        0.6,
        "graphs replay without per-kernel launches; 60% of the launch gaps assumed back",
    ),
    "idle_queued": (
        "AL509",
        "remove the dependency the queue waits on",
        0.0,
        "the GPU had work queued and waited on another stream, event, collective or graph: "
        "not priced (it needs restructuring, not a setting)",
    ),
    "idle_host": (
        "AL509",
        "move host work off the step's critical path",
        0.3,
        "an assumption: about a third of other host work can be overlapped or moved to the GPU",
    ),
}
ORDER = tuple(RETURNS)


@dataclass
class Bucket:
    name: str
    us: float  # mean µs per steady step
    finding: str | None
    fix: str | None
    returns_us: float
    basis: str
    share: float = 0.0  # the part of the bucket the fix returns (returns_us = us × share)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "us": round(self.us, 3),
            "finding": self.finding,
            "fix": self.fix,
            "returns_us": round(self.returns_us, 3),
            "share": round(self.share, 4),
            "basis": self.basis,
        }


@dataclass
class Waterfall:
    windows: int  # steady, complete windows averaged
    step_us: float
    buckets: list[Bucket]
    note: str | None = None

    @property
    def saving_us(self) -> float:
        return sum(b.returns_us for b in self.buckets)

    @property
    def expected_step_us(self) -> float:
        return self.step_us - self.saving_us

    def returns(self, code: str) -> float:
        """What the finding `code` claims: the returns of the buckets it owns (each owned once)."""
        return sum(b.returns_us for b in self.buckets if b.finding == code)

    def bucket(self, name: str) -> Bucket | None:
        return next((b for b in self.buckets if b.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "windows": self.windows,
            "step_us": round(self.step_us, 3),
            "buckets": [b.to_dict() for b in self.buckets],
            "saving_us": round(self.saving_us, 3),
            "expected_step_us": round(self.expected_step_us, 3),
            "note": self.note,
        }


def carve(w: Waterfall, source: str, name: str, us: float, finding: str, basis: str) -> float:
    """Move up to `us` of bucket `source` into a new bucket `name` owned by `finding`, returning
    nothing on this trace (its price is stated elsewhere: a cross-rank finding on another rank's
    trace), so no microsecond is claimed twice; the buckets still add up to the step. Returns the
    µs moved."""
    src = w.bucket(source)
    if src is None or us <= 0 or w.bucket(name) is not None:
        return 0.0
    moved = min(us, src.us)
    src.us -= moved
    src.returns_us = src.us * src.share
    w.buckets.insert(w.buckets.index(src) + 1, Bucket(name, moved, finding, None, 0.0, basis, 0.0))
    return moved


def build(
    per_window: list[dict[str, float]],
    overrides: dict[str, tuple[str | None, str | None, float, str]] | None = None,
    note: str | None = None,
) -> Waterfall:
    """The mean waterfall of the steady windows, each a dict bucket → µs (the buckets add up to the
    window's wall time, `wall`). `overrides` replaces a bucket's (finding, fix, share, basis) where
    the evidence says otherwise (a device without tensor cores, code already in CUDA graphs)."""
    rules = {**RETURNS, **(overrides or {})}
    n = len(per_window)
    step = sum(w["wall"] for w in per_window) / n if n else 0.0
    buckets = []
    for name in ORDER:
        us = sum(w.get(name, 0.0) for w in per_window) / n if n else 0.0
        finding, fix, share, basis = rules[name]
        buckets.append(Bucket(name, us, finding, fix, us * share, basis, share))
    return Waterfall(n, step, buckets, note)
