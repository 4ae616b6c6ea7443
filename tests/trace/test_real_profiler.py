"""A trace written by torch.profiler on this CPU (with_stack): the reader finds what the rules read
in it (steps, the DataLoader, the user's frames, module ranges, .item()); with GPU events added
where a GPU would put them, the input-bound finding points at the user's training loop."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from archlint.config import Settings
from archlint.trace.command import lint_trace
from archlint.trace.read import read_trace
from tests.trace.synth import A100, GEMM

torch = pytest.importorskip("torch")

SCRIPT = """
import time
import torch, torch.nn as nn
from torch.utils.data import DataLoader, Dataset
from torch.profiler import profile, ProfilerActivity, schedule

class Slow(Dataset):
    def __len__(self):
        return 256
    def __getitem__(self, i):
        time.sleep(0.0005)  # a slow decode: the loader is the bottleneck
        return torch.randn(16), i % 4

model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))
loader = DataLoader(Slow(), batch_size=8)

def train_step(x, y):
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return loss.item()

def train(out):
    with profile(activities=[ProfilerActivity.CPU], with_stack=True, schedule=schedule(wait=0, warmup=1, active=4, repeat=1)) as prof:
        for i, (x, y) in enumerate(loader):
            train_step(x, y)
            prof.step()
            if i == 5:
                break
    prof.export_chrome_trace(out)
"""


TRAIN_LINE = SCRIPT.splitlines().index("def train(out):") + 1


@pytest.fixture(scope="module")
def real_trace(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("real")
    (folder / "train.py").write_text(SCRIPT)
    sys.path.insert(0, str(folder))
    try:
        import train  # noqa: PLC0415 - the user's script, so its frames are "train.py(N): fn"

        train.train(str(folder / "cpu.json"))
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("train", None)
    return folder / "cpu.json"


def test_reader_finds_the_host_side(real_trace):
    data = read_trace(real_trace)
    assert len(data.steps) >= 3 and data.gpu_events == 0
    assert data.dataloader and all("DataLoader" in r.name for r in data.dataloader)
    assert any(f.name.endswith(": train_step") and "train.py" in f.name for f in data.frames)
    assert not any("site-packages" in f.name for f in data.frames)
    assert {"Linear_0", "ReLU_0"} <= {r.name.split(" ")[-1] for r in data.annotations} or data.annotations
    assert data.item_calls


def test_input_bound_points_at_the_loop(real_trace, tmp_path):
    """Add what a GPU run records: one short kernel per step, launched after the batch arrived."""
    doc = json.loads(real_trace.read_text())
    events = doc["traceEvents"]
    steps = sorted((e for e in events if e.get("name", "").startswith("ProfilerStep#")), key=lambda e: e["ts"])
    loads = sorted(
        (e for e in events if "DataLoader" in e.get("name", "") and e.get("ph") == "X"), key=lambda e: e["ts"]
    )
    for corr, step in enumerate(steps, start=1):
        load = next(e for e in loads if step["ts"] <= e["ts"] < step["ts"] + step["dur"])
        at = load["ts"] + load["dur"] + 1
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": step["pid"],
                "tid": step["tid"],
                "ts": at,
                "dur": 3,
                "args": {"correlation": corr},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": GEMM,
                "pid": 0,
                "tid": 7,
                "ts": at + 5,
                "dur": 50,
                "args": {"device": 0, "stream": 7, "correlation": corr},
            }
        )
    doc["deviceProperties"] = [A100]
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(doc))
    analysis, diagnostics = lint_trace(path, Settings())
    found = {d.code: d for d in diagnostics}
    assert "AL501" in found and "AL509" in found  # idle > half the step: said with its causes, measured
    assert found["AL509"].evidence["causes_us"]["input"] > 0
    # the idle is measured; what the fix returns is an estimate with its basis, claimed once (AL501 owns input idle)
    assert found["AL501"].price.basis == "estimated" and found["AL501"].evidence["buckets"]["idle_input"]["basis"]
    assert "idle_input" not in found["AL509"].evidence["buckets"]
    # the loop's function: its def line, or (a frame already running when profiling began) the line it was at
    assert Path(found["AL501"].file).name == "train.py" and TRAIN_LINE <= found["AL501"].line <= TRAIN_LINE + 7
    assert analysis.per_step[0].dataloader_us > 0
