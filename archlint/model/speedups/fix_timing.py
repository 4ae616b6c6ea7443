"""Mechanical fixes measured end to end: the user's model with a rule's fix applied, timed
against the model as it is, interleaved pass for pass.

Some findings have a fix archlint can apply itself — fold each BatchNorm into the conv before
it (AL205), drop a conv bias that a BatchNorm cancels (AL204), remove an activation that changes
nothing (AL202). Their honest price is what the whole model saves with the fix in place: an op's
own time misses what the fix adds (the folded conv now has a bias) or what changes around it.
The fix is made as a user would make it, in the model's own module tree: a conv replaced by the
conv with its BatchNorm folded in and the BatchNorm by nn.Identity (what torch.ao's
fuse_modules does), a conv by the same conv without its bias, an activation by nn.Identity. The
edits go into a copy of the tree whose leaves are shared with the model and never changed (its
parameters and buffers are put back after timing, as after any forward archlint runs), so the
timed forward is the user's own code. (Timed on the fx replay graph instead, the same fold
measured 20–45% more than on the model: the replay's calls cost differently.)

A module is edited only where the captured graph shows it ran exactly one op (a module called
twice, or a functional conv inside a bigger module, cannot be edited for one call alone), and
the fix counts only if the model's forward then calls every module the edit put in (a forward
that reaches its layers through a plain list would not see them); otherwise the caller falls
back to the ops' measured time.

The saving is the median of the paired per-pass differences, the two run in alternating order
(they share their weights: whichever ran second would find them in cache). Pairs come BATCH at a
time and stop by archlint.model.timing.paired's sequential rule: once the difference is measured, once
it cannot reach the materiality floor (FLOOR_SHARE of the model's time) whatever it is, or at
--repeat pairs, or when the --latency-budget runs out. One inside the noise is no measured
saving: 0 ms that says how wide the noise was (paired.WithinNoise).
"""

from __future__ import annotations

import contextlib
import copy
import itertools
from collections.abc import Callable, Iterable

import torch
from torch import nn
from torch.nn.modules.conv import _ConvNd

from archlint.model.runtime.sandbox import preserved
from archlint.model.speedups.fold import foldable, fuse, set_module
from archlint.model.timing.budget import Budget
from archlint.model.timing.paired import judge
from archlint.model.timing.timer import make_timer, sample

BATCH = 8  # pairs timed between two looks at the difference
FLOOR_SHARE = 0.01  # the rules' default materiality floor (min_saving_share): a saving below it never pays

Edit = Callable[[nn.Module], list[nn.Module] | None]  # edits a tree in place: the modules put in; None: cannot
Fix = Callable[[Iterable], Edit]  # a fix (fold_norms, drop_bias, to_identity): module paths → their edit


def saving_ms(pricer, fix: Fix, paths: tuple) -> float | None:
    """What the model saves, in ms, with `fix` applied to these module paths; None where the
    pricer has no model or the fix does not apply to them. Timed once per pricer."""
    cache = vars(pricer).setdefault("_fixed_ms", {})  # lives and dies with the pricer
    if (fix, paths) not in cache:
        cache[fix, paths] = _measure(pricer, fix(paths), LABELS[fix])
    return cache[fix, paths]


def _measure(pricer, edit: Edit, label: str) -> float | None:
    model = getattr(pricer, "model", None)
    if model is None:
        return None
    # The user's model is never changed nor moved: on its own device a tree copy will do (its
    # parameters and buffers put back after timing: a forward may count its steps in a buffer).
    shared = all(t.device == pricer.device for t in itertools.chain(model.parameters(), model.buffers()))
    base = tree_copy(model) if shared else copy.deepcopy(model).to(pricer.device)
    for m in base.modules():  # eval without .eval(): an exported GraphModule refuses it
        m.training = False
    fixed = tree_copy(base)
    inserted = edit(fixed)
    if inserted is None:
        return None
    timer = make_timer(pricer.device)
    args, kwargs = pricer.args, getattr(pricer, "kwargs", {})

    def run(module):
        def once() -> None:
            with timer.region("model"):
                module(*args, **kwargs)

        return once

    budget = getattr(pricer, "budget", None) or Budget(None)
    floor_ms = FLOOR_SHARE * pricer.end_to_end_ms
    before: list[float] = []
    after: list[float] = []
    # The per-op timing just ran this model (its base shares the weights): warm already. One
    # warm-up pair serves the fixed copy's new modules, where --warmup / 2 pairs used to.
    warmup = 1 if pricer.warmup else 0
    with torch.no_grad(), preserved(model) if shared else contextlib.nullcontext():
        if not _all_called(fixed, inserted, args, kwargs):
            return None
        while True:
            batch = min(BATCH, pricer.repeat - len(before))
            b, a = sample(
                [run(base), run(fixed)],
                timer,
                warmup,
                batch + batch % 2,
                alternate=True,
                label=f"pricing findings: the model with {label} against the model",
                deadline=budget.deadline(budget.pricing_share),
            )
            warmup = 0  # the first batch warmed both up
            before += b.passes
            after += a.passes
            verdict = judge(before, after, floor_ms, pricer.repeat, last=budget.spent(budget.pricing_share))
            if verdict.done:
                break
    if verdict.why == "cap" and budget.spent(budget.pricing_share) and len(before) < pricer.repeat:
        budget.cut(f"a fix priced on the whole model on {len(before)} pairs")
    return verdict.saving_ms


def _all_called(model: nn.Module, inserted: list[nn.Module], args: tuple, kwargs: dict) -> bool:
    """One forward of the edited model reaches every module the edit put in."""
    called: set[int] = set()
    hooks = [m.register_forward_pre_hook(lambda m, _: called.add(id(m))) for m in inserted]
    try:
        model(*args, **kwargs)
    finally:
        for h in hooks:
            h.remove()
    return all(id(m) in called for m in inserted)


def tree_copy(module: nn.Module) -> nn.Module:
    """A copy of the module tree: its own containers, each module a shallow copy sharing its
    parameters and buffers with the original. Replacing a submodule in the copy leaves the
    original as it was; nothing is copied that the edits do not replace."""
    clone = _shallow(module)
    clone._modules = {k: None if v is None else tree_copy(v) for k, v in module._modules.items()}
    return clone


def _shallow(module: nn.Module) -> nn.Module:
    """A copy of one module with its own dicts (parameters, buffers, hooks) holding the same
    tensors and hooks: what is set on the copy stays on the copy."""
    clone = copy.copy(module)
    for key, value in vars(module).items():
        if isinstance(value, dict):
            vars(clone)[key] = value.copy()
    return clone


def fold_norms(pairs: Iterable[tuple[str, str]]) -> Edit:
    """Each (conv or linear, BatchNorm) pair of module paths: the layer replaced by the folded
    layer, the BatchNorm by nn.Identity — `--what-if fold-bn`'s own fold."""
    pairs = list(pairs)

    def edit(root: nn.Module) -> list[nn.Module] | None:
        inserted: list[nn.Module] = []
        for layer_path, norm_path in pairs:
            layer, norm = _get(root, layer_path), _get(root, norm_path)
            if layer is None or norm is None or not foldable(layer, norm):
                return None
            inserted += [fuse(layer, norm), nn.Identity()]
            set_module(root, layer_path, inserted[-2])
            set_module(root, norm_path, inserted[-1])
        return inserted

    return edit


def drop_bias(convs: Iterable[str]) -> Edit:
    """Each conv (by module path) replaced by a bias-less copy sharing its weight."""
    convs = list(convs)

    def edit(root: nn.Module) -> list[nn.Module] | None:
        inserted: list[nn.Module] = []
        for path in convs:
            conv = _get(root, path)
            if not isinstance(conv, _ConvNd) or conv.bias is None:
                return None
            bare = _shallow(conv)
            bare._parameters["bias"] = None
            set_module(root, path, bare)
            inserted.append(bare)
        return inserted

    return edit


def to_identity(paths: Iterable[str]) -> Edit:
    """Each leaf module (an activation that changes nothing) replaced by nn.Identity."""
    paths = list(paths)

    def edit(root: nn.Module) -> list[nn.Module] | None:
        inserted: list[nn.Module] = []
        for path in paths:
            module = _get(root, path)
            if module is None or next(module.children(), None) is not None:
                return None
            inserted.append(nn.Identity())
            set_module(root, path, inserted[-1])
        return inserted

    return edit


# what each fix does, in the progress line that times it
LABELS = {fold_norms: "BatchNorms folded", drop_bias: "conv biases dropped", to_identity: "no-op activations removed"}


def _get(root: nn.Module, path: str) -> nn.Module | None:
    try:
        return root.get_submodule(path) if path else None
    except AttributeError:
        return None
