import torch
import torch.nn as nn
import torch.nn.functional as F


class FocalLoss(nn.Module):
    def __init__(self, gamma=2.0, alpha=0.25):
        super().__init__()
        self.gamma, self.alpha = gamma, alpha

    def forward(self, logits, targets):
        bce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
        p_t = torch.exp(-bce)
        loss = self.alpha * (1 - p_t) ** self.gamma * bce
        if torch.isnan(loss).any():  # label: AL401
            raise ValueError("focal loss is NaN")
        return loss.mean()


class WeightedBCE(nn.Module):
    def __init__(self, pos_weight):
        super().__init__()
        self.pos_weight = pos_weight

    def forward(self, logits, targets):
        weight = torch.ones_like(targets)
        weight[targets > 0.5] = self.pos_weight
        return F.binary_cross_entropy_with_logits(logits, targets, weight=weight)
