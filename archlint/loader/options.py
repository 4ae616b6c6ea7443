"""What one `archlint loader` run is asked to do, read and checked from its command line
(archlint.loader.command) before anything runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class LoaderOptions:
    target: str  # PATH.py:NAME: a DataLoader, a Dataset, or a function returning one
    init: dict[str, Any] = field(default_factory=dict)  # arguments of a class or function NAME
    batch_size: int | None = None  # None: the DataLoader's (a Dataset: 32)
    num_workers: int | None = None
    pin_memory: bool | None = None
    batches: int = 30  # timed batches per setting
    warmup: int | None = None  # None: 2, or what the workers prefetch + 1
    seconds: float = 5.0  # time budget per setting
    workers: list[int] = field(default_factory=list)  # num_workers settings to compare
    stage_items: int = 64
    device: str | None = None  # copy batches to this device as a stage
    # The input-bound verdict: the model the loader feeds
    model: str | None = None
    input_shapes: list[list[int]] = field(default_factory=list)  # default: the loader's batch
    model_init: dict[str, Any] = field(default_factory=dict)
    dtype: str = "float32"
    step: str = "train"  # train | eval
    device_spec: str | None = None
    # Output
    output_format: str = "text"
    output_file: Path | None = None
    html: Path | None = None
    timeout: float = 600.0
    debug: bool = False
