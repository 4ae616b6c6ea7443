"""Issue 43: AL104 on Hugging Face decoders is placed at a layer and names the switch that removes
its bytes where one exists (Gemma-2's final logit softcap after lm_head: logits_to_keep=1)."""

from __future__ import annotations

import warnings

from archlint.config import ModelSpec, Settings
from archlint.diagnostics import Severity
from archlint.model.analyze import analyze


def _al104(name: str, **config):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, found = analyze(ModelSpec(name, hf_config=config), Settings())
    return [d for d in found if d.code == "AL104"]


def test_gemma2_softcap_at_lm_head_with_logits_to_keep():
    (d,) = _al104(
        "hf:gemma2",
        num_hidden_layers=2,
        hidden_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=256,
        head_dim=32,
    )
    assert d.severity is Severity.WARNING and d.module == "lm_head"
    assert "after lm_head (div → tanh → mul" in d.message
    assert d.evidence["switch"] == {"logits_to_keep": 1} and "logits_to_keep=1" in d.message
    assert "transformers" in d.file.replace("\\", "/").split("/")  # the class whose forward runs them


def test_no_logits_switch_where_the_bytes_are_in_the_blocks():
    # a decoder without a softcap: AL104 (if any) sits in its blocks and names no logits switch
    for d in _al104("hf:llama", num_hidden_layers=2, hidden_size=128, num_attention_heads=4, intermediate_size=256):
        assert d.module and "logits_to_keep" not in d.message


def test_custom_kernel_reference_path_is_info_not_priced():
    # StyleGAN2 (rosinality's layout): fused_leaky_relu and upfirdn2d take their PyTorch reference
    # path on a CPU (`if input.device.type == "cpu"`), a CUDA kernel on the GPU. Their ops are
    # said to be captured through that path (info, with the branch), never priced in a warning.
    import sys
    from pathlib import Path

    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "models"))
    from stylegan2_ops.model import Generator

    _, found = analyze(
        ModelSpec("sg", model=Generator().eval(), given_args=(torch.randn(4, 128),), given_kwargs={}), Settings()
    )
    ref = [d for d in found if d.code == "AL104" and "reference_path" in d.evidence]
    (info,) = ref
    assert info.severity is Severity.INFO and {p["function"] for p in info.evidence["reference_path"]} == {
        "fused_leaky_relu",
        "upfirdn2d",
    }
    assert "device.type == 'cpu'" in info.message
    held = set(info.evidence["ops"])
    for d in found:
        if d.severity is Severity.WARNING:
            assert not held & set(d.price.claims), d.message  # no warning prices a reference-path op
            assert not any(m.endswith((".activate", ".blur")) for m in [d.module or ""])


def test_al107_band_mask_does_not_offer_is_causal():
    # ModernBERT-style local attention: a window |i - j| <= w built every call. Building it once
    # is the fix; is_causal=True would compute another model (issue 43, item 3).
    import torch
    from torch import nn

    class Local(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(64, 192)

        def forward(self, x):
            t = x.shape[1]
            pos = torch.arange(t)
            band = (pos[None, :] - pos[:, None]).abs() <= 16
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            return nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=band)

    class Causal(Local):
        def forward(self, x):
            t = x.shape[1]
            mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            return nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    def al107(model):
        _, found = analyze(
            ModelSpec("m", model=model.eval(), given_args=(torch.randn(2, 512, 64),), given_kwargs={}), Settings()
        )
        return [d for d in found if d.code == "AL107"]

    (band,) = al107(Local())
    assert not band.evidence["causal"] and "is_causal=True would change the model" in band.message
    assert "is_causal" not in band.price.alternative
    (tri,) = al107(Causal())
    assert tri.evidence["causal"] and "or pass is_causal=True" in tri.message


def test_use_cuda_kernel_switch_is_named():
    # BigVGAN's AMPBlock1 picks its fused CUDA anti-aliased activation when use_cuda_kernel is on;
    # off (the capture), the PyTorch path runs on the GPU too: AL104 stays, naming the switch.
    import sys
    from pathlib import Path

    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "models"))
    from bigvgan_switch.model import Stack

    _, found = analyze(
        ModelSpec("bv", model=Stack().eval(), given_args=(torch.randn(1, 128, 8192),), given_kwargs={}), Settings()
    )
    (d,) = [d for d in found if d.code == "AL104" and d.severity is Severity.WARNING]
    assert d.module.startswith("resblocks.0.activations") and "use_cuda_kernel" in d.evidence["switch"]["test"]
    assert "use_cuda_kernel" in d.message and "reference_path" not in d.evidence


def test_al104_statement_agrees_with_its_final_price():
    # minGPT's AL104: AL106 and AL110 own part of its ops (settle cuts the price); the share the
    # message states is the one its final price carries, not the one before the cut
    import re
    import sys
    from pathlib import Path

    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from rule_noise import repo_model

    model, args = repo_model("mingpt_karpathy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, found = analyze(ModelSpec("gpt", model=model, given_args=args, given_kwargs={}), Settings())
    (d,) = [d for d in found if d.code == "AL104"]
    assert d.evidence["counted_by"] and "own part of these ops" in d.message
    stated = int(re.search(r"hold (\d+)% of the model's MAC", d.message).group(1))
    assert stated == round(100 * d.price.saving_share), (stated, d.price.saving_share)
    assert torch.is_tensor(args[0])


def test_restate_keeps_what_was_said_after_the_statement():
    from archlint.diagnostics import Diagnostic, Price
    from archlint.model.checks._verdict import restate, stated

    d = Diagnostic(code="AL104", message="", price=Price.static("fuse", mac_bytes_saved=50, model_mac_bytes=100))
    stated(d, lambda d: f"saves {d.price.saving_share:.0%}")
    d.message += " (library code)"
    d.price.saving_share = 0.1
    restate(d)
    assert d.message == "saves 10% (library code)"
    d.message = "rewritten"
    restate(d)
    assert d.message == "rewritten"
