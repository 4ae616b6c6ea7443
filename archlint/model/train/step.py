"""One training step (`--train`): zero_grad, the forward in train mode, the loss, backward and
optimizer.step(), costed from the captured forward graph.

The forward is the capture's (in train mode); the backward is costed op by op from each op's own
formula (archlint.model.train.backward) where autograd runs one (archlint.model.train.grad); the
optimizer from the trainable parameters the forward reads (archlint.model.train.optimizer). The
memory over the step is archlint.model.train.memory's; archlint.model.stepped runs the step's
analysis (costs, timing, estimate, memory, per rank, the ways to fit).

JSON (ModelResult): `phase: "train"`; `totals.train` = {loss, optimizer, forward_flops,
backward_flops, loss_flops, optimizer_flops, step_flops, and the same in *_mac_bytes,
trainable_params, frozen_params, backward_unknown_ops}; layers carry `flops_backward`,
`mac_bytes_backward` and `backward_terms`; with a device spec `estimate.train` = the step's time
split and its MFU; with --latency `totals.train.measured` = the real step timed.
"""

from __future__ import annotations

from collections import Counter

import networkx as nx
from torch import nn

from archlint.model.cost import numel
from archlint.model.train import backward, grad
from archlint.model.train.optimizer import Optimizer, step_cost
from archlint.train_result import OWN_LOSS, TrainStep, loss_phrase

DEFAULT_LOSS = "mean"


def loss_cost(graph: nx.DiGraph, sources: list[str], loss: str, own: bool = False) -> dict:
    """The loss over the model's outputs: each reduced (mean or sum) and the results added. mean:
    forward one add per element, backward one divide per element (the gradient 1/N written out);
    sum: backward a broadcast view of the gradient (no kernel). Its name is OWN_LOSS where the model
    returns its own loss (the one source, reduced as the modelled step takes it: one element)."""
    elements = sum(sum(numel(s) for s in graph.nodes[n]["out_shapes"][:1]) for n in sources)
    out_bytes = sum(numel(graph.nodes[n]["out_shapes"][0]) * int(graph.nodes[n].get("itemsize", 4)) for n in sources)
    return {
        "name": OWN_LOSS if own else loss,
        "outputs": len(sources),
        "forward_flops": elements + max(0, len(sources) - 1),
        "forward_mac_bytes": out_bytes,
        "backward_flops": elements if loss == "mean" else 0,
        "backward_mac_bytes": out_bytes if loss == "mean" else 0,
    }


def trainable_params(
    graph: nx.DiGraph, model: nn.Module, named: list[tuple[str, nn.Parameter]] | None = None
) -> tuple[int, int, int, int]:
    """(trainable elements, trainable tensors, frozen elements, bytes per element) of the
    parameters the forward reads: an unread parameter gets no gradient and the optimizer skips it.
    `named`: model.named_parameters(), where the caller has it (unique_parameters)."""
    unused = set(graph.graph.get("unused_params") or ())
    train = tensors = frozen = 0
    itemsize = 4
    for name, p in model.named_parameters() if named is None else named:
        if name in unused:
            continue
        if p.requires_grad:
            train, tensors, itemsize = train + p.numel(), tensors + 1, p.element_size()
        else:
            frozen += p.numel()
    return train, tensors, frozen, itemsize


def param_split(model: nn.Module, params: list[nn.Parameter] | None = None) -> tuple[int, int]:
    """(trainable, frozen) elements as torch counts them: every parameter of model.parameters(), a
    shared one once, by requires_grad, whether the forward reads it or not. `params`:
    model.parameters(), where the caller has them."""
    trainable = frozen = 0
    for p in model.parameters() if params is None else params:
        if p.requires_grad:
            trainable += p.numel()
        else:
            frozen += p.numel()
    return trainable, frozen


def cost_step(
    graph: nx.DiGraph, model: nn.Module, optimizer: Optimizer, loss: str, notes: list[str], cuda: bool = False
) -> TrainStep:
    """Backward on every op node (flops_backward, ...) and the step's totals (`totals.train`)."""
    # the parameters walked once, under every name (grad.trainable) and each once (torch's own count)
    every = list(model.named_parameters(remove_duplicate=False))
    named = unique_parameters(every)
    sources = grad.propagate(graph, model, params={name: p.requires_grad for name, p in every})
    if not sources:
        notes.append(
            "--train: no output of the model carries a gradient (no trainable parameter reaches it): "
            "backward and optimizer cost nothing"
        )
    own = any(  # the model returns its own loss (a Hugging Face model given labels): said in step_notes
        (d.get("attrs") or {}).get("loss") in sources for _, d in graph.nodes(data=True) if d["kind"] == "output"
    )
    # the backward's terms on each op, and the forward's and backward's totals, in one pass over the ops
    summed = backward.cost_backward_totals(graph)
    unknown = summed.unknown
    if unknown:
        ops = Counter(graph.nodes[n]["op"] for n in unknown)
        listed = ", ".join(f"{op} ×{c}" if c > 1 else op for op, c in ops.most_common(8))
        notes.append(f"{len(unknown)} ops have no backward formula and are left out of the backward totals: {listed}")
    fwd_flops, fwd_mac = summed.forward_flops, summed.forward_mac_bytes
    bwd_flops, bwd_mac = summed.backward_flops, summed.backward_mac_bytes
    lc = loss_cost(graph, sources, loss, own)
    elements, tensors, _, itemsize = trainable_params(graph, model, named)
    opt = step_cost(optimizer, elements, tensors, itemsize, cuda)
    trainable, frozen = param_split(model, [p for _, p in named])
    return TrainStep(
        loss=lc,
        optimizer=opt,
        forward_flops=fwd_flops,
        backward_flops=bwd_flops,
        loss_flops=lc["forward_flops"] + lc["backward_flops"],
        optimizer_flops=opt["flops"],
        step_flops=fwd_flops + bwd_flops + lc["forward_flops"] + lc["backward_flops"] + opt["flops"],
        forward_mac_bytes=fwd_mac,
        backward_mac_bytes=bwd_mac,
        loss_mac_bytes=lc["forward_mac_bytes"] + lc["backward_mac_bytes"],
        optimizer_mac_bytes=opt["mac_bytes"],
        step_mac_bytes=fwd_mac + bwd_mac + lc["forward_mac_bytes"] + lc["backward_mac_bytes"] + opt["mac_bytes"],
        trainable_params=trainable,  # torch's count, as totals.params
        frozen_params=frozen,
        # of the trainable, those the forward reads: they get a gradient and the optimizer updates them
        updated_params=elements,
        backward_unknown_ops=len(unknown),
    )


def unique_parameters(every: list[tuple[str, nn.Parameter]]) -> list[tuple[str, nn.Parameter]]:
    """model.named_parameters() from model.named_parameters(remove_duplicate=False) (`every`): each
    parameter once, under the first name it has, in the same order (a module reached again adds
    only parameters already seen; a parameter shared by two modules keeps its first name)."""
    seen: set[int] = set()
    named = []
    for name, p in every:
        if id(p) not in seen:
            seen.add(id(p))
            named.append((name, p))
    return named


def step_notes(optimizer: Optimizer, loss: str, defaults: set[str], own: bool = False) -> list[str]:
    """What the step runs, in words; `own`: the model returns its own loss (cost_step's loss name
    is OWN_LOSS), which the step takes as it is, whatever --loss says."""
    default = " (the default; --{} to change)"
    optimizer_said = f"optimizer {optimizer.label}" + (default.format("optimizer") if "optimizer" in defaults else "")
    if own:
        loss_said = f"loss {loss_phrase(OWN_LOSS)}" + ("" if "loss" in defaults else f" (--loss {loss} does not apply)")
    else:
        loss_said = f"loss {loss}" + (default.format("loss") if "loss" in defaults else "") + " of the outputs"
    return [
        "training step (--train): zero_grad (set_to_none: no kernel), forward in train mode, "
        f"{optimizer_said}, {loss_said}, backward, optimizer.step(); backward costed per op from its own formula"
    ]
