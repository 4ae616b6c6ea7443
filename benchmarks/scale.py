"""The training step at the scale users bring (issue 45): wall time and peak memory of
`archlint MODEL --train --device-spec h100-sxm` on an 8B, a 70B and a Mixtral-style MoE config,
alone and with the many-GPU flags, and the reused step against the exact one on small versions.

    python benchmarks/scale.py [--configs llama-8b,llama-70b,mixtral] [--no-distributed] [--check-only]

Configs (transformers models built from their configs on meta: no weights, no download), AdamW:
  llama-8b   LlamaConfig(hidden 4096, intermediate 14336, 32 layers, 32 heads, 8 KV heads,
             vocab 128256), 1×2048 tokens            goal: ≤ 20 s and ≤ 1 GB peak RSS
  llama-70b  80 layers, hidden 8192, 64 heads, 8 KV heads, intermediate 28672, vocab 128256,
             2×4096 tokens                           goal: ≤ 60 s
  mixtral    MixtralConfig (Mixtral-8x7B's sizes: hidden 4096, intermediate 14336, 32 layers,
             32 heads, 8 KV heads, vocab 32000, 8 experts, top-2), 1×2048 tokens   measured
Each runs as its own `python -m archlint` process, as a user runs it, once with `--train --device-spec
h100-sxm` and once more with `--world-size 8 --strategy fsdp`: its wall time, its CPU time (user +
system: on this shared 2-core machine the wall time follows the other processes' load, printed
beside it) and its peak resident memory (the child's own VmHWM, read while it runs).

The check: what the memory model takes from a step already recorded instead of running it again
(the steady step replayed from the first, archlint.model.train.steady, on a GPU spec too) and the
real values it reuses from a layer before (each layer's causal mask, archlint.model.train.values)
must give the same figures as computing them: on 2- and 4-layer versions of the configs and on a ViT and a
ResNet, the JSON of `totals.train`, `memory` (peak, bytes by kind, the per-op timeline, the
allocator's replays) and the layers' rows, with the replay and with it turned off, must be equal.

Measured 2026-11-28 on the shared 2-core machine (load average 13-34, so wall times are 4-20× the
CPU times), before (ef48043) → after (issue 45):
  llama-8b  --train        CPU 35.9 s → 32.0 s, peak RSS 3772 MB → 885 MB (wall 445 s → 415 s)
  llama-8b  fsdp ×8        CPU 18.9 s, peak RSS 1412 MB (wall 251 s) before
  at load 5 after: llama-8b --train wall 28.1 s, CPU 21.6 s, 1044 MB; fsdp ×8 22.1 s, 15.1 s, 996 MB
  llama-70b --train        killed at 16.5 GB RSS after 136 s CPU → done in 68.9 s CPU, 1519 MB
  mixtral   --train        internal error (forward_flops on meta) → CPU 25.9 s, 1170 MB; fsdp ×8 31.6 s, 1077 MB
  the check: equal on llama-8b 2 and 4 layers (and fsdp ×8), mixtral and llama-70b 2 layers,
  vit_b_16 and resnet50.
Then (2026-11-29, load 20-26): each layer's causal mask computed once on its real values and reused
(archlint.model.train.values), and the export capture traced once, not twice (the KV cache in the
output reduced while tracing); figures identical (the 70B's JSON equal to the run before):
  llama-8b  --train        CPU 24.9 s → 16.3 s, peak RSS 1045 MB → 1018 MB
  llama-8b  fsdp ×8        CPU 13.8 s, 978 MB
  llama-70b --train        CPU 92.4 s → 34.9 s, peak RSS 1545 MB (the run before read 1207 MB under
                           memory pressure, 34 s of it system time; side by side, at once, with each
                           change turned off: CPU 37.0 s, 42.9 s with two export traces, 56.5 s without
                           the reused values; peak RSS 1582, 1583, 1555 MB: neither change moves it)
  llama-70b fsdp ×8        CPU 94.9 s, 1272 MB
  mixtral   --train        CPU 17.6 s, 1084 MB; fsdp ×8 21.3 s, 1085 MB
With the --train speed-ups beside them (the merged tree, 2026-11-29, load 0.4-0.8, wall = CPU):
  llama-8b  --train 10.5 s, 916 MB; fsdp ×8 10.5 s, 883 MB
  llama-70b --train 19.5 s, 1241 MB; fsdp ×8 27.0 s, 1082 MB

The `ARCHLINT_SCALE_LAYERS` environment variable sets the configs' layer count (the check's small
versions use it); the factories below are the targets the child processes analyze.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS_VAR = "ARCHLINT_SCALE_LAYERS"


def _layers(default: int) -> int:
    return int(os.environ.get(LAYERS_VAR, default))


def llama_8b():
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(
        LlamaConfig(
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=_layers(32),
            num_attention_heads=32,
            num_key_value_heads=8,
            vocab_size=128256,
        )
    )


def llama_70b():
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(
        LlamaConfig(
            hidden_size=8192,
            intermediate_size=28672,
            num_hidden_layers=_layers(80),
            num_attention_heads=64,
            num_key_value_heads=8,
            vocab_size=128256,
        )
    )


def mixtral():
    from transformers import MixtralConfig, MixtralForCausalLM

    return MixtralForCausalLM(
        MixtralConfig(
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=_layers(32),
            num_attention_heads=32,
            num_key_value_heads=8,
            vocab_size=32000,
            num_local_experts=8,
            num_experts_per_tok=2,
        )
    )


# name: (factory, input shape, goal seconds, goal peak RSS bytes)
CONFIGS = {
    "llama-8b": ("llama_8b", "1,2048", 20.0, 1 << 30),
    "llama-70b": ("llama_70b", "2,4096", 60.0, None),
    "mixtral": ("mixtral", "1,2048", None, None),
}
BASE_FLAGS = ["--train", "--optimizer", "adamw", "--device-spec", "h100-sxm"]
DISTRIBUTED_FLAGS = ["--world-size", "8", "--strategy", "fsdp"]


def run_child(config: str, flags: list[str], layers: int | None = None, rss_cap: int = 8 << 30) -> dict:
    """One `python -m archlint` process on the config: wall s, CPU s, peak RSS bytes, exit code and
    the report's JSON."""
    factory, shape, _, _ = CONFIGS[config]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if layers is not None:
        env[LAYERS_VAR] = str(layers)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        cmd = [
            sys.executable,
            "-m",
            "archlint",
            f"{Path(__file__).resolve()}:{factory}",
            "--input-shape",
            shape,
            "--input-dtype",
            "int64",
            *flags,
            "-q",
            "--output-format",
            "json",
            "-o",
            str(out),
        ]
        start = time.perf_counter()
        errors = (Path(tmp) / "stderr").open("wb")  # a file, not a pipe: the loop below does not read one
        child = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=errors)
        over, hwm = False, 0
        while True:  # polled: a run past the cap is ended before it takes the machine's memory
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            hwm = max(hwm, _high_water(child.pid))
            if not over and _rss(child.pid) > rss_cap:
                over = True
                child.kill()
            time.sleep(0.5)
        wall = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        errors.close()
        said = (
            (Path(tmp) / "stderr").read_text(errors="replace").strip().splitlines()[-1:] if code not in (0, 1) else []
        )
        stderr = [f"ended: its memory passed --rss-cap {rss_cap / 2**30:g} GiB"] if over else said
        report = json.loads(out.read_text()) if out.exists() else None
    # the child's own high-water mark (Linux's VmHWM, read while it runs): its ru_maxrss starts from this
    # process's resident size at the fork (Linux carries it across exec), which checks() makes large;
    # elsewhere ru_maxrss (KiB on Linux, bytes on macOS)
    rss = hwm or usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "rss_bytes": rss,
        "exit": code,
        "report": report,
        "stderr": stderr,
    }


def _high_water(pid: int) -> int:
    """A running process's peak resident bytes so far (Linux's VmHWM; 0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:")), 0)
    except (OSError, ValueError, IndexError):
        return 0


def _rss(pid: int) -> int:
    """A running process's resident bytes (Linux's /proc; 0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _figures(model_json: dict) -> dict:
    """What the check compares: the step's FLOPs and bytes, the memory model's every figure and
    the layers' rows."""
    return {
        "train": model_json.get("totals", {}).get("train"),
        "memory": model_json.get("memory"),
        "distributed": model_json.get("distributed"),
        "layers": model_json.get("layers"),
    }


@contextlib.contextmanager
def _exact():
    """Every reuse off: the steady step run, not replayed (steady.plan), and each real value computed
    where the step computes it, not taken from a layer before (values._Results)."""
    from archlint.model.train import steady, values

    plan, cacheable = steady.plan, values._Results.__dict__["cacheable"]  # the staticmethod itself
    steady.plan = lambda *a: None
    values._Results.cacheable = staticmethod(lambda func: False)
    try:
        yield
    finally:
        steady.plan, values._Results.cacheable = plan, cacheable


def exact_against_reused(model, inputs: dict, **options) -> tuple[bool, str]:
    """archlint.analyze with the memory model's reuse (the steady replay, real values reused) and with
    it off: equal figures?"""
    import archlint
    from archlint.model.train import steady

    def figures() -> dict:
        result = archlint.analyze(
            model, inputs, train=True, optimizer="adamw", device_spec="h100-sxm", quiet=True, **options
        )
        return _figures(result.to_dict()["models"][0])

    replays = []
    real_plan = steady.plan
    steady.plan = lambda *a: replays.append(real_plan(*a)) or replays[-1]
    try:
        reused = figures()
    finally:
        steady.plan = real_plan
    if not replays or any(r is None for r in replays):
        return False, "the replay was not used"
    with _exact():
        exact = figures()
    same = json.dumps(reused, sort_keys=True) == json.dumps(exact, sort_keys=True)
    peak = (reused["memory"] or {}).get("peak_bytes")
    return same, f"{len(replays)} replayed steps, peak {peak} bytes"


def checks() -> list[tuple[str, bool, str]]:
    import torch

    rows = []
    for config, layers_list in (("llama-8b", (2, 4)), ("mixtral", (2,)), ("llama-70b", (2,))):
        factory, shape, _, _ = CONFIGS[config]
        for layers in layers_list:
            os.environ[LAYERS_VAR] = str(layers)
            with torch.device("meta"):
                model = globals()[factory]()
            batch, tokens = (int(x) for x in shape.split(","))
            inputs = {"input_ids": torch.randint(0, model.config.vocab_size, (batch, tokens))}
            same, said = exact_against_reused(model, inputs)
            rows.append((f"{config} ({layers} layers)", same, said))
            if layers == layers_list[0] and config == "llama-8b":
                same, said = exact_against_reused(model, inputs, world_size=8, strategy="fsdp")
                rows.append((f"{config} ({layers} layers) fsdp ×8", same, said))
    os.environ.pop(LAYERS_VAR, None)
    import torchvision

    for name, build in (("vit_b_16", torchvision.models.vit_b_16), ("resnet50", torchvision.models.resnet50)):
        torch.manual_seed(0)
        model = build()
        import archlint
        from archlint.model.train import steady

        args = (torch.randn(8, 3, 224, 224),)
        replays, real_plan = [], steady.plan

        def figures(model=model, args=args):
            result = archlint.analyze(model, *args, train=True, optimizer="adamw", device_spec="h100-sxm", quiet=True)
            return _figures(result.to_dict()["models"][0])

        steady.plan = lambda *a: replays.append(real_plan(*a)) or replays[-1]
        try:
            reused = figures()
        finally:
            steady.plan = real_plan
        with _exact():
            exact = figures()
        used = bool(replays) and all(r is not None for r in replays)
        same = used and json.dumps(reused, sort_keys=True) == json.dumps(exact, sort_keys=True)
        rows.append(
            (f"{name} (batch 8)", same, f"{len(replays)} replayed steps" if used else "the replay was not used")
        )
    return rows


def _ratio(value: float, goal: float | None) -> str:
    return f"{value / goal:5.2f}×" if goal else "    —"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--no-distributed", action="store_true", help="only the one-process step")
    parser.add_argument("--check-only", action="store_true", help="only the exact-against-reused check")
    parser.add_argument("--no-check", action="store_true")
    parser.add_argument("--rss-cap", type=float, default=8.0, help="GiB: a run past it is ended (default 8)")
    args = parser.parse_args()
    ok = True
    if not args.no_check:
        print("exact against reused (figures of --train --device-spec h100-sxm with the replay and without):")
        for name, same, said in checks():
            ok &= same
            print(f"  {name:32s} {'equal' if same else 'DIFFERENT'}  ({said})", flush=True)
    if args.check_only:
        return 0 if ok else 1
    print(
        f"\n{'config':10s} {'flags':24s} {'wall s':>7s} {'cpu s':>7s} {'RSS MB':>7s} {'wall/goal':>9s} "
        f"{'RSS/goal':>8s}  peak (one process) · load average"
    )
    for config in args.configs.split(","):
        _, _, goal_s, goal_rss = CONFIGS[config]
        for label, flags in (("--train", BASE_FLAGS), ("--train fsdp ×8", BASE_FLAGS + DISTRIBUTED_FLAGS)):
            if args.no_distributed and flags is not BASE_FLAGS:
                continue
            load = os.getloadavg()[0]
            run = run_child(config, flags, rss_cap=int(args.rss_cap * 2**30))
            model = (run["report"] or {}).get("models", [{}])[0]
            peak = (model.get("memory") or {}).get("peak_bytes")
            said = f"{peak / 1e9:.1f} GB" if peak else f"exit {run['exit']} {' '.join(run['stderr'])}"
            if goal_s and run["exit"] in (0, 1):
                ok &= run["cpu_s"] <= goal_s
            print(
                f"{config:10s} {label:24s} {run['wall_s']:7.1f} {run['cpu_s']:7.1f} {run['rss_bytes'] / 2**20:7.0f} "
                f"{_ratio(run['wall_s'], goal_s):>9s} {_ratio(run['rss_bytes'], goal_rss):>8s}  {said} · "
                f"{load:.1f}→{os.getloadavg()[0]:.1f}",
                flush=True,
            )
    print(
        "goals: llama-8b ≤ 20 s and ≤ 1 GB, llama-70b ≤ 60 s (ratios of the wall time; the CPU time is what "
        "an idle 2-core machine's wall time would be)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
