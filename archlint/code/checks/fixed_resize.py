"""AL311: a Compose pipeline resizes (or center-crops) every item to a fixed size before its
random augmentation: the same work every epoch, which preprocessing once would do a single time."""

from __future__ import annotations

import libcst as cst

from archlint.code.checks import Finding
from archlint.code.facts import Facts
from archlint.diagnostics import Severity

CODES = ("AL311",)
SEVERITY = Severity.INFO  # as its page says (archlint.declarations checks)
PRICE = ()
FIX = "none"
_PACKAGES = ("torchvision.transforms.", "torchvision.transforms.v2.")
_COMPOSE = tuple(p + "Compose" for p in _PACKAGES)
_FIXED = ("Resize", "CenterCrop")  # deterministic given a fixed size
_RANDOM_PREFIXES = ("Random",)
_AUGMENT = ("ColorJitter", "AutoAugment", "RandAugment", "TrivialAugmentWide", "AugMix", "ElasticTransform")


def _transform(facts: Facts, node: cst.BaseExpression, scope) -> str | None:
    """The torchvision transform class a pipeline element instantiates ("Resize"), else None."""
    if not isinstance(node, cst.Call):
        return None
    name = facts.qname(node.func, scope) or ""
    for package in _PACKAGES:
        if name.startswith(package) and "." not in name[len(package) :]:
            return name[len(package) :]
    return None


def _fixed_size(call: cst.Call) -> bool:
    """The size argument is a literal int or a tuple/list of literal ints."""
    size = next((a.value for a in call.args if a.keyword is None or a.keyword.value == "size"), None)
    if isinstance(size, cst.Integer):
        return True
    return (
        isinstance(size, (cst.Tuple, cst.List))
        and bool(size.elements)
        and all(isinstance(e.value, cst.Integer) for e in size.elements)
    )


def check(facts: Facts):
    for site in facts.calls:
        if facts.qname(site.node.func, site.scope) not in _COMPOSE or not site.node.args:
            continue
        steps = site.node.args[0].value
        if not isinstance(steps, (cst.List, cst.Tuple)):
            continue
        fixed = None
        for element in steps.elements:
            name = _transform(facts, element.value, site.scope)
            if name is None:
                continue
            if fixed is None and name in _FIXED and _fixed_size(element.value):
                fixed = (element.value, name)
            elif fixed is not None and (name.startswith(_RANDOM_PREFIXES) or name in _AUGMENT):
                node, what = fixed
                yield Finding(
                    "AL311",
                    node,
                    f"{what} to a fixed size runs on every item every epoch before the random {name}: "
                    f"store the images {what.lower()}d once (offline) and keep only the random steps per item; "
                    "smaller files also decode faster",
                )
                break
