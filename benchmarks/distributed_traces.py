"""Real multi-rank traces of known models, read by `archlint trace`, against archlint's model side.

Each run trains a known model (an MLP, torchvision's resnet18, a 2-layer GPT-2) for a few steps in
`world` processes on this CPU with the gloo backend, under torch's DistributedDataParallel or FSDP2
(`fully_shard` per repeated block, then the root), with torch.profiler on every rank
(schedule: 1 wait, 2 warm-up, `--steps` active steps; record_shapes for the collectives' sizes),
and writes one Chrome trace per rank (rank{r}.json) into a folder. A `--slow-rank R` variant makes
rank R late to every step's collectives by `--slow-ms` (extra compute, 128×128 matmuls for that
long, inside record_function "extra_work", before its forward): the others wait for it in the gradient all-reduce.

Then, per run:
- `archlint trace FOLDER` (in-process, the CLI's code): what it reads per rank (collectives,
  exposed communication) and across ranks (wait vs transfer, the straggler, AL512);
- the collectives: the c10d ops each rank's main thread issued in one step (op, payload bytes, as
  benchmarks/distributed_memory.py reads them), against archlint's predicted list for the same model,
  strategy and world size (models[].distributed.collectives): equal as multisets or not;
- exposed communication: the trace's (gloo collective time on the rank's worker threads that no op of
  its other threads overlaps, per step; `exposed_communication_us` of archlint trace) against
  archlint's estimate (models[].distributed.estimate.exposed_comm_ms) with `--spec` (default:
  benchmarks/this_cpu_gloo.toml, whose [interconnect] is `--sweep`'s fit), and the same overlap model
  fed the step's measured phase times instead of archlint's compute estimate (isolating the
  communication model from the compute estimate).

`--sweep`: gloo's loopback all-reduce on this machine, 4 KB to 16 MB in 2 processes, fitted to the
ring model t = 2(n-1)/n·B/bw + 2(n-1)·α (least squares): the bandwidth and latency for the spec.

The machine is shared (2 cores, several processes): every figure is printed with the load average.
Traces are written to `--out` (default: a temporary folder, removed); none are committed except the
small fixture tests/fixtures/traces/gloo_ddp_mlp2_slow1 (made with --fixture).

Run: nice -n 10 python benchmarks/distributed_traces.py [--models mlp,resnet18,gpt2]
     [--strategies ddp,fsdp] [--worlds 2,4] [--slow-rank 1 --slow-ms 40] [--out DIR] [--json rows.json]
     python benchmarks/distributed_traces.py --sweep
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import socket
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SPEC = ROOT / "benchmarks" / "this_cpu_gloo.toml"
FIXTURE = ROOT / "tests" / "fixtures" / "traces" / "gloo_ddp_mlp2_slow1"
OPS = {
    "c10d::allreduce_": "all_reduce",
    "c10d::_allgather_base_": "all_gather",
    "c10d::allgather_": "all_gather",
    "c10d::_reduce_scatter_base_": "reduce_scatter",
    "c10d::reduce_scatter_": "reduce_scatter",
    "c10d::broadcast_": "broadcast",
}
PHASES = ("forward", "backward", "optimizer")


def _mlp():
    m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    return m, (torch.randn(16, 256),), {}


def _resnet18():
    import torchvision.models as tvm

    return tvm.resnet18(weights=None), (torch.randn(2, 3, 32, 32),), {}


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(
        vocab_size=512, n_embd=64, n_layer=2, n_head=2, n_positions=64, use_cache=False, attn_implementation="eager"
    )
    ids = torch.randint(0, 512, (2, 32))
    return GPT2LMHeadModel(cfg), (), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


MODELS = {"mlp": _mlp, "resnet18": _resnet18, "gpt2": _gpt2}


def _loss(out) -> torch.Tensor:
    from archlint.model.train.memory import step_loss

    return step_loss(out)


def _build(model_name: str, strategy: str):
    torch.manual_seed(0)
    model, args, kwargs = MODELS[model_name]()
    model.train()
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(model), args, kwargs
    from torch.distributed.fsdp import fully_shard

    from archlint.model.distributed.units import shard_units

    for path in shard_units(model).paths:
        fully_shard(model.get_submodule(path))
    fully_shard(model)
    return model, args, kwargs


def _worker(rank: int, world: int, port: int, model_name: str, strategy: str, steps: int, slow: tuple, out: str):
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        model, args, kwargs = _build(model_name, strategy)
        from archlint.model.train.memory import make_optimizer

        opt = make_optimizer("adam", [p for p in model.parameters() if p.requires_grad])
        slow_rank, slow_ms = slow
        with profile(
            activities=[ProfilerActivity.CPU],
            record_shapes=True,
            schedule=schedule(wait=1, warmup=2, active=steps, repeat=1),
            on_trace_ready=lambda p: p.export_chrome_trace(str(Path(out) / f"rank{rank}.json")),
        ) as prof:
            for _ in range(3 + steps):
                opt.zero_grad(set_to_none=True)
                if rank == slow_rank:  # extra compute: late to the step's collectives, the others wait for it
                    with record_function("extra_work"):
                        a, until = torch.randn(128, 128), time.perf_counter() + slow_ms / 1e3
                        while time.perf_counter() < until:
                            a = torch.tanh(a @ a)
                with record_function("phase:forward"):
                    loss = _loss(model(*args, **kwargs))
                with record_function("phase:backward"):
                    loss.backward()
                with record_function("phase:optimizer"):
                    opt.step()
                prof.step()
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def record(model_name: str, strategy: str, world: int, out: Path, steps: int = 4, slow=(-1, 0.0)) -> Path:
    """One job's traces, rank{r}.json in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    mp.spawn(_worker, args=(world, _port(), model_name, strategy, steps, slow, str(out)), nprocs=world)
    return out


# --- the trace's own figures (raw JSON: what the benchmark checks archlint trace against) -------------


def _events(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def _numel(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


ITEMSIZE = {"float": 4, "c10::BFloat16": 2, "c10::Half": 2, "double": 8, "long int": 8, "int": 4}


def issued(path: Path, itemsize: int = 4) -> list[list[tuple[str, int]]]:
    """Per ProfilerStep, the collectives the rank's main thread issued (c10d ops: op, payload bytes:
    an all-gather's output, a reduce-scatter's input, an all-reduce's buffer). A TensorList's dtype is
    not recorded with the c10d op: gloo's own run of it (the next gloo event of its kind and dims) has
    it; else the models' fp32 (`itemsize`)."""
    ev = _events(path)
    steps = sorted((e for e in ev if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
    runs = sorted((e for e in ev if e["name"] in ("gloo:all_reduce", "gloo:broadcast")), key=lambda e: e["ts"])
    out = []
    for s in steps:
        got = []
        for e in sorted(ev, key=lambda e: e["ts"]):
            if e["name"] in OPS and e["tid"] == s["tid"] and s["ts"] <= e["ts"] < s["ts"] + s["dur"]:
                dims = e["args"]["Input Dims"]
                if e["name"] == "c10d::_allgather_base_":
                    nbytes = _numel(dims[0]) * itemsize
                elif e["name"] == "c10d::_reduce_scatter_base_":
                    nbytes = _numel(dims[1]) * itemsize
                else:
                    kind = "gloo:all_reduce" if e["name"] == "c10d::allreduce_" else "gloo:broadcast"
                    run = next(
                        (
                            g
                            for g in runs
                            if g["name"] == kind and g["ts"] >= e["ts"] and g["args"].get("Input Dims") == dims[0]
                        ),
                        None,
                    )
                    size = itemsize
                    if run is not None:
                        runs.remove(run)
                        size = ITEMSIZE.get(run["args"]["Input type"][0], itemsize)
                    nbytes = sum(_numel(d) for d in dims[0]) * size
                got.append((OPS[e["name"]], nbytes))
        out.append(got)
    return out


def _union(events) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted((x["ts"], x["ts"] + x["dur"]) for x in events):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def phases(path: Path) -> dict[str, float]:
    """The rank's mean phase times per step (ms): the phase annotations' wall time, and the backward's
    compute (backward_busy: its operators, less the time blocked in a wait or a collective's call)."""
    ev = _events(path)
    out: dict[str, list[float]] = {p: [] for p in PHASES}
    busy_bwd = []
    for e in ev:
        if e["name"].startswith("phase:"):
            out[e["name"][6:]].append(e["dur"] / 1e3)
            if e["name"] == "phase:backward":
                lo, hi = e["ts"], e["ts"] + e["dur"]
                inside = [x for x in ev if x["tid"] == e["tid"] and x is not e and lo <= x["ts"] < hi]
                # as archlint trace counts compute: operators, less the time blocked in a wait or a collective's call
                blocked = _union(x for x in inside if re.search(r"wait|^c10d::|^record_param_comms$", x["name"], re.I))
                busy = 0.0
                for a, b in _union(x for x in inside if x.get("cat") == "cpu_op"):
                    busy += (b - a) - sum(max(0.0, min(b, d) - max(a, c)) for c, d in blocked)
                busy_bwd.append(busy / 1e3)
    means = {p: statistics.mean(v) for p, v in out.items() if v}
    means["backward_busy"] = statistics.mean(busy_bwd) if busy_bwd else 0.0
    return means


# --- archlint's two sides --------------------------------------------------------------------------


def read_traces(folder: Path) -> dict:
    """`archlint trace FOLDER --output-format json`, in-process (the CLI's code)."""
    import contextlib
    import io

    from archlint.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "r.json"
        with contextlib.redirect_stdout(io.StringIO()):
            main(["trace", str(folder), "--output-format", "json", "-o", str(report), "--exit-zero"])
        return json.loads(report.read_text())


def predict(model_name: str, strategy: str, world: int, spec: Path, measured: dict | None = None) -> dict:
    """archlint's collectives and estimate for the same step (per-rank batch = the run's)."""
    from archlint import api

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model, args, kwargs = MODELS[model_name]()
    inputs = (*args, kwargs) if kwargs else args
    d = (
        api.analyze(
            model,
            *inputs,
            train=True,
            optimizer="adam",
            world_size=world,
            strategy=strategy,
            device_spec=str(spec),
        )
        .to_dict()["models"][0]
        .get("distributed", {})
    )
    comms = [(c["op"], c["bytes_per_rank"]) for c in d.get("collectives", []) for _ in range(c["count"])]
    out = {"comms": comms, "estimate": d.get("estimate") or {}}
    if measured is not None:  # the same overlap model fed the step's measured phases
        from archlint.devices import resolve
        from archlint.model.distributed.comm import estimate_step
        from archlint.model.distributed.step import distributed_step
        from archlint.model.distributed.strategy import parallel

        torch.manual_seed(0)
        model, args, kwargs = MODELS[model_name]()
        model.train()
        _, rec, units = distributed_step(model, args, kwargs, parallel(strategy, world), optimizer="adam", loss="mean")
        train = {
            "forward_ms": measured["forward"],
            "backward_ms": measured["backward_busy"],
            "optimizer_ms": measured["optimizer"],
            "step_ms": measured["forward"] + measured["backward_busy"] + measured["optimizer"],
        }
        out["with_measured_compute"] = estimate_step(rec, units, parallel(strategy, world), resolve(str(spec)), train)
    return out


def compare(model_name: str, strategy: str, world: int, folder: Path, spec: Path, slow: tuple) -> dict:
    report = read_traces(folder)
    traces = sorted(report["traces"], key=lambda t: t["rank"])
    ranks = report.get("ranks") or []
    cross = ranks[0] if ranks else None
    files = sorted(folder.glob("rank*.json*"))
    steps = [issued(f) for f in files]
    trace_comms = [Counter(s[-1]) for s in steps]  # one complete step per rank (the last active one)
    rank_phases = [phases(f) for f in files]
    mean_phase = {k: statistics.mean(p[k] for p in rank_phases) for k in rank_phases[0]}
    pred = predict(model_name, strategy, world, spec, mean_phase)
    same = all(c == Counter(pred["comms"]) for c in trace_comms)
    # per rank and step (its steady steps' waterfall): the exposed communication, HTA's definition (the
    # collectives' time no compute overlaps, a wait for a slower rank included), and each rank's wait
    waits = {f["rank"]: f["wait_us"] / 1e3 for f in cross["per_rank"]} if cross else {}
    exposed = [_per_step(t, "exposed_communication") for t in traces]
    step_ms = [statistics.mean(s["wall_us"] for s in t["per_step"] if s["steady"]) / 1e3 for t in traces]
    findings = [d for d in report.get("diagnostics", report.get("findings", [])) if d.get("code") == "AL512"]
    est = pred["estimate"]
    own = pred["with_measured_compute"]
    row = {
        "model": model_name,
        "strategy": strategy,
        "world": world,
        "slow": list(slow),
        "load": os.getloadavg()[0],
        "collectives_trace": sorted(trace_comms[0].items()),
        "collectives_archlint": sorted(Counter(pred["comms"]).items()),
        "collectives_equal": same,
        "trace_collective_names": [
            sorted((c["name"], c["calls_per_step"]) for c in t["evidence"].get("collectives", [])) for t in traces
        ],
        "step_ms": step_ms,
        "exposed_ms_trace": exposed,
        "wait_ms_trace": [waits.get(t["rank"]) for t in traces],
        "comm_ms_trace": [t["communication_us"] / max(1, t["steps"]) / 1e3 for t in traces],
        "transfer_ms_trace": sum(c["transfer_us"] for c in cross["collectives"]) / 1e3 if cross else None,
        "exposed_ms_archlint": est.get("exposed_comm_ms"),
        "comm_ms_archlint": est.get("comm_ms"),
        "compute_ms_archlint": est.get("compute_ms"),
        "exposed_ms_archlint_measured_compute": own.get("exposed_comm_ms"),
        "phases_ms": mean_phase,
        "straggler": cross["straggler"] if cross else None,
        "al512": [d.get("message", "") for d in findings],
    }
    med = statistics.median(exposed)
    print(
        f"{model_name:<9} {strategy:<5} N={world} slow={slow[0] if slow[0] >= 0 else '-'} load {row['load']:.1f} | "
        f"collectives {'equal' if same else 'DIFFER'} ({sum(trace_comms[0].values())}/step) | step "
        f"{statistics.median(step_ms):.1f} ms | exposed trace {med:.2f} ms (ranks {', '.join(f'{x:.2f}' for x in exposed)}; "
        f"waits {', '.join(_f(waits.get(t['rank'])) for t in traces)}) "
        f"archlint {_f(est.get('exposed_comm_ms'))} (ratio {_ratio(est.get('exposed_comm_ms'), med)}), with measured "
        f"compute {_f(own.get('exposed_comm_ms'))} (ratio {_ratio(own.get('exposed_comm_ms'), med)}) | transfer trace "
        f"{_f(row['transfer_ms_trace'])} archlint comm {_f(est.get('comm_ms'))} | straggler "
        f"{cross['straggler']['rank'] if cross and cross['straggler'] else '-'} AL512 {len(findings)}",
        flush=True,
    )
    if not same:
        print(f"   trace {row['collectives_trace']}\n   archlint {row['collectives_archlint']}")
    return row


def _per_step(t: dict, bucket: str) -> float:
    """A trace's bucket, ms per steady step (its waterfall: the mean of its steady windows)."""
    steady = [s for s in t["per_step"] if s["steady"] and s["complete"]]
    return statistics.mean(s["buckets"].get(bucket, 0.0) for s in steady) / 1e3 if steady else 0.0


def _f(v) -> str:
    return "—" if v is None else f"{v:.2f}"


def _ratio(a, b) -> str:
    return "—" if a is None or not b else f"{a / b:.2f}"


# --- gloo's loopback link ------------------------------------------------------------------------------


def _sweep_worker(rank: int, world: int, port: int, out: str):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    rows = []
    for k in range(10, 23, 2):  # 1 Ki to 4 Mi floats: 4 KB to 16 MB
        x = torch.ones(2**k)
        times = []
        for _ in range(12):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(x)
            times.append(time.perf_counter() - t0)
        rows.append((x.numel() * 4, statistics.median(times[2:])))
    if rank == 0:
        Path(out).write_text(json.dumps(rows))
    dist.destroy_process_group()


def sweep(world: int = 2) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sweep.json"
        mp.spawn(_sweep_worker, args=(world, _port(), str(out)), nprocs=world)
        rows = json.loads(out.read_text())
    # t = moved/bw + steps·α with moved = 2(n-1)/n·B, steps = 2(n-1): least squares in (1/bw, α) of the
    # relative error (each size weighs alike; plain least squares lets the 16 MB point decide alone)
    xs = [(2 * (world - 1) / world * b / t, 2 * (world - 1) / t) for b, t in rows]
    sxx = sum(a * a for a, _ in xs)
    sxs = sum(a * s for a, s in xs)
    sss = sum(s * s for _, s in xs)
    sxy = sum(a for a, _ in xs)
    ssy = sum(s for _, s in xs)
    det = sxx * sss - sxs * sxs
    inv_bw = (sxy * sss - sxs * ssy) / det
    alpha = (sxx * ssy - sxs * sxy) / det
    for b, t in rows:
        print(f"  all_reduce {b / 1e3:>9.0f} KB: {t * 1e3:8.3f} ms")
    fit = {"gbs": 1 / inv_bw / 1e9, "latency_us": alpha * 1e6, "rows": rows, "load": os.getloadavg()[0]}
    print(
        f"fit over {world} ranks: {fit['gbs']:.3f} GB/s per rank, {fit['latency_us']:.1f} µs per ring step "
        f"(load {fit['load']:.1f})"
    )
    return fit


def make_fixture() -> None:
    """tests/fixtures/traces/gloo_ddp_mlp2_slow1: 2 ranks of the MLP under DDP, rank 1 late by 40 ms."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = record("mlp", "ddp", 2, Path(tmp), steps=3, slow=(1, 40.0))
        FIXTURE.mkdir(parents=True, exist_ok=True)
        for f in sorted(folder.glob("rank*.json")):
            with gzip.open(FIXTURE / (f.name + ".gz"), "wt", compresslevel=9) as out:
                out.write(f.read_text())
    print(f"wrote {FIXTURE}: {sum(p.stat().st_size for p in FIXTURE.iterdir()) / 1e3:.0f} KB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp,resnet18,gpt2")
    parser.add_argument("--strategies", default="ddp,fsdp")
    parser.add_argument("--worlds", default="2,4")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--slow-rank", type=int, default=1, help="the straggler variant's slow rank (-1: none)")
    parser.add_argument("--slow-ms", type=float, default=40.0)
    parser.add_argument("--spec", type=Path, default=SPEC)
    parser.add_argument("--out", type=Path, help="keep the traces here (one folder per run)")
    parser.add_argument("--json", type=Path, help="write the rows here")
    parser.add_argument("--reuse", action="store_true", help="read the traces already in --out instead of new runs")
    parser.add_argument("--sweep", action="store_true", help="only measure gloo's all-reduce on this machine")
    parser.add_argument("--sweep-world", type=int, default=2, help="--sweep's processes")
    parser.add_argument("--fixture", action="store_true", help="only (re)make the test fixture")
    a = parser.parse_args()
    if a.sweep:
        sweep(a.sweep_world)
        return 0
    if a.fixture:
        make_fixture()
        return 0
    base = a.out or Path(tempfile.mkdtemp(prefix="archlint-traces-"))
    rows = []
    try:
        for name in a.models.split(","):
            for strategy in a.strategies.split(","):
                for world in (int(w) for w in a.worlds.split(",")):
                    variants = [(-1, 0.0)]
                    if a.slow_rank >= 0 and strategy == "ddp" and a.slow_rank < world:
                        variants.append((a.slow_rank, a.slow_ms))
                    for slow in variants:
                        tag = f"{name}_{strategy}_{world}" + (f"_slow{slow[0]}" if slow[0] >= 0 else "")
                        folder = base / tag
                        try:
                            if not (a.reuse and len(list(folder.glob("rank*.json"))) == world):
                                record(name, strategy, world, folder, a.steps, slow)
                        except mp.ProcessRaisedException as exc:  # a step that cannot run here: said, skipped
                            print(f"{tag}: the real step failed: {str(exc).strip().splitlines()[-1][:120]}")
                            continue
                        rows.append(compare(name, strategy, world, folder, a.spec, slow))
                        if a.json:
                            a.json.write_text(json.dumps(rows, indent=1, default=str))
    finally:
        if a.out is None:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
