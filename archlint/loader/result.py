"""Plain results of `archlint loader`; no torch in here, so the reporters can read them.

Field names follow the JSON contract in docs/design.md (`loaders[]`): reporters serialize them as they are.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Stage:
    """Where one sample's time goes: exclusive time of one stage, measured in the main process."""

    name: str  # "open/read", "decode", "transform: Resize", "other in __getitem__", "collate", ...
    ms_per_sample: float
    share: float  # of the sum of all stages


@dataclass
class WorkersRow:
    num_workers: int
    samples_per_s: float
    first_batch_s: float
    batches: int  # timed batches behind the figure


@dataclass
class Prefetch:
    """What prepares batches ahead of the training step (archlint.loader.prefetch)."""

    kind: str  # "cuda-stream": a CUDA-stream prefetcher wraps the DataLoader | "workers": num_workers > 0
    detail: str  # what was recognised, in words


@dataclass
class Verdict:
    """Which side bounds the run: the loader's samples/s against the model step's samples/s."""

    model: str  # target of the model
    step: str  # "train" (forward, backward, optimizer step) | "eval" (forward under inference_mode)
    device: str
    basis: str  # "measured" (timed here) | "estimated" (a device-spec estimate)
    model_batch: int
    model_step_ms: float
    model_samples_per_s: float
    loader_samples_per_s: float
    bound: str  # "input": the loader is the slower side | "model"
    factor: float  # slower side's shortfall: fast samples/s ÷ slow samples/s (≥ 1)
    message: str
    best_workers: int | None = None  # the workers setting with the highest samples/s, when scanned
    best_samples_per_s: float | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class LoaderResult:
    target: str
    batch_size: int | None
    num_workers: int
    samples_per_s: float
    batches_per_s: float
    first_batch_s: float  # from iter(loader) to the first batch: worker start-up included
    spread: list[float]  # [q1, q3] of the milliseconds between consecutive timed batches
    stages: list[Stage]
    files_per_sample: float | None  # None: stages were not measured (an IterableDataset)
    bytes_per_sample: float | None
    workers: list[WorkersRow]
    verdict: Verdict | None = None
    prefetch: Prefetch | None = None  # None: nothing prepares batches ahead (num_workers=0, no prefetcher)
    batches: int = 0  # timed batches behind samples_per_s
    pin_memory: bool = False
    device: str | None = None  # where batches were copied for the host→device stage
    stage_items: int = 0  # items behind the stage breakdown
    stage_sum_ms: float | None = None  # sum of the stages, per sample
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
