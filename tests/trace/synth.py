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
    def __init__(self, device: dict = A100, rank: int | None = 0, pid: int = 100, tid: int = 100, world_size: int = 1):
        self.events: list[dict] = []
        self.world_size = world_size
        self.devices = [device, {**device, "id": 1}]
        self.rank, self.pid, self.tid, self.corr = rank, pid, tid, 0

    def _x(self, cat, name, ts, dur, pid=None, tid=None, **args):
        self.events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": self.pid if pid is None else pid,
                "tid": self.tid if tid is None else tid,
                "ts": ts,
                "dur": dur,
                "args": args,
            }
        )

    def step(self, n: int, ts: float, dur: float) -> None:
        self._x("user_annotation", f"ProfilerStep#{n}", ts, dur)

    def gpu(
        self, name, ts, dur, launch_ts, *, launch="cudaLaunchKernel", launch_dur=4.0, cat="kernel", device=0, stream=7
    ) -> None:
        self.corr += 1
        self._x("cuda_runtime", launch, launch_ts, launch_dur, correlation=self.corr)
        self._x(cat, name, ts, dur, pid=device, tid=stream, device=device, stream=stream, correlation=self.corr)

    def host(self, cat, name, ts, dur) -> None:
        self._x(cat, name, ts, dur)

    def memory(self, ts, allocated, reserved, device=0) -> None:
        self.events.append(
            {
                "ph": "i",
                "s": "t",
                "name": "[memory]",
                "pid": self.pid,
                "tid": self.tid,
                "ts": ts,
                "args": {
                    "Device Type": 1,
                    "Device Id": device,
                    "Total Allocated": allocated,
                    "Total Reserved": reserved,
                    "Bytes": 1024,
                },
            }
        )

    def document(self) -> dict:
        doc = {"schemaVersion": 1, "deviceProperties": self.devices, "traceEvents": self.events}
        if self.rank is not None:
            doc["distributedInfo"] = {"backend": "nccl", "rank": self.rank, "world_size": self.world_size}
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


# ── one training timeline as each torch release writes it ───────────────────────────────────────
# Category names by release (Kineto's ActivityType names, and torch 1.8's own): what a step, an op,
# a DataLoader range, a runtime call, a GPU event and the GPU projection of a range are filed under.
RELEASES = {
    # torch 1.8: Kineto's first trace writer, its own names; GPU rows have tid "stream N"
    "1.8": dict(
        step="Operator",
        op="Operator",
        loader="Operator",
        runtime="Runtime",
        driver="Runtime",
        kernel="Kernel",
        memcpy="Memcpy",
        memset="Memset",
        gpu_range=None,
        stream_arg=True,
    ),
    # the TensorBoard plugin's own test traces of that time: no stream arg, only the "stream N" tid
    "1.8-tb": dict(
        step="Operator",
        op="Operator",
        loader="Operator",
        runtime="Runtime",
        driver="Runtime",
        kernel="Kernel",
        memcpy="Memcpy",
        memset="Memset",
        gpu_range=None,
        stream_arg=False,
    ),
    # 1.9: libkineto's ActivityType names; the GPU projection spelled "gpu_user_Annotation"
    "1.9": dict(
        step="cpu_op",
        op="cpu_op",
        loader="cpu_op",
        runtime="cuda_runtime",
        driver="cuda_runtime",
        kernel="kernel",
        memcpy="gpu_memcpy",
        memset="gpu_memset",
        gpu_range="gpu_user_Annotation",
        stream_arg=True,
    ),
    # 1.10 to 1.13: record_function ranges (steps, the DataLoader) are user_annotation
    "1.10": dict(
        step="user_annotation",
        op="cpu_op",
        loader="user_annotation",
        runtime="cuda_runtime",
        driver="cuda_runtime",
        kernel="kernel",
        memcpy="gpu_memcpy",
        memset="gpu_memset",
        gpu_range="gpu_user_annotation",
        stream_arg=True,
    ),
    # 2.x: python_function ranges (with_stack), cuda_driver launches (cuLaunchKernel), ac2g flow events
    "2.x": dict(
        step="user_annotation",
        op="cpu_op",
        loader="python_function",
        runtime="cuda_runtime",
        driver="cuda_driver",
        kernel="kernel",
        memcpy="gpu_memcpy",
        memset="gpu_memset",
        gpu_range="gpu_user_annotation",
        stream_arg=True,
        flows=True,
    ),
}


def release_trace(release: str, steps_n: int = 3) -> dict:
    """The same three training steps in the shape `release` writes them: per step a DataLoader
    wait, a pageable host-to-device copy, a memset, three kernels (one launched through the driver
    API) and a device synchronisation at the end. Returns the trace document."""
    c = RELEASES[release]
    pid, tid, events, corr = 100, 100, [], 0

    def x(cat, name, ts, dur, pid_=pid, tid_=tid, **args):
        events.append(
            {"ph": "X", "cat": cat, "name": name, "pid": pid_, "tid": tid_, "ts": ts, "dur": dur, "args": args}
        )

    def gpu(cat, name, ts, dur, launch, launch_ts, runtime_cat):
        nonlocal corr
        corr += 1
        x(runtime_cat, launch, launch_ts, 6.0, correlation=corr, **{"external id": corr})
        args = {"device": 0, "correlation": corr, "external id": corr}
        if c["stream_arg"]:
            args["stream"] = 7
        x(cat, name, ts, dur, pid_=0, tid_="stream 7", **args)
        if c["gpu_range"]:
            x(c["gpu_range"], "forward", ts, dur, pid_=0, tid_="stream 7", device=0, stream=7, correlation=corr)
        if c.get("flows"):
            events.append(
                {"ph": "s", "id": corr, "pid": pid, "tid": tid, "ts": launch_ts, "cat": "ac2g", "name": "ac2g"}
            )
            events.append(
                {"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": ts, "cat": "ac2g", "name": "ac2g", "bp": "e"}
            )

    events.append(
        {
            "ph": "X",
            "cat": "Trace",
            "name": "PyTorch Profiler (0)",
            "pid": "Spans",
            "tid": "PyTorch Profiler",
            "ts": 999_000.0,
            "dur": steps_n * STEP + 2000.0,
            "args": {"Op count": 0},
        }
    )
    for i in range(steps_n):
        s = 1_000_000.0 + i * STEP
        x(c["step"], f"ProfilerStep#{i + 1}", s, STEP)
        x(c["loader"], "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", s + 10, 2000.0)
        x(c["op"], "aten::to", s + 2020, 60.0)
        gpu(c["memcpy"], "Memcpy HtoD (Pageable -> Device)", s + 2100, 40.0, "cudaMemcpyAsync", s + 2030, c["runtime"])
        gpu(c["memset"], "Memset (Device)", s + 2150, 5.0, "cudaMemsetAsync", s + 2090, c["runtime"])
        x(c["op"], "aten::mm", s + 2200, 100.0)
        gpu(c["kernel"], GEMM, s + 2300, 3000.0, "cudaLaunchKernel", s + 2210, c["runtime"])
        gpu(
            c["kernel"],
            "void at::native::vectorized_elementwise_kernel<4>",
            s + 6000,
            500.0,
            "cudaLaunchKernel",
            s + 5900,
            c["runtime"],
        )
        gpu(
            c["kernel"],
            "void at::native::reduce_kernel<512, 1>",
            s + 6600,
            400.0,
            "cuLaunchKernel",
            s + 6550,
            c["driver"],
        )
        x(c["runtime"], "cudaDeviceSynchronize", s + 6560, 3000.0)
    return {
        "schemaVersion": 1,
        "deviceProperties": [A100],
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
        "traceEvents": events,
    }
