"""Real values for the meta tensors that depend on the inputs alone (archlint.model.train.values):
a model that reads its mask's data (`.item()`, `nonzero()`) is still measured on the meta device,
with the same bytes as the run on real tensors."""

import copy

import torch
import torch.nn as nn

from archlint.model.train import memory
from archlint.model.train.memory import step_memory

META = "measured on the meta device"


class MaskedMean(nn.Module):
    """Pools the positions its mask keeps; skips the masking when the mask keeps them all (as
    Hugging Face's attention masks do with `padding_mask.all()`)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)
        self.register_buffer("scale", torch.tensor(2.0))

    def forward(self, x, mask):
        h = torch.relu(self.proj(x)) * self.scale
        if bool(mask.all()):  # .item() on an input: the real run skips the masking
            return h.mean(1)
        keep = mask.flatten().nonzero().squeeze(1)  # a shape that only the mask's data gives
        return h.flatten(0, 1).index_select(0, keep).mean(0)


def real_run(model, args, optimizer):
    """step_memory as it ran before values were known: on a real copy of the model."""
    first, tracker, forward_end = memory._two_steps(
        copy.deepcopy(model), args, {}, optimizer, "single", "mean", False, False
    )
    return memory._summary(tracker, forward_end)


def test_item_on_an_input_is_answered_on_meta():
    torch.manual_seed(0)
    model, x = MaskedMean(), torch.randn(2, 6, 16)
    for mask in (torch.ones(2, 6, dtype=torch.bool), torch.tensor([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 0, 0]]).bool()):
        r = step_memory(model, (x, mask), optimizer="adam")
        assert r["basis"].startswith(META), r["basis"]
        real = real_run(model, (x, mask), "adam")
        for key in ("peak_bytes", "activations_bytes", "grads_bytes", "optimizer_bytes", "ops"):
            assert r[key] == real[key], key


def test_writing_an_unknown_into_a_known_tensor_forgets_its_value():
    class Leak(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x, mask):
            m = mask.clone()
            m.add_(self.lin(x).detach())  # the mask's copy now holds a weight's data
            return self.lin(x) * (2 if m.sum().item() > 0 else 1)

    r = step_memory(Leak(), (torch.randn(3, 4), torch.zeros(3, 4)), optimizer="sgd")
    assert "real tensors" in r["basis"]  # not answered from the stale value


def test_hugging_face_sdpa_mask_runs_on_meta():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=100, n_embd=32, n_layer=1, n_head=2, n_positions=16, use_cache=False)
    ids = torch.randint(0, 100, (2, 8))
    model = GPT2LMHeadModel(cfg)
    r = step_memory(model, (), {"input_ids": ids}, optimizer="sgd")
    assert r["basis"].startswith(META), r["basis"]
    first, tracker, forward_end = memory._two_steps(
        copy.deepcopy(model), (), {"input_ids": ids}, "sgd", "single", "mean", False, False
    )
    assert r["peak_bytes"] == tracker.peak
