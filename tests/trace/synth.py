"""Small, valid Kineto-style Chrome traces for the trace-rule tests (µs throughout).

Written as torch.profiler writes them: complete ("X") events with cat/name/pid/tid/ts/dur/args,
GPU events carrying stream, device and the correlation id of the runtime call that launched them.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

A100 = {"id": 0, "name": "NVIDIA A100-SXM4-40GB", "totalGlobalMem": 40 * 2**30, "computeMajor": 8, "computeMinor": 0}
P100 = {"id": 0, "name": "Tesla P100-PCIE-16GB", "totalGlobalMem": 16 * 2**30, "computeMajor": 6, "computeMinor": 0}


class Trace:
    def __init__(self, device: dict = A100, rank: int | None = 0, pid: int = 100, tid: int = 100):
        self.events: list[dict] = []
        self.devices = [device, {**device, "id": 1}]
        self.rank, self.pid, self.tid, self.corr = rank, pid, tid, 0

    def _x(self, cat, name, ts, dur, pid=None, tid=None, **args):
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": self.pid if pid is None else pid,
                            "tid": self.tid if tid is None else tid, "ts": ts, "dur": dur, "args": args})

    def step(self, n: int, ts: float, dur: float) -> None:
        self._x("user_annotation", f"ProfilerStep#{n}", ts, dur)

    def gpu(self, name, ts, dur, launch_ts, *, launch="cudaLaunchKernel", launch_dur=4.0, cat="kernel",
            device=0, stream=7) -> None:
        self.corr += 1
        self._x("cuda_runtime", launch, launch_ts, launch_dur, correlation=self.corr)
        self._x(cat, name, ts, dur, pid=device, tid=stream, device=device, stream=stream, correlation=self.corr)

    def host(self, cat, name, ts, dur) -> None:
        self._x(cat, name, ts, dur)

    def memory(self, ts, allocated, reserved, device=0) -> None:
        self.events.append({"ph": "i", "s": "t", "name": "[memory]", "pid": self.pid, "tid": self.tid, "ts": ts,
                            "args": {"Device Type": 1, "Device Id": device, "Total Allocated": allocated,
                                     "Total Reserved": reserved, "Bytes": 1024}})

    def document(self) -> dict:
        doc = {"schemaVersion": 1, "deviceProperties": self.devices, "traceEvents": self.events}
        if self.rank is not None:
            doc["distributedInfo"] = {"backend": "nccl", "rank": self.rank, "world_size": 1}
        return doc

    def write(self, path: Path) -> Path:
        text = json.dumps(self.document())
        if path.name.endswith(".gz"):
            with gzip.open(path, "wt", encoding="utf-8") as f:
                f.write(text)
        else:
            path.write_text(text, encoding="utf-8")
        return path


STEP = 10_000.0  # each synthetic step lasts 10 ms
GEMM = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"


def steps(build, n: int = 3, **kw) -> Trace:
    """A trace of n steps; build(trace, step_start) adds one step's events."""
    t = Trace(**kw)
    for i in range(n):
        start = 1_000_000.0 + i * STEP
        t.step(i + 1, start, STEP)
        build(t, start)
    return t


def busy(t: Trace, start: float, lo: float = 100.0, hi: float = 9_900.0, name: str = GEMM) -> None:
    """One kernel that keeps the GPU busy from start+lo to start+hi, launched just before."""
    t.gpu(name, start + lo, hi - lo, start + lo - 50)
