"""A model and a CUDA training loop without autocast (AL403), shared by the tests that price it."""

MODEL = """
from torch import nn


class Net(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.Conv2d(width, width, 3, padding=1))
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        return self.head(self.body(x).mean((2, 3)))
"""

TRAIN = """
import torch
from torch import nn

from {module} import Net


def main(loader):
    model = Net().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
