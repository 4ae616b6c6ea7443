"""What a call is given, and where a loop's batches come from — resolved within one file.

Every answer has three states: a known literal, known-absent, or UNKNOWN. Checks only report the
first two: a value archlint cannot see (a variable, `**kwargs` from elsewhere, a config object) is
never a finding.
"""

from __future__ import annotations

import re

import libcst as cst

from archlint.code.facts import CallSite, Facts, Loop, Scope, target_names
from archlint.code.names import dotted

DATALOADER = "torch.utils.data.DataLoader"
# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory, ...)
DATALOADER_POSITIONS = {"num_workers": 5, "pin_memory": 7}


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()
MISSING = None  # the argument is not passed: the default applies


def literal(node: cst.BaseExpression | None):
    """True/False/None/int/str for a literal node, else UNKNOWN."""
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[node.value]
    if isinstance(node, cst.Integer):
        return node.evaluated_value
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value
    return UNKNOWN


def _dict_items(node: cst.BaseExpression | None, scope: Scope, depth: int = 0):
    """{key: value node} for a dict literal or dict(k=v) call, following a name in scope; else None."""
    if node is None or depth > 4:
        return None
    if isinstance(node, cst.Dict):
        items = {}
        for el in node.elements:
            if not isinstance(el, cst.DictElement) or not isinstance(el.key, cst.SimpleString):
                return None  # **spread or a computed key: unknown contents
            items[el.key.evaluated_value] = el.value
        return items
    if isinstance(node, cst.Call) and dotted(node.func) == "dict":
        items = {}
        for arg in node.args:
            if arg.keyword is None:
                return None
            items[arg.keyword.value] = arg.value
        return items
    if isinstance(node, cst.Name):
        return known_dict(node.value, scope, depth + 1)
    return None


def known_dict(name: str, scope: Scope, depth: int = 0) -> dict | None:
    """The keys a dict variable can hold, when every way the file fills it is a literal.

    Flow-insensitive on purpose: a key set by any `.update({...})`, `d["k"] = v` or `d |= {...}` in
    the scope counts as present, so a conditionally added `pin_memory` silences the finding.
    """
    found = scope.lookup(name)
    if found is None:
        return None
    home, values = found
    items: dict = {}
    for value in values:
        got = _dict_items(value, home, depth)
        if got is None:
            return None
        items.update(got)
    for value in home.aug_updates.get(name, []):
        got = _dict_items(value, home, depth)
        if got is None:
            return None
        items.update(got)
    for key, value in home.item_sets.get(name, []):
        k = literal(key)
        if not isinstance(k, str):
            return None
        items[k] = value
    for site in home.calls:
        func = site.node.func
        if any(a.star != "**" and isinstance(a.value, cst.Name) and a.value.value == name for a in site.node.args):
            return None  # handed to a function that may add keys: unknown
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == name:
            if func.attr.value in ("update", "setdefault"):
                if func.attr.value == "setdefault" and len(site.node.args) == 2:
                    k = literal(site.node.args[0].value)
                    if not isinstance(k, str):
                        return None
                    items.setdefault(k, site.node.args[1].value)
                    continue
                for arg in site.node.args:
                    if arg.keyword is not None:
                        items[arg.keyword.value] = arg.value
                        continue
                    got = _dict_items(arg.value, home, depth)
                    if got is None:
                        return None
                    items.update(got)
            elif func.attr.value in ("pop", "clear", "popitem"):
                return None
    return items


def argument(site: CallSite, name: str, position: int | None = None):
    """The value node passed for parameter `name`: a node, MISSING, or UNKNOWN."""
    call = site.node
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if any(a.star == "*" for a in call.args):
        return UNKNOWN
    if position is not None and len(positional) > position:
        return positional[position].value
    result = MISSING
    for arg in call.args:
        if arg.star == "**":
            items = _dict_items(arg.value, site.scope)
            if items is None:
                return UNKNOWN
            if name in items:
                result = items[name]
    return result


# batch loops -----------------------------------------------------------------

_WRAPPERS = {"enumerate", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "iter", "zip"}
_LOADER_NAME = re.compile(r"loader(?!s)", re.IGNORECASE)  # "train_loader", not "loaders" (a list of them)


def _unwrap(node: cst.BaseExpression, facts: Facts, scope: Scope) -> tuple[cst.BaseExpression, bool]:
    """`enumerate(tqdm(loader))` → (loader, index_dropped)."""
    dropped = False
    while isinstance(node, cst.Call) and node.args:
        name = facts.qname(node.func, scope) or dotted(node.func)
        if name not in _WRAPPERS:
            break
        dropped = dropped or name == "enumerate"
        node = node.args[0].value
    return node, dropped


def loader_calls(facts: Facts) -> list[CallSite]:
    return facts.calls_to(DATALOADER)


def _call_site(facts: Facts, node: cst.Call):
    """The CallSite of a call node, from an index built once (a scan of every call per loop made
    linting quadratic in the file's size: 9 s of a 2 MB file's 30)."""
    index = facts.__dict__.get("_call_sites")
    if index is None:
        index = facts.__dict__["_call_sites"] = {}
        for c in facts.calls:
            index.setdefault(id(c.node), c)
    return index.get(id(node))


def loader_source(expr: cst.BaseExpression, scope: Scope, facts: Facts):
    """Where the iterable comes from: a DataLoader CallSite, "loader" (named like one), or None."""
    expr, _ = _unwrap(expr, facts, scope)
    if isinstance(expr, cst.Call) and facts.qname(expr.func, scope) == DATALOADER:
        return _call_site(facts, expr)
    if isinstance(expr, cst.Name):
        found = scope.lookup(expr.value)
        if found is not None:
            home, values = found
            if len(values) == 1 and values[0] is not None:
                value, _ = _unwrap(values[0], facts, home)
                if isinstance(value, cst.Call) and facts.qname(value.func, home) == DATALOADER:
                    return _call_site(facts, value)
    name = dotted(expr)
    if name and _LOADER_NAME.search(name.rsplit(".", 1)[-1]):
        return "loader"
    return None


class BatchLoop:
    """A loop that takes one batch from a loader per iteration."""

    def __init__(self, loop: Loop, source, batch_names: list[str]) -> None:
        self.loop = loop
        self.source = source  # CallSite of the DataLoader, or "loader" when only the name says so
        self.batch_names = batch_names

    @property
    def is_training(self) -> bool:
        return self.loop.has_backward


def batch_loops(facts: Facts) -> list[BatchLoop]:
    if "_batch_loops" in facts.__dict__:
        return facts.__dict__["_batch_loops"]
    found = []
    for loop in facts.loops:
        if loop.iter is not None:
            source = loader_source(loop.iter, loop.scope, facts)
            if source is not None:
                _, dropped = _unwrap(loop.iter, facts, loop.scope)
                target = loop.node.target
                if dropped and isinstance(target, cst.Tuple) and len(target.elements) == 2:
                    names = target_names(target.elements[1].value)
                else:
                    names = list(loop.targets)
                found.append(BatchLoop(loop, source, names))
                continue
        for it, names in loop.next_of:  # x, y = next(it) with it = iter(loader)
            source = loader_source(it, loop.scope, facts)
            if source is None and isinstance(it, cst.Name):
                got = loop.scope.lookup(it.value)
                if got and len(got[1]) == 1 and got[1][0] is not None:
                    source = loader_source(got[1][0], loop.scope, facts)
            if source is not None:
                found.append(BatchLoop(loop, source, names))
                break
    facts.__dict__["_batch_loops"] = found
    return found


def root_name(node: cst.BaseExpression) -> str | None:
    """`batch["x"].float()` → "batch": the variable an expression is a view or method of."""
    while True:
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, cst.Attribute):
            node = node.value
        elif isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        else:
            return None


def batch_views(bl: BatchLoop) -> set[str]:
    """The batch's names plus names unpacked or indexed from them (`x, y = batch`, `x = batch[0]`)."""
    names = set(bl.batch_names)
    for target, value in bl.loop.assigns:
        if value is not None and isinstance(value, (cst.Name, cst.Subscript)) and root_name(value) in names:
            names.update(target_names(target))
    return names


_SCALAR_METHODS = {"item", "tolist", "size", "dim", "numel", "__len__", "keys", "values", "items"}


def refs(node: cst.CSTNode, names: set[str]) -> bool:
    """Does an expression use one of `names` as a tensor (not through len()/.size()/.item())?"""
    if isinstance(node, cst.Name):
        return node.value in names
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _SCALAR_METHODS:
            return False
        if isinstance(func, cst.Name) and func.value in ("len", "isinstance", "type", "str", "repr"):
            return False
    if isinstance(node, cst.Attribute):
        if node.attr.value in ("shape", "dtype", "device", "ndim"):
            return False
        return refs(node.value, names)
    return any(refs(child, names) for child in node.children)


def tensor_names(bl: BatchLoop) -> set[str]:
    """Names in the loop body that hold tensors derived from the batch (images, output, loss, ...)."""
    names = set(bl.batch_names)
    for target, value in bl.loop.assigns:
        if value is not None and refs(value, names):
            names.update(target_names(target))
    return names


def is_tensor_expr(node: cst.BaseExpression, names: set[str]) -> bool:
    return root_name(node) in names


def device_like(node: cst.BaseExpression, facts: Facts, scope: Scope | None = None) -> bool:
    """Is this argument of .to()/.cuda() a device (not a dtype or another tensor)?"""
    value = literal(node)
    if isinstance(value, str):
        return value.split(":")[0] in ("cuda", "mps", "xpu", "xla", "npu", "hpu")
    if isinstance(value, int) and not isinstance(value, bool):
        return True
    if isinstance(node, cst.Call) and facts.qname(node.func, scope) == "torch.device":
        return True
    name = dotted(node)
    if name:
        last = name.rsplit(".", 1)[-1].lower()
        return any(word in last for word in ("device", "gpu", "rank")) and not facts.qname(node, scope)
    return False


def in_loop(site: CallSite, loop: Loop) -> tuple[bool, bool] | None:
    """(inside, conditional) of a call relative to a loop of the same function, or None."""
    for enclosing, conditional in site.loops:
        if enclosing is loop:
            return True, conditional
    return None
