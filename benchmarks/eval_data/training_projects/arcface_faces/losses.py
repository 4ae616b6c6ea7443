"""Additive-margin softmax losses: the margin is applied to the target logit of each labelled sample."""
import math

import torch
import torch.nn.functional as F


class CombinedMarginLoss(torch.nn.Module):
    def __init__(self, s, m1, m2, m3):
        super().__init__()
        self.s, self.m1, self.m2, self.m3 = s, m1, m2, m3

    def forward(self, logits, labels):
        index_positive = torch.where(labels != -1)[0]  # label: AL401
        target_logit = logits[index_positive, labels[index_positive].view(-1)]
        with torch.no_grad():
            target_logit.arccos_()
            logits.arccos_()
            final_target_logit = target_logit + self.m2
            logits[index_positive, labels[index_positive].view(-1)] = final_target_logit
            logits.cos_()
        return F.cross_entropy(logits * self.s, labels)


class ArcFace(torch.nn.Module):
    def __init__(self, s=64.0, margin=0.5):
        super().__init__()
        self.s = s
        self.cos_m, self.sin_m = math.cos(margin), math.sin(margin)
        self.theta = math.cos(math.pi - margin)
        self.sinmm = math.sin(math.pi - margin) * margin

    def forward(self, logits, labels):
        valid = labels != -1
        target_logit = logits[valid, labels[valid]]  # label: AL401
        sin_theta = torch.sqrt(1.0 - torch.pow(target_logit, 2))
        cos_theta_m = target_logit * self.cos_m - sin_theta * self.sin_m
        final = torch.where(target_logit > self.theta, cos_theta_m, target_logit - self.sinmm)
        logits[valid, labels[valid]] = final  # label: AL401
        return F.cross_entropy(logits * self.s, labels)


class CosFace(torch.nn.Module):
    def __init__(self, s=64.0, m=0.40):
        super().__init__()
        self.s, self.m = s, m

    def forward(self, logits, labels):
        one_hot = F.one_hot(labels, logits.size(1)).to(logits.dtype)
        return F.cross_entropy((logits - one_hot * self.m) * self.s, labels)
