"""The caching allocator's record of real training steps against the memory model's replay: where
the reserved peak comes from.

benchmarks/gpu_checks.py (section alloc_trace) keeps, for a few (model, optimizer) at batch 32, every
alloc, free and segment of two training steps on the GPU and which aten op asked for each block. For
each traced case this prints, in GB and as a share of the memory section's max_memory_reserved:

  trace       the segments the trace itself reserved (the model's weights, made before, not in it)
  events      the trace's alloc/free sequence replayed through archlint's Allocator: are its rules right?
  no cuDNN    the same without the cuDNN workspaces (blocks a convolution op frees before the next
              allocation): what they add to the reserved peak
  archlint    the memory model's replay (step_memory on meta, --device-spec h200): the workspaces at
              the size rule's estimates (archlint.model.train.gpu_workspaces)
  traced ws   the memory model's own sequence with each convolution's workspaces at the sizes and places
              the trace shows (the rule swapped for the trace, here only): the steady step alone, and
              both steps as one process (what step_memory replays)

and, with --convs, each convolution's traced blocks beside the rule's workspaces; with --ops, the
bytes each kind of op allocated in the steady step, traced beside the memory model's (where the
model misses allocations: an op kind the meta step does not run, or runs with other sizes).

Usage: python benchmarks/gpu_alloc_trace.py RESULTS.json[.gz] [--convs] [--ops]
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

CONV_OPS = ("convolution", "convolution_backward")
# ops CUDA runs where the meta device runs another of the same outputs
ON_META = {"cudnn_batch_norm": "native_batch_norm", "cudnn_batch_norm_backward": "native_batch_norm_backward"}
MiB = 1 << 20


def load(path: Path) -> dict:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)


def blocks(row: dict) -> list[dict]:
    """Each traced allocation: size, event index, free event index, step, op index, op name, and
    whether it is a cuDNN workspace (in a convolution op, freed before the next allocation)."""
    events, out, live = row["events"], [], {}
    for i, (action, size, addr) in enumerate(events):
        if action == "alloc":
            live[addr] = len(out)
            out.append({"size": size, "at": i, "freed": None})
        elif action == "free_completed" and addr in live:
            out[live.pop(addr)]["freed"] = i
    base = row["allocations_before"]
    for step, record in enumerate(row["steps"]):
        for j, (name, start, end) in enumerate(record["ops"]):
            for k in range(start + 1, end + 1):  # the k-th allocation is number allocations_before + k
                b = out[k - base - 1]
                after = out[k - base]["at"] if k - base < len(out) else len(events)
                b.update(
                    step=step,
                    op=j,
                    name=name,
                    workspace=name in CONV_OPS and b["freed"] is not None and b["freed"] < after,
                )
    return out


def trace_reserved(row: dict) -> int:
    reserved = peak = 0
    for action, size, _ in row["events"]:
        reserved += size if action == "segment_alloc" else -size if action == "segment_free" else 0
        peak = max(peak, reserved)
    return peak


def replay_events(row: dict, keep=lambda b: True) -> int:
    from archlint.model.train.allocator import Allocator

    alloc, live, n = Allocator(), {}, iter(blocks(row))
    for action, size, addr in row["events"]:
        if action == "alloc":
            if keep(next(n)):
                live[addr] = alloc.malloc(size)
        elif action == "free_completed" and addr in live:
            alloc.free(live.pop(addr))
    return alloc.peak_reserved


def traced_workspaces(row: dict) -> list[tuple[str, list[tuple[int, int]]]]:
    """Each convolution op of the second (steady) step: its name and workspaces as the tracker places
    them, (outputs made before it, bytes)."""
    ops: dict[int, list[dict]] = {}
    for b in blocks(row):
        if b.get("step") == 1 and b["name"] in CONV_OPS:
            ops.setdefault(b["op"], []).append(b)
    names = [(j, name) for j, (name, *_) in enumerate(row["steps"][1]["ops"]) if name in CONV_OPS]
    out = []
    for j, name in names:
        made, ws = 0, []
        for b in ops.get(j, []):
            if b["workspace"]:
                ws.append((max(made, 1), b["size"]))
            else:
                made += 1
        out.append((name, ws))
    return out


def meta_steps(name: str, optimizer: str, batch: int, workspaces=None):
    """The memory model's two trackers for this case; `workspaces` (a list as traced_workspaces gives)
    stands in for the size rule, op by op in turn."""
    import torch
    from gpu_checks import build

    from archlint.devices import resolve
    from archlint.model.train import memory
    from archlint.model.train.gpu_workspaces import cublas_sizes, threads_per_sm

    model, args, kwargs = build(name, batch, "cpu")
    model.train()
    spec = resolve("h200")
    cublas, lt, _ = cublas_sizes(spec)
    grid = (spec.sms, threads_per_sm(spec)[0])  # reductions' buffers, as step_memory counts them
    meta, margs, mkwargs = memory.to_meta(model), memory._meta_inputs(tuple(args)), memory._meta_inputs(dict(kwargs))
    values = memory._input_values(model, meta, (args, kwargs), (margs, mkwargs))
    base, variant = memory.parse_optimizer(optimizer)
    rule = memory.cudnn_workspaces
    if workspaces is not None:
        turn = itertools.cycle(workspaces)
        convs = (torch.ops.aten.convolution, torch.ops.aten.convolution_backward)

        def traced(func, op_args):
            if getattr(func, "overloadpacket", None) not in convs:
                return []
            op, ws = next(turn)
            assert op == func.overloadpacket.__name__, f"the trace's op {op} is not the model's {func}"
            return ws

        memory.cudnn_workspaces = traced
    try:
        first, second, _ = memory._two_steps(
            meta,
            margs,
            mkwargs,
            base,
            variant or "foreach",
            "mean",
            True,
            False,
            values,
            {"cublas": cublas, "cublasLt": lt},
            grid,
        )
    finally:
        memory.cudnn_workspaces = rule
    return first, second


def replayed(first, second, both: bool) -> int:
    from archlint.model.train.allocator import replay
    from archlint.model.train.memory import _both_steps

    if both:
        storages, workspaces = _both_steps(first, second)
    else:
        storages = [
            (r.born, r.died, r.nbytes) for r in second.records + [t for t in second.transients if not t.skippable]
        ]
        workspaces = [(r.born, r.died, r.nbytes) for r in second.transients if r.skippable]
    return replay(storages, workspaces=workspaces).peak_reserved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--convs", action="store_true", help="each convolution's traced blocks beside the rule")
    parser.add_argument("--ops", action="store_true", help="bytes allocated per kind of op, traced and modelled")
    ns = parser.parse_args()
    results = load(ns.results)
    measured = {(r["model"], r["optimizer"]): r for r in results.get("memory", []) if "max_reserved_bytes" in r}
    print(
        f"{'model':28} {'opt':6} {'reserved':>8} {'trace':>7} {'events':>7} {'no cuDNN':>8} {'archlint':>8} "
        f"{'traced ws: steady':>17} {'both steps':>10}   (GB; then share of reserved)"
    )
    for row in results.get("alloc_trace", []):
        if "events" not in row:
            print(f"{row['model']:28} {row['optimizer']:6} {row.get('error', row.get('skipped'))}")
            continue
        real = measured.get((row["model"], row["optimizer"]), {}).get("max_reserved_bytes")
        figures = [trace_reserved(row), replay_events(row), replay_events(row, lambda b: not b.get("workspace"))]
        first, modelled = meta_steps(row["model"], row["optimizer"], row["batch"])
        figures.append(replayed(first, modelled, True))
        traced = traced_workspaces(row)
        first, second = meta_steps(row["model"], row["optimizer"], row["batch"], traced)
        figures += [replayed(first, second, False), replayed(first, second, True)]
        print(
            f"{row['model']:28} {row['optimizer']:6} {(real or 0) / 1e9:8.3f} "
            + " ".join(f"{f / 1e9:7.3f}" for f in figures)
        )
        if real:
            print(f"{'':44}" + " ".join(f"{f / real:7.3f}" for f in figures), flush=True)
        if ns.convs:
            conv_table(row, traced)
        if ns.ops:
            op_table(row, modelled)
    return 0


def op_table(row: dict, second) -> None:
    """Bytes allocated in the steady step by each kind of op: traced, and by the memory model (its
    records and cuDNN workspaces, each op's), largest difference first (MB); CUDA's batch norm under
    the meta device's name."""
    traced: dict[str, list[int]] = {}
    for b in blocks(row):
        if b.get("step") == 1:
            t = traced.setdefault(ON_META.get(b["name"], b["name"]), [0, 0])
            t[0] += 1
            t[1] += -(-b["size"] // 512) * 512
    modelled: dict[str, list[int]] = {}
    for r in second.records + second.transients:
        if r.op >= 0:
            m = modelled.setdefault(second.op_names[r.op], [0, 0])
            m[0] += 1
            m[1] += r.nbytes
    names = sorted(
        set(traced) | set(modelled), key=lambda n: -abs(traced.get(n, [0, 0])[1] - modelled.get(n, [0, 0])[1])
    )
    print(f"    {'op':40} {'traced blocks':>13} {'MB':>9} {'model blocks':>12} {'MB':>9} {'traced - model MB':>17}")
    for name in names[:25]:
        (tn, tb), (mn, mb) = traced.get(name, [0, 0]), modelled.get(name, [0, 0])
        print(f"    {name:40} {tn:13} {tb / 1e6:9.1f} {mn:12} {mb / 1e6:9.1f} {(tb - mb) / 1e6:17.1f}")


def conv_table(row: dict, traced) -> None:
    """The steady step's convolutions: the traced workspaces beside the size rule's (MiB)."""
    import torch

    from archlint.model.train import memory

    rule, seen = memory.cudnn_workspaces, []

    def note(func, op_args):
        ws = rule(func, op_args)
        if getattr(func, "overloadpacket", None) in (torch.ops.aten.convolution, torch.ops.aten.convolution_backward):
            x, w = (
                (op_args[0], op_args[1])
                if func.overloadpacket is torch.ops.aten.convolution
                else (op_args[1], op_args[2])
            )
            seen.append((func.overloadpacket.__name__, tuple(x.shape), tuple(w.shape), ws))
        return ws

    memory.cudnn_workspaces = note
    try:
        meta_steps(row["model"], row["optimizer"], row["batch"])
    finally:
        memory.cudnn_workspaces = rule
    for (name, x, w, ws), (_, real) in zip(seen[-len(traced) :], traced):
        print(
            f"    {name:20} x{x} w{w}  traced {[round(b / MiB, 2) for _, b in real]}  rule {[round(b / MiB, 2) for _, b in ws]}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
