"""What `--train` costs over the forward analysis of the same model (target: at most 3×).

    python benchmarks/train_speed.py [--repeat 3] [--models resnet50,vit_b_16]

Each model is analyzed as `archlint MODEL` and as `archlint MODEL --train` do it (archlint.analyze,
which runs the CLI's path: load, capture, cost, checks), on the same prebuilt model and input, the
two interleaved so that both see the same machine load; each time is the best of --repeat runs.
Beside them, for scale, torch's FlopCounterMode on one real training step (forward + backward) of
the same model on this CPU, the peer that counts a backward. The memory model (archlint.model.train.memory),
when it is in the build, runs inside --train and is included in its time.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import time
import warnings

import torch
import torchvision

import archlint


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def flop_counter_step(model, x) -> None:
    from torch.utils.flop_counter import FlopCounterMode

    model.train()
    with FlopCounterMode(display=False):
        model(x).mean().backward()
    model.zero_grad(set_to_none=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", default="resnet50,vit_b_16")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    present = importlib.util.find_spec("archlint.model.train.memory") is not None
    memory = "with the memory model" if present else "without the memory model (not in this build)"
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, best of {args.repeat}; --train {memory}")
    print(f"{'model':12s} {'forward s':>10s} {'--train s':>10s} {'ratio':>7s} {'FlopCounterMode step s':>23s}")
    worst = 0.0
    for name in args.models.split(","):
        model = getattr(torchvision.models, name)()
        x = torch.randn(1, 3, 224, 224)
        archlint.analyze(model, x, quiet=True)  # warm-up: imports, caches
        archlint.analyze(model, x, train=True, quiet=True)
        forward, train = float("inf"), float("inf")
        for _ in range(args.repeat):
            forward = min(forward, timed(lambda: archlint.analyze(model, x, quiet=True)))
            train = min(train, timed(lambda: archlint.analyze(model, x, train=True, quiet=True)))
        peer = min(timed(lambda: flop_counter_step(model, x)) for _ in range(args.repeat))
        worst = max(worst, train / forward)
        print(f"{name:12s} {forward:10.3f} {train:10.3f} {train / forward:6.2f}× {peer:23.3f}")
    print(f"worst ratio {worst:.2f}× (target ≤ 3×): {'met' if worst <= 3 else 'NOT met'}")


if __name__ == "__main__":
    main()
