"""`archlint calibrate --families`: the family microbenchmarks turned into device-spec TOML.

Runs archlint.model.estimating.families on a device, takes the shares of the roofs (a spec's datasheet
figures with `--device-spec`, else the peaks this command measures), and prints a ready-to-paste TOML
fragment: `launch-overhead-us`, `[host-op-us]`, `[achieved]`, `[size-share]` and their
`[sources]` lines, each source saying where the figure came from. `--write-spec PATH` writes a
copy of the `--device-spec` file with those figures replaced (only the keys the spec loader knows; the
copy is loaded back before it is written, atomically, and an existing file is kept unless
`--force`).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from archlint import devices
from archlint.errors import UsageError
from archlint.model.estimating import families
from archlint.model.estimating.estimate import Gemm, tile_efficiency
from archlint.model.timing.roofline import device_key, peaks, resolve_device, resolve_dtype
from archlint.model.timing.timer import load_average

HOST_OPS = (("elementwise", False), ("elementwise-autocast", True), ("linear", False), ("linear-autocast", True))
_TENSOR_UNIT = {torch.float16: "tensor-fp16", torch.bfloat16: "tensor-bf16", torch.float32: "tensor-tf32"}


def roofs_for(spec, measured: dict, dtype: torch.dtype) -> families.Roofs:
    """A spec's datasheet roofs (what the estimate multiplies the shares by), else the measured peaks."""
    if spec is not None:
        unit = _TENSOR_UNIT.get(dtype, "tensor-fp16")
        return families.Roofs(
            flops={"tensor": spec.peaks.get(unit, 0.0), "cuda": spec.peaks.get("cuda-fp32", 0.0)},
            bandwidth=spec.bandwidth,
            tile=spec.tile,
            sms=spec.sms,
            basis=f"the {spec.name} spec's roofs ({unit} {spec.peaks.get(unit, 0) / 1e12:g} TFLOP/s, cuda-fp32 "
            f"{spec.peaks.get('cuda-fp32', 0) / 1e12:g} TFLOP/s, {spec.bandwidth / 1e9:g} GB/s), divided by "
            f"the estimate's tile/wave efficiency ({'×'.join(map(str, spec.tile))} tiles on {spec.sms} SMs)",
        )
    return families.Roofs(
        flops={"tensor": measured["peak_flops_per_s"]},
        bandwidth=measured["bandwidth_bytes_per_s"],
        basis=f"the peaks this command measured ({measured['peak_flops_per_s'] / 1e12:.3g} TFLOP/s, "
        f"{measured['matmul_n']}² matmul; {measured['bandwidth_bytes_per_s'] / 1e9:.4g} GB/s, copy)",
    )


def measure(device: torch.device, dtype: torch.dtype, batch: int, repeat: int, spec=None) -> dict:
    """Everything the TOML is made of: peaks, one row per case, the size curve and the host costs."""
    if device.type == "cuda" and dtype not in (torch.float16, torch.bfloat16):
        raise UsageError(
            f"calibrate --families on {device}: use --dtype float16 or bfloat16 (the tensor-core "
            "families are measured in 16 bits; the CUDA-core family runs in float32 by itself)"
        )
    measured, _ = peaks(device, dtype, recalibrate=True)
    roofs = roofs_for(spec, measured, dtype)
    rows = []
    if spec is not None:  # the peak's own square matmul, against the datasheet: the high end of tensor-gemm
        n = measured["matmul_n"]
        eff = tile_efficiency(Gemm(n, n, n), spec.tile, spec.sms)
        rows.append(
            {
                "name": f"matmul {n}³ (the peak measurement, best of 5)",
                "family": "tensor-gemm",
                "used": True,
                "ms": 2 * n**3 / measured["peak_flops_per_s"] * 1e3,
                "share": measured["peak_flops_per_s"] / (roofs.flops["tensor"] * eff),
            }
        )
    cuda_core = spec is not None and device.type == "cuda"
    for case in families.family_cases(device, dtype, batch, cuda_core=cuda_core):
        ms = families.time_case(case, device, dtype, repeat)
        rows.append(
            {
                "name": case.name,
                "family": case.family,
                "used": case.used,
                "ms": ms,
                "share": families.share(case, ms, roofs),
            }
        )
    curve = {}
    raw = families.Roofs(roofs.flops, roofs.bandwidth, roofs.basis)  # no tile/wave term: the curve shows it
    for kind, cases in families.curve_cases(device, dtype, batch).items():
        curve[kind] = [
            (shape, families.share(c, families.time_case(c, device, dtype, repeat), raw)) for shape, c in cases
        ]
    host = {name: families.host_op_us(device, name.split("-")[0], autocast) for name, autocast in HOST_OPS}
    return {
        "device": device_key(device, dtype),
        "name": _device_name(device),
        "dtype": str(dtype).removeprefix("torch."),
        "batch": batch,
        "repeat": repeat,
        "roofs": roofs,
        "peaks": measured,
        "rows": rows,
        "curve": curve,
        "host": host,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "timer": _timer(device),
        "versions": _versions(device),
    }


def _device_name(device: torch.device) -> str:
    return (
        torch.cuda.get_device_name(device) if device.type == "cuda" else device_key(device, torch.float32).split("|")[1]
    )


def _timer(device: torch.device) -> str:
    return "CUDA events" if device.type == "cuda" else "perf_counter"


def _versions(device: torch.device) -> str:
    text = f"torch {torch.__version__}"
    if device.type == "cuda":
        text += f", CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}"
    return text


def achieved(rows: list[dict]) -> dict[str, tuple[float, float, float, bool]]:
    """Per family: (value, low, high, capped) over its rows that count."""
    by: dict[str, list[float]] = {}
    for r in rows:
        if r["used"] and r["share"] is not None:
            by.setdefault(r["family"], []).append(r["share"])
    return {name: families.summarize(shares) for name, shares in by.items()}


def _num(x: float) -> float:
    """Three significant figures: monotone, so low ≤ value ≤ high still holds, and never 0."""
    return float(f"{x:.3g}")


def _percent(x: float) -> str:
    return f"{x * 100:.3g}%"  # 76%, 2.4%, 0.052%: a small share stays readable


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def fragments(result: dict) -> dict:
    """The TOML pieces: top-level keys, tables (name → lines) and sources (key → text)."""
    where = (
        f"archlint calibrate --families on {result['name']} ({result['date']}, {result['versions']}, "
        f"{result['dtype']}, batch {result['batch']}, {result['timer']}, median of {result['repeat']})"
    )
    shares = achieved(result["rows"])
    order = [n for n in devices.SHARE_NAMES if n in shares]
    per_family = "; ".join(
        f"{name} from "
        + ", ".join(
            f"{r['name']} {_percent(r['share'])}"
            for r in result["rows"]
            if r["used"] and r["family"] == name and r["share"] is not None
        )
        + f" (median {_percent(shares[name][0])}{', capped at 100%' if shares[name][3] else ''})"
        for name in order
    )
    host = result["host"]
    curve = result["curve"]
    return {
        "top": {"launch-overhead-us": _num(host["elementwise"])},
        "tables": {
            "host-op-us": ["[host-op-us]  # eager per-op host cost, µs (see sources.host-op-us)"]
            + [f"{k} = {_num(v)}" for k, v in host.items()],
            "achieved": [
                f"[achieved]  # measured on {result['name']} (see sources.achieved): [value, low, high] of the roof"
            ]
            + [f"{n} = [{_num(shares[n][0])}, {_num(shares[n][1])}, {_num(shares[n][2])}]" for n in order],
            "size-share": ["[size-share]  # share of the tensor roof by size, no tile/wave term divided out"]
            + [
                f"{kind} = [{', '.join('[' + ', '.join(map(str, (*shape, _num(s)))) + ']' for shape, s in pts)}]"
                for kind, pts in curve.items()
            ],
        },
        "sources": {
            "achieved": f"{where}: shares of {result['roofs'].basis}; value = the median case, low-high = the "
            f"lowest and highest case; {per_family}",
            "launch-overhead-us": f"{where}: 1,000 torch.relu calls on a 1-element tensor timed end to end, median of 5: "
            f"{host['elementwise']:.2f} µs per eager op (host-op-us.elementwise)",
            "host-op-us": f"{where}: 1,000 tiny ops timed end to end (synchronized before and after), median of 5, µs "
            "per op: elementwise = torch.relu on 1 element, linear = F.linear 1×8·8×8; -autocast: the same "
            f"under torch.autocast({'float16' if 'cuda' in result['device'] else 'bfloat16'}), which casts "
            "the linear's input and weight at every call",
            "size-share": f"{where}: gemm = [m, k, n, share] of the ViT-B MLP fc1 GEMM, conv = [batch, cin, cout, hw, "
            f"kernel, share] of a 3×3 NHWC conv, batch 1 up to {result['batch']}; shares of the tensor "
            f"roof ({result['roofs'].basis.split(', divided')[0]}), no tile/wave term divided out",
        },
    }


def to_toml(result: dict) -> str:
    """The whole output: the cases as comments, then the TOML to paste (valid TOML on its own)."""
    f = fragments(result)
    lines = [
        f"# archlint calibrate --families: {result['device']}, batch {result['batch']}, median of {result['repeat']}",
        f"# shares of {result['roofs'].basis}",
        "#",
        f"# {'case':72} {'family':12} {'ms':>10} {'share':>7}",
    ]
    for r in result["rows"]:
        share = "-" if r["share"] is None else f"{r['share']:.1%}"
        lines.append(f"# {r['name']:72} {r['family'] + ('' if r['used'] else '*'):12} {r['ms']:10.4f} {share:>7}")
    lines.append("# (* reported only, counted in no share; - no such roof without --device-spec)")
    lines += [""] + [f"{k} = {v}" for k, v in f["top"].items()]
    for table in f["tables"].values():
        lines += [""] + table
    lines += ["", "[sources]"] + [f"{k} = {_quote(v)}" for k, v in f["sources"].items()]
    return "\n".join(lines) + "\n"


def merged_spec(text: str, f: dict, known: set[str]) -> tuple[str, list[str]]:
    """The spec's text with the measured figures put in (keys the loader knows: `known`), its
    comments and other figures kept; and the keys left out because the loader does not know them."""
    sections: list[tuple[str | None, list[str]]] = [(None, [])]
    for line in text.splitlines():
        if line.startswith("["):
            sections.append((line.split("]")[0].lstrip("["), [line]))
        else:
            sections[-1][1].append(line)
    left_out = sorted({k for k in (*f["top"], *f["tables"]) if k not in known})
    top = sections[0][1]
    for key, value in f["top"].items():
        if key in known:
            _set(top, key, str(value))
    sections = [(name, lines) for name, lines in sections if name not in f["tables"] or name not in known]
    new = [(name, lines + [""]) for name, lines in f["tables"].items() if name in known]
    at = next((i for i, (name, _) in enumerate(sections) if name == "sources"), len(sections))
    sections[at:at] = new
    for name, lines in sections:
        if name == "sources":
            for key, value in f["sources"].items():
                if key in known:
                    _set(lines, key, _quote(value))
    return "\n".join(line for _, lines in sections for line in lines).rstrip("\n") + "\n", left_out


def _set(lines: list[str], key: str, value: str) -> None:
    """Replace `key = …` in a section's lines, or add it after the section's last key."""
    for i, line in enumerate(lines):
        if line.split("=")[0].strip() == key and "=" in line:
            lines[i] = f"{key} = {value}"
            return
    last = max(
        (i for i, line in enumerate(lines) if "=" in line and not line.lstrip().startswith("#")), default=len(lines) - 1
    )
    lines.insert(last + 1, f"{key} = {value}")


def write_spec(spec, f: dict, path: Path, force: bool) -> list[str]:
    """Write the merged copy of `spec` to `path` atomically; it must load as a spec first."""
    if path.exists() and not force:
        raise UsageError(f"--write-spec {path}: the file exists; give another path or --force to replace it")
    known = set(devices.GPU_FIGURES) | set(devices.GPU_OPTIONAL)
    text, left_out = merged_spec(Path(spec.path).read_text(encoding="utf-8"), f, known)
    devices.parse(tomllib.loads(text), str(path))  # a copy the loader rejects is never written
    from archlint import writeguard
    from archlint.outputs import write_text

    with writeguard.run_inputs():  # never over the spec it copies (its figures would be lost with --force)
        writeguard.note_inputs([spec.path], "the device spec")
        write_text(path, text, "the device spec")
    return left_out


def families_command(
    device: str, dtype: str, batch: int | None, repeat: int, spec_name: str | None, write: str | None, force: bool
) -> int:
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    spec = devices.resolve(spec_name) if spec_name else None
    if spec is not None and spec.kind != "gpu":
        raise UsageError(f"--device-spec {spec_name}: a {spec.kind} spec has no [achieved] shares; give a GPU spec")
    if write and spec is None:
        raise UsageError("--write-spec needs --device-spec NAME: the spec file to copy with the measured figures")
    if write and Path(write).exists() and not force:  # said before minutes of measuring, not after
        raise UsageError(f"--write-spec {write}: the file exists; give another path or --force to replace it")
    if repeat < 1 or (batch is not None and batch < 1):
        raise UsageError("--batch and --repeat must be 1 or more")
    result = measure(dev, dt, batch or (256 if dev.type == "cuda" else 8), repeat, spec)
    sys.stdout.write(to_toml(result))
    load = load_average()
    if dev.type == "cpu" and load is not None and load > (os.cpu_count() or 1):
        print(
            f"# warning: the machine was busy (load average {load:.1f}): these figures are likely off; measure again when it is quiet"
        )
    if write:
        left_out = write_spec(spec, fragments(result), Path(write), force)
        print(
            f"# written: {write} (a copy of {spec.path} with the figures above)"
            + (f"; not written, as the spec loader does not know them yet: {', '.join(left_out)}" if left_out else "")
        )
    return 0
