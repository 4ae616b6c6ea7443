"""Which tensors of a captured forward need a gradient, and which ops run a backward at all.

Autograd's own rule, on the OpGraph: a model input needs no gradient (unless the tensor given
requires one); a parameter needs one when `requires_grad` is set (a frozen parameter does not;
buffers never do); an op's output needs one when the op is differentiable and any of its
inputs or parameters does. Backward then runs only for the ops that need a gradient *and* lead
to the loss: an output the loss does not read sends no gradient back.

Sets on every op node:
    grad_out      the op's output needs a gradient (forward propagation)
    grad_inputs   per input position (edge `index`): that input needs a gradient
    grad_params   {name: needs a gradient} for the parameters the op reads
    backward      the op runs a backward in this step (grad_out and it reaches the loss)
    grad_fanout   how many of its consumers send a gradient back to it (summed when > 1)
"""

from __future__ import annotations

import networkx as nx
from torch import nn

from archlint.model.opgraph import topological_order

# Ops whose output carries no gradient whatever their inputs: integer/boolean results, value
# reads, and `detach`.
NOT_DIFFERENTIABLE_KEYS = frozenset(
    "detach data argmax argmin eq ne lt gt le ge isinf isnan isfinite sign floor ceil round trunc "
    "logical_and logical_or logical_not logical_xor bitwise_and bitwise_or bitwise_xor bitwise_not "
    "and or xor not invert nonzero argwhere argsort unique unique_consecutive unique_dim _unique "
    "_unique2 bincount histc count_nonzero one_hot nms".split()
)
NOT_DIFFERENTIABLE_KINDS = frozenset({"creation", "sync", "input", "output"})


def trainable(model: nn.Module) -> dict[str, bool]:
    """{parameter name: requires_grad} for every parameter of the model, under each of its names
    (a tied weight, GPT-2's lm_head.weight and transformer.wte.weight, is read under both)."""
    return {name: p.requires_grad for name, p in model.named_parameters(remove_duplicate=False)}


def _differentiable(op: dict) -> bool:
    if op["kind"] in NOT_DIFFERENTIABLE_KINDS or op.get("key") in NOT_DIFFERENTIABLE_KEYS:
        return False
    dtype = op.get("dtype") or ""
    return "float" in dtype or "complex" in dtype


def propagate(
    graph: nx.DiGraph,
    model: nn.Module,
    inputs_need_grad: frozenset[str] = frozenset(),
    params: dict[str, bool] | None = None,
) -> list[str]:
    """Set grad_out, grad_inputs, grad_params, backward and grad_fanout on every node (see above);
    return the ops whose outputs the loss reads. `inputs_need_grad`: input nodes given as tensors
    that require a gradient; `params`: trainable(model), where the caller has it."""
    params = trainable(model) if params is None else params
    order = topological_order(graph)  # nx.topological_sort's, sorted once per graph (the checks ask too)
    # each node's attributes, its producers and its consumers, read in one pass each through the
    # graph's own views (networkx's per-node views cost a few objects a lookup, each lookup a call)
    nodes = dict(graph.nodes(data=True))
    producers: dict[str, list[tuple[str, int]]] = {name: [] for name in nodes}
    consumers: dict[str, list[tuple[str, int]]] = {name: [] for name in nodes}
    for producer, consumer, i in graph.in_edges(data="index", default=0):  # each node's in pred's order
        producers[consumer].append((producer, i))
        consumers[producer].append((consumer, i))
    for name in order:
        op = nodes[name]
        kind = op["kind"]
        if kind == "input":
            op["grad_out"] = name in inputs_need_grad
            op["grad_inputs"], op["grad_params"] = [], {}
            continue
        # one flag per input position: as many as the op's inputs, or its edges' highest index
        grad_inputs = op["grad_inputs"] = [False] * len(op.get("in_shapes") or ())
        for producer, i in producers[name]:
            if i >= len(grad_inputs):
                grad_inputs += [False] * (i + 1 - len(grad_inputs))
            grad_inputs[i] = bool(nodes[producer].get("grad_out"))
        shapes = op.get("param_shapes")
        if shapes:
            module = op.get("module") or ""
            # a leaf module lists its parameters by their own names ("weight"), other ops by the model's
            # ("layer1.0.conv1.weight"); a buffer is in neither and needs no gradient
            grad_params = op["grad_params"] = {
                n: params[full] if (full := f"{module}.{n}" if module else n) in params else params.get(n, False)
                for n in shapes
            }
            needs = True in grad_inputs or any(grad_params.values())
        else:  # most ops: no parameter (a comprehension's frame less)
            op["grad_params"] = {}
            needs = True in grad_inputs
        op["grad_out"] = needs and _differentiable(op)
    sources = _loss_sources(graph, nodes, producers)
    # one pass against the order: an op reaches the loss when it is a source or one of its consumers
    # reaches it (the sources and their ancestors); its consumers' `backward` is set before its fanout
    # (one loop over its consumers for both: whether one reaches the loss, and how many send back)
    source_set = set(sources)
    reaches: set[str] = set()
    for name in reversed(order):
        op = nodes[name]
        source = reached = name in source_set
        senders = 0
        for consumer, i in consumers[name]:
            if consumer in reaches:
                reached = True
            c = nodes[consumer]
            if c.get("backward") and c["grad_inputs"][i]:
                senders += 1
        if reached:
            reaches.add(name)
        op["backward"] = reached and bool(op.get("grad_out")) and op["kind"] not in ("input", "output")
        op["grad_fanout"] = senders + (1 if source else 0)
    return sources


def loss_sources(graph: nx.DiGraph) -> list[str]:
    """The ops whose outputs the loss reads: every floating-point output of the model (a tensor, a
    tuple's items, a ModelOutput's fields), each reduced and the results added; or, where the model
    returns its own loss (a ModelOutput's `loss`: the output node's attrs["loss"], capture.common.own_loss),
    that one alone, as a loop backpropagates it (`out.loss.backward()`)."""
    nodes = dict(graph.nodes(data=True))
    producers: dict[str, list[tuple[str, int]]] = {name: [] for name in nodes}
    for producer, consumer, i in graph.in_edges(data="index", default=0):
        producers[consumer].append((producer, i))
    return _loss_sources(graph, nodes, producers)


def _loss_sources(graph: nx.DiGraph, nodes: dict[str, dict], producers: dict[str, list[tuple[str, int]]]) -> list[str]:
    """loss_sources, given each node's attributes and its (producer, edge index) in pred's order."""
    sources = []
    for name, op in nodes.items():
        if op["kind"] != "output":
            continue
        own = (op.get("attrs") or {}).get("loss")
        if own is not None and own in nodes and nodes[own].get("grad_out"):
            sources.append(own)
            continue
        ordered = sorted(producers[name], key=lambda pair: pair[1])  # by edge index, a stable sort as before
        sources += [p for p, _ in ordered if nodes[p].get("grad_out")]
    return sources
