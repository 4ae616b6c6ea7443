"""Credit-default prediction on tabular features, in the layout of a tabular deep-learning repository
(run.py, src/data.py, src/models/, src/losses/)."""
import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

from src.data import load_features
from src.losses import FocalLoss, WeightedBCE
from src.models import MLP


def evaluate(model, loader, device):
    model.eval()
    scores, labels = [], []
    with torch.no_grad():
        for xb, yb in loader:
            scores.append(torch.sigmoid(model(xb.to(device))).cpu())  # label: AL302
            labels.append(yb)
    model.train()
    scores, labels = torch.cat(scores), torch.cat(labels)
    return ((scores > 0.5).float() == labels).float().mean().item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--csv", default="data/credit.csv")
    parser.add_argument("--loss", default="focal", choices=["focal", "bce"])
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--debug", action="store_true")
    args = parser.parse_args()
    device = torch.device(args.device)

    (x_train, y_train), (x_val, y_val) = load_features(args.csv)
    train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=args.batch_size, shuffle=True,  # label: AL304
                              pin_memory=True)
    val_loader = DataLoader(TensorDataset(x_val, y_val), batch_size=4096, pin_memory=True, num_workers=2)
    model = MLP(x_train.shape[1], hidden=(512, 256, 128)).to(device)
    if args.loss == "focal":
        criterion = FocalLoss(gamma=2.0)
    elif args.loss == "bce":
        criterion = WeightedBCE(pos_weight=float((y_train == 0).sum() / (y_train == 1).sum()))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-5)
    for epoch in range(args.epochs):
        for xb, yb in train_loader:  # label: AL403
            xb, yb = xb.to(device), yb.to(device)  # label: AL302
            logits = model(xb)
            loss = criterion(logits, yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if args.debug:
                print(f"batch loss {loss.item():.4f}")
        print(f"epoch {epoch}: val acc {evaluate(model, val_loader, device):.4f}")


if __name__ == "__main__":
    main()
