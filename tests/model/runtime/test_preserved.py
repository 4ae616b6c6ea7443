"""sandbox.preserved puts a module's attributes back as they were: the same objects under the same
names, and its dicts', lists' and sets' contents (issue 45 compares them by identity in C)."""

from __future__ import annotations

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
