"""fold-bn: every BatchNorm that directly follows a Conv (or a Linear) folded into that layer's
weights and bias, for inference.

On the fx graph of the model (torch.fx.symbolic_trace) a pair is a BatchNorm call whose only
input is a Conv/Linear call that feeds nothing else, each module called once. Where fx cannot
trace the model, pairs are taken from the module tree instead: consecutive children of an
nn.Sequential (the call order is the order of the children there, and nowhere else). The
folding itself is torch's own (torch.nn.utils.fusion), so it matches what torch.ao's
fuse_modules and inductor do.
"""

from __future__ import annotations

import torch.fx as fx
from torch import nn
from torch.fx.passes.shape_prop import ShapeProp
from torch.nn.utils.fusion import fuse_conv_bn_eval, fuse_linear_bn_eval

_BN = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
_CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d)


def foldable(layer: nn.Module, bn: nn.Module) -> bool:
    """A Conv/Linear and the BatchNorm after it can be folded into one layer (also used by
    archlint.model.speedups.fix_timing, which times the fold for AL205)."""
    if not isinstance(bn, _BN) or bn.running_mean is None or bn.running_var is None:
        return False  # without running statistics a BatchNorm normalizes by the batch: nothing to fold
    if isinstance(layer, _CONV):
        return layer.out_channels == bn.num_features
    return isinstance(layer, nn.Linear) and layer.out_features == bn.num_features


def fuse(layer: nn.Module, bn: nn.Module) -> nn.Module:
    return fuse_conv_bn_eval(layer, bn) if isinstance(layer, _CONV) else fuse_linear_bn_eval(layer, bn)


def fold_bn(model: nn.Module, inputs: tuple) -> tuple[nn.Module, int, str]:
    """(the folded model, the number of pairs folded, where they were found). `model` is the
    caller's copy in eval mode: it is changed (its modules replaced), never the user's."""
    try:
        gm = fx.symbolic_trace(model)
    except Exception as exc:  # any tracing error (data-dependent control flow, ...): use the module tree
        first = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
        return model, _fold_sequentials(model), f"module tree (nn.Sequential pairs; fx could not trace: {first})"
    return gm, _fold_graph(gm, inputs), "fx graph"


def _fold_graph(gm: fx.GraphModule, inputs: tuple) -> int:
    modules = dict(gm.named_modules())
    calls: dict[str, int] = {}
    for node in gm.graph.nodes:
        if node.op == "call_module":
            calls[node.target] = calls.get(node.target, 0) + 1
    pairs = []
    for node in gm.graph.nodes:
        if node.op != "call_module" or not isinstance(modules.get(node.target), _BN) or not node.args:
            continue
        prev = node.args[0]
        if not isinstance(prev, fx.Node) or prev.op != "call_module" or len(prev.users) != 1:
            continue
        layer, bn = modules.get(prev.target), modules[node.target]
        if calls[prev.target] == 1 and calls[node.target] == 1 and foldable(layer, bn):
            pairs.append((prev, node))
    if any(isinstance(modules[p.target], nn.Linear) for p, _ in pairs):
        # BatchNorm1d after a Linear folds only on (N, C) outputs: on (N, C, L) it normalizes dim 1,
        # which is not the Linear's feature dim. The shapes come from one forward pass.
        ShapeProp(gm).propagate(*inputs)
        pairs = [
            (p, n)
            for p, n in pairs
            if not isinstance(modules[p.target], nn.Linear) or len(p.meta["tensor_meta"].shape) == 2
        ]
    for prev, node in pairs:
        fused = fuse(modules[prev.target], modules[node.target])
        set_module(gm, prev.target, fused)
        node.replace_all_uses_with(prev)
        gm.graph.erase_node(node)
    if pairs:
        gm.graph.lint()
        gm.delete_all_unused_submodules()
        gm.recompile()
    return len(pairs)


def _fold_sequentials(model: nn.Module) -> int:
    folded = 0
    for seq in [m for m in model.modules() if isinstance(m, nn.Sequential)]:
        names = list(seq._modules)
        for a, b in zip(names, names[1:]):
            layer, bn = seq._modules[a], seq._modules[b]
            if isinstance(layer, _CONV) and foldable(layer, bn):  # Linear+BN needs shapes: fx only
                seq._modules[a], seq._modules[b] = fuse(layer, bn), nn.Identity()
                folded += 1
    return folded


def set_module(root: nn.Module, target: str, module: nn.Module) -> None:
    parent, _, name = target.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, name, module)
