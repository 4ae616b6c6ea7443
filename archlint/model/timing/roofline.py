"""The device's roofline: peak matrix FLOP/s and copy bandwidth, measured once and cached.

Peaks are measured, not looked up: a large matmul in the model's dtype (2·n³ FLOP per run) and a
large device-to-device copy (bytes read + bytes written). Each is the best of a few runs, timed
with the same timer as the ops. They are cached per device and dtype in
$ARCHLINT_CACHE_DIR, else $XDG_CACHE_HOME/archlint, else ~/.cache/archlint (`archlint calibrate`
measures again). Each op is then placed on the roofline: arithmetic intensity = 2·FLOPs / MAC
bytes (FLOPs are multiply-adds), bound = compute if that intensity reaches the ridge point,
attainable time = max(2·FLOPs / peak FLOP/s, MAC bytes / bandwidth), efficiency = attainable /
measured.

Two memory roofs: the copy bandwidth of a buffer far larger than any cache (DRAM), and that of
a buffer that fits in the last-level cache. An op whose bytes fit in that cache (`cache_bytes`)
is placed under the cache roof: its data can stay there between ops, and under the DRAM roof it
seemed to run at up to 5× what the roof allows (a roof that is not its roof, not a fast op).
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import TypeGuard

import torch

from archlint.errors import UsageError
from archlint.model.timing.timer import load_average, make_timer

CACHE_FILE = "roofline.json"
REQUIRED = {
    "peak_flops_per_s",
    "bandwidth_bytes_per_s",
    "cache_bandwidth_bytes_per_s",
    "cache_bytes",
}  # else re-measured
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}


def cache_dir() -> Path:
    if os.environ.get("ARCHLINT_CACHE_DIR"):
        return Path(os.environ["ARCHLINT_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "archlint"


def device_key(device: torch.device, dtype: torch.dtype) -> str:
    """Names the hardware, not just the device index: a cache entry is only reused on the same
    GPU model, or the same CPU model with the same number of threads."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = f"{_cpu_name()} x{torch.get_num_threads()} threads"
    return f"{device.type}|{name}|{str(dtype).removeprefix('torch.')}"


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _best_ms(fn, device: torch.device, runs: int) -> float:
    timer = make_timer(device)
    fn()  # warm-up: first call allocates and picks kernels
    timer.collect()
    best = float("inf")
    for _ in range(runs):
        with timer.region("x"):
            fn()
        best = min(best, timer.collect()["x"])
    return best


def last_level_cache_bytes(device: torch.device) -> int:
    """The largest cache's size: the CPU's from sysfs (Linux), the GPU's L2; 8 MiB where unknown."""
    if device.type == "cuda":
        return int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 8 * 2**20)
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = path.read_text().strip().upper()
        except OSError:  # no such cache level readable: the others decide
            continue
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes) if sizes else 8 * 2**20


def _copy_bandwidth(nbytes: int, device: torch.device, dtype: torch.dtype, runs: int) -> float:
    """Bytes per second of a copy of `nbytes` (read + write), the best of `runs`."""
    src = torch.empty(nbytes // torch.tensor([], dtype=dtype).element_size(), dtype=dtype, device=device)
    src.fill_(1)
    dst = torch.empty_like(src)
    copy_ms = _best_ms(lambda: dst.copy_(src), device, runs=runs)
    return 2 * src.numel() * src.element_size() / (copy_ms / 1e3)


def measure_peaks(device: torch.device, dtype: torch.dtype) -> dict:
    """Peak matrix FLOP/s (2·n³ per n×n matmul: the best of the sizes from 512 doubling until one
    run takes ≥ 50 ms, since throughput still grows past the first size that takes long enough)
    and copy bandwidth (a copy of ≥ 64 MB on CPU, 512 MB on GPU, counting read + write)."""
    best_flop_per_ms, best_n, n = 0.0, 512, 512
    while n <= (16384 if device.type == "cuda" else 4096):
        a = torch.randn(n, n, device=device).to(dtype)
        b = torch.randn(n, n, device=device).to(dtype)
        out = torch.empty(n, n, device=device, dtype=dtype)
        matmul_ms = _best_ms(lambda: torch.mm(a, b, out=out), device, runs=5)
        del a, b, out
        if 2 * n**3 / matmul_ms > best_flop_per_ms:
            best_flop_per_ms, best_n = 2 * n**3 / matmul_ms, n
        if matmul_ms >= 50:
            break
        n *= 2
    nbytes = (512 if device.type == "cuda" else 64) * 2**20
    llc = last_level_cache_bytes(device)
    dram = _copy_bandwidth(nbytes, device, dtype, runs=10)
    cache = max(dram, _copy_bandwidth(llc // 4, device, dtype, runs=50))  # source and copy: half the cache
    return {
        "device": device_key(device, dtype),
        "peak_flops_per_s": best_flop_per_ms * 1e3,  # 2 per multiply-add: hardware FLOP/s
        "bandwidth_bytes_per_s": dram,
        "cache_bandwidth_bytes_per_s": cache,
        "cache_bytes": llc // 2,  # an op whose bytes fit in this stays under the cache roof
        "matmul_n": best_n,
        "copy_bytes": 2 * nbytes,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _read_cache() -> dict:
    path = cache_dir() / CACHE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # absent or corrupt: measure again and rewrite it
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(key: str, peaks: dict) -> None:
    path = cache_dir() / CACHE_FILE
    data = _read_cache()
    data[key] = peaks
    from archlint.outputs import write_text

    try:  # whole or not at all: two archlint runs never read half a file
        write_text(path, json.dumps(data, indent=1, sort_keys=True), "the roofline cache")
    except UsageError as exc:  # the peaks were measured and are used; only the next run measures again
        print(f"archlint: warning: {exc}; the peaks will be measured again next time", file=sys.stderr)


def _valid(entry: object) -> TypeGuard[dict]:
    return isinstance(entry, dict) and all(
        isinstance(entry.get(k), (int, float)) and not isinstance(entry.get(k), bool) and 0 < entry[k] < math.inf
        for k in REQUIRED
    )


def peaks(device: torch.device, dtype: torch.dtype, recalibrate: bool = False) -> tuple[dict, bool]:
    """(peaks, cached): the cached peaks of this device and dtype, measured now when absent."""
    key = device_key(device, dtype)
    if not recalibrate:
        entry = _read_cache().get(key)
        if _valid(entry):  # a hand-edited, corrupt or older entry (NaN, 0, a string, a key missing) is measured again
            return entry, True
    measured = measure_peaks(device, dtype)
    _write_cache(key, measured)
    return measured, False


def place(flops: int, mac_bytes: int, latency_ms: float, p: dict) -> dict | None:
    """One op on the roofline; None when the op moves no memory (a view): nothing to place."""
    if mac_bytes <= 0 or latency_ms <= 0:
        return None
    work = 2 * flops  # FLOPs here are multiply-adds; the hardware peak counts 2 per FMA
    intensity = work / mac_bytes
    in_cache = mac_bytes <= p.get("cache_bytes", 0) and p.get("cache_bandwidth_bytes_per_s")
    bandwidth = p["cache_bandwidth_bytes_per_s"] if in_cache else p["bandwidth_bytes_per_s"]
    ridge = p["peak_flops_per_s"] / bandwidth
    attainable_ms = max(work / p["peak_flops_per_s"], mac_bytes / bandwidth) * 1e3
    return {
        "intensity": intensity,
        "bound": "compute" if intensity >= ridge else "memory",
        "memory_roof": "cache" if in_cache else "dram",
        "attainable_ms": attainable_ms,
        "efficiency": attainable_ms / latency_ms,
    }


def resolve_device(name: str) -> torch.device:
    """The device the user named, or a UsageError saying why it cannot be used."""
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UsageError(f"unknown device {name!r}; use cpu, cuda or cuda:N") from None
    if device.type == "cpu":
        return device
    if device.type != "cuda":
        raise UsageError(f"device {name!r} is not supported for timing; use cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        raise UsageError(
            f"--device {name}: CUDA is not available on this machine (torch {torch.__version__}); use --device cpu"
        )
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index >= torch.cuda.device_count():
        raise UsageError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA device(s); use cuda:0..")
    return torch.device("cuda", index)


def resolve_dtype(name: str) -> torch.dtype:
    if name not in _DTYPES:
        raise UsageError(f"dtype {name!r} is not supported; use one of {', '.join(_DTYPES)}")
    return _DTYPES[name]


def calibrate_command(device: str, dtype: str) -> int:
    """`archlint calibrate`: measure the peaks again, cache them and print them."""
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    p, _ = peaks(dev, dt, recalibrate=True)
    print(f"{p['device']}")
    load = load_average()
    if dev.type == "cpu" and load is not None and load > (os.cpu_count() or 1):
        print(
            f"  warning: the machine was busy (load average {load:.1f}): these peaks are likely low; calibrate again when it is quiet"
        )
    print(
        f"  peak matrix throughput  {p['peak_flops_per_s'] / 1e9:,.1f} GFLOP/s  ({p['matmul_n']}² matmul, 2 FLOP per multiply-add)"
    )
    print(
        f"  copy bandwidth          {p['bandwidth_bytes_per_s'] / 1e9:,.1f} GB/s  (read + write of {p['copy_bytes'] / 2**20:.0f} MiB)"
    )
    print(f"  ridge point             {p['peak_flops_per_s'] / p['bandwidth_bytes_per_s']:.1f} FLOP/byte")
    print(f"cached in {cache_dir() / CACHE_FILE}")
    return 0
