"""AL402: a tensor created on the CPU and then copied to the device (`torch.zeros(n).cuda()`)."""

from __future__ import annotations

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.checks import Finding
from archlint.code.checks._edits import add_keyword, delete_between
from archlint.code.facts import CallSite, Facts
from archlint.diagnostics import Applicability, Fix, Severity

CODES = ("AL402",)
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ()
FIX = "safe"
FACTORIES = frozenset(
    f"torch.{n}"
    for n in (
        "zeros",
        "ones",
        "empty",
        "full",
        "rand",
        "randn",
        "randint",
        "randperm",
        "arange",
        "linspace",
        "logspace",
        "eye",
        "tensor",
        "as_tensor",
    )
)

# Created on the device, these no longer compute what they did on the CPU: random factories draw
# from the device's generator (other values under the same seed); linspace/logspace use another
# kernel (last-bit differences). requires_grad=True makes the device tensor the leaf whose .grad
# fills, where before the CPU tensor was. Their fixes are unsafe.
CHANGES_VALUES = frozenset(f"torch.{n}" for n in ("rand", "randn", "randint", "randperm", "linspace", "logspace"))


def check(facts: Facts):
    for site in facts.calls:
        func = site.node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("cuda", "to"):
            continue
        inner = func.value
        if not isinstance(inner, cst.Call) or facts.qname(inner.func, site.scope) not in FACTORIES:
            continue
        if any(a.keyword is not None and a.keyword.value == "device" for a in inner.args):
            continue
        if facts.qname(inner.func, site.scope) in _FROM_DATA and not _literal_data(inner):
            continue  # `torch.tensor(reward)`: host data (a NumPy array, a list) is copied over either way
        device_text = _device(site, facts)
        if device_text is None:
            continue
        factory = facts.qname(inner.func, site.scope)
        yield Finding(
            "AL402",
            site.node,
            f"{factory}(...) is built on the CPU and then copied to the device: pass device= to create "
            "it there directly (no host allocation, no copy)",
            lambda site=site, inner=inner, device_text=device_text, factory=factory: _fix(
                facts, site, inner, device_text, factory
            ),
        )


_FROM_DATA = frozenset({"torch.tensor", "torch.as_tensor"})


def _literal_data(call: cst.Call) -> bool:
    """`torch.tensor(0.0)`, `torch.tensor([1, 2, 3])`: data written in the source, cheap to build on
    the device. Any other argument is data that already lives on the host and must be copied."""
    return bool(call.args) and call.args[0].keyword is None and _written(call.args[0].value)


def _written(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.List, cst.Tuple)):
        return all(not isinstance(el, cst.StarredElement) and _written(el.value) for el in node.elements)
    if isinstance(node, cst.UnaryOperation):
        node = node.expression
    return isinstance(node, (cst.Integer, cst.Float)) or (
        isinstance(node, cst.Name) and node.value in ("True", "False")
    )


def _device(site: CallSite, facts: Facts) -> str | None:
    """The device the tensor is moved to, as source text; None when it is not a device move."""
    call, attr = site.node, site.node.func.attr.value
    if attr == "cuda":
        if not call.args:
            return '"cuda"'
        value = df.literal(call.args[0].value)
        if len(call.args) == 1 and call.args[0].keyword is None and isinstance(value, int):
            return f'"cuda:{value}"'
        return "" if len(call.args) else None  # .cuda(args.gpu): a move, but no exact rewrite
    device = df.argument(site, "device", 0)
    if device in (df.MISSING, df.UNKNOWN) or not df.device_like(device, facts, site.scope):
        return None
    return facts.code(device) if len(call.args) == 1 and not call.args[0].star else ""


def _fix(facts: Facts, site: CallSite, inner: cst.Call, device_text: str, factory: str) -> Fix | None:
    if not device_text or any(a.star for a in inner.args):
        return None  # the move carries other arguments (non_blocking, dtype): rewrite by hand
    grad = any(a.keyword is not None and a.keyword.value == "requires_grad" for a in inner.args)
    same = factory not in CHANGES_VALUES and not grad
    return Fix(
        f"Create the tensor with device={device_text}",
        Applicability.SAFE if same else Applicability.UNSAFE,
        (add_keyword(facts, inner, f"device={device_text}"), delete_between(facts, inner, site.node)),
    )
