"""Issue 26: one materiality rule for every model rule, findings located where the user acts,
the forward the user runs, alternatives that keep the model, no phantom costs."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from archlint.config import ModelSpec, Settings, check_rule_options
from archlint.diagnostics import Diagnostic, Price, Severity
from archlint.model.analyze import analyze, analyze_model
from archlint.model.checks import _repeats, _verdict, check_modules

from ._graphs import findings, opgraph


def by_code(model, *shapes, settings=None):
    out: dict[str, list] = {}
    for d in findings(opgraph(model, *shapes), settings):
        out.setdefault(d.code, []).append(d)
    return out


# ---- 1. one floor, every model rule -------------------------------------------------------------


def static(saved: int, model: int = 1000) -> Price:
    return Price.static("x", mac_bytes_saved=saved, model_mac_bytes=model)


@pytest.mark.parametrize(("saved", "severity"), [(20, Severity.WARNING), (5, Severity.INFO), (0, Severity.INFO)])
def test_floor_decides_for_any_rule(saved, severity):
    for code in ("AL107", "AL108", "AL201", "AL204"):
        d = Diagnostic(code, "m", module="a.b", price=static(saved))
        _verdict.judge(d, {"min_saving_share": 0.01}, None, 1000)
        assert d.severity is severity
        assert ("verdict" in d.evidence) == (severity is Severity.INFO)


def test_a_finding_repriced_by_a_what_if_is_judged_again_from_what_its_rule_proposed():
    # first verdict: the fix's own timing was inside the noise (no saving): info
    d = Diagnostic("AL106", "m", module="a", price=Price.timed("x", saving_ms=0.0, model_ms=10.0))
    _verdict.judge(d, {"min_saving_share": 0.01}, None, 1000)
    assert d.severity is Severity.INFO and d.evidence["proposed"] == "warning"
    # the --what-if timed the fix on the whole model: 20% faster, a warning again
    d.price = Price.timed("x", saving_ms=2.0, model_ms=10.0)
    _verdict.judge_again(d, {"min_saving_share": 0.01}, None, 1000)
    assert d.severity is Severity.WARNING and "verdict" not in d.evidence and "proposed" not in d.evidence
    # a finding its what-if made a warning (AL114) still meets the floor
    tiny = Diagnostic("AL114", "m", module="a", price=Price.timed("x", saving_ms=0.01, model_ms=10.0))
    _verdict.judge_again(tiny, {"min_saving_share": 0.01}, None, 1000)
    assert tiny.severity is Severity.INFO and "under the 1% floor" in tiny.evidence["verdict"]
    # a rule that proposes info (AL205: a deployment step) stays info whatever the what-if measured
    fold = Diagnostic(
        "AL205", "m", module="a", severity=Severity.INFO, price=Price.timed("x", saving_ms=3.0, model_ms=10.0)
    )
    _verdict.judge_again(fold, {"min_saving_share": 0.01}, None, 1000)
    assert fold.severity is Severity.INFO


def test_missing_or_negative_price_is_info():
    for price in (None, static(-50), Price.timed("x", saving_ms=-1.0, model_ms=10.0)):
        d = Diagnostic("AL110", "m", module="a", price=price)
        _verdict.judge(d, {"min_saving_share": 0.0}, None, 1000)
        assert d.severity is Severity.INFO


def test_every_model_rule_takes_the_floor_option():
    for module in check_modules():
        assert _verdict.with_floor(module.OPTIONS)["min_saving_share"] == _verdict.FLOOR
        check_rule_options({module.CODE: {"min_saving_share": 0.05}}, "test")  # documented on its page


class HandNorm(nn.Module):
    """A hand-written RMSNorm (AL110) beside a big Linear: under 1% of the model's MAC."""

    def __init__(self, big: int):
        super().__init__()
        self.norm_weight = nn.Parameter(torch.ones(16))
        self.proj = nn.Linear(16, big)

    def forward(self, x):
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norm_weight
        return self.proj(x)


def test_floor_is_configurable_per_rule():
    graph = opgraph(HandNorm(8192), (1, 64, 16))
    (d,) = [d for d in findings(graph) if d.code == "AL110"]
    assert d.severity is Severity.INFO and d.price.saving_share < 0.01
    lowered = Settings(rule_options={"AL110": {"min_saving_share": 0.0}})
    (d,) = [d for d in findings(graph, lowered) if d.code == "AL110"]
    assert d.severity is Severity.WARNING


class FakePricer:
    end_to_end_ms = 10.0
    end_to_end_spread_ms = (5.0, 20.0)  # a loaded machine: the passes spread 4×


class Timed:
    pricer = FakePricer()


def test_latency_verdict_never_rests_on_noise():
    # 0.15 ms of a 10 ms model is 1.5%, but over the passes' spread 0.75%–3%: the static share decides
    d = Diagnostic("AL113", "m", module="a", price=Price.timed("x", saving_ms=0.15, model_ms=10.0, mac_bytes_saved=5))
    _verdict.judge(d, {"min_saving_share": 0.01}, Timed(), 1000)
    assert d.severity is Severity.INFO and "straddles" in d.evidence["verdict_basis"]
    d = Diagnostic("AL113", "m", module="a", price=Price.timed("x", saving_ms=0.15, model_ms=10.0, mac_bytes_saved=50))
    _verdict.judge(d, {"min_saving_share": 0.01}, Timed(), 1000)
    assert d.severity is Severity.WARNING
    clear = Diagnostic(
        "AL113", "m", module="a", price=Price.timed("x", saving_ms=1.0, model_ms=10.0, mac_bytes_saved=1)
    )
    _verdict.judge(clear, {"min_saving_share": 0.01}, Timed(), 1000)
    assert clear.severity is Severity.WARNING and "verdict_basis" not in clear.evidence


# ---- 2. located: no model-wide total at the root -----------------------------------------------


class Softcapped(nn.Module):
    """Gemma-2's final logit softcap in the model's own forward, over a big tensor."""

    def __init__(self):
        super().__init__()
        self.lm_head = nn.Linear(16, 4096, bias=False)

    def forward(self, x):
        logits = self.lm_head(x)
        return torch.tanh(logits / 30.0) * 30.0


def test_al104_places_the_root_chain_after_the_layer_it_follows():
    # issue 43: not at the model root — at lm_head, whose logits the softcap post-processes
    (d,) = by_code(Softcapped(), (1, 512, 16))["AL104"]
    assert d.module == "lm_head" and d.severity is Severity.WARNING and "after lm_head" in d.message
    assert d.evidence["places"][0]["after"] and d.evidence["places"][0]["module"] == "lm_head"
    names = [d.evidence["ops"]]
    assert len(names[0]) == 3 and "div → tanh → mul" in d.message and "1×512×4096" in d.message
    assert _verdict.located(d)


class FunctionalMLP(nn.Module):
    """An MLP-only model whose activations are functional calls in its own forward."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(64, 64), nn.Linear(64, 64), nn.Linear(64, 64)

    def forward(self, x):
        x = F.gelu(self.fc1(x))
        x = F.relu(self.fc2(x)) + x
        return torch.sigmoid(self.fc3(x)) * 2 - 1


def test_al104_on_an_mlp_only_model_is_at_a_layer_not_the_root():
    (d,) = by_code(FunctionalMLP(), (8192, 64))["AL104"]
    assert d.module in ("fc1", "fc2", "fc3") and d.severity is Severity.WARNING
    assert {p["module"] for p in d.evidence["places"]} == {"fc1"} and d.evidence["places"][0]["repeats"] == [
        "fc1",
        "fc2",
        "fc3",
    ]


class OnInputs(nn.Module):
    def forward(self, x):
        return torch.tanh(x * 3.0) + 1.0


def test_al104_on_the_model_inputs_is_info():
    found = by_code(OnInputs(), (4096, 256)).get("AL104", [])
    assert found and all(d.severity is Severity.INFO and "root" in d.evidence["verdict"] for d in found)


def test_al104_label_names_the_ops_that_carry_the_bytes():
    # a learned per-channel scale (exp of a parameter, then reciprocal) weighs nothing next to
    # the activation ops: the label names mul and add, not exp → reciprocal
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(64, 64)
            self.log_scale = nn.Parameter(torch.zeros(64))

        def forward(self, x):
            scale = torch.reciprocal(torch.exp(self.log_scale) + 1e-6)
            return self.proj(x) * scale + 1.0

    (d,) = by_code(Scaled(), (8192, 64))["AL104"]
    assert "mul → add" in d.message and "exp" not in d.message.split("most in")[1]


def test_a_root_total_without_ops_is_info():
    d = Diagnostic("AL104", "m", module="", node=None, price=static(500))
    _verdict.judge(d, {"min_saving_share": 0.01}, None, 1000)
    assert d.severity is Severity.INFO and "root" in d.evidence["verdict"]


# ---- 3. the forward the user runs ---------------------------------------------------------------


class ExportMask(nn.Module):
    """Builds a causal mask only while exported (as transformers does); eagerly is_causal=True."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(32, 96)

    def forward(self, x):
        q, k, v = self.qkv(x).view(1, 256, 3, 2, 16).permute(2, 0, 3, 1, 4)
        if torch.compiler.is_exporting():
            mask = torch.tril(torch.ones(256, 256, dtype=torch.bool))
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_export_only_mask_is_rechecked_on_the_eager_forward():
    spec = ModelSpec("export_mask", model=ExportMask().eval(), given_args=(torch.randn(1, 256, 32),))
    settings = Settings(strategy="export", rule_options={"AL107": {"min_saving_share": 0.0}})
    result, found = analyze(spec, settings)
    (d,) = [d for d in found if d.code == "AL107"]
    assert d.severity is Severity.INFO and d.evidence["eager"] == "absent" and "only under export" in d.message
    assert any("re-checked on the eager forward" in n for n in result.notes)


# ---- 4. AL201: parameters read as data, train-only parameters ---------------------------------


class RelEmbeddings(nn.Module):
    """DeBERTa's encoder.rel_embeddings: an Embedding whose .weight goes into a LayerNorm."""

    def __init__(self):
        super().__init__()
        self.rel_embeddings = nn.Embedding(64, 32)
        self.LayerNorm = nn.LayerNorm(32)
        self.proj = nn.Linear(32, 32)
        self.masked_spec_embed = nn.Parameter(torch.zeros(32))  # wav2vec2: used only in training

    def forward(self, x):
        rel = self.LayerNorm(self.rel_embeddings.weight)
        return self.proj(x) @ rel.t()


@pytest.mark.parametrize("strategy", ["fx", "export", "dispatch"])
def test_al201_parameter_read_as_data_is_used(strategy):
    settings = Settings(strategy=strategy)
    graph, _ = analyze_model(RelEmbeddings().eval(), (torch.randn(1, 8, 32),), settings)
    found = [d for d in findings(graph, settings) if d.code == "AL201"]
    assert not [d for d in found if "rel_embeddings" in (d.module or "") + d.message]
    (spec,) = found
    assert spec.evidence["train_only"] and spec.severity is Severity.INFO and "only in train mode" in spec.message


# ---- 5. alternatives that keep the model ---------------------------------------------------------


class Attention(nn.Module):
    def __init__(self, softcap: bool = False, tokens_as_heads: bool = False):
        super().__init__()
        self.qkv = nn.Linear(64, 192)
        self.softcap, self.tokens_as_heads = softcap, tokens_as_heads

    def forward(self, x):
        q, k, v = self.qkv(x).view(1, 512, 3, 2, 32).permute(2, 0, 3, 1, 4)
        if self.tokens_as_heads:  # EdgeNeXt's XCA: attention over channels, tokens as the head dim
            q, k, v = q.transpose(-2, -1), k.transpose(-2, -1), v.transpose(-2, -1)
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if self.softcap:
            s = torch.tanh(s / 50.0) * 50.0
        return (s.softmax(-1) @ v).sum()


def test_al106_softcap_suggests_flex_attention_not_sdpa():
    (d,) = by_code(Attention(softcap=True), (1, 512, 64))["AL106"]
    assert "flex_attention" in d.price.alternative and "scaled_dot_product" not in d.price.alternative
    assert d.evidence["softcap"] and d.severity is Severity.WARNING
    (plain,) = by_code(Attention(), (1, 512, 64))["AL106"]
    assert "scaled_dot_product_attention" in plain.price.alternative


def test_al106_head_dim_above_fused_kernels_is_info():
    (d,) = by_code(Attention(tokens_as_heads=True), (1, 512, 64))["AL106"]
    assert d.evidence["head_dim"] == 512 and d.severity is Severity.INFO and "math kernel" in d.message


class Unrolled(nn.Module):
    """RAFT's update loop: the same context joined to new features at one width, 6 times."""

    def __init__(self):
        super().__init__()
        self.gru = nn.Conv2d(32, 16, 3, padding=1)

    def forward(self, context):
        h = torch.zeros_like(context)
        for _ in range(6):
            h = torch.tanh(self.gru(torch.cat([context, h], 1)))
        return h


def test_al203_unrolled_iterations_are_not_dense_connections():
    assert "AL203" not in by_code(Unrolled(), (1, 16, 32, 32))


def test_changing_the_model_is_info_and_says_retrain():
    d = Diagnostic("AL101", "m", module="a", price=static(500), evidence={"changes_model": True})
    _verdict.judge(d, {"min_saving_share": 0.01}, None, 1000)
    assert d.severity is Severity.INFO and "retrain" in d.message


# ---- 6. phantom costs ----------------------------------------------------------------------------


class Casts(nn.Module):
    def forward(self, x):
        return x.to(torch.float32) * 2, x.to(torch.float16)


@pytest.mark.parametrize("strategy", ["fx", "export", "dispatch"])
def test_cast_to_own_dtype_is_not_a_copy(strategy):
    graph, _ = analyze_model(Casts(), (torch.randn(1, 8, 16, 16),), Settings(strategy=strategy))
    casts = {d["dtype"]: d["mac_bytes"] for _, d in graph.nodes(data=True) if d["kind"] == "copy"}
    assert casts["float32"] == 0 and casts["float16"] > 0


# ---- 7. messages: one form per finding -------------------------------------------------------


def test_repeats_keep_forms_apart():
    def found(module, layers):
        return Diagnostic(
            "AL108",
            f"{len(layers)} Linear layers",
            module=module,
            price=static(10),
            evidence={"pattern": ",".join(layers)},
        )

    merged = _repeats.group(
        [
            found("blocks.0.attn", ["query", "key", "value"]),
            found("blocks.1.attn", ["key", "value"]),
            found("blocks.2.attn", ["key", "value"]),
        ],
        {},
        False,
    )
    assert sorted(d.message.split(" —")[0] for d in merged) == ["2 Linear layers", "3 Linear layers"]


class UpsampledHead(nn.Module):
    """A 3×3 classifier run after a 4× upsample (FCN/DeepLab classify first, then upsample logits)."""

    def __init__(self):
        super().__init__()
        self.features = nn.Conv2d(3, 64, 3, padding=1)
        self.up = nn.Upsample(scale_factor=4, mode="bilinear")
        self.head = nn.Conv2d(64, 21, 3, padding=1)

    def forward(self, x):
        return self.head(self.up(self.features(x)))


def test_head_conv_after_upsample_is_an_info_note_saying_retrain():
    (d,) = by_code(UpsampledHead(), (1, 3, 32, 32))["AL111"]
    assert d.evidence["form"] == "head-after-upsample" and d.evidence["scale"] == 16
    assert d.severity is Severity.INFO and "retrain" in d.message


class Stages(nn.Module):
    """EdgeNeXt-like: a LayerNorm2d (permute → LayerNorm → permute back) in each of four stages."""

    def __init__(self):
        super().__init__()
        self.stages = nn.ModuleList(
            nn.Sequential(nn.Conv2d(c, c, 3, padding=1), LayerNorm2d(c)) for c in (16, 16, 32, 32)
        )
        self.links = nn.ModuleList([nn.Conv2d(16, 16, 1), nn.Conv2d(16, 32, 1), nn.Conv2d(32, 32, 1)])

    def forward(self, x):
        for i, stage in enumerate(self.stages):
            x = stage(x)
            if i < 3:
                x = self.links[i](x)
        return x


class LayerNorm2d(nn.LayerNorm):
    def forward(self, x):
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def test_repeats_group_the_same_with_and_without_latency():
    from archlint.model.timing.measure import measure

    model, x = Stages().eval(), torch.randn(1, 16, 32, 32)

    def groups(settings, pricer=None, graph=None):
        return sorted(
            (d.code, tuple(sorted(d.evidence.get("repeats", [d.module]))))
            for d in findings(graph, settings, pricer)
            if d.code == "AL113"
        )

    static_graph, _ = analyze_model(model, (x,), Settings())
    settings = Settings(latency=True, warmup=1, repeat=3)
    timed_graph, _ = analyze_model(model, (x,), settings)
    report = measure(timed_graph, model, (x,), "cpu", settings)
    assert groups(Settings(), graph=static_graph) == groups(settings, report.pricer, timed_graph)
    assert len(groups(Settings(), graph=static_graph)) == 1


class SharedPositions(nn.Module):
    """DeBERTa: every layer's query_proj and key_proj also read the one position-embedding tensor."""

    def __init__(self):
        super().__init__()
        self.rel = nn.Parameter(torch.randn(64, 32))
        self.layer = nn.ModuleList(
            nn.ModuleDict({"query_proj": nn.Linear(32, 32), "key_proj": nn.Linear(32, 32)}) for _ in range(3)
        )

    def forward(self, x):
        pos = self.rel * 1.0
        for block in self.layer:
            x = x + block["query_proj"](x) + block["key_proj"](x)
            x = x + (block["query_proj"](pos) @ block["key_proj"](pos).t()).sum()
        return x


def test_al108_shared_tensor_lists_each_layer_once():
    found = by_code(SharedPositions(), (1, 16, 32))["AL108"]
    shared = [d for d in found if "of each of 3 blocks" in d.message]
    assert len(shared) == 1 and shared[0].message.count("query_proj") == 1


def test_library_switch_only_where_the_library_has_it():
    from archlint.model.checks import handwritten_attention as al106

    class Graph:
        graph = {"modules": {"": {"type": "Gemma2ForCausalLM"}}}

    pytest.importorskip("transformers")
    import transformers  # noqa: F401  (the model's library, imported as when it was built)

    assert al106._supported(Graph(), softcap=True)  # Gemma-2 takes flex_attention
    Graph.graph = {"modules": {"": {"type": "MptForCausalLM"}}}
    assert not al106._supported(Graph(), softcap=False)  # MPT has no SDPA path: no switch to name
