"""Mechanical fixes measured end to end: the model's replay graph with a rule's fix applied,
timed against the same graph without it, interleaved pass for pass.

Some findings have a fix archlint can apply itself — fold each BatchNorm into the conv before
it (AL205), drop a conv bias that a BatchNorm cancels (AL204). Their honest price is what the
whole model saves with the fix in place: an op's own time misses what the fix adds (the folded
conv now has a bias) or what changes around it. The edits work on a copy of the replay graph
(fx call_module nodes for folding; module or functional convs for the bias); where a node cannot
be edited the caller falls back to the ops' measured time. The saving is the median of the
paired per-pass differences; one within twice its standard error is no measured saving (0).
"""

from __future__ import annotations

import copy
import math
import statistics
from collections.abc import Callable, Iterable

import torch
import torch.fx as fx
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval, fuse_linear_bn_eval

from archlint.model.timer import make_timer, sample

Edit = Callable[[fx.GraphModule, dict[str, fx.Node]], bool]  # edits the graph in place; False: cannot


def saving_ms(pricer, name: str, edit: Edit, nodes: tuple) -> float | None:
    """What the model saves, in ms, with `edit` applied to its replay graph; None where the
    pricer has no replay graph or the edit does not apply to these nodes. Once per pricer."""
    cache = vars(pricer).setdefault("_fixed_ms", {})  # lives and dies with the pricer
    if (name, nodes) not in cache:
        cache[name, nodes] = _measure(pricer, edit)
    return cache[name, nodes]


def _measure(pricer, edit: Edit) -> float | None:
    if getattr(pricer, "replay", None) is None:
        return None
    base = copy.deepcopy(pricer.replay).to(pricer.device)  # the user's modules are never touched
    for m in base.modules():  # eval without .eval(): an exported GraphModule refuses it
        m.training = False
    graph = copy.deepcopy(base.graph)
    fixed = fx.GraphModule(base, graph)  # shares base's modules; edits add new ones at its root
    if not edit(fixed, {n.name: n for n in graph.nodes}):
        return None
    graph.lint()
    fixed.recompile()
    timer = make_timer(pricer.device)
    args = pricer.args

    def run(gm):
        def once() -> None:
            with timer.region("model"):
                gm(*args)

        return once

    with torch.no_grad():
        before, after = sample([run(base), run(fixed)], timer, math.ceil(pricer.warmup / 2), math.ceil(pricer.repeat / 2))
    return paired_saving(before.passes, after.passes)


def paired_saving(before: Iterable[float], after: Iterable[float]) -> float:
    """The median of the paired differences; 0 when within twice its standard error (σ from the
    interquartile range, a median's error ≈ 1.25·σ/√n)."""
    diffs = [b - a for b, a in zip(before, after)]
    if len(diffs) < 4:
        return 0.0
    q1, med, q3 = statistics.quantiles(diffs, n=4, method="inclusive")
    error = 1.2533 * (q3 - q1) / 1.349 / math.sqrt(len(diffs))
    return med if abs(med) > 2 * error else 0.0


def fold_norms(pairs: Iterable[tuple[str, str]]) -> Edit:
    """Each (conv or linear, BatchNorm) pair of module calls folded into one module."""
    pairs = list(pairs)

    def edit(gm: fx.GraphModule, nodes: dict[str, fx.Node]) -> bool:
        for i, (layer_name, norm_name) in enumerate(pairs):
            layer, norm = _module(gm, nodes.get(layer_name)), _module(gm, nodes.get(norm_name))
            if layer is None or norm is None or getattr(norm, "running_mean", None) is None:
                return False
            if isinstance(layer, nn.Linear) and norm.running_mean.shape[0] != layer.out_features:
                return False
            fuse = fuse_linear_bn_eval if isinstance(layer, nn.Linear) else fuse_conv_bn_eval
            _replace(gm, nodes[layer_name], f"_archlint_folded_{i}", fuse(layer, norm))
            nodes[norm_name].replace_all_uses_with(nodes[layer_name])
            gm.graph.erase_node(nodes[norm_name])
        return True

    return edit


def drop_bias(convs: Iterable[str]) -> Edit:
    """Each conv without its bias: a module conv replaced by a bias-less copy sharing its
    weight, a functional one called with bias=None."""
    convs = list(convs)

    def edit(gm: fx.GraphModule, nodes: dict[str, fx.Node]) -> bool:
        for i, name in enumerate(convs):
            node = nodes.get(name)
            if node is None:
                return False
            module = _module(gm, node)
            if isinstance(module, nn.modules.conv._ConvNd) and module.bias is not None:
                bare = copy.copy(module)
                bare._parameters = {**module._parameters, "bias": None}
                _replace(gm, node, f"_archlint_unbiased_{i}", bare)
            elif node.op == "call_function" and len(node.args) > 2 and node.args[2] is not None:
                node.args = (*node.args[:2], None, *node.args[3:])
            elif node.op == "call_function" and node.kwargs.get("bias") is not None:
                node.kwargs = {**node.kwargs, "bias": None}
            else:
                return False
        return True

    return edit


def _module(gm: fx.GraphModule, node: fx.Node | None) -> nn.Module | None:
    if node is None or node.op != "call_module":
        return None
    try:
        return gm.get_submodule(node.target)
    except AttributeError:
        return None


def _replace(gm: fx.GraphModule, node: fx.Node, name: str, module: nn.Module) -> None:
    """Call `module` at `node` instead, registered at the copy's own root (its other modules are
    shared with the original graph)."""
    gm.add_submodule(name, module)
    node.target = name
