"""Wide ResNet 28-2 as used for CIFAR semi-supervised baselines."""
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, in_planes, out_planes, stride):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_planes, momentum=0.001)
        self.conv1 = nn.Conv2d(in_planes, out_planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_planes, momentum=0.001)
        self.conv2 = nn.Conv2d(out_planes, out_planes, 3, 1, 1, bias=False)
        self.shortcut = None if in_planes == out_planes else nn.Conv2d(in_planes, out_planes, 1, stride, bias=False)

    def forward(self, x):
        out = F.leaky_relu(self.bn1(x), 0.1)
        y = self.conv2(F.leaky_relu(self.bn2(self.conv1(out)), 0.1))
        return y + (x if self.shortcut is None else self.shortcut(out))


class WideResNet(nn.Module):
    def __init__(self, num_classes, depth=28, widen_factor=2):
        super().__init__()
        n = (depth - 4) // 6
        ch = [16, 16 * widen_factor, 32 * widen_factor, 64 * widen_factor]
        self.conv1 = nn.Conv2d(3, ch[0], 3, 1, 1, bias=False)
        blocks = []
        for i, stride in enumerate((1, 2, 2)):
            blocks += [BasicBlock(ch[i] if j == 0 else ch[i + 1], ch[i + 1], stride if j == 0 else 1) for j in range(n)]
        self.blocks = nn.Sequential(*blocks)
        self.bn = nn.BatchNorm2d(ch[3], momentum=0.001)
        self.fc = nn.Linear(ch[3], num_classes)

    def forward(self, x):
        out = F.leaky_relu(self.bn(self.blocks(self.conv1(x))), 0.1)
        return self.fc(F.adaptive_avg_pool2d(out, 1).flatten(1))


def build_wideresnet(depth, widen_factor, num_classes):
    return WideResNet(num_classes=num_classes, depth=depth, widen_factor=widen_factor)
