import torch.nn as nn
import torchvision


class Backbone(nn.Module):
    def __init__(self, name):
        super().__init__()
        self.body = getattr(torchvision.models, name)(weights=None)
        self.proj = nn.Conv2d(2048, 256, kernel_size=1)

    def forward(self, x):
        return self.proj(self.body(x))
