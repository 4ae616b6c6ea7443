"""`archlint trace` against Holistic Trace Analysis: time and peak memory on the same traces.

    python benchmarks/trace_speed.py [--size-mb 500] [--hta-max-mb 100] [--keep]

Each measurement runs in a fresh process (so one tool's caches and heap never flatter or burden
the other) and reports wall time and the process's peak resident memory (ru_maxrss). archlint:
`lint_trace` (read, temporal breakdown, per-step figures, all trace rules); HTA:
`TraceAnalysis(trace_dir).get_temporal_breakdown()` (parse + breakdown), in the Python that has
HolisticTraceAnalysis (--hta-python, default: this one). Traces: the three real GPU traces of
tests/trace/fixtures, and a synthetic Kineto trace of --size-mb written on the fly (deleted after
unless --keep). HTA runs only on traces up to --hta-max-mb (it holds the trace in pandas frames
and needs several times the file size in memory; on a shared machine a 500 MB run risks the
others), under an address-space limit of --hta-limit-gb. Goals: archlint faster than HTA, and its
peak memory below the file's size.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "trace" / "fixtures"

ARCHLINT = """
import json, resource, sys, time
from pathlib import Path
from archlint.config import Settings
from archlint.trace.command import lint_trace
start = time.perf_counter()
analysis, diagnostics = lint_trace(Path(sys.argv[1]), Settings())
elapsed = time.perf_counter() - start
print(json.dumps({"s": elapsed, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "breakdown": analysis.temporal_breakdown, "findings": sorted(d.code for d in diagnostics)}))
"""

HTA = """
import json, logging, resource, sys, time
logging.disable(logging.WARNING)
limit = int(float(sys.argv[2]) * 2**30)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from hta.trace_analysis import TraceAnalysis
start = time.perf_counter()
df = TraceAnalysis(trace_dir=sys.argv[1]).get_temporal_breakdown(visualize=False)
elapsed = time.perf_counter() - start
row = df.iloc[0]
print(json.dumps({"s": elapsed, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "breakdown": {"idle_us": float(row["idle_time(us)"]), "compute_us": float(row["compute_time(us)"]),
                                "non_compute_us": float(row["non_compute_time(us)"]), "span_us": float(row["kernel_time(us)"])}}))
"""

KERNELS = [
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4::Params)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)",
    "ampere_sgemm_128x64_tn",
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
]
OPS = ["aten::linear", "aten::add", "aten::mean", "aten::mm", "nccl:all_reduce"]


def write_synthetic(path: Path, target_bytes: int, seed: int = 0) -> int:
    """A Kineto-like trace of about target_bytes: steps of CPU ops, each launching one kernel
    (cpu_op, cudaLaunchKernel, kernel and the two ac2g flow events, with the args Kineto writes),
    a DataLoader wait at each step's start. Written streaming; returns the number of events."""
    rng = random.Random(seed)
    pid, tid = 4242, 4242
    ts, corr, n = 1_700_000_000_000.0, 1, 0
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8},\n')
        f.write(
            '"deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85899345920, '
            '"computeMajor": 8, "computeMinor": 0, "numSms": 108}],\n"traceEvents": [\n'
        )
        step = 0
        first = True
        while f.tell() < target_bytes:
            step += 1
            ops = 400
            step_start = ts
            step_events = []
            dl = rng.uniform(2_000, 6_000)
            step_events.append(
                {
                    "ph": "X",
                    "cat": "python_function",
                    "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                    "pid": pid,
                    "tid": tid,
                    "ts": ts,
                    "dur": dl,
                    "args": {"Python id": step},
                }
            )
            ts += dl
            gpu_at = ts
            for k in range(ops):
                which = k % len(KERNELS)
                dur_cpu = rng.uniform(15, 40)
                kdur = rng.uniform(5, 120)
                step_events.append(
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": OPS[which],
                        "pid": pid,
                        "tid": tid,
                        "ts": ts,
                        "dur": dur_cpu,
                        "args": {
                            "External id": corr,
                            "Record function id": 0,
                            "Sequence number": corr,
                            "Fwd thread id": 0,
                            "Input Dims": [[64, 1024], [1024, 1024]],
                            "Input type": ["float", "float"],
                            "Ev Idx": n,
                        },
                    }
                )
                launch = ts + dur_cpu * 0.4
                step_events.append(
                    {
                        "ph": "X",
                        "cat": "cuda_runtime",
                        "name": "cudaLaunchKernel",
                        "pid": pid,
                        "tid": tid,
                        "ts": launch,
                        "dur": 4.0,
                        "args": {"External id": corr, "cbid": 211, "correlation": corr},
                    }
                )
                start = max(gpu_at, launch + 5)
                step_events.append(
                    {
                        "ph": "X",
                        "cat": "kernel",
                        "name": KERNELS[which],
                        "pid": 0,
                        "tid": 7,
                        "ts": start,
                        "dur": kdur,
                        "args": {
                            "External id": corr,
                            "queued": 0,
                            "device": 0,
                            "context": 1,
                            "stream": 7,
                            "correlation": corr,
                            "registers per thread": 72,
                            "shared memory": 16384,
                            "blocks per SM": 2.5,
                            "warps per SM": 10.0,
                            "grid": [270, 1, 1],
                            "block": [128, 1, 1],
                            "est. achieved occupancy %": 12,
                        },
                    }
                )
                step_events.append(
                    {"ph": "s", "id": corr, "pid": pid, "tid": tid, "ts": launch, "cat": "ac2g", "name": "ac2g"}
                )
                step_events.append(
                    {"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": start, "cat": "ac2g", "name": "ac2g", "bp": "e"}
                )
                gpu_at = start + kdur
                ts += dur_cpu
                corr += 1
            step_events.insert(
                0,
                {
                    "ph": "X",
                    "cat": "user_annotation",
                    "name": f"ProfilerStep#{step}",
                    "pid": pid,
                    "tid": tid,
                    "ts": step_start,
                    "dur": max(ts, gpu_at) - step_start,
                    "args": {"External id": corr},
                },
            )
            ts = max(ts, gpu_at) + 1
            for e in step_events:
                f.write(("" if first else ",\n") + json.dumps(e))
                first = False
            n += len(step_events)
        f.write("\n]}\n")
    return n


def measure(python: str, script: str, *args: str) -> dict:
    proc = subprocess.run(
        [python, "-c", script, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": last[:160]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def hta_available(python: str) -> bool:
    return subprocess.run([python, "-c", "import hta.trace_analysis"], capture_output=True).returncode == 0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size-mb", type=float, default=500)
    p.add_argument("--hta-max-mb", type=float, default=100)
    p.add_argument("--hta-limit-gb", type=float, default=8)
    p.add_argument("--hta-python", default=sys.executable)
    p.add_argument("--keep", action="store_true")
    a = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="trace_speed_"))
    traces = sorted(FIXTURES.glob("*.json.gz"))
    nominal = {}
    for mb in sorted({a.hta_max_mb, a.size_mb}):
        path = tmp / f"synthetic_{mb:g}mb.json"
        nominal[path] = mb
        t0 = time.perf_counter()
        events = write_synthetic(path, int(mb * 1e6))
        print(
            f"wrote {path.name}: {path.stat().st_size / 1e6:.0f} MB, {events:,} events in {time.perf_counter() - t0:.0f} s"
        )
        traces.append(path)
    has_hta = hta_available(a.hta_python)
    if not has_hta:
        print(f"HTA: not importable by {a.hta_python} (pip install HolisticTraceAnalysis psutil); archlint only")
    print(
        f"{'trace':<36}{'MB':>7}  {'archlint s':>10} {'peak MB':>8}  {'HTA s':>8} {'peak MB':>8}  {'speed-up':>8}  breakdown Δ (% of span)"
    )
    try:
        for path in traces:
            size = path.stat().st_size / 1e6
            ours = measure(sys.executable, ARCHLINT, str(path))
            theirs: dict = {"skipped": True}
            if has_hta and nominal.get(path, size) <= a.hta_max_mb:
                folder = tmp / f"hta_{path.name}"
                folder.mkdir()
                os.link(path, folder / path.name) if path.parent == tmp else shutil.copy(path, folder)
                theirs = measure(a.hta_python, HTA, str(folder), str(a.hta_limit_gb))
                shutil.rmtree(folder)
            line = f"{path.name[:35]:<36}{size:>7.2f}  "
            line += f"{ours['s']:>10.2f} {ours['rss_mb']:>8.0f}  " if "s" in ours else f"{'error':>19}  "
            if "s" in theirs:
                span = theirs["breakdown"]["span_us"] or 1
                delta = max(abs(ours["breakdown"][k] - theirs["breakdown"][k]) for k in theirs["breakdown"]) / span
                line += f"{theirs['s']:>8.2f} {theirs['rss_mb']:>8.0f}  {theirs['s'] / ours['s']:>7.1f}×  {delta:.4%}"
            elif "error" in theirs:
                line += f"{'failed':>17}  ({theirs['error']})"
            else:
                line += f"{'—':>17}  (HTA not run above {a.hta_max_mb:g} MB)"
            if "s" in ours and size >= 1:  # below a MB the interpreter's own memory is all there is
                line += f"  | archlint peak/file {ours['rss_mb'] / size:.2f}× ; findings {','.join(ours['findings']) or '-'}"
            elif "s" in ours:
                line += f"  | findings {','.join(ours['findings']) or '-'}"
            else:
                line += f"  ({ours['error']})"
            print(line, flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
