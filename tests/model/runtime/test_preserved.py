"""sandbox.preserved puts a module's attributes back as they were: the same objects under the same
names, and its dicts', lists' and sets' contents (issue 45 compares them by identity in C)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from archlint.model.runtime.sandbox import preserved


class _Stateful(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.a, self.b = [1], [2]
        self.cache: dict = {"k": torch.zeros(1)}
        self.seen: list = [self.a]
        self.register_buffer("steps", torch.zeros(()))

    def mutate(self):
        self.a, self.b = self.b, self.a  # the same keys, their objects swapped
        self.cache["k"] = torch.ones(1)  # a dict's item replaced
        self.cache["new"] = 1
        self.seen[0] = self.b  # a list's item replaced, same length
        self.fc.register_forward_hook(lambda *args: None)  # an empty hook table filled
        del self.fc.in_features  # an attribute gone
        self.extra = 3  # an attribute added
        self.steps += 1  # a buffer changed in place
        self.fc.weight = nn.Parameter(torch.ones(2, 2))  # a parameter rebound


def test_every_kind_of_change_is_put_back():
    m = _Stateful()
    before = {k: v for k, v in m.__dict__.items()}
    a, b, cache_k, seen, weight = m.a, m.b, m.cache["k"], list(m.seen), m.fc.weight
    with preserved(m, parameter_values=False):
        m.mutate()
    assert list(m.__dict__) == list(before) and all(m.__dict__[k] is v for k, v in before.items())
    assert m.a is a and m.b is b and m.cache == {"k": cache_k} and m.seen[0] is seen[0]
    assert not m.fc._forward_hooks and m.fc.in_features == 2 and not hasattr(m, "extra")
    assert m.steps.item() == 0 and m.fc.weight is weight


class _BiasCache(nn.Module):
    """timm's LeViT attention: eval forwards cache a tensor by device, and its own train() empties
    the cache (by rebinding it) whatever the mode it is given."""

    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(4))
        self.cache: dict = {}

    def train(self, mode=True):
        super().train(mode)
        if self.cache:
            self.cache = {}
        return self

    def forward(self, x):
        if self.training:
            return x + self.bias
        key = str(x.device)
        if key not in self.cache:
            self.cache[key] = self.bias * 1
        return x + self.cache[key]


def test_a_module_whose_train_clears_its_cache_keeps_it():
    # The capture's train()/eval() ran outside sandbox.preserved: the user's cache, filled by their
    # own forward, came back empty (a new dict). Every strategy, both modes.
    import archlint

    for extra in ({}, {"strategy": "export"}, {"strategy": "dispatch"}, {"mode": "train"}, {"train": True}):
        model = nn.Sequential(nn.Linear(4, 4), _BiasCache()).eval()
        with torch.no_grad():
            model(torch.randn(2, 4))
        cache, cached = model[1].cache, model[1].cache["cpu"]
        archlint.analyze(model, torch.randn(2, 4), select=[], **extra)
        assert model[1].cache is cache and cache == {"cpu": cached}, extra
        assert not model.training and not model[1].training


def test_levit_analyzed_twice_keeps_its_attention_bias_cache():
    timm = pytest.importorskip("timm")
    import archlint

    model = timm.create_model("levit_128s", pretrained=False).eval()
    x = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        model(x)
    caches = {
        n: (m.attention_bias_cache, dict(m.attention_bias_cache))
        for n, m in model.named_modules()
        if hasattr(m, "attention_bias_cache")
    }
    assert caches and all(was for _, was in caches.values())
    first = archlint.analyze(model, x, select=[])
    second = archlint.analyze(model, x, select=[], train=True)
    assert second.strategy == first.strategy == "fx" and second.totals.flops > 0
    for name, m in model.named_modules():
        if name in caches:
            assert m.attention_bias_cache is caches[name][0] and m.attention_bias_cache == caches[name][1], name
