"""Exponential moving averages of the step's metrics, and chunked inference."""
from collections import defaultdict

import torch


class EMA:
    def __init__(self, beta=1.0):
        self.beta = beta
        self.total = defaultdict(float)
        self.fix = defaultdict(float)

    def update(self, metrics, weight=1):
        for key, value in metrics.items():
            self.total[key] = self.total[key] * self.beta + weight * float(value)  # label: AL401
            self.fix[key] = self.fix[key] * self.beta + weight
        return {key: tot / self.fix[key] for key, tot in self.total.items()}


def apply_model(model, mix, segment=44100 * 10):
    out = []
    for offset in range(0, mix.shape[-1], segment):
        out.append(model(mix[..., offset:offset + segment]))
    return torch.cat(out, -1)
