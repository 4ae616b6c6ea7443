"""The transformer-era rules (AL106 handwritten attention, AL107 mask built in forward, AL108
unfused projections, AL109 misaligned GEMM, AL110 hand-written fused ops, AL111 pointwise conv after
an upsample, AL112 host syncs in forward, AL113 layout round trips) on a hand-written nanoGPT and its fixed twin (through
the CLI), on Hugging Face models, and their silence on torchvision classification models.

One deliberate exception: torchvision's Swin and MaxViT write attention by hand (matmul → add the
relative-position bias → softmax → matmul); AL106 reports them, since F.scaled_dot_product_attention
takes that bias as attn_mask. And ConvNeXt's LayerNorm2d (permute → layer_norm → permute back) gets
AL113 as info (< 1% of the model each: tests/rules/test_layout_roundtrip.py). No other torchvision
classification model gets any of these rules."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import torch
import torchvision

from archlint.cli import main
from archlint.config import Settings
from archlint.model.analyze import analyze_model

from ._graphs import findings
from .test_torchvision_noise import build

NANOGPT = Path(__file__).resolve().parents[1] / "fixtures" / "models" / "nanogpt.py"
RULES = ("AL106", "AL107", "AL108", "AL109", "AL110", "AL111", "AL112", "AL113", "AL114")
HANDWRITTEN_ATTENTION = ("swin_t", "swin_s", "swin_b", "swin_v2_t", "swin_v2_s", "swin_v2_b", "maxvit_t")


def run(capsys, target):
    argv = [
        f"{NANOGPT}:{target}",
        "--input-shape",
        "1,64:int64",
        "--dtype",
        "bfloat16",
        "--output-format",
        "json",
        "--exit-zero",
        "--select",
        ",".join(RULES),
    ]
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)["diagnostics"]


def test_nanogpt_gets_each_finding_priced(capsys):
    found = run(capsys, "NanoGPT")
    # Each of the two blocks has the same four findings: one finding per rule lists both blocks.
    assert Counter(d["code"] for d in found) == {"AL106": 1, "AL107": 1, "AL108": 1, "AL109": 1, "AL110": 1}
    assert all(len(d["evidence"]["repeats"]) == 2 for d in found if d["code"] != "AL109")
    for d in found:
        assert d["price"]["basis"] == "static" and d["price"]["alternative"]
        pays = (d["price"]["mac_bytes_saved"] or 0) > 0 and d["price"]["saving_share"] >= 0.01  # the one floor
        assert d["severity"] == ("warning" if pays else "info"), d
        if d["code"] != "AL109":  # padding a GEMM saves device time, not bytes: no static saving
            assert d["price"]["mac_bytes_saved"] > 0 and 0 < d["price"]["saving_share"] < 1
    by_code = {d["code"]: d for d in found}
    assert by_code["AL106"]["evidence"]["score_shape"] == [1, 4, 64, 64]
    assert by_code["AL107"]["evidence"]["mask_shape"] == [64, 64]
    assert by_code["AL108"]["evidence"]["out_features"] == [128, 128, 128]
    assert by_code["AL109"]["evidence"]["out_features"] == 50257 and "→ 50304" in by_code["AL109"]["message"]
    assert by_code["AL110"]["evidence"]["pattern"] == "GELU (tanh approximation)"


def test_nanogpt_fixed_has_none(capsys):
    assert run(capsys, "NanoGPTFixed") == []


def codes(model, inputs):
    graph, _ = analyze_model(model, inputs, Settings())
    return Counter(d.code for d in findings(graph) if d.code in RULES)


def allowed(name):
    return {"AL106"} if name in HANDWRITTEN_ATTENTION else {"AL113"} if name.startswith("convnext") else set()


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small", "vit_b_16", "convnext_tiny", "swin_t"])
def test_torchvision_sample(name):
    found = codes(*build(name))
    assert set(found) <= allowed(name), found


@pytest.mark.slow
@pytest.mark.parametrize("name", torchvision.models.list_models(module=torchvision.models))
def test_torchvision_zoo(name):
    found = codes(*build(name))
    assert set(found) <= allowed(name), found


def test_hugging_face_models():
    transformers = pytest.importorskip("transformers")
    from archlint.model.loading.load import meta_build

    def hf(cls, config):
        model, _ = meta_build(cls, {"config": config})
        return codes(model.eval(), (torch.randint(0, 100, (1, 16)),))

    gpt2 = hf(transformers.GPT2LMHeadModel, transformers.GPT2Config(n_layer=1, n_embd=64, n_head=4, vocab_size=100))
    assert "AL108" not in gpt2 and "AL106" not in gpt2  # fused c_attn, SDPA
    llama = transformers.LlamaConfig(
        num_hidden_layers=1,
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        vocab_size=100,
    )
    assert hf(transformers.LlamaForCausalLM, llama)["AL108"] == 2  # q/k/v, gate/up


@pytest.mark.parametrize("head_dim, fires", [(20, True), (32, False), (264, True)])
def test_misaligned_gemm_head_dims_fused_attention_cannot_take(head_dim, fires):
    import torch.nn.functional as F
    from torch import nn

    class Attention(nn.Module):
        def forward(self, q):
            return F.scaled_dot_product_attention(q, q, q, is_causal=True)

    q = torch.randn(1, 2, 16, head_dim, dtype=torch.bfloat16)
    graph, _ = analyze_model(Attention(), (q,), Settings())
    found = [d for d in findings(graph) if d.code == "AL109"]
    assert bool(found) == fires
    if fires:
        assert found[0].evidence["head_dim"] == head_dim
        assert found[0].price.mac_bytes_saved == 4 * 2 * 16 * 16 * 2  # four passes over the bf16 scores


# ---- issue 43: AL108's alternative as it would run ------------------------------------------


class _ActorCritic(torch.nn.Module):
    """A policy layer and a 1-wide value head on one trunk: fusing gives 257 outputs."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(64, 256)
        self.policy = torch.nn.Linear(256, 256)
        self.value = torch.nn.Linear(256, 1)

    def forward(self, x):
        h = torch.relu(self.body(x))
        return self.policy(h), self.value(h)


def _al108(model, shape, spec=None):
    from archlint.config import ModelSpec, Settings
    from archlint.model.analyze import analyze

    _, found = analyze(
        ModelSpec("ac", model=model.eval(), given_args=(torch.randn(*shape),), given_kwargs={}),
        Settings(device_spec=spec),
    )
    return [d for d in found if d.code == "AL108"]


def test_al108_offers_the_padded_fusion_not_an_unaligned_one():
    (d,) = _al108(_ActorCritic(), (64, 64))
    assert d.evidence["fused_features"] == 264 and "nn.Linear(256, 264)" in d.price.alternative
    assert "nn.Linear(256, 257)" not in d.price.alternative and "padded" in d.message
    # the padding's 7 zero rows (weights read, outputs written) are charged against the read saved
    assert d.evidence["padding_bytes"] == 4 * 7 * (256 + 64)
    assert d.price.mac_bytes_saved == 64 * 256 * 4 - d.evidence["padding_bytes"]


def test_al108_on_a_device_spec_is_priced_as_the_fused_gemm_runs():
    (d,) = _al108(_ActorCritic(), (8192, 64), "a100-pcie")
    assert d.price.basis == "estimated" and d.price.device == "a100-pcie"

    # three compute-bound 256-wide fp32 projections: one wider GEMM does the same tiles, no saving
    class QKV(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v = (torch.nn.Linear(256, 256) for _ in range(3))

        def forward(self, x):
            return self.q(x) + self.k(x) * self.v(x)

    (q,) = _al108(QKV(), (4096, 256), "a100-pcie")
    assert q.price.basis == "estimated" and not (q.price.saving_ms or 0) > 0 and q.severity.value == "info"
