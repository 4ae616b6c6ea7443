"""Issue 43 (second untuned set, nf_resnet26): element-wise ops computed from parameters alone
(weight standardisation every forward) are no activation pass fusion removes. AL104 finds them
from the graph's dataflow, leaves them out of its price and, where they weigh, says as info that
in inference they are computed once."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import torch

from archlint.config import ModelSpec, Settings
from archlint.diagnostics import Severity
from archlint.model.analyze import analyze
from archlint.model.checks._parameter_only import parameter_only

from ._graphs import opgraph

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "models"))


def _al104(model, *shapes, mode="eval"):
    args = tuple(torch.randn(*s) for s in shapes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, found = analyze(ModelSpec("nf", model=model, given_args=args, given_kwargs={}), Settings(mode=mode))
    return [d for d in found if d.code == "AL104"]


def test_weight_standardisation_is_not_priced_as_activation_passes():
    from weight_standardised import INPUT_SHAPE, NFNet

    found = _al104(NFNet().eval(), INPUT_SHAPE)
    # the old rule: one warning, batchnorm on the 1×128×1152 weight the costliest "activation pass"
    assert not [d for d in found if d.severity is Severity.WARNING]
    (info,) = found
    assert info.severity is Severity.INFO and "parameters and buffers alone" in info.message
    assert "compute it once" in info.message
    assert "on a 1×128×1152 tensor" in info.message or "on a 128×128×3×3 tensor" in info.message  # the weight's size
    assert info.evidence["mac_share"] > 0.5 and len(info.evidence["modules"]) == 6
    assert info.evidence["modules"][0].startswith("blocks.") and info.module == info.evidence["modules"][0]


def test_in_training_the_info_says_weight_sized():
    from weight_standardised import INPUT_SHAPE, NFNet

    (info,) = [d for d in _al104(NFNet().train(), INPUT_SHAPE, mode="train") if "parameter" in d.message]
    assert "in training they run every step" in info.message and "compute it once" not in info.message


def test_parameter_only_follows_dataflow_not_classes():
    from weight_standardised import INPUT_SHAPE, NFNet, ScaledActivations

    graph = opgraph(NFNet().eval(), INPUT_SHAPE)
    fixed = parameter_only(graph)
    norms = [n for n, d in graph.nodes(data=True) if d["kind"] == "norm"]
    convs = [n for n, d in graph.nodes(data=True) if d["kind"] == "conv"]
    assert len(norms) == 6 and set(norms) <= fixed  # every standardisation, over the weights
    assert not set(convs) & fixed  # a conv reads the activation
    adds = [n for n, d in graph.nodes(data=True) if d["kind"] == "elementwise" and n not in fixed]
    assert adds  # the residual adds and scales over the activation stay

    graph = opgraph(ScaledActivations().eval(), (4096, 128))
    fixed = parameter_only(graph)
    assert {graph.nodes[n]["key"] for n in fixed if graph.nodes[n]["kind"] != "reshape"} == {"exp"}


def test_activation_chains_keep_their_warning_and_say_what_was_left_out():
    from weight_standardised import ScaledActivations

    (d,) = _al104(ScaledActivations().eval(), (4096, 128))
    assert d.severity is Severity.WARNING and "fusion would remove" in d.message
    left = d.evidence["parameter_only"]
    # a per-channel scale's exp weighs nothing: in the evidence, not the message
    assert len(left["ops"]) == 1 and left["mac_share"] < 0.01 and "left out" not in d.message
    assert not set(left["ops"]) & set(d.evidence["ops"])


def test_a_warning_on_activations_says_what_weighty_parameter_ops_it_left_out():
    from weight_standardised import NFNet

    found = _al104(NFNet().eval(), (1, 128, 96, 96))  # activations large enough to warn on their own
    (warning,) = [d for d in found if d.severity is Severity.WARNING]
    left = warning.evidence["parameter_only"]
    assert left["mac_share"] >= 0.01 and f"{len(left['ops'])} ops computed from parameters alone" in warning.message
    assert not set(left["ops"]) & set(warning.evidence["ops"])
