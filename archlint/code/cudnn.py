"""What a file says about cuDNN's algorithm search (AL303, and the project join's facts): whether it
builds convolutions, whether their input sizes vary per batch, and whether it chooses a mode itself."""

from __future__ import annotations

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.facts import Facts
from archlint.code.names import dotted

_CONV_CALLS = ("torch.nn.Conv1d", "torch.nn.Conv2d", "torch.nn.Conv3d", "torch.nn.functional.conv2d",
               "torch.nn.functional.conv3d", "torch.nn.functional.conv1d")
_CONV_LIBRARIES = ("torchvision.models", "timm", "segmentation_models_pytorch", "torchvision.models.detection")
# diffusers' convolutional models (its transformers are not): built directly or with from_pretrained()
_DIFFUSERS_CONV = frozenset({"UNet1DModel", "UNet2DModel", "UNet2DConditionModel", "UNet3DConditionModel",
                             "UNetSpatioTemporalConditionModel", "AutoencoderKL", "VQModel", "ControlNetModel"})


# CTC loss: speech recognition on spectrograms of variable length. Each batch brings new input
# sizes to the conv front end, and benchmark mode would search cuDNN's algorithms again for each.
# (Padded or packed sequences alone say nothing of the convs: a captioning CNN sees fixed images.)
_VARYING_SIZES = ("torch.nn.CTCLoss", "torch.nn.functional.ctc_loss")


# Detection training with images of their own sizes: torchvision's detection models resize each
# image and batch them padded to the largest (GeneralizedRCNNTransform), and aspect-ratio grouping
# samplers make batches of different shapes on purpose. cuDNN's benchmark mode would search its
# algorithms again for every new shape; torchvision's detection references leave it off.
_VARYING_PREFIXES = ("torchvision.models.detection.",)
_VARYING_NAMES = frozenset({"GroupedBatchSampler", "create_aspect_ratio_groups", "GeneralizedRCNN",
                            "GeneralizedRCNNTransform"})


def varying_sizes(facts: Facts) -> bool:
    """The file's conv inputs change size from batch to batch: it trains with CTC loss (speech), or a
    torchvision detection model, or groups images by aspect ratio."""
    if facts.calls_to(*_VARYING_SIZES):
        return True
    if "detection" not in facts.source and not any(n in facts.source for n in _VARYING_NAMES):
        return False  # the common case, without a walk over every call
    for site in facts.calls:
        name = facts.qname(site.node.func, site.scope) or dotted(site.node.func) or ""
        if name.startswith(_VARYING_PREFIXES) or name.rsplit(".", 1)[-1] in _VARYING_NAMES:
            return True
    return any(scope.kind == "class" and any((dotted(b.value) or "").rsplit(".", 1)[-1] in _VARYING_NAMES
                                             for b in scope.node.bases) for scope in facts.scopes)


def has_convolutions(facts: Facts) -> bool:
    if any(facts.imports.uses(lib) for lib in _CONV_LIBRARIES):
        return True
    for site in facts.calls:
        name = facts.qname(site.node.func, site.scope) or ""
        if name in _CONV_CALLS or name.startswith(tuple(lib + "." for lib in _CONV_LIBRARIES)):
            return True
        parts = name.split(".")
        if parts[0] == "diffusers" and _DIFFUSERS_CONV.intersection(parts):
            return True
    return False


def chooses_algorithms(facts: Facts) -> bool:
    """The file already decides how cuDNN picks algorithms (benchmark on or off, or determinism)."""
    return bool(choices(facts)) or bool(facts.calls_to("torch.use_deterministic_algorithms"))


def choices(facts: Facts) -> list[cst.BaseExpression]:
    """Targets of the file's assignments that choose a cuDNN mode: `deterministic = False` chooses
    nothing."""
    if "_cudnn_choices" not in facts.__dict__:
        found = []
        for target, value in facts.attr_assigns:
            name = dotted(target) or ""
            if name.endswith("cudnn.benchmark") or (
                    name.endswith("cudnn.deterministic") and df.literal(value) is not False):
                found.append(target)
        facts.__dict__["_cudnn_choices"] = found
    return facts.__dict__["_cudnn_choices"]
