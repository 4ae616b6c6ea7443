"""AL301 pin_memory, AL302 non_blocking, AL304 num_workers: the DataLoader → GPU copy path."""

from __future__ import annotations

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.checks import Finding
from archlint.code.checks._edits import add_keyword, replace
from archlint.code.facts import CallSite, Facts
from archlint.diagnostics import Applicability, Fix

CODES = ("AL301", "AL302", "AL304")


def _copies(facts: Facts, bl: df.BatchLoop) -> list[CallSite]:
    """Host→device copies of this loop's batches without non_blocking: `x.cuda()`, `x.to(device)`."""
    views = df.batch_views(bl)
    moved = _moves(bl, views)
    found = []
    for site in bl.loop.calls:
        func = site.node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("cuda", "to"):
            continue
        if df.root_name(func.value) not in views or isinstance(func.value, cst.Call):
            continue  # not a batch tensor, or a chained call such as x.float().cuda() handled once
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


def _moves(bl: df.BatchLoop, views: set[str]) -> dict[str, list[cst.Call]]:
    """Batch names the loop rebinds to a device copy (`x = x.cuda()`): name → the copy calls."""
    moved: dict[str, list[cst.Call]] = {}
    for target, value in bl.loop.assigns:
        values = value.elements if isinstance(value, cst.Tuple) else [value]
        targets = target.elements if isinstance(target, cst.Tuple) else [target]
        if len(values) != len(targets):
            continue
        for t, v in zip(targets, values):
            t = getattr(t, "value", t)
            v = getattr(v, "value", v)
            if (isinstance(t, cst.Name) and t.value in views and isinstance(v, cst.Call)
                    and isinstance(v.func, cst.Attribute) and v.func.attr.value in ("cuda", "to")):
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
        if not _feeds_cuda(facts, site):
            continue  # a CPU-only script: workers help less, and the message is about the GPU
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
            yield Finding(
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


def _pin_fix(facts: Facts, site: CallSite, copies: list[CallSite], applicability: Applicability):
    def build() -> Fix:
        value = df.argument(site, "pin_memory", df.DATALOADER_POSITIONS["pin_memory"])
        if value is df.MISSING:
            edits = [add_keyword(facts, site.node, "pin_memory=True")]
        else:
            edits = [replace(facts, value, "True")]
        edits += [add_keyword(facts, c.node, "non_blocking=True") for c in copies]
        return Fix("Set pin_memory=True" + (" and non_blocking=True on its copies" if copies else ""),
                   applicability, tuple(edits))

    return build
