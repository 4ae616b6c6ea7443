"""--trace DIR: one timed forward pass under torch.profiler, one named range per op.

Written the way `torch.profiler.tensorboard_trace_handler` names its files
(`{worker}.{time_ns}.pt.trace.json`, Chrome-trace JSON), so TensorBoard's torch-tb-profiler plugin
(`pip install 'archlint[tb]'`), Perfetto, chrome://tracing and Holistic Trace Analysis open it.
The worker name is the model target, so several models traced into one DIR stay apart.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from archlint.errors import UsageError


def write_trace(run_once: Callable[[], object], device: torch.device, trace_dir: Path, target: str) -> Path:
    """Profile one call of `run_once` (which opens its own record_function ranges) into trace_dir."""
    if trace_dir.exists() and not trace_dir.is_dir():
        raise UsageError(f"--trace {trace_dir}: exists and is not a directory; give a directory")
    try:
        trace_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--trace {trace_dir}: cannot create the directory ({exc.strerror})") from None
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities, record_shapes=True) as prof:
        run_once()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    worker = re.sub(r"[^A-Za-z0-9_.-]+", "_", target).strip("_") or "model"
    path = trace_dir / f"{worker}.{time.time_ns()}.pt.trace.json"
    prof.export_chrome_trace(str(path))
    return path
