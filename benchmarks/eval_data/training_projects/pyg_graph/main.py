"""Graph classification with a GIN on TU datasets, in the layout of PyTorch Geometric examples split
into model/engine modules."""
import argparse
import os.path as osp

import torch
from torch_geometric.datasets import TUDataset
from torch_geometric.loader import DataLoader

from engine import test, train_epoch
from model import GIN

parser = argparse.ArgumentParser()
parser.add_argument("--dataset", type=str, default="MUTAG")
parser.add_argument("--batch_size", type=int, default=128)
parser.add_argument("--hidden_channels", type=int, default=32)
parser.add_argument("--num_layers", type=int, default=5)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--epochs", type=int, default=100)


def main(args):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    path = osp.join(osp.dirname(osp.realpath(__file__)), "data", "TU")
    dataset = TUDataset(path, name=args.dataset).shuffle()
    train_loader = DataLoader(dataset[len(dataset) // 10:], args.batch_size, shuffle=True)  # label: AL301 AL304
    test_loader = DataLoader(dataset[: len(dataset) // 10], args.batch_size)  # label: AL301 AL304
    model = GIN(dataset.num_features, args.hidden_channels, dataset.num_classes, num_layers=args.num_layers)
    model = model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(1, args.epochs + 1):
        loss = train_epoch(model, train_loader, optimizer, device)
        train_acc = test(model, train_loader, device)
        test_acc = test(model, test_loader, device)
        print(f"Epoch: {epoch:03d}, Loss: {loss:.4f}, Train: {train_acc:.4f}, Test: {test_acc:.4f}")


if __name__ == "__main__":
    main(parser.parse_args())
