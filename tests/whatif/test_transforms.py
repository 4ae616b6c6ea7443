"""Each transformation on small real models: it applies within its documented tolerance or says
why not, and the user's model is bit-for-bit unchanged afterwards. Timing is checked for shape
and sign only: the machine may be busy."""

from __future__ import annotations

import math

import pytest
import torch
import torchvision
from torch import nn

from archlint.config import Settings
from archlint.model.speedups.run import _combination, what_ifs
from archlint.result import WhatIf

from .models import LSTMLM, ConvBN, FlattenByView, TokensBN

FAST = Settings(warmup=1, repeat=3)
NO_COMPILE = ["fold-bn", "sdpa", "channels-last", "int8-dynamic", "bf16", "fp16", "inference-mode"]


def _by_name(results):
    return {w.name: w for w in results}


def _snapshot(model: nn.Module) -> dict:
    """Everything --what-if must leave as it was: values, dtypes, devices, strides (the memory
    format), requires_grad, and every module's training flag."""
    state = {
        k: (v.detach().clone(), v.dtype, v.device, v.stride(), v.requires_grad)
        for k, v in model.state_dict(keep_vars=True).items()
    }
    return {
        "state": state,
        "training": [(n, m.training) for n, m in model.named_modules()],
        "modules": [(n, type(m)) for n, m in model.named_modules()],
    }


def _assert_same(before: dict, after: dict) -> None:
    assert after["training"] == before["training"]
    assert after["modules"] == before["modules"]
    assert before["state"].keys() == after["state"].keys()
    for k, (value, *meta) in before["state"].items():
        new_value, *new_meta = after["state"][k]
        assert new_meta == meta, k
        assert torch.equal(new_value, value), k  # bit for bit


def _timed_ok(w: WhatIf) -> None:
    assert w.applicable, w.reason
    assert w.baseline_ms > 0 and w.transformed_ms > 0 and w.speedup > 0
    lo, hi = w.spread
    assert lo <= w.speedup <= hi and w.passes >= 5


def test_fold_bn_and_inference_mode_keep_outputs_within_1e5():
    model, x = ConvBN().eval(), torch.randn(2, 3, 16, 16)
    found = _by_name(what_ifs(model, (x,), "cpu", FAST, ["fold-bn", "inference-mode"])[0])
    fold = found["fold-bn"]
    _timed_ok(fold)
    assert fold.reason == "3 pairs folded (fx graph)"  # stem conv, conv (with bias), fc + BatchNorm1d
    assert fold.max_rel_diff <= 1e-5
    inference = found["inference-mode"]
    _timed_ok(inference)
    assert inference.max_abs_diff == 0.0


def test_fold_bn_skips_a_linear_whose_batchnorm_normalizes_another_dim():
    found = _by_name(what_ifs(TokensBN().eval(), (torch.randn(2, 6, 6),), "cpu", FAST, ["fold-bn"])[0])
    assert not found["fold-bn"].applicable
    assert "no BatchNorm directly after a Conv or Linear" in found["fold-bn"].reason


def test_fold_bn_on_the_module_tree_when_fx_cannot_trace():
    class Branchy(ConvBN):
        def forward(self, x):
            if x.sum() > 0:  # data-dependent control flow: fx cannot trace it
                x = x * 1.0
            return super().forward(x)

    fold = _by_name(what_ifs(Branchy().eval(), (torch.rand(2, 3, 16, 16),), "cpu", FAST, ["fold-bn"])[0])["fold-bn"]
    _timed_ok(fold)
    assert fold.reason.startswith("1 pair folded (module tree")  # the stem's Sequential only
    assert fold.max_rel_diff <= 1e-5


def test_user_model_is_unchanged_bit_for_bit():
    model = torchvision.models.mobilenet_v3_small(weights=None, num_classes=10)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
    model.train()
    model.features[1].eval()  # a model with mixed training flags: each must come back as it was
    model.classifier[0].weight.requires_grad_(False)
    before = _snapshot(model)
    results = what_ifs(model, (torch.randn(1, 3, 64, 64),), "cpu", FAST, NO_COMPILE)[0]
    assert _by_name(results)["fold-bn"].applicable and _by_name(results)["channels-last"].applicable
    _assert_same(before, _snapshot(model))


def _torch_error_under_bf16_autocast(model: nn.Module, *inputs) -> str | None:
    """What torch itself says when this CPU cannot run the model under bf16 autocast (oneDNN builds
    without a bf16 LSTM primitive for CPUs lacking avx512_bf16 raise), or None when it runs."""
    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            model(*inputs)
    except RuntimeError as exc:
        return str(exc).splitlines()[0]
    return None


def test_bf16_and_int8_on_an_lstm_lm_are_reported_within_a_sanity_bound():
    model, tokens = LSTMLM().eval(), torch.randint(0, 50, (2, 12))
    found = _by_name(what_ifs(model, (tokens,), "cpu", FAST, ["int8-dynamic", "bf16", "channels-last"])[0])
    torch_error = _torch_error_under_bf16_autocast(model, tokens)
    timed = ("int8-dynamic", "bf16") if torch_error is None else ("int8-dynamic",)
    for name in timed:
        _timed_ok(found[name])
        assert 0 < found[name].max_rel_diff < 0.25, name  # reported, not asserted: a sanity bound only
    if torch_error is not None:  # torch cannot run it here: the what-if says so with torch's words
        assert not found["bf16"].applicable and found["bf16"].speedup is None
        assert found["bf16"].reason.startswith("fails on this model") and torch_error[:60] in found["bf16"].reason
    assert found["int8-dynamic"].reason.startswith(
        "2 Linear/LSTM layers that run quantized to int8"
    )  # the LSTM, the Linear
    assert not found["channels-last"].applicable and "no 2-D convolution" in found["channels-last"].reason


def test_not_applicable_says_why():
    mlp = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)).eval()
    found = _by_name(what_ifs(mlp, (torch.randn(4, 8),), "cpu", FAST, NO_COMPILE)[0])
    assert found["fp16"].reason == "fp16 autocast is for CUDA; on CPU autocast runs bf16 (see bf16)"
    assert found["fold-bn"].reason == "no BatchNorm layer"
    assert found["channels-last"].reason.startswith("no 2-D convolution")
    double = nn.Linear(4, 4).double().eval()
    found = _by_name(
        what_ifs(double, (torch.randn(2, 4, dtype=torch.float64),), "cpu", FAST, ["bf16", "int8-dynamic"])[0]
    )
    assert found["bf16"].reason == "the model already runs in float64"
    assert not found["int8-dynamic"].applicable
    for w in found.values():
        assert w.speedup is None and w.baseline_ms is None


def test_a_transformation_that_fails_on_the_model_is_not_applicable_with_its_first_line():
    # .view() on a channels_last activation raises: a real failure of the first call.
    found = _by_name(
        what_ifs(FlattenByView().eval(), (torch.randn(2, 3, 8, 8),), "cpu", FAST, ["channels-last", "inference-mode"])[
            0
        ]
    )
    cl = found["channels-last"]
    assert not cl.applicable and cl.reason.startswith("fails on this model: RuntimeError: view size is not compatible")
    assert "\n" not in cl.reason
    _timed_ok(found["inference-mode"])


def test_compile_without_a_cpp_compiler_is_not_applicable(monkeypatch):
    from torch._inductor import cpp_builder
    from torch._inductor.exc import InvalidCxxCompiler

    class NoCompiler(InvalidCxxCompiler):  # its own message: InvalidCxxCompiler() reads inductor's config,
        def __init__(self):  # whose keys differ between torch versions
            RuntimeError.__init__(self, "No working C++ compiler found")

    def no_compiler():  # what inductor raises when it finds no usable C++ compiler
        raise NoCompiler()

    monkeypatch.setattr(cpp_builder, "get_cpp_compiler", no_compiler)
    found = _by_name(what_ifs(ConvBN().eval(), (torch.randn(1, 3, 8, 8),), "cpu", FAST, ["compile"])[0])
    assert not found["compile"].applicable
    assert found["compile"].reason.startswith("torch.compile on CPU needs a C++ compiler: NoCompiler: No working")


@pytest.mark.slow
def test_compile_applies_and_reports_compile_time_apart():
    found = _by_name(what_ifs(ConvBN().eval(), (torch.randn(1, 3, 8, 8),), "cpu", FAST, ["compile"])[0])
    w = found["compile"]
    _timed_ok(w)
    assert w.compile_s > 0 and w.compile_s * 1000 > w.transformed_ms
    assert w.max_rel_diff < 1e-4


def _w(name, speedup, lo, applicable=True):
    return WhatIf(name, applicable, "", 1.0, 1.0 / speedup, [lo, speedup * 1.1], speedup, 0.0, 0.0)


def test_combination_takes_winners_beyond_noise_and_one_precision():
    results = {
        "fold-bn": _w("fold-bn", 1.2, 1.1),
        "channels-last": _w("channels-last", 1.05, 0.97),  # within noise: left out
        "int8-dynamic": _w("int8-dynamic", 1.5, 1.3),
        "bf16": _w("bf16", 1.8, 1.6),  # the faster precision change wins
        "inference-mode": _w("inference-mode", 1.04, 1.01),
    }
    assert _combination(results) == ("fold-bn", "bf16", "inference-mode")
    assert _combination({"fold-bn": results["fold-bn"], "bf16": results["bf16"]}) == ("fold-bn", "bf16")
    assert _combination({"fold-bn": results["fold-bn"]}) == ()


def test_combined_is_timed_as_one_and_named_by_its_parts(monkeypatch):
    from archlint.model.speedups import run

    monkeypatch.setattr(run, "_combination", lambda results: ("fold-bn", "inference-mode"))
    found = _by_name(
        what_ifs(ConvBN().eval(), (torch.randn(2, 3, 16, 16),), "cpu", FAST, ["fold-bn", "inference-mode"])[0]
    )
    combined = found["combined: fold-bn + inference-mode"]
    _timed_ok(combined)
    assert combined.reason == "3 pairs folded (fx graph); torch.inference_mode() instead of torch.no_grad()"
    assert combined.max_rel_diff <= 1e-5 and math.isfinite(combined.speedup)


def test_sdpa_replaces_hand_written_attention_and_keeps_outputs():
    from .models import HandAttention

    model, x = HandAttention().eval(), torch.randn(2, 10, 32)
    found = _by_name(what_ifs(model, (x,), "cpu", FAST, ["sdpa"])[0])
    w = found["sdpa"]
    _timed_ok(w)
    assert w.reason == "3 hand-written attentions replaced by F.scaled_dot_product_attention"  # not the masked one
    assert w.max_rel_diff <= 1e-5


def test_sdpa_is_not_applicable_without_the_pattern():
    found = _by_name(what_ifs(ConvBN().eval(), (torch.randn(1, 3, 8, 8),), "cpu", FAST, ["sdpa"])[0])
    assert found["sdpa"].reason.startswith("no hand-written attention")
