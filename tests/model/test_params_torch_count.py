"""params is torch's count (sum(p.numel() for p in model.parameters()), a shared one once),
everywhere: totals, text, --train's trainable/frozen and the max-params budget; what the traced
forward never reads is said beside it (issue 39, item 2)."""

import pytest
import timm
import torch
import torchvision
from torch import nn

import archlint


class Block(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.unused = nn.Linear(d, d)  # built, never called

    def forward(self, x):
        return self.fc(x).relu()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(*[Block() for _ in range(4)])
        self.head = nn.Linear(64, 10)
        self.head.bias.requires_grad_(False)

    def forward(self, x):
        return self.head(self.blocks(x))


def torch_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_params_is_torchs_count_and_the_unused_share_is_said():
    net = Net()
    a = archlint.analyze(net, (8, 64))
    assert a.totals.params == torch_count(net) == 33_930
    assert a.totals.unused_params == 4 * (64 * 64 + 64)
    assert sum(layer.params for layer in a.layers) == torch_count(net) - a.totals.unused_params  # per op: its own
    note = next(n for n in a.notes if n.startswith("params:"))
    assert "blocks.0.unused (4.16K)" in note and "16.64K (49.0%)" in note
    doc = a.to_dict()["models"][0]["totals"]
    assert doc["params"] == 33_930 and doc["unused_params"] == 16_640
    assert "33.93K (16.64K unused)" in a.summary()


def test_train_counts_trainable_and_frozen_as_torch_does():
    net = Net()
    train = archlint.analyze(net, (8, 64), train=True).totals.train
    assert train.trainable_params == sum(p.numel() for p in net.parameters() if p.requires_grad) == 33_920
    assert train.frozen_params == 10
    assert train.updated_params == 33_920 - 16_640  # the optimizer updates what gets a gradient


def test_the_max_params_budget_checks_torchs_count():
    a = archlint.analyze(Net(), (8, 64), max_params=25_000)  # the forward reads 17.29K of 33.93K
    assert not a.passed
    gate = next(g for g in a.result.gate if g.check == "max-params")
    assert not gate.passed and gate.actual == 33_930


@pytest.mark.parametrize(
    "name, build, shape",
    [
        ("inception_v3", lambda: torchvision.models.inception_v3(init_weights=False), (1, 3, 299, 299)),
        ("googlenet-aux", lambda: torchvision.models.googlenet(aux_logits=True, init_weights=False), (1, 3, 224, 224)),
        ("resnet18", torchvision.models.resnet18, (1, 3, 224, 224)),
        ("timm-deit_tiny", lambda: timm.create_model("deit_tiny_patch16_224"), (1, 3, 224, 224)),
        ("timm-efficientnet_b0", lambda: timm.create_model("efficientnet_b0"), (1, 3, 224, 224)),
    ],
)
def test_zoo_params_equal_torchs_count(name, build, shape):
    torch.manual_seed(0)
    model = build()
    a = archlint.analyze(model, shape)
    assert a.totals.params == torch_count(model)
    if name in ("inception_v3", "googlenet-aux"):  # the auxiliary heads run only in training
        assert a.totals.unused_params > 0 and "aux" in next(n for n in a.notes if n.startswith("params:")).lower()
    else:
        assert a.totals.unused_params == 0
