import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicEncoder(nn.Module):
    def __init__(self, output_dim=128):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3)
        self.conv2 = nn.Conv2d(64, output_dim, kernel_size=1)

    def forward(self, x):
        return self.conv2(F.relu(self.conv1(x)))


class RAFT(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.fnet = BasicEncoder(256)
        self.update = nn.Conv2d(256, 2, 3, padding=1)

    def forward(self, image1, image2, iters=12):
        f1, f2 = self.fnet(image1), self.fnet(image2)
        flow = torch.zeros_like(f1[:, :2])
        preds = []
        for _ in range(iters):
            flow = flow + self.update(f1 * f2)
            preds.append(F.interpolate(flow, scale_factor=2, mode="bilinear"))
        return preds
