"""Does `archlint loader` measure what you would measure by hand?

A JPEG folder (written with PIL to a temporary directory, removed after) behind a DataLoader with
a torchvision Compose pipeline. Each round times the same DataLoader twice, in alternating order
(ABBA, so that drift on a shared machine falls on both): archlint's throughput measurement
(archlint.loader.measure.throughput, as `archlint loader` runs it), and a plain loop written by
hand: iterate, skip the same warm-up batches, time the next N batches with perf_counter. Prints
samples/s of both per round, the ratio archlint ÷ hand per round, and the median ratio, which
should lie within ±10% of 1. Also per num_workers setting given with --workers.

    python benchmarks/loader_overhead.py [--rounds 8] [--workers 0,2] [--images 800] [--batches 40]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms as T

from archlint.loader.load import with_workers
from archlint.loader.measure import default_warmup, shutdown, throughput


class JpegFolder(Dataset):
    def __init__(self, root: Path) -> None:
        self.files = sorted(root.glob("*.jpg"))
        self.transform = T.Compose(
            [
                T.RandomResizedCrop(64),
                T.RandomHorizontalFlip(),
                T.ToTensor(),
                T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
            ]
        )

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int):
        return self.transform(Image.open(self.files[i]).convert("RGB")), i % 10


def write_images(root: Path, n: int, size: int) -> None:
    rng = np.random.default_rng(0)
    for i in range(n):
        Image.fromarray((rng.random((size, size, 3)) * 255).astype("uint8")).save(root / f"{i:05d}.jpg", quality=90)


def by_hand(loader: DataLoader, warmup: int, batches: int) -> float:
    """samples/s the way one times a loader by hand: skip warm-up batches, time the next ones."""
    it = iter(loader)
    try:
        for _ in range(warmup):
            next(it)
        samples, start = 0, time.perf_counter()
        for _ in range(batches):
            images, _labels = next(it)
            samples += len(images)
        return samples / (time.perf_counter() - start)
    finally:
        shutdown(it)  # the same clean-up archlint does: no worker left behind


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--workers", default="0,2")
    p.add_argument("--images", type=int, default=800)
    p.add_argument("--size", type=int, default=96)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--batches", type=int, default=40)
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="archlint-loader-bench-") as tmp:
        root = Path(tmp)
        write_images(root, a.images, a.size)
        dataset = JpegFolder(root)
        print(
            f"{a.images} JPEGs of {a.size}×{a.size} px, batch {a.batch_size}, {a.batches} timed batches per run, "
            f"{a.rounds} rounds (ABBA order); torch {torch.__version__}, {torch.get_num_threads()} threads"
        )
        summary = []
        for workers in [int(w) for w in a.workers.split(",")]:
            loader = DataLoader(dataset, batch_size=a.batch_size, shuffle=True, num_workers=workers)
            warmup = default_warmup(loader)
            if (warmup + a.batches) * a.batch_size > a.images:
                raise SystemExit(f"--images {a.images} is too few for {warmup} + {a.batches} batches of {a.batch_size}")
            ours, hand = [], []
            for r in range(a.rounds):
                order = ("archlint", "hand") if r % 2 == 0 else ("hand", "archlint")
                for who in order:
                    if who == "archlint":  # as `archlint loader` runs it: a copy made by with_workers
                        ours.append(
                            throughput(with_workers(loader, workers), a.batches, None, budget_s=60).samples_per_s
                        )
                    else:
                        hand.append(by_hand(loader, warmup, a.batches))
            ratios = [o / h for o, h in zip(ours, hand)]
            print(f"\nnum_workers={workers} (warm-up {warmup} batches)")
            print("  round  archlint samples/s  hand samples/s  ratio")
            for r, (o, h, q) in enumerate(zip(ours, hand, ratios)):
                print(f"  {r:5d}  {o:18.1f}  {h:14.1f}  {q:5.3f}")
            median = statistics.median(ratios)
            spread = (min(ratios), max(ratios))
            verdict = "within ±10%" if abs(median - 1) <= 0.10 else "OUTSIDE ±10%"
            print(
                f"  median ratio {median:.3f} (rounds {spread[0]:.3f}–{spread[1]:.3f}); "
                f"medians {statistics.median(ours):.1f} vs {statistics.median(hand):.1f} samples/s: {verdict}"
            )
            summary.append((workers, median, verdict))
        print("\nsummary: " + "; ".join(f"num_workers={w}: archlint/hand {m:.3f} ({v})" for w, m, v in summary))


if __name__ == "__main__":
    main()
