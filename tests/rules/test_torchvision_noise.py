"""No noise on well-built models: every model rule on every torchvision classification model
(built on the meta device, captured and costed by archlint), with every finding it accepts
justified below. AL201 and AL202 must report nothing on models without unused modules or
redundant activations: torchvision has none, except the training-only auxiliary heads of
GoogLeNet and Inception v3, which AL201 reports as such (severity info), not as dead code.
"""

from __future__ import annotations

import pytest
import torch
import torchvision

from archlint.diagnostics import Severity

from archlint.config import Settings
from archlint.model.analyze import analyze_model

from ._graphs import findings

MODELS = torchvision.models.list_models(module=torchvision.models)

# Why each rule may fire, and where. A finding outside these bounds fails the test.
#
# AL101 (G1): only convs at least 1:4.8 unbalanced — the deliberate expansions/reductions the
#   ShuffleNetV2 paper criticizes: MobileNetV2/MNASNet/EfficientNet/MobileNetV3 inverted
#   residuals (t = 6), DenseNet's 1×1 bottleneck shrinking the growing concat to 4·k, SqueezeNet
#   and GoogLeNet/Inception 1×1 reductions, RegNet/MaxViT/ShuffleNetV2-x2.0 heads and stems.
#   ResNet's 1:4 bottlenecks (25% above the bound) stay under the 0.3 default.
AL101_MIN_RATIO = 4.8
# AL102 (G2): grouped (not depthwise) convs with ≥ 4 groups: ResNeXt's cardinality and RegNet's
#   group width — G2's very example.
AL102_MODELS = ("resnext", "regnet")
# AL103 (G3): blocks of more than 3 fragments in series or 3 parallel branches — Inception's
#   4-branch modules (the paper's example), squeeze-excitation chains (pool → fc → fc between
#   the convs of EfficientNet/MobileNetV3/RegNetY blocks), and transformer blocks that spell
#   attention out as separate GEMMs (Swin: qkv, q·kᵀ, attn·v, proj, fc1, fc2 in series — fused
#   scaled_dot_product_attention would remove two; Swin v2 adds a position-bias MLP), MaxViT.
#   ViT calls nn.MultiheadAttention (one op): 3 fragments per block, silent.
AL103_MODELS = ("efficientnet", "googlenet", "inception", "maxvit", "mobilenet_v3", "regnet_y", "swin")
# AL104 (G4): eager BatchNorm + ReLU + residual adds hold most of a CNN's MAC (ResNet-50: ~75%);
#   LayerNorm/GELU/adds in Swin and ConvNeXt. Real passes over memory that fusion would remove.
#   ViTs (matmul-dominated) and VGG without BN stay silent.
AL104_SILENT = ("vit_", "vgg11", "vgg13", "vgg16", "vgg19", "squeezenet", "inception")
# AL203: only DenseNet's dense connectivity (concat traffic quadratic in depth; VoVNet's point).
# AL204: only VGG-BN, whose convs keep bias=True in front of BatchNorm (a real waste).
# AL205: one info finding per model with BatchNorm: torchvision ships training definitions;
#   folding BN into convs is a deployment step.
# AL105: fp32 models: never.


def build(name: str):
    from torchvision.models.regnet import BlockParams

    # RegNet computes its widths with tensors (.tolist()): run that part on the CPU.
    original = BlockParams.__dict__["from_init_params"]

    def on_cpu(cls, *args, **kwargs):
        with torch.device("cpu"):
            return original.__func__(cls, *args, **kwargs)

    BlockParams.from_init_params = classmethod(on_cpu)
    try:
        with torch.device("meta"):
            model = torchvision.models.get_model(name, weights=None)
    finally:
        BlockParams.from_init_params = original
    size = 299 if name == "inception_v3" else 224
    graph, _ = analyze_model(model, (torch.randn(1, 3, size, size, device="meta"),), Settings())
    return graph


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("name", MODELS)
def test_no_noise(name):
    graph = build(name)
    by_code: dict[str, list] = {}
    for d in findings(graph):
        by_code.setdefault(d.code, []).append(d)
        assert d.price is not None and (d.module is not None or d.node is not None)

    assert "AL202" not in by_code  # no torchvision model applies an activation that cannot act
    assert "AL105" not in by_code  # fp32
    aux = by_code.get("AL201", [])
    if name in ("googlenet", "inception_v3"):
        assert {d.module for d in aux} == ({"aux1", "aux2"} if name == "googlenet" else {"AuxLogits"})
        assert all(d.severity is Severity.INFO and d.evidence["train_only"] for d in aux)
        assert all("auxiliary head used only in train mode" in d.message for d in aux)
    else:
        assert aux == []
    for d in by_code.get("AL101", []):
        ratio = d.evidence["ratio"]
        assert max(ratio, 1 / ratio) >= AL101_MIN_RATIO and d.evidence["excess"] > 0.3
    for d in by_code.get("AL102", []):
        assert name.startswith(AL102_MODELS) and d.evidence["groups"] >= 4
    assert ("AL103" in by_code) <= name.startswith(AL103_MODELS)
    if name.startswith(AL104_SILENT) and not name.endswith("_bn"):
        assert "AL104" not in by_code
    assert {d.evidence["form"] for d in by_code.get("AL203", [])} == ({"dense"} if "densenet" in name else set())
    assert ("AL204" in by_code) == name.endswith("_bn")
    has_bn = any("BatchNorm" in (info.get("type") or "") for info in graph.graph["modules"].values())
    assert len(by_code.get("AL205", [])) == int(has_bn)
