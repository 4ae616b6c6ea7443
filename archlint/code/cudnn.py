"""What a file says about cuDNN's algorithm search (AL303, and the project join's facts): whether it
builds convolutions, whether their input sizes vary per batch, and whether it chooses a mode itself."""

from __future__ import annotations

import re

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.facts import Facts
from archlint.code.names import dotted

_CONV_CALLS = (
    "torch.nn.Conv1d",
    "torch.nn.Conv2d",
    "torch.nn.Conv3d",
    "torch.nn.functional.conv2d",
    "torch.nn.functional.conv3d",
    "torch.nn.functional.conv1d",
)
_CONV_LIBRARIES = ("torchvision.models", "timm", "segmentation_models_pytorch", "torchvision.models.detection")
# diffusers' convolutional models (its transformers are not): built directly or with from_pretrained()
_DIFFUSERS_CONV = frozenset(
    {
        "UNet1DModel",
        "UNet2DModel",
        "UNet2DConditionModel",
        "UNet3DConditionModel",
        "UNetSpatioTemporalConditionModel",
        "AutoencoderKL",
        "VQModel",
        "ControlNetModel",
    }
)


# CTC loss: speech recognition on spectrograms of variable length. Each batch brings new input
# sizes to the conv front end, and benchmark mode would search cuDNN's algorithms again for each.
# (Padded or packed sequences alone say nothing of the convs: a captioning CNN sees fixed images.)
_VARYING_SIZES = ("torch.nn.CTCLoss", "torch.nn.functional.ctc_loss")


# Detection training with images of their own sizes: torchvision's detection models resize each
# image and batch them padded to the largest (GeneralizedRCNNTransform), and aspect-ratio grouping
# samplers make batches of different shapes on purpose. cuDNN's benchmark mode would search its
# algorithms again for every new shape; torchvision's detection references leave it off.
_VARYING_PREFIXES = ("torchvision.models.detection.",)
_VARYING_NAMES = frozenset(
    {"GroupedBatchSampler", "create_aspect_ratio_groups", "GeneralizedRCNN", "GeneralizedRCNNTransform"}
)


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
    return any(
        scope.kind == "class"
        and any((dotted(b.value) or "").rsplit(".", 1)[-1] in _VARYING_NAMES for b in scope.node.bases)
        for scope in facts.scopes
    )


def has_convolutions(facts: Facts) -> bool:
    return bool(conv_defs(facts))


MODULE = "<module>"  # a convolution built at module level, or by a library imported for it


def _top(scope) -> str:
    """The top-level def or class a scope is in, or MODULE."""
    while scope.parent is not None and scope.parent.kind != "module":
        scope = scope.parent
    return MODULE if scope.kind == "module" else scope.node.name.value


def conv_defs(facts: Facts) -> list[str]:
    """The top-level defs and classes of the file that build convolutions, directly or through another
    of them (`IResNet` → `IBasicBlock`, `iresnet50()` → `IResNet`), sorted; MODULE when module-level
    code does, or a convolutional library is imported without a call this walk can place."""
    if "_conv_defs" in facts.__dict__:
        return facts.__dict__["_conv_defs"]
    found: set[str] = set()
    libraries = tuple(lib + "." for lib in _CONV_LIBRARIES)
    for site in facts.calls:
        name = facts.qname(site.node.func, site.scope) or ""
        parts = name.split(".")
        if (
            name in _CONV_CALLS
            or name.startswith(libraries)
            or (parts[0] == "diffusers" and _DIFFUSERS_CONV.intersection(parts))
        ):
            found.add(_top(site.scope))
    if not found and any(facts.imports.uses(lib) for lib in _CONV_LIBRARIES):
        found.add(MODULE)
    if found and MODULE not in found:
        # a top-level def that calls one of them builds convolutions too (a few rounds: chains are short)
        for _ in range(3):
            more = {
                _top(site.scope)
                for site in facts.calls
                if (dotted(site.node.func) or "").split(".")[-1] in found
                or any(isinstance(a.value, cst.Name) and a.value.value in found for a in site.node.args)
            }
            more |= {
                scope.node.name.value
                for scope in facts.scopes
                if scope.kind == "class"  # a subclass
                and scope.parent is facts.module_scope
                and any((dotted(b.value) or "").split(".")[-1] in found for b in scope.node.bases)
            }
            if more <= found:
                break
            found |= more
    if found and MODULE not in found and _registered(facts, found):
        found.add(MODULE)  # looked up by name at run time (`create_model("resnet50")`): counts as used
    facts.__dict__["_conv_defs"] = sorted(found)
    return facts.__dict__["_conv_defs"]


def _registered(facts: Facts, found: set[str]) -> bool:
    """A conv def under a decorator (`@register_model`), or listed in a module-level dict, list or
    tuple (`MODELS = {"cnn": ConvNet}`): a registry picks it by name, so no call names it."""
    for stmt in facts.module.body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and stmt.decorators and stmt.name.value in found:
            return True
    for values in facts.module_scope.assigns.values():
        for value in values:
            if isinstance(value, (cst.Dict, cst.List, cst.Tuple)):
                items = [getattr(el, "value", None) for el in value.elements]
                if any(isinstance(v, cst.Name) and v.value in found for v in items):
                    return True
    return False


def used_convolutions(facts: Facts) -> bool:
    """The file builds convolutions that it uses: at module level, or in a def or class whose name it
    mentions again (`model = ConvNet()`). A class nothing here builds is another experiment's model."""
    found = conv_defs(facts)
    if MODULE in found:
        return True
    return any(_mentions(facts, name) > 1 for name in found)


_WORD = re.compile(r"\w+")


def _mentions(facts: Facts, name: str) -> int:
    """How many times `name` appears as a whole word in the source (`\\bname\\b`). For a name of word
    characters, each such match is a maximal run of them, so one count of the file's words answers
    every name: a search of the whole file per conv def was quadratic (2.8 s of 3.5 s on 0.3 MB)."""
    if not _WORD.fullmatch(name):
        return len(re.findall(rf"\b{re.escape(name)}\b", facts.source))
    words = facts.__dict__.get("_words")
    if words is None:
        words = facts.__dict__["_words"] = {}
        for match in _WORD.finditer(facts.source):  # not findall: a list of every word of a large file
            word = match.group()
            words[word] = words.get(word, 0) + 1
    return words.get(name, 0)


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
                name.endswith("cudnn.deterministic") and df.literal(value) is not False
            ):
                found.append(target)
        facts.__dict__["_cudnn_choices"] = found
    return facts.__dict__["_cudnn_choices"]
