"""The step's conv/linear/matmul/attention multiply-adds against torch's FlopCounterMode on the
same step (forward in train mode, mean of the outputs, backward; math SDPA): within 1% on every
torchvision classification model (slow sweep), a sample of timm models and two Hugging Face models
built from small configs. Unmarked: a sample, a frozen backbone and the first conv on the raw input.

Models are built on the meta device where they can be (no weights, nothing computed); both counts
are from shapes alone."""

from __future__ import annotations

import pytest
import torch
import torchvision
from torch import nn
from torchvision.models import get_model, list_models

from archlint.model.loading.load import meta_build
from tests.model.train.flopcheck import counted, ours, step_graph

TOLERANCE = 0.01
CLASSIFIERS = sorted(list_models(module=torchvision.models))
SAMPLE = ["resnet18", "mobilenet_v3_small", "vit_b_16", "efficientnet_b0", "regnet_y_400mf"]


def _torchvision(name: str, batch: int = 2) -> tuple[nn.Module, torch.Tensor]:
    size = 299 if name == "inception_v3" else 224
    model, _ = meta_build(get_model, dict(name=name, weights=None))
    return model, torch.randn(batch, 3, size, size, device="meta")


def _check(model: nn.Module, args: tuple, kwargs: dict | None = None) -> None:
    theirs = counted(model, args, kwargs)
    mine = ours(model, args, kwargs)
    assert theirs > 0
    assert abs(mine - theirs) <= TOLERANCE * theirs, (
        f"archlint {mine:,} vs FlopCounterMode {theirs:,} ({mine / theirs - 1:+.2%})"
    )


@pytest.mark.parametrize("name", SAMPLE)
def test_torchvision_sample(name):
    _check(*_one(name))


def _one(name):
    model, x = _torchvision(name)
    return model, (x,)


@pytest.mark.slow
@pytest.mark.parametrize("name", CLASSIFIERS)
def test_every_torchvision_classifier(name):
    _check(*_one(name))


def test_frozen_backbone_computes_only_the_head_gradients():
    model, x = _torchvision("resnet18")
    for p in model.parameters():
        p.requires_grad_(False)
    model.fc.requires_grad_(True)
    _check(model, (x,))
    graph, totals = step_graph(model, (x,))
    with_backward = {d["module"] for _, d in graph.nodes(data=True) if d.get("flops_backward")}
    assert with_backward == {"fc"}
    fc = next(d for _, d in graph.nodes(data=True) if d.get("module") == "fc")
    assert set(fc["backward_terms"]) == {"grad_weight", "grad_bias"}  # its input needs no gradient
    assert totals.backward_flops == fc["flops"]
    assert totals.trainable_params == 512 * 1000 + 1000 and totals.frozen_params > 11_000_000


def test_first_conv_computes_no_input_gradient():
    model, x = _torchvision("resnet18")
    graph, _ = step_graph(model, (x,))
    by_module = {d["module"]: d for _, d in graph.nodes(data=True) if d["kind"] == "conv"}
    assert set(by_module["conv1"]["backward_terms"]) == {"grad_weight"}
    assert set(by_module["layer1.0.conv1"]["backward_terms"]) == {"grad_input", "grad_weight"}
    assert by_module["conv1"]["flops_backward"] == by_module["conv1"]["flops"]
    assert by_module["layer1.0.conv1"]["flops_backward"] == 2 * by_module["layer1.0.conv1"]["flops"]
    _check(model, (x,))


def test_after_a_frozen_first_layer_no_input_gradient_either():
    """A frozen first conv: its output needs no gradient, so the next conv computes its weight
    gradient but no input gradient (autograd's rule; FlopCounterMode counts the same)."""
    conv = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Conv2d(8, 8, 3))
    for p in conv[0].parameters():
        p.requires_grad_(False)  # frozen first conv: no weight gradient; its input needs none
    x = torch.randn(2, 3, 16, 16)
    graph, _ = step_graph(conv, (x,))
    terms = {d["module"]: d.get("backward_terms") for _, d in graph.nodes(data=True) if d["kind"] == "conv"}
    assert terms["0"] == {} and set(terms["2"]) == {"grad_weight", "grad_bias"}
    _check(conv, (x,))


TIMM_SAMPLE = ["vit_tiny_patch16_224", "resnet18d"]
TIMM_MORE = [
    "convnext_atto",
    "efficientnet_b0",
    "deit_tiny_patch16_224",
    "mobilevitv2_050",
    "regnetx_002",
    "swin_tiny_patch4_window7_224",
    "levit_128s",
    "poolformer_s12",
    "mixer_s16_224",
    "cait_xxs24_224",
]


def _timm(name):
    timm = pytest.importorskip("timm")
    model, _ = meta_build(timm.create_model, dict(model_name=name, pretrained=False))
    size = model.default_cfg.get("input_size", (3, 224, 224))
    return model, (torch.randn(2, *size, device="meta"),)


@pytest.mark.parametrize("name", TIMM_SAMPLE)
def test_timm_sample(name):
    _check(*_timm(name))


@pytest.mark.slow
@pytest.mark.parametrize("name", TIMM_MORE)
def test_timm_more(name):
    _check(*_timm(name))


def _hf(which):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if which == "bert":
        config = transformers.BertConfig(
            num_hidden_layers=2,
            hidden_size=64,
            num_attention_heads=4,
            intermediate_size=256,
            vocab_size=1000,
            num_labels=3,
        )
        model = transformers.BertForSequenceClassification(config)
    else:
        config = transformers.GPT2Config(
            n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=64, use_cache=False
        )
        model = transformers.GPT2LMHeadModel(config)
    return model, (), {"input_ids": torch.randint(0, 1000, (2, 16))}


@pytest.mark.parametrize("which", ["bert", "gpt2"])
def test_hugging_face(which):
    _check(*_hf(which))


class _Sdpa(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(32, 96)

    def forward(self, x):
        q, k, v = self.qkv(x).view(2, 16, 3, 4, 8).permute(2, 0, 3, 1, 4)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


class _Mha(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(32, 32)
        self.attention = nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, x):
        x = self.proj(x)
        return self.attention(x, x, x)[0]


class _Embedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 32)
        self.head = nn.Linear(32, 32)

    def forward(self, ids):
        return self.head(self.embed(ids))


@pytest.mark.parametrize(
    "model, x",
    [
        (_Sdpa(), torch.randn(2, 16, 32)),
        (_Mha(), torch.randn(2, 16, 32)),
        (_Embedding(), torch.randint(0, 100, (2, 7))),
    ],
    ids=["sdpa", "multihead", "embedding"],
)
def test_attention_and_embedding(model, x):
    _check(model, (x,))


def test_fused_attention_recomputes_qk():
    graph, _ = step_graph(_Sdpa(), (torch.randn(2, 16, 32),))
    attention = next(d for _, d in graph.nodes(data=True) if d["kind"] == "attention")
    qk = 2 * 4 * 16 * 16 * 8  # batch · heads · L · S · E
    assert attention["flops"] == 2 * qk  # QKᵀ and AV (E = Ev)
    assert attention["backward_terms"]["grad_input"]["flops"] == 4 * qk  # dV, dP, dQ, dK
    assert attention["backward_terms"]["recompute"]["flops"] == qk


def test_gradients_of_a_tensor_read_twice_are_summed():
    class Residual(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, x):
            y = self.a(x)
            return self.b(y) + y

    graph, _ = step_graph(Residual(), (torch.randn(4, 8),))
    a = next(d for _, d in graph.nodes(data=True) if d.get("module") == "a")
    add = next(d for _, d in graph.nodes(data=True) if d["key"] == "add")
    assert a["grad_fanout"] == 2 and a["backward_terms"]["grad_sum"]["flops"] == 4 * 8
    assert add["flops_backward"] == 0 and add["mac_bytes_backward"] == 0  # the gradient passes through
