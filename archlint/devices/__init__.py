"""Device specs for `--device-spec`: small TOML files of datasheet figures, each with its source.

Built-ins ship beside this file (`archlint device-specs` lists them); a user's own file has the
same keys. Validation is strict: an unknown key, a missing one, a negative or non-number value,
or a figure without a source is a usage error naming the key. No torch in here.

GPU keys: name, kind = "gpu", description, [peak-tflops] (dense, no sparsity; 0 = the unit does
not exist: tensor-fp16 tensor-bf16 tensor-tf32 tensor-fp8 tensor-int8 cuda-fp32 cuda-fp16
cuda-fp64), memory-bandwidth-gbs, sm-count, l2-mb, launch-overhead-us, gemm-tile = [m, n, k],
[sources] (one line per figure above); optional: memory-gib (the device's memory, for --train's
"does it fit"), [achieved] (measured shares), eager-op-us (the host's measured cost of one op of a
real model's eager forward: the GPU waits for it when kernels are short), each with its source.
CPU keys: name, kind = "cpu", description, cores, simd-bits, fma-units (per core),
frequency-ghz, memory-bandwidth-gbs, cache-mb (last level), op-overhead-us, [sources].
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from archlint.errors import UsageError

DIR = Path(__file__).parent
TENSOR_UNITS = ("tensor-fp16", "tensor-bf16", "tensor-tf32", "tensor-fp8", "tensor-int8")
CUDA_UNITS = ("cuda-fp32", "cuda-fp16", "cuda-fp64")
_COMMON = ("name", "kind", "description", "sources")
GPU_FIGURES = ("peak-tflops", "memory-bandwidth-gbs", "sm-count", "l2-mb", "launch-overhead-us", "gemm-tile")
GPU_OPTIONAL = (
    "memory-gib",
    "achieved",
    "eager-op-us",
    "interconnect",
)  # figures a spec may give, each with its source
CPU_OPTIONAL = ("interconnect",)
# [interconnect]: the links a multi-GPU step's collectives use (archlint.model.distributed.comm), GB/s
# per GPU per direction and µs per ring step: within a node (NVLink or PCIe), between nodes (the
# GPU's network interface), and to the host (PCIe: CPU offload)
INTERCONNECT_KEYS = ("intra-node-gbs", "intra-node-latency-us", "inter-node-gbs", "inter-node-latency-us", "host-gbs")
# [achieved]: measured shares of the roofs on this GPU (name = [value, low, high]) that replace
# the built-in ones (archlint.devices.achieved) for this spec
SHARE_NAMES = ("tensor-gemm", "attention", "cuda-core", "stream", "broadcast", "window", "depthwise-wide")
CPU_FIGURES = ("cores", "simd-bits", "fma-units", "frequency-ghz", "memory-bandwidth-gbs", "cache-mb", "op-overhead-us")
_POSITIVE = {
    "memory-bandwidth-gbs",
    "sm-count",
    "l2-mb",
    "cores",
    "simd-bits",
    "fma-units",
    "frequency-ghz",
    "cache-mb",
}


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    kind: str  # gpu | cpu
    description: str
    peaks: dict[str, float]  # FLOP/s per unit ("tensor-fp16", "cuda-fp32", "vector-fp32", ...)
    bandwidth: float  # DRAM bytes/s
    cache_bytes: float  # L2 (GPU) or last-level cache (CPU)
    overhead_s: float  # per-op launch (GPU) or framework (CPU) cost
    sms: int  # SMs (GPU) or cores (CPU)
    tile: tuple[int, int, int] = (128, 128, 32)
    sources: dict[str, str] = field(default_factory=dict)
    memory_bytes: int | None = None  # the device's memory (GPU specs that give memory-gib)
    eager_op_s: float | None = None  # eager-op-us: a real model's host cost per op, measured
    achieved: dict[str, tuple[float, float, float]] = field(default_factory=dict)  # [achieved]: value, low, high
    figures: dict[str, Any] = field(default_factory=dict)  # the file's figures as written
    interconnect: dict[str, float] = field(default_factory=dict)  # [interconnect]: INTERCONNECT_KEYS given
    path: str = ""

    @property
    def cores(self) -> int:
        return self.sms


def builtin_names() -> list[str]:
    return sorted(p.stem for p in DIR.glob("*.toml"))


def resolve(name_or_file: str, root: Path | None = None) -> DeviceSpec:
    """A built-in spec by name, else a TOML file (relative to root when given)."""
    if name_or_file in builtin_names():
        return load_file(DIR / f"{name_or_file}.toml")
    path = Path(name_or_file)
    if root is not None and not path.is_absolute() and not path.exists():
        path = root / path
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise UsageError(
                f"--device-spec {name_or_file}: no such file; give a TOML spec file or one of {', '.join(builtin_names())}"
            )
        return load_file(path)
    raise UsageError(
        f"unknown device spec {name_or_file!r}; use one of {', '.join(builtin_names())} or a TOML file (see `archlint device-specs`)"
    )


def load_file(path: Path) -> DeviceSpec:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
        raise UsageError(f"device spec {path}: not valid TOML ({exc}); fix the file") from None
    return parse(data, str(path))


def _number(table: dict, key: str, where: str, positive: bool) -> float:
    if key not in table:
        raise UsageError(f"{where}: missing key {key!r}")
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{where}: {key!r} must be a number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise UsageError(f"{where}: {key!r} must be {'> 0' if positive else '≥ 0'}, got {value!r}")
    return float(value)


def parse(data: dict, where: str) -> DeviceSpec:
    kind = data.get("kind")
    if kind not in ("gpu", "cpu"):
        raise UsageError(f'device spec {where}: \'kind\' must be "gpu" or "cpu", got {kind!r}')
    where = f"device spec {where}"
    figures = GPU_FIGURES if kind == "gpu" else CPU_FIGURES
    # a CPU spec may give [interconnect] too: processes training over gloo (loopback, or hosts on a network)
    known = GPU_OPTIONAL if kind == "gpu" else CPU_OPTIONAL
    optional = tuple(k for k in known if k in data)
    allowed = set(_COMMON) | set(figures) | set(known)
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r}; a {kind} spec has {', '.join(sorted(allowed))}")
    for key in ("name", "description"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise UsageError(f"{where}: missing key {key!r} (a non-empty string)")
    sources = data.get("sources")
    if not isinstance(sources, dict):
        raise UsageError(f"{where}: missing key 'sources' (a table: one source per figure)")
    bad = sorted(set(sources) - set(figures) - set(optional))
    if bad:
        raise UsageError(f"{where}: unknown key 'sources.{bad[0]}'")
    for key in figures + optional:
        if not isinstance(sources.get(key), str) or not sources[key].strip():
            raise UsageError(f"{where}: missing key 'sources.{key}' (say where the figure comes from)")
    if kind == "gpu":
        peaks_t = data.get("peak-tflops")
        if not isinstance(peaks_t, dict):
            raise UsageError(f"{where}: missing key 'peak-tflops' (a table of dense TFLOP/s per unit)")
        extra = sorted(set(peaks_t) - set(TENSOR_UNITS + CUDA_UNITS))
        if extra:
            raise UsageError(
                f"{where}: unknown key 'peak-tflops.{extra[0]}'; use {', '.join(TENSOR_UNITS + CUDA_UNITS)}"
            )
        peaks = {
            u: _number(peaks_t, u, f"{where} [peak-tflops]", u == "cuda-fp32") * 1e12 for u in TENSOR_UNITS + CUDA_UNITS
        }
        tile = data.get("gemm-tile")
        if "gemm-tile" not in data:
            raise UsageError(f"{where}: missing key 'gemm-tile'")
        if not (
            isinstance(tile, list)
            and len(tile) == 3
            and all(isinstance(t, int) and not isinstance(t, bool) and t > 0 for t in tile)
        ):
            raise UsageError(f"{where}: 'gemm-tile' must be three positive integers [m, n, k], got {tile!r}")
        sms = _number(data, "sm-count", where, True)
        spec = DeviceSpec(
            name=data["name"],
            kind=kind,
            description=data["description"],
            peaks=peaks,
            bandwidth=_number(data, "memory-bandwidth-gbs", where, True) * 1e9,
            cache_bytes=_number(data, "l2-mb", where, True) * 2**20,
            overhead_s=_number(data, "launch-overhead-us", where, False) * 1e-6,
            sms=int(sms),
            tile=tuple(tile),
            sources=dict(sources),
            memory_bytes=int(_number(data, "memory-gib", where, True) * 2**30) if "memory-gib" in data else None,
            eager_op_s=_number(data, "eager-op-us", where, True) * 1e-6 if "eager-op-us" in data else None,
            achieved=_achieved(data.get("achieved", {}), where),
            interconnect=_interconnect(data.get("interconnect", {}), where),
        )
    else:
        n = {key: _number(data, key, where, key in _POSITIVE) for key in CPU_FIGURES}
        fp32 = n["cores"] * n["fma-units"] * n["simd-bits"] / 32 * 2 * n["frequency-ghz"] * 1e9
        spec = DeviceSpec(
            name=data["name"],
            kind=kind,
            description=data["description"],
            peaks={"vector-fp32": fp32, "vector-fp64": fp32 / 2},
            bandwidth=n["memory-bandwidth-gbs"] * 1e9,
            cache_bytes=n["cache-mb"] * 2**20,
            overhead_s=n["op-overhead-us"] * 1e-6,
            sms=int(n["cores"]),
            sources=dict(sources),
            interconnect=_interconnect(data.get("interconnect", {}), where),
        )
    return DeviceSpec(
        **{**spec.__dict__, "figures": {k: data[k] for k in figures}, "path": where.removeprefix("device spec ")}
    )


def _interconnect(table: object, where: str) -> dict[str, float]:
    if not isinstance(table, dict):
        raise UsageError(f"{where}: 'interconnect' must be a table of {', '.join(INTERCONNECT_KEYS)}")
    extra = sorted(set(table) - set(INTERCONNECT_KEYS))
    if extra:
        raise UsageError(f"{where}: unknown key 'interconnect.{extra[0]}'; use {', '.join(INTERCONNECT_KEYS)}")
    return {key: _number(table, key, f"{where} [interconnect]", key.endswith("gbs")) for key in table}


def _achieved(table: object, where: str) -> dict[str, tuple[float, float, float]]:
    if not isinstance(table, dict):
        raise UsageError(f"{where}: 'achieved' must be a table of name = [value, low, high]")
    out = {}
    for name, triple in table.items():
        if name not in SHARE_NAMES:
            raise UsageError(f"{where}: unknown key 'achieved.{name}'; use {', '.join(SHARE_NAMES)}")
        ok = (
            isinstance(triple, list)
            and len(triple) == 3
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in triple)
        )
        if not ok or not 0 < triple[1] <= triple[0] <= triple[2] <= 1:
            raise UsageError(
                f"{where}: 'achieved.{name}' must be [value, low, high] with 0 < low ≤ value ≤ high ≤ 1, got {triple!r}"
            )
        out[name] = (float(triple[0]), float(triple[1]), float(triple[2]))
    return out


def describe(spec: DeviceSpec) -> list[str]:
    """Lines for `archlint device-specs`: the figures and where each comes from."""
    lines = [f"{spec.name}  ({spec.kind}) {spec.description}"]
    if spec.kind == "gpu":
        peaks = ", ".join(f"{u} {v / 1e12:g}" for u, v in spec.peaks.items() if v > 0)
        lines.append(f"  peak TFLOP/s (dense): {peaks}")
        lines.append(
            f"  memory {spec.bandwidth / 1e9:g} GB/s, {spec.sms} SMs, L2 {spec.cache_bytes / 2**20:g} MiB, "
            f"launch {spec.overhead_s * 1e6:g} µs, GEMM tile {'×'.join(map(str, spec.tile))}"
        )
        if spec.interconnect:  # [interconnect]: the links of a multi-GPU step
            lines.append(
                "  interconnect (per GPU, each way): "
                + ", ".join(
                    f"{key.removesuffix('-gbs')} {value:g} GB/s"
                    if key.endswith("gbs")
                    else f"{key.removesuffix('-latency-us')} {value:g} µs a ring step"
                    for key, value in spec.interconnect.items()
                )
            )
    else:
        f = spec.figures
        lines.append(
            f"  {spec.cores} cores × {f['fma-units']:g} FMA units × {f['simd-bits']:g}-bit SIMD at {f['frequency-ghz']:g} GHz "
            f"= {spec.peaks['vector-fp32'] / 1e9:,.0f} GFLOP/s fp32"
        )
        lines.append(
            f"  memory {spec.bandwidth / 1e9:g} GB/s, cache {spec.cache_bytes / 2**20:g} MiB, overhead {spec.overhead_s * 1e6:g} µs per op"
        )
    by_text: dict[str, list[str]] = {}
    for key, text in spec.sources.items():  # one line per source, naming the figures it gives
        by_text.setdefault(text, []).append(key)
    for text, keys in by_text.items():
        lines.append(f"    source of {', '.join(keys)}: {text}")
    return lines


def list_command() -> int:
    for name in builtin_names():
        for line in describe(load_file(DIR / f"{name}.toml")):
            print(line)
        print()
    print("use: archlint model.py:Net --device-spec NAME (or a TOML file with the same keys; see cpu-template.toml)")
    return 0
