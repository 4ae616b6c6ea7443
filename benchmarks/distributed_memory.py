"""How close archlint's per-rank model of a distributed training step comes to the real one.

For each model, strategy and world size, the REAL step runs in `world` processes on this CPU with
the gloo backend: torch's DistributedDataParallel, DDP with torch.distributed.optim's
ZeroRedundancyOptimizer (archlint's `zero1-torch`), or FSDP2 (`fully_shard` on each repeated block
archlint finds, then on the root; optionally with MixedPrecisionPolicy(bf16, reduce fp32)). After
two warm steps (the optimizer state is made at the first; DDP rebuilds its buckets at the second),
the third runs under record_function("measured_step"). The profiler (profile_memory=True) runs from
before the model is built, so every allocation the process makes for the model (parameters, shards,
DDP's buckets, optimizer state, FSDP2's buffers, gloo's) is seen with its free: the live total at
each event is the sum of what was allocated and not yet freed, and the step's peak is the largest
live total inside the measured step (the method of benchmarks/train_memory.py, with the persistent
part counted by the same profiler instead of summed from the tensors, since DDP's buckets and
FSDP2's buffers are not reachable as tensors). Rank 0's peak is reported (ranks are alike; under
ZeroRedundancyOptimizer rank 0 owns the largest parameter). The profiler does not record the frees
gloo's worker threads make after a collective (its reduce-scatter's clone, an all-gather's output the
main thread has let go of, DDP's first bucket replaced at the rebuild): summed from the events, those
blocks stayed "live" for ever, differently in each run (the misses of 2026-11-28). So c10's CPU
allocator is told to count every thread's allocations and frees in its running total
(caffe2_report_cpu_memory_usage), which each recorded event carries: a step's peak is the largest total
inside it (step_peaks). Each of the measured steps' peaks is kept; the row's figure is their median
(steady_peak): on this shared CPU a step now and then holds a buffer longer because gloo's worker thread,
descheduled, drops its last reference late (steady_peak's docstring), and the largest step's would
measure that race instead of the step.

Collectives: the c10d ops the step calls (c10d::allreduce_, _allgather_base_, _reduce_scatter_base_,
broadcast_: the profiler's records with their input shapes), each with its payload in bytes (the
all-gather's output, the reduce-scatter's input, the all-reduce's or broadcast's buffer), compared
as multisets with archlint's list: exact or not.

Compared with archlint.model.distributed.step.distributed_step on the same model and per-rank input.

Run: nice -n 10 python benchmarks/distributed_memory.py [--quick] [--models a,b] [--strategies ddp,fsdp]
     [--worlds 2,4]
Goal: the peak within 10% and the collectives exact on every row.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from archlint.model.distributed.step import distributed_step
from archlint.model.distributed.strategy import parallel
from archlint.model.distributed.units import shard_units
from archlint.model.train.memory import make_optimizer, step_loss

IMAGE = (2, 3, 32, 32)


def _tv(name, image=IMAGE, **kw):
    def build():
        import torchvision.models as tvm

        return getattr(tvm, name)(weights=None, **kw), (torch.randn(*image),), {}

    return build


def _mlp():
    m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    return m, (torch.randn(16, 256),), {}


def _deep_mlp():
    blocks = [torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU()) for _ in range(6)]
    return torch.nn.Sequential(*blocks, torch.nn.Linear(256, 10)), (torch.randn(32, 256),), {}


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=176,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        attn_implementation="eager",
        use_cache=False,
    )
    ids = torch.randint(0, 512, (2, 32))
    return LlamaForCausalLM(cfg), (), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(
        vocab_size=512, n_embd=64, n_layer=2, n_head=2, n_positions=64, use_cache=False, attn_implementation="eager"
    )
    ids = torch.randint(0, 512, (2, 32))
    return GPT2LMHeadModel(cfg), (), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def _bert():
    from transformers import BertConfig, BertForSequenceClassification

    cfg = BertConfig(
        vocab_size=512,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=256,
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    return BertForSequenceClassification(cfg), (), {"input_ids": torch.randint(0, 512, (2, 32))}


def _vit():
    import torchvision.models as tvm

    m = tvm.VisionTransformer(
        image_size=32, patch_size=8, num_layers=3, num_heads=2, hidden_dim=64, mlp_dim=128, num_classes=10
    )
    return m, (torch.randn(2, 3, 32, 32),), {}


MODELS = {
    "mlp": _mlp,
    "deep_mlp": _deep_mlp,
    "resnet18": _tv("resnet18"),
    "mobilenet_v3_small": _tv("mobilenet_v3_small"),
    "squeezenet1_1": _tv("squeezenet1_1", image=(2, 3, 64, 64)),
    "shufflenet_v2_x0_5": _tv("shufflenet_v2_x0_5"),
    "regnet_x_400mf": _tv("regnet_x_400mf"),
    "vit_tiny": _vit,
    "hf/llama-tiny": _llama,
    "hf/gpt2-tiny": _gpt2,
    "hf/bert-tiny": _bert,
}
MEASURED_STEPS = 3
QUICK = ("deep_mlp", "resnet18", "vit_tiny", "hf/llama-tiny")
OPS = {
    "c10d::allreduce_": "all_reduce",
    "c10d::_allgather_base_": "all_gather",
    "c10d::allgather_": "all_gather",
    "c10d::_reduce_scatter_base_": "reduce_scatter",
    "c10d::reduce_scatter_": "reduce_scatter",
    "c10d::broadcast_": "broadcast",
}
ITEMSIZE = {"float": 4, "c10::BFloat16": 2, "c10::Half": 2, "double": 8, "long int": 8, "int": 4}


def _payload(name: str, args: dict, itemsize: int) -> int:
    dims, types = args.get("Input Dims", []), args.get("Input type", [])

    def numel(d):
        n = 1
        for x in d:
            n *= x
        return n

    if name in ("c10d::_allgather_base_",):  # (output, input): the output
        return numel(dims[0]) * ITEMSIZE.get(types[0], itemsize)
    if name in ("c10d::_reduce_scatter_base_",):  # (output, input): the input
        return numel(dims[1]) * ITEMSIZE.get(types[1], itemsize)
    first = dims[0]  # a TensorList: its dtype is not recorded; the model's
    return sum(numel(d) for d in first) * itemsize


def step_peaks(events: list[dict]) -> tuple[list[dict], list[int]]:
    """Each measured step's peak of live CPU bytes: the largest "Total Allocated" of its [memory] events.

    The profiler records an allocation or a free only on a thread that carries its state (the main
    thread, and gloo's worker threads while they run a collective); a buffer whose last reference
    gloo's worker drops after the collective (its reduce-scatter's clone, an all-gather's output the
    main thread has let go of, DDP's first bucket replaced at the rebuild) is freed unrecorded, with
    no event. Summing the events, as before, kept such blocks alive for ever, and which were freed
    where changed from run to run (the misses of 2026-11-28). With c10's
    caffe2_report_cpu_memory_usage on (report_every_cpu_allocation), the CPU allocator counts every
    allocation and free on every thread in one total, and each recorded event carries that total: a
    peak is reached at an allocation, made on a recording thread, so the largest total inside the
    step is its peak, whichever thread freed what."""
    windows = sorted((e for e in events if e.get("name") == "measured_step"), key=lambda e: e["ts"])
    memory = [e for e in events if e.get("name") == "[memory]" and e["args"].get("Device Type") == 0]
    peaks = [
        max((e["args"]["Total Allocated"] for e in memory if w["ts"] <= e["ts"] <= w["ts"] + w["dur"]), default=0)
        for w in windows
    ]
    return windows, peaks


def steady_peak(peaks: list[int]) -> int:
    """The steady step's peak: the median of the measured steps' (the lower middle one).

    The steps run the same ops on the same sizes; they differ only when a buffer's last reference is
    dropped by gloo's worker thread rather than the main thread, later than the step's own free. Seen on
    mlp fsdp×2 (2026-11-29, load 20-30 on 2 cores): one step of three at 2,477,216 B, the others at
    2,164,868 B; the extra is exactly unit 0's prefetched all-gather output (526,336 B), which FSDP2 lets
    go at the unit's pre-backward, still alive through the weight gradient's mm (1,950,880 + 526,336 =
    2,477,216): the Work that also holds it is dropped by gloo's worker thread, which had not run yet
    (the free has no event; 40 steps in a row at load 20 had none of it). That is the scheduler, not the
    step: the largest of three steps caught it in one run of three, the median in none."""
    return sorted(peaks)[(len(peaks) - 1) // 2]


def report_every_cpu_allocation(on: bool = True) -> bool:
    """c10's FLAGS_caffe2_report_cpu_memory_usage on: the CPU allocator's running total then counts the
    allocations and frees of every thread (without it, only those made while a thread records; gloo's
    worker frees outside its collectives are then missing from the total too). Returns the old value."""
    import ctypes

    lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libc10.so"))
    flag = ctypes.c_bool.in_dll(lib, "FLAGS_caffe2_report_cpu_memory_usage")
    old, flag.value = bool(flag.value), on
    return old


def _worker(rank: int, world: int, port: int, model_name: str, strategy: str, precision: str | None, out: str):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from torch.profiler import ProfilerActivity, profile, record_function

    report_every_cpu_allocation()
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True) as prof:
            torch.manual_seed(0)
            model, args, kwargs = MODELS[model_name]()
            model.train()
            itemsize = 4
            if strategy in ("ddp", "zero1-torch"):
                from torch.nn.parallel import DistributedDataParallel as DDP

                wrapped = DDP(model)
            else:
                from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

                policy = (
                    MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
                    if precision == "bf16"
                    else MixedPrecisionPolicy()
                )
                if precision == "bf16":
                    itemsize = 2
                for path in shard_units(model).paths:
                    fully_shard(model.get_submodule(path), mp_policy=policy)
                fully_shard(model, mp_policy=policy)
                wrapped = model
            opt = make_optimizer("adam", [p for p in wrapped.parameters() if p.requires_grad])
            if strategy == "zero1-torch":  # the same Adam, its state sharded by ZeroRedundancyOptimizer
                from torch.distributed.optim import ZeroRedundancyOptimizer

                kwargs_opt = {k: v for k, v in opt.defaults.items()}
                del opt
                opt = ZeroRedundancyOptimizer(
                    [p for p in wrapped.parameters() if p.requires_grad], optimizer_class=torch.optim.Adam, **kwargs_opt
                )

            def step():
                opt.zero_grad(set_to_none=True)
                loss = step_loss(wrapped(*args, **kwargs))
                loss.backward()
                del loss
                opt.step()

            step()
            step()
            for _ in range(MEASURED_STEPS):
                opt.zero_grad(set_to_none=True)
                with record_function("measured_step"):
                    loss = step_loss(wrapped(*args, **kwargs))
                    loss.backward()
                    del loss
                    opt.step()
        if rank == 0:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "trace.json"
                prof.export_chrome_trace(str(path))
                events = json.loads(path.read_text())["traceEvents"]
                if os.environ.get("DISTRIBUTED_MEMORY_TRACE"):  # keep rank 0's trace for a closer look
                    Path(os.environ["DISTRIBUTED_MEMORY_TRACE"]).write_text(path.read_text())
            windows, peaks = step_peaks(events)
            window = windows[0]
            start, end = window["ts"], window["ts"] + window["dur"]
            # a TensorList's dtype is not recorded with the c10d op: gloo's own event for it (the next one of
            # its kind and size, on gloo's thread) has it
            gloo = [
                e for e in events if e.get("name") in ("gloo:all_reduce", "gloo:broadcast") and start <= e["ts"] <= end
            ]
            comms = []
            for e in sorted(
                (
                    e
                    for e in events
                    if e.get("name") in OPS and start <= e["ts"] <= end and e.get("tid") == window["tid"]
                ),
                key=lambda e: e["ts"],
            ):
                size = itemsize
                if e["name"] in ("c10d::allreduce_", "c10d::broadcast_"):
                    dims = e["args"]["Input Dims"][0]
                    kind = "gloo:all_reduce" if e["name"] == "c10d::allreduce_" else "gloo:broadcast"
                    match = next(
                        (
                            g
                            for g in sorted(gloo, key=lambda g: g["ts"])
                            if g["name"] == kind and g["args"].get("Input Dims") == dims and g["ts"] >= e["ts"]
                        ),
                        None,
                    )
                    if match is not None:
                        gloo.remove(match)
                        size = ITEMSIZE.get(match["args"]["Input type"][0], itemsize)
                comms.append((OPS[e["name"]], _payload(e["name"], e.get("args", {}), size)))
            # the steady step's peak (the median of the measured steps'), with them all
            Path(out).write_text(
                json.dumps(
                    {
                        "peak": steady_peak(peaks),
                        "peaks": peaks,
                        "comms": comms,
                    }
                )
            )
    finally:
        dist.destroy_process_group()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(model_name: str, strategy: str, world: int, precision: str | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "rank0.json")
        mp.spawn(_worker, args=(world, _port(), model_name, strategy, precision, out), nprocs=world)
        return json.loads(Path(out).read_text())


def predict(model_name: str, strategy: str, world: int, precision: str | None) -> dict:
    torch.set_num_threads(1)  # as each rank runs (oneDNN's scratch per thread: archlint.model.train.cpu_scratch)
    torch.manual_seed(0)
    model, args, kwargs = MODELS[model_name]()
    model.train()
    par = parallel(strategy, world, mixed_precision=precision)
    d, _, _ = distributed_step(model, args, kwargs, par, optimizer="adam", loss="mean")
    comms = [(c.op, c.bytes_per_rank) for c in d.collectives for _ in range(c.count)]
    return {"peak": d.per_rank.peak_bytes, "comms": comms, "volume": d.comm_bytes_per_rank}


def compare(name: str, strat: str, world: int, real: dict, seconds: float) -> dict:
    """One row: archlint's figures for the measured step, printed and returned."""
    strategy, precision = (strat[:-5], "bf16") if strat.endswith("-bf16") else (strat, "")
    est = predict(name, strategy, world, precision or None)
    real = {**real, "peak": steady_peak(real["peaks"])}  # stored rows (--repredict) read the same way
    ratio = est["peak"] / real["peak"]
    low, high = min(real["peaks"]), max(real["peaks"])
    inside = low * 0.9 <= est["peak"] <= high * 1.1
    same = Counter(map(tuple, real["comms"])) == Counter(map(tuple, est["comms"]))
    detail = (
        "exact"
        if same
        else (
            f"DIFFER: measured {sorted(Counter(map(tuple, real['comms'])).items())} "
            f"archlint {sorted(Counter(map(tuple, est['comms'])).items())}"
        )
    )
    print(
        f"{name:<20} {strat:<11} {world:>2} {real['peak'] / 1e6:>12.3f} {est['peak'] / 1e6:>12.3f} "
        f"{ratio:>6.3f}  [{low / 1e6:.2f}-{high / 1e6:.2f}] {len(real['comms'])} {detail}  ({seconds:.0f} s)",
        flush=True,
    )
    return {
        "model": name,
        "strategy": strat,
        "world": world,
        "measured": real,
        "archlint": est,
        "ratio": ratio,
        "within_range": inside,
        "collectives_exact": same,
    }


def summary(rows: list[dict]) -> None:
    """Per strategy: rows within 10% of the steady step's peak (steady_peak), inside the steps' range ±10%,
    collectives exact."""
    for strat in sorted({r["strategy"] for r in rows}):
        mine = [r for r in rows if r["strategy"] == strat]
        near = sum(abs(r["ratio"] - 1) <= 0.1 for r in mine)
        print(
            f"{strat}: peak within 10% of the steady step's on {near}/{len(mine)} "
            f"({min(r['ratio'] for r in mine):.3f}-{max(r['ratio'] for r in mine):.3f}), inside the steps' range "
            f"±10% on {sum(r['within_range'] for r in mine)}/{len(mine)}, collectives exact on "
            f"{sum(r['collectives_exact'] for r in mine)}/{len(mine)}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    parser.add_argument("--models", help="comma-separated names (default: all)")
    parser.add_argument("--strategies", default="ddp,fsdp,fsdp-bf16,zero1-torch")
    parser.add_argument("--worlds", default="2,4")
    parser.add_argument("--json", type=Path, help="write the rows here (after each row)")
    parser.add_argument(
        "--repredict",
        type=Path,
        help="rows written by --json: archlint's side again with this "
        "code, the measured side as it was (the real steps are not run)",
    )
    a = parser.parse_args()
    print(f"{'model':<20} {'strategy':<11} {'N':>2} {'measured MB':>12} {'archlint MB':>12} {'ratio':>6}  collectives")
    rows = []
    if a.repredict:
        for r in json.loads(a.repredict.read_text()):
            rows.append(compare(r["model"], r["strategy"], r["world"], r["measured"], 0.0))
    names = [] if a.repredict else (a.models.split(",") if a.models else list(QUICK if a.quick else MODELS))
    for name in names:
        for strat in a.strategies.split(","):
            strategy, precision = (strat[:-5], "bf16") if strat.endswith("-bf16") else (strat, "")
            for world in (int(w) for w in a.worlds.split(",")):
                t0 = time.perf_counter()
                try:
                    real = measure(name, strategy, world, precision or None)
                except (
                    mp.ProcessRaisedException
                ) as exc:  # a real step that cannot run (FSDP2 bf16 on a BatchNorm model): said, skipped
                    print(
                        f"{name:<20} {strat:<11} {world:>2} the real step failed: {str(exc).strip().splitlines()[-1][:100]}"
                    )
                    continue
                rows.append(compare(name, strat, world, real, time.perf_counter() - t0))
                if a.json:
                    a.json.write_text(json.dumps(rows, indent=1))
    summary(rows)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
