"""AL401: a GPU→CPU synchronization on every iteration of a CUDA training loop, in the loop itself
or in a project function the loop calls once per step."""

from __future__ import annotations

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.checks import Finding
from archlint.code.facts import CallSite, Facts, Scope, target_names
from archlint.code.indexing import call_sync, index_sync
from archlint.code.names import dotted
from archlint.code.tensors import function_tensors, holds_tensor, tensor_names
from archlint.diagnostics import Severity

CODES = ("AL401",)
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ()
FIX = "none"
_METHODS = {"item": ".item()", "cpu": ".cpu()", "numpy": ".numpy()", "tolist": ".tolist()"}
_BUILTINS = ("print", "float", "int", "bool")
_ADVICE = (
    "waits for the GPU to finish: keep the value on the GPU (accumulate with .detach()) and read it "
    "every N steps or once per epoch"
)


def _plain_tensor(node: cst.BaseExpression, names: set[str]) -> bool:
    """A tensor variable itself (not a call on it, which is reported on its own)."""
    if isinstance(node, cst.StarredElement):
        node = node.value
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):  # `float(v.detach())`
        return not _synced_before(node) and df.refs(node, names) and df.root_name(node) in names
    if isinstance(node, cst.Attribute) and dotted(node) in names:  # a module's buffer: `int(self.queue_ptr)`
        return True
    return isinstance(node, (cst.Name, cst.Attribute, cst.Subscript)) and df.root_name(node) in names


def _formats_tensor(value: cst.BaseExpression, names: set[str]) -> bool:
    """An f-string, `"%.3f" % loss` or `"{}".format(loss)` that renders a tensor as text."""
    if isinstance(value, cst.FormattedString):
        return any(
            isinstance(p, cst.FormattedStringExpression) and _plain_tensor(p.expression, names) for p in value.parts
        )
    if (
        isinstance(value, cst.BinaryOperation)
        and isinstance(value.operator, cst.Modulo)
        and isinstance(value.left, (cst.SimpleString, cst.ConcatenatedString, cst.BinaryOperation))
    ):
        right = value.right
        items = [el.value for el in right.elements] if isinstance(right, cst.Tuple) else [right]
        return any(_plain_tensor(item, names) for item in items)
    return False


def _syncing_arg(call: cst.Call, names: set[str]) -> bool:
    return any(_plain_tensor(arg.value, names) or _formats_tensor(arg.value, names) for arg in call.args)


def _syncing_test(test: cst.BaseExpression, names: set[str]) -> bool:
    """An `if` condition that needs a tensor's value on the host (`if loss < best:`, `if torch.isnan(x).any():`)."""
    if isinstance(test, cst.Comparison) and all(
        isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in test.comparisons
    ):
        return False  # identity and membership tests do not read tensor values
    if isinstance(test, cst.UnaryOperation):
        return _syncing_test(test.expression, names)
    if isinstance(test, cst.BooleanOperation):
        return _syncing_test(test.left, names) or _syncing_test(test.right, names)
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value in ("isinstance", "hasattr"):
        return False
    return df.refs(test, names)


def _syncing_method(node: cst.BaseExpression) -> bool:
    return (
        isinstance(node, cst.Call)
        and not node.args
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in _METHODS
    )


def _synced_before(node: cst.BaseExpression) -> bool:
    """A sync earlier in the same chain: `loss.cpu().detach().numpy().item()` waits once, at `.cpu()`."""
    while isinstance(node, (cst.Call, cst.Attribute, cst.Subscript)):
        if _syncing_method(node):
            return True
        node = (
            node.func.value
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            else (node.func if isinstance(node, cst.Call) else node.value)
        )
    return False


def _what(site: CallSite, names: set[str], facts: Facts) -> str | None:
    func = site.node.func
    if isinstance(func, cst.Attribute) and func.attr.value in _METHODS and not site.node.args:
        if _synced_before(func.value):
            return None  # `x.cpu().numpy()`: one sync, reported on the inner call
        return _METHODS[func.attr.value] if holds_tensor(func.value, names) else None
    if isinstance(func, cst.Attribute) and func.attr.value == "format" and isinstance(func.value, cst.SimpleString):
        return "formatting a tensor as text" if _syncing_arg(site.node, names) else None
    if isinstance(func, cst.Name) and func.value in _BUILTINS:
        rebound = func.value in facts.bound or func.value in facts.imports.names
        if not rebound and _syncing_arg(site.node, names):
            return f"{func.value}() of a tensor"
        return None
    if facts.qname(site.node.func, site.scope) == "torch.cuda.synchronize":
        return "torch.cuda.synchronize()"
    if any(_formats_tensor(arg.value, names) for arg in site.node.args):
        return "formatting a tensor as text"
    return call_sync(site.node, names, facts, site.scope)


def _loop_findings(facts: Facts, seen: set[int]):
    for bl in df.training_loops(facts):
        names = tensor_names(bl)
        for site in bl.loop.calls:
            where = df.in_loop(site, bl.loop)
            if where is None or where.conditional or id(site.node) in seen:
                continue  # under an `if` (e.g. every N steps): not every iteration
            what = _what(site, names, facts)
            if what == "torch.cuda.synchronize()" and site.conditional:
                continue  # `if args.synchronize_step: torch.cuda.synchronize()`: asked for, on purpose
            if what:
                seen.add(id(site.node))
                yield Finding("AL401", site.node, f"{what} on every training step {_ADVICE}")
        for node in df.unconditional_asserts(bl.loop.node.body):  # `assert torch.isfinite(loss).all()`
            if _syncing_test(node.test, names):
                yield Finding(
                    "AL401",
                    node.test,
                    "`assert` on a tensor's value on every training step waits for "
                    "the GPU to finish: check every N steps, or under a debug flag",
                )
        for node, nested in bl.loop.ifs:
            if not nested and _syncing_test(node.test, names):
                seen.update(id(n) for n in df.subtree(node.test))  # its masks wait at the same place
                yield Finding(
                    "AL401",
                    node.test,
                    "`if` on a tensor's value on every training step waits for the GPU to finish: "
                    "decide on the GPU (torch.where, masking) or check every N steps",
                )
        for index in bl.loop.indexes:  # `loss_fg = mse(rgb[acc > 0.5], target[acc > 0.5])`
            where = df.in_loop(index, bl.loop)
            if where is None or where.conditional or id(index.node) in seen:
                continue
            if _on_host(index.node, bl, facts):
                continue  # `x = x[y != -1]` before `x = x.cuda()`: the loader's batch, still on the host
            what = index_sync(index, names, facts)
            if what:
                seen.add(id(index.node))
                yield Finding("AL401", index.node, f"{what} on every training step {_ADVICE}")


def _on_host(node: cst.Subscript, bl: df.BatchLoop, facts: Facts) -> bool:
    """An indexing of the loader's batch before the loop copies it to the device (or when it never
    does by rebinding the name): a CPU tensor, whose mask indexing waits for nothing."""
    if bl.source is None:
        return False  # a step loop: its tensors are the step's own
    root = df.root_name(node.value)
    if root not in df.batch_views(bl):
        return False
    moves = [
        value
        for target, value in bl.loop.assigns
        if root in target_names(target)
        and isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in ("cuda", "to")
    ]
    if not moves:
        return True
    line = facts.position(node).start.line
    return all(facts.position(value).start.line >= line for value in moves)


def _function_tensors(scope: Scope, params: list[str], facts: Facts) -> set[str]:
    """Tensor parameters plus what the function derives from them and what its backward starts from."""
    names = set(params)
    for site in scope.calls:
        if df.is_backward_call(site.node):
            names |= df.backward_roots_of([site], set(scope.assigns) | set(scope.unpacked))
    return function_tensors(scope, names, facts)


def _buffers(scope: Scope, facts: Facts) -> set[str]:
    """`self.queue_ptr` where the method's class registers it as a buffer (or a Parameter): a tensor
    on the module's device (moco's `ptr = int(self.queue_ptr)`)."""
    cls = scope.parent
    if cls is None or cls.kind != "class":
        return set()
    found = facts.__dict__.setdefault("_buffers", {})
    if cls.qualname not in found:
        names = set()
        for site in facts.calls:
            owner = site.scope.parent
            func = site.node.func
            if (
                owner is cls
                and isinstance(func, cst.Attribute)
                and func.attr.value == "register_buffer"
                and site.node.args
            ):
                key = df.literal(site.node.args[0].value)
                if isinstance(key, str):
                    names.add(f"self.{key}")
        found[cls.qualname] = names
    return found[cls.qualname]


def _helper_findings(facts: Facts, seen: set[int], only: dict | None = None):
    """Functions the project calls once per training step (`log_step(loss)`, a closure running the
    forward and backward): their unconditional syncs of the tensors they are given are per step too."""
    per_step = {} if only is not None else dict(facts.project.per_step)
    for qualname, batch in df.trainer_hooks(facts).items():  # the library trainer calls it every step
        per_step.setdefault(qualname, [batch, "the Trainer's training loop"])
    if not per_step:
        return
    for scope in facts.functions:
        entry = per_step.get(scope.qualname)
        if entry is None:
            continue
        params, caller = entry
        if df.flag_guarded(scope.node):
            continue  # `if not DEBUG_NAN: return` first: the rest runs on debugging runs only
        names = _function_tensors(scope, params, facts) | _buffers(scope, facts)
        for site in scope.calls:
            if site.scope is not scope or site.conditional or id(site.node) in seen:
                continue
            what = _what(site, names, facts)
            if what:
                seen.add(id(site.node))
                yield Finding(
                    "AL401",
                    site.node,
                    f"{what} in {scope.qualname}(), which the training step calls every step (at {caller}), {_ADVICE}",
                )
        for index in scope.indexes:
            if index.scope is not scope or index.conditional or id(index.node) in seen:
                continue
            what = index_sync(index, names, facts)
            if what:
                seen.add(id(index.node))
                yield Finding(
                    "AL401",
                    index.node,
                    f"{what} in {scope.qualname}(), which the training step calls every step (at {caller}), {_ADVICE}",
                )
        # `if not torch.isfinite(losses).all(): raise ...` (detectron2's _detect_anomaly)
        tests = [(n.test, "`if`") for n in df.unconditional_ifs(scope.node.body)]
        tests += [(n.test, "`assert`") for n in df.unconditional_asserts(scope.node.body)]
        for test, what in tests:
            if _syncing_test(test, names):
                yield Finding(
                    "AL401",
                    test,
                    f"{what} on a tensor's value in {scope.qualname}(), which the training "
                    f"step calls every step (at {caller}), waits for the GPU to finish: "
                    "check every N steps",
                )


def check(facts: Facts) -> list[Finding]:
    """AL401's findings, worked out once per file: host_numpy asks for them too (it stays silent on
    their lines), and working them out again cost a tenth of a cold run."""
    if "_sync_findings" not in facts.__dict__:
        facts.__dict__["_sync_findings"] = list(_findings(facts))
    return facts.__dict__["_sync_findings"]


def _findings(facts: Facts):
    seen: set[int] = set()
    if facts.uses_cuda:
        yield from _loop_findings(facts, seen)
        yield from _helper_findings(facts, seen)
    elif df.trainer_hooks(facts):  # a Hugging Face Trainer runs on the GPU when there is one, as Accelerate does
        yield from _helper_findings(facts, seen, only=df.trainer_hooks(facts))
