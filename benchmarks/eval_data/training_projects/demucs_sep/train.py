"""Music source separation (waveform U-Net), in the layout of a separation repository:
train.py builds the pieces, demucs/solver.py owns the loop."""
import argparse

import torch
from torch.utils.data import DataLoader

from demucs.model import Demucs
from demucs.solver import Solver
from demucs.wav import WavSet


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--musdb", default="/data/musdb18hq")
    parser.add_argument("--epochs", type=int, default=360)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--plot", action="store_true")
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"

    train_set = WavSet(args.musdb, "train", segment=11)
    valid_set = WavSet(args.musdb, "valid", segment=None)
    loaders = {
        "train": DataLoader(train_set, batch_size=args.batch_size, shuffle=True,  # label: AL301
                            num_workers=args.workers, drop_last=True),
        "valid": DataLoader(valid_set, batch_size=1, num_workers=args.workers),  # label: AL301
    }
    model = Demucs(sources=["drums", "bass", "other", "vocals"]).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.999))
    Solver(loaders, model, optimizer, args, device).train()


if __name__ == "__main__":  # label: AL303
    main()
