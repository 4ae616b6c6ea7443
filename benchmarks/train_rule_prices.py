"""Are the training step's rule prices real? AL611 (unfused optimizer) and AL403 (no autocast),
archlint's estimate against the step timed on this machine.

    python benchmarks/train_rule_prices.py [--device cuda] [--device-spec h100-sxm] [--models mlp,resnet50]

For each model, archlint analyzes the --train step with AdamW on the device spec (no hardware
needed) and prices AL611 (the step's optimizer against fused=True) and AL403's step estimate
(float32 against bf16 autocast, forward and backward). Then the real thing on --device: AdamW's
optimizer.step() timed with foreach=False, foreach=True and fused=True (gradients set, state
created, the three interleaved, median of --repeat steps between synchronisations) and, on CUDA, the whole step (forward,
mean loss, backward, AdamW's default) in float32 and under torch.autocast(bfloat16). Printed: each
saving estimated and measured, and their ratio. The spec should describe the device the timings
run on (h100-sxm for an H100; cpu-example is the 2-core VM archlint's CPU figures come from).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torchvision
from torch import nn

import archlint


def mlp() -> tuple[nn.Module, tuple[int, ...]]:  # a large model at a small batch: the optimizer matters
    return nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(4)]), (8, 1024)


MODELS = {
    "mlp": mlp,
    "resnet50": lambda: (torchvision.models.resnet50(), (32, 3, 224, 224)),
    "vit_b_16": lambda: (torchvision.models.vit_b_16(), (16, 3, 224, 224)),
}


def median_ms(fn, repeat: int, sync) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeat):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


IMPLEMENTATIONS = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}


def optimizer_ms(model: nn.Module, repeat: int, sync) -> dict[str, float]:
    """AdamW's step in each implementation, over the same parameters, the three interleaved round
    by round (a loaded machine slows all three alike): medians in ms."""
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.grad = torch.randn_like(p)
    opts = {name: torch.optim.AdamW(params, lr=1e-3, **impl) for name, impl in IMPLEMENTATIONS.items()}
    times: dict[str, list[float]] = {name: [] for name in opts}
    for i in range(repeat + 3):
        for name, opt in opts.items():
            sync()
            start = time.perf_counter()
            opt.step()
            sync()
            if i >= 3:  # the first steps create the state
                times[name].append((time.perf_counter() - start) * 1e3)
    return {name: statistics.median(t) for name, t in times.items()}


def step_ms(model: nn.Module, x: torch.Tensor, repeat: int, sync, autocast: bool) -> float:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = model(x).mean()
        loss.backward()
        opt.step()

    return median_ms(step, repeat, sync)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--device-spec", default=None, help="default: h100-sxm on CUDA, cpu-example on the CPU")
    ap.add_argument("--models", default="mlp,resnet50")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--threads", type=int, default=None, help="torch threads on the CPU (default: torch's)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    spec = args.device_spec or ("h100-sxm" if args.device.startswith("cuda") else "cpu-example")
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    print(
        f"device {args.device} ({torch.cuda.get_device_name() if args.device.startswith('cuda') else 'cpu'}), "
        f"spec {spec}, torch {torch.__version__}"
    )
    for name in args.models.split(","):
        model, shape = MODELS[name]()
        a = archlint.analyze(model, shape, train=True, optimizer="adamw", device_spec=spec, show_info=True)
        m = a.result.models[0]
        est = m.estimate.train
        al611 = next((d for d in a.result.diagnostics if d.code == "AL611"), None)
        model = model.to(args.device)
        timed = optimizer_ms(model, args.repeat, sync)
        loop, foreach, fused = timed["for-loop"], timed["foreach"], timed["fused"]
        default = foreach if args.device.startswith("cuda") else loop  # what torch runs unasked
        print(f"\n{name}: {m.totals.train.trainable_params:,} params in {m.totals.train.optimizer['tensors']} tensors")
        print(f"  AdamW step measured: for-loop {loop:.3f} ms, foreach {foreach:.3f} ms, fused {fused:.3f} ms")
        if al611 is not None and al611.price.saving_ms is not None:
            measured = default - fused
            print(
                f"  AL611 ({al611.severity.value}) estimated saving {al611.price.saving_ms:.3f} ms "
                f"(optimizer {al611.evidence['optimizer_ms']:.3f} → {al611.evidence['fused_optimizer_ms']:.3f} ms); "
                f"measured {measured:.3f} ms ({default:.3f} → {fused:.3f}); estimated/measured "
                f"{al611.price.saving_ms / measured if measured else float('nan'):.2f}"
            )
        half = est.get("autocast")
        if half and args.device.startswith("cuda"):
            x = torch.randn(*shape, device=args.device)
            fp32, bf16 = (step_ms(model.train(), x, args.repeat, sync, ac) for ac in (False, True))
            print(
                f"  AL403 step: estimated {est['step_ms']:.2f} → {half['step_ms']:.2f} ms "
                f"(saving {est['step_ms'] - half['step_ms']:.2f}); measured {fp32:.2f} → {bf16:.2f} ms "
                f"(saving {fp32 - bf16:.2f}); speed-up estimated {est['step_ms'] / half['step_ms']:.2f}×, "
                f"measured {fp32 / bf16:.2f}×"
            )


if __name__ == "__main__":
    main()
