import torch.nn as nn
import torch.nn.functional as F


class FocalLoss(nn.Module):
    def __init__(self, ignore_index=255):
        super().__init__()
        self.ignore_index = ignore_index

    def forward(self, inputs, targets):
        return F.cross_entropy(inputs, targets, reduction="mean", ignore_index=self.ignore_index)
