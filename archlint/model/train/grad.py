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
    # the graph read once, in bulk: a view's lookup made a view or two a node (AtlasView, ItemsView), 4 us
    # a node, a millisecond on a mid-sized model. Each op's producers with the input position each feeds,
    # in the graph's order (nx's in-edges: each node's predecessors as graph.pred gives them), and each
    # op's consumers with the position each reads it at.
    nodes = dict(graph.nodes(data=True))
    fed: dict[str, list[tuple[str, int]]] = {}
    feeds: dict[str, list[tuple[str, int]]] = {}
    for producer, consumer, index in graph.in_edges(data="index", default=0):
        fed.setdefault(consumer, []).append((producer, index))
        feeds.setdefault(producer, []).append((consumer, index))
    for name in order:
        op = nodes[name]
        if op["kind"] == "input":
            op["grad_out"] = name in inputs_need_grad
            op["grad_inputs"], op["grad_params"] = [], {}
            continue
        # one flag per input position: as many as the op's inputs, or its edges' highest index
        grad_inputs = op["grad_inputs"] = [False] * len(op.get("in_shapes") or ())
        for producer, i in fed.get(name, ()):
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
        op["grad_out"] = _differentiable(op) and needs
    sources = loss_sources(graph)
    # one pass against the order: an op reaches the loss when it is a source or one of its consumers
    # reaches it (the sources and their ancestors); its consumers' `backward` is set before its fanout
    source_set = set(sources)
    reaches: set[str] = set()
    for name in reversed(order):
        op, consumers = nodes[name], feeds.get(name, ())
        source = name in source_set
        reached = source
        for consumer, _ in consumers if not reached else ():
            if consumer in reaches:
                reached = True
                break
        if reached:
            reaches.add(name)
        op["backward"] = bool(op.get("grad_out")) and reached and op["kind"] not in ("input", "output")
        senders = 0
        for consumer, i in consumers:
            c = nodes[consumer]
            if c.get("backward") and c["grad_inputs"][i]:
                senders += 1
        op["grad_fanout"] = senders + (1 if source else 0)
    return sources


def loss_sources(graph: nx.DiGraph) -> list[str]:
    """The ops whose outputs the loss reads: every floating-point output of the model (a tensor, a
    tuple's items, a ModelOutput's fields), each reduced and the results added; or, where the model
    returns its own loss (a ModelOutput's `loss`: the output node's attrs["loss"], capture.common.own_loss),
    that one alone, as a loop backpropagates it (`out.loss.backward()`)."""
    sources = []
    for name, op in graph.nodes(data=True):  # (one view for the walk, not one a node)
        if op["kind"] != "output":
            continue
        own = (op.get("attrs") or {}).get("loss")
        if own is not None and own in graph and graph.nodes[own].get("grad_out"):
            sources.append(own)
            continue
        producers = sorted(graph.predecessors(name), key=lambda p: graph.edges[p, name].get("index", 0))
        sources += [p for p in producers if graph.nodes[p].get("grad_out")]
    return sources
