"""AL301 pin_memory, AL302 non_blocking, AL304 num_workers: the DataLoader → GPU copy path."""

from __future__ import annotations

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.checks import Finding
from archlint.code.checks._edits import add_keyword, replace
from archlint.code.facts import CallSite, Facts, Scope
from archlint.code.names import dotted
from archlint.diagnostics import Applicability, Fix, Severity

CODES = ("AL301", "AL302", "AL304")
SEVERITY = {"AL301": Severity.WARNING, "AL302": Severity.WARNING, "AL304": Severity.WARNING}  # as the pages say
PRICE = {"AL301": (), "AL302": (), "AL304": ()}
FIX = {"AL301": "safe", "AL302": "safe", "AL304": "none"}


def _copies(facts: Facts, bl: df.BatchLoop) -> list[CallSite]:
    """Host→device copies of this loop's batches without non_blocking: `x.cuda()`, `x.to(device)`."""
    views = df.batch_views(bl)
    return _copy_sites(facts, bl.loop.calls, views, _moves(bl.loop.assigns, views))


def _function_copies(facts: Facts, scope: Scope, params: set[str]) -> list[CallSite]:
    """Copies a per-batch function makes of the batch it is handed (`parse_batch(self, batch)`:
    `text = text.cuda()` after `text, lengths, mel = batch`)."""
    views = set(params)
    for _ in range(3):
        for name, values in scope.assigns.items():
            if any(
                isinstance(v, (cst.Name, cst.Subscript)) and df.root_name(v) in views for v in values if v is not None
            ):
                views.add(name)
        for name, entries in scope.unpacked.items():
            if any(isinstance(v, (cst.Name, cst.Subscript)) and df.root_name(v) in views for v, _ in entries):
                views.add(name)
    for loop in facts.loops:  # `for key, ipt in inputs.items(): inputs[key] = ipt.to(self.device)`
        if loop.scope is scope:
            views.update(df.iterated_views(loop, views))
    assigns = [(cst.Name(name), v) for name, values in scope.assigns.items() for v in values if v is not None]
    calls = [site for site in scope.calls if site.scope is scope]
    return _copy_sites(facts, calls, views, _moves(assigns, views))


def _copy_sites(facts: Facts, calls: list[CallSite], views: set[str], moved: dict) -> list[CallSite]:
    found = []
    for site in calls:
        func = site.node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("cuda", "to"):
            continue
        if df.root_name(func.value) not in views or (isinstance(func.value, cst.Call) and not _view(func.value)):
            continue  # not a batch tensor, or a copy made on the host first (x.float().cuda(): pageable memory)
        root = df.root_name(func.value)
        if root in moved and site.node not in moved[root]:
            continue  # `x = x.cuda()` earlier in the loop: this copy of x is already on the device
        if any(a.keyword is not None and a.keyword.value == "non_blocking" for a in site.node.args):
            continue  # set, to whatever value: a choice
        if df.on_side_stream(site, facts):
            continue  # a CUDA-stream prefetcher's copy: it already overlaps the default stream's compute
        positional = [a for a in site.node.args if a.keyword is None]
        if func.attr.value == "to":
            device = df.argument(site, "device", 0)
            if device in (df.MISSING, df.UNKNOWN) or not df.device_like(device, facts, site.scope):
                continue
            if len(positional) > 2 or any(a.star for a in site.node.args):
                continue  # .to(device, dtype, non_blocking) positionally: leave it alone
        found.append(site)
    return found


# Methods that return a view of the same storage: a view of a pinned batch is pinned too, and its copy
# (`x.squeeze(1).cuda()`, `y.view(-1).to(device)`) can run asynchronously like the batch's own.
_VIEW_METHODS = frozenset(
    {
        "view",
        "view_as",
        "squeeze",
        "unsqueeze",
        "flatten",
        "unflatten",
        "permute",
        "transpose",
        "t",
        "narrow",
        "select",
        "expand",
        "expand_as",
        "detach",
        "unbind",
        "chunk",
        "split",
    }
)


def _view(node: cst.BaseExpression) -> bool:
    """`x.squeeze(1)`, `y.view(-1)`, `x[0].permute(2, 0, 1)`: a chain of views of a name."""
    while True:
        if isinstance(node, cst.Call):
            if not (isinstance(node.func, cst.Attribute) and node.func.attr.value in _VIEW_METHODS):
                return False
            node = node.func.value
        elif isinstance(node, (cst.Subscript, cst.Attribute)):
            node = node.value
        else:
            return isinstance(node, cst.Name)


def _moves(assigns, views: set[str]) -> dict[str, list[cst.Call]]:
    """Batch names the loop rebinds to a device copy (`x = x.cuda()`): name → the copy calls."""
    moved: dict[str, list[cst.Call]] = {}
    for target, value in assigns:
        values = value.elements if isinstance(value, cst.Tuple) else [value]
        targets = target.elements if isinstance(target, cst.Tuple) else [target]
        if len(values) != len(targets):
            continue
        for t, v in zip(targets, values):
            t = getattr(t, "value", t)
            v = getattr(v, "value", v)
            if (
                isinstance(t, cst.Name)
                and t.value in views
                and isinstance(v, cst.Call)
                and isinstance(v.func, cst.Attribute)
                and v.func.attr.value in ("cuda", "to")
            ):
                moved.setdefault(t.value, []).append(v)
    return moved


def _feeds_cuda(facts: Facts, site: CallSite) -> bool:
    """The loader's batches go to a GPU: this file uses one, or a module that uses one calls the
    function that builds it."""
    return facts.uses_cuda or site.scope.qualname in facts.project.feeds_cuda


def _pinned(facts: Facts, loader: CallSite) -> object:
    value = df.argument(loader, "pin_memory", df.DATALOADER_POSITIONS["pin_memory"])
    return value if value in (df.MISSING, df.UNKNOWN) else df.literal(value)


def check(facts: Facts):
    loaders = df.loader_calls(facts)
    loops = df.batch_loops(facts)
    pinned = {id(site.node): _pinned(facts, site) for site in loaders}
    all_pinned = all(v is True for v in pinned.values())
    fed: dict[int, list] = {}  # loader → the batch loops it feeds, found once (not once per loader)
    for bl in loops:
        fed.setdefault(id(bl.source), []).append(bl)

    for site in loaders:
        if not _feeds_cuda(facts, site) or not _reaches_device(facts, site, fed.get(id(site), ())):
            continue  # a CPU-only script, or host-side batches: workers help less, and the message is about the GPU
        workers = df.argument(site, "num_workers", df.DATALOADER_POSITIONS["num_workers"])
        if workers is df.MISSING or df.literal(workers) == 0:
            how = "is not set" if workers is df.MISSING else "is 0"
            yield Finding(
                "AL304",
                site.node,
                f"DataLoader num_workers {how}: batches are loaded in the training process, so the "
                "GPU waits for each one; set num_workers (e.g. 4 or the CPU cores per GPU)",
            )

    for site in loaders:
        state = pinned[id(site.node)]
        if state is True or state is df.UNKNOWN or not _feeds_cuda(facts, site):
            continue
        if not _reaches_device(facts, site, fed.get(id(site), ())):
            continue  # its batches stay on the host (`for img, _ in loader: sizes.append(img.shape)`)
        if state not in (df.MISSING, False):
            continue  # pin_memory=None or another literal: leave it
        copies = [c for bl in fed.get(id(site), ()) for c in _copies(facts, bl)]
        message = (
            "DataLoader feeds the GPU from pageable memory: set pin_memory=True so host→device "
            "copies are faster and can overlap compute"
        )
        if copies:
            message += " (then its batches' .cuda()/.to() copies can take non_blocking=True)"
        if state is df.MISSING:
            yield Finding("AL301", site.node, message, _pin_fix(facts, site, copies, Applicability.SAFE))
        else:
            yield Finding("AL301", site.node, message, _pin_fix(facts, site, copies, Applicability.UNSAFE))

    reported: set[int] = set()
    for bl in loops:
        src = bl.source
        if isinstance(src, CallSite):
            known = pinned.get(id(src.node))
        elif isinstance(src, df.ProjectLoader):
            known = src.pinned
        else:
            known = all_pinned if loaders else None
        if known is not True:
            continue  # unpinned batches are reported with AL301; non_blocking from pageable memory buys nothing
        for copy in _copies(facts, bl):
            if id(copy.node) in reported:
                continue  # one copy, one finding: nested loops over the same batch see it twice
            reported.add(id(copy.node))
            yield _non_blocking(facts, copy)
    for scope in facts.functions:  # per-batch functions handed pinned batches (`model.parse_batch(batch)`)
        given = facts.project.batches.get(scope.qualname)
        params = {p for p, pin in (given or {}).items() if pin == "true"}
        if not params:
            continue
        for copy in _function_copies(facts, scope, params):
            if id(copy.node) not in reported:
                reported.add(id(copy.node))
                yield _non_blocking(facts, copy)


def _non_blocking(facts: Facts, copy: CallSite) -> Finding:
    return Finding(
        "AL302",
        copy.node,
        "copy of a batch from a pinned DataLoader blocks the host: add non_blocking=True "
        "so the copy overlaps the previous step's GPU work",
        lambda copy=copy: Fix(
            "Add non_blocking=True",
            Applicability.SAFE,
            (add_keyword(facts, copy.node, "non_blocking=True"),),
        ),
    )


# Builtins that read a batch on the host (its size, a number from it) without sending it anywhere.
_HOST_READS = frozenset(
    {
        "len",
        "float",
        "int",
        "bool",
        "str",
        "repr",
        "print",
        "isinstance",
        "type",
        "range",
        "min",
        "max",
        "sum",
        "round",
        "abs",
    }
)


def _reaches_device(facts: Facts, site: CallSite, loops) -> bool:
    """The loader's batches may reach the GPU or a model. False only when every use of the loader
    is a loop of this file (its name appears nowhere else) and no loop copies a batch to a device,
    hands one to a call, stores or yields it (`for img, _ in loader: n += img.shape[0]`)."""
    if not loops or any(bl.loop.scope.has_yield for bl in loops):
        return True
    name = _bound_name(facts, site)
    texts = facts.__dict__.setdefault("_scope_code", {})  # rendered once per scope, not once per loader
    if id(site.scope) not in texts:
        texts[id(site.scope)] = facts.code(site.scope.node)
    if name is None or texts[id(site.scope)].count(name) != 1 + len(loops):
        return True  # also passed, returned or stored somewhere: its batches may go anywhere
    for bl in loops:
        views = df.batch_views(bl)
        for call in bl.loop.calls:
            func = call.node.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value in ("cuda", "to")
                and df.root_name(func.value) in views
            ):
                return True
            if dotted(func) in _HOST_READS:
                continue
            if any(df.refs(arg.value, views) for arg in call.node.args):
                return True
        for target, value in bl.loop.assigns:
            if not isinstance(target, cst.Name) and value is not None and df.refs(value, views):
                return True  # `self.batch = x`, `cache[i] = x`
    return False


def _bound_name(facts: Facts, site: CallSite) -> str | None:
    """The one name a DataLoader call is assigned to (`stats_loader = DataLoader(...)`)."""
    names = [name for name, values in site.scope.assigns.items() if any(v is site.node for v in values)]
    return names[0] if len(names) == 1 else None


def _pin_fix(facts: Facts, site: CallSite, copies: list[CallSite], applicability: Applicability):
    def build() -> Fix:
        value = df.argument(site, "pin_memory", df.DATALOADER_POSITIONS["pin_memory"])
        if value is df.MISSING:
            edits = [add_keyword(facts, site.node, "pin_memory=True")]
        else:
            edits = [replace(facts, value, "True")]
        edits += [add_keyword(facts, c.node, "non_blocking=True") for c in copies]
        return Fix(
            "Set pin_memory=True" + (" and non_blocking=True on its copies" if copies else ""),
            applicability,
            tuple(edits),
        )

    return build
