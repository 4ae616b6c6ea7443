"""Strategy "export": `torch.export.export(strict=False)` (FakeTensor shapes; handles much Python
control flow fx cannot). Each leaf-module call's aten ops become one op."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
from collections.abc import Mapping
from typing import Any

import torch
import torch.fx as fx
import torch.utils._pytree as pytree
from torch import nn
from torch.overrides import TorchFunctionMode

from archlint.model.capture.common import CaptureFailed, Replay, ancestors, is_leaf, own_loss_index, tensors_in, to_meta
from archlint.model.capture.describe import (
    HOST_READS,
    SYNC_REASONS,
    call_attrs,
    function_label,
    host_sync,
    module_attrs,
)
from archlint.model.capture.fxnodes import alias_tuple_item, attribute_at, input_nodes, opgraph_node
from archlint.model.capture.graph import GraphBuilder, user_frame
from archlint.model.cost import normalize

_aot_utils: Any  # where this torch says which output types export knows (_unknown_output)
try:
    from torch._functorch._aot_autograd import utils as _aot_utils
except ImportError:  # another torch's layout: a refused output is caught after the trace
    _aot_utils = None


class _HostSyncs(TorchFunctionMode):
    """Notes the calls that read a tensor's value on the host or make a shape depend on values
    (describe.HOST_READS, describe.host_sync). Export runs the forward on fake tensors: it fails
    on most of them and silently drops a value read whose result reaches no tensor (a logged
    `.item()`), so a forward with any of them is left to the dispatch recording, which sees them."""

    def __init__(self):
        super().__init__()
        self.seen: dict[str, str] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        reason = SYNC_REASONS[0] if name in HOST_READS else host_sync(normalize(name), args, kwargs)
        if reason is not None:
            self.seen.setdefault(name, reason)
        return func(*args, **kwargs)

    def failure(self) -> CaptureFailed | None:
        if not self.seen:
            return None
        calls = ", ".join(f"{name} ({reason})" for name, reason in self.seen.items())
        return CaptureFailed(
            "export",
            RuntimeError(f"the forward makes the host wait for tensor values: {calls}; left to the dispatch recording"),
        )


def capture_export(model: nn.Module, inputs: tuple, builder: GraphBuilder, kwargs: dict | None = None) -> Replay | None:
    meta = any(t.device.type == "meta" for t in itertools.chain(model.parameters(), model.buffers()))
    args, kwargs = to_meta((inputs, kwargs or {})) if meta else (inputs, kwargs or {})
    syncs = _HostSyncs()
    try:
        with syncs:
            ep, loss = _exported(model, args, kwargs, builder)
    except Exception as exc:
        raise (syncs.failure() or CaptureFailed("export", exc)) from exc
    if (failure := syncs.failure()) is not None:
        raise failure
    return _record(model, ep, builder, loss)


def _exported(model: nn.Module, args: tuple, kwargs: dict, builder: GraphBuilder):
    """The exported program, and where the loss the model returns itself is among its outputs
    (common.own_loss; None: it returns none)."""
    # One trace: the forward's output is reduced to its tensors, while it is traced, only where export
    # would refuse it (_unknown_output); a refusal found only after the trace (a torch that does not
    # say which outputs it knows) costs a second trace, below. An 8B model's trace is seconds.
    refused: list[str] = []
    try:
        with _tensor_outputs(model, only_if_refused=refused) as loss:
            ep = _export(model, args, kwargs)
    except Exception as exc:
        if "not a known type" not in str(exc):
            raise
        # The output holds an object export cannot flatten (a Hugging Face KV cache in a
        # ModelOutput): export the forward with its output reduced to the tensors it holds.
        with _tensor_outputs(model) as loss:
            ep = _export(model, args, kwargs)
        refused[:] = [str(exc).split(" in output")[0].removeprefix("Found ")]
    if not refused:
        return ep, _loss_position(ep.call_spec.out_spec)
    builder.notes.append(f"exported with the output reduced to its tensors ({refused[0]})")
    return ep, loss[0] if loss else None


def _loss_position(spec) -> int | None:
    """The leaf position of a Mapping output's "loss" (a ModelOutput's or a dict's) in the flattened
    output: the leaves of the fields before it."""
    if spec is None or not isinstance(spec.type, type) or not issubclass(spec.type, Mapping):
        return None
    keys = list(spec.context) if isinstance(spec.context, (list, tuple)) else []
    if "loss" not in keys:
        return None
    at = keys.index("loss")
    return sum(spec.child(i).num_leaves for i in range(at))


def _record(model: nn.Module, ep, builder: GraphBuilder, loss: int | None = None) -> Replay | None:
    """The exported program's ops into the OpGraph; its replay (None when it cannot be built)."""
    b = builder
    wrapped = {str(n.target) for n in ep.graph.nodes if isinstance(n.target, torch._ops.HigherOrderOperator)}
    if wrapped:  # `with torch.no_grad():` / autocast in forward: their ops sit in a subgraph; inline them
        ep = ep.run_decompositions({})
        b.notes.append(f"export wrapped part of the forward in {', '.join(sorted(wrapped))}: inlined")
    sig = ep.graph_signature
    state_of = {**sig.inputs_to_parameters, **sig.inputs_to_buffers, **sig.inputs_to_lifted_tensor_constants}
    user_inputs, user_outputs = set(sig.user_inputs), set(sig.user_outputs)
    nodes = list(ep.graph.nodes)

    # Group the aten ops of each leaf-module call (one nn_module_stack key per call).
    group_of: dict[str, tuple[str, str]] = {}
    for n in nodes:
        for key, (path, _) in (n.meta.get("nn_module_stack") or {}).items():
            b.reached.update(ancestors(path))
            mod = b.modules.get(path)
            if mod is not None and is_leaf(mod):
                group_of[n.name] = (key, path)
                break
    members: dict[str, list[fx.Node]] = {}
    for n in nodes:
        if n.name in group_of:
            members.setdefault(group_of[n.name][0], []).append(n)

    alias: dict[str, str] = {}
    fused: list[tuple[str, list[str]]] = []  # (OpGraph name, export node names) per leaf-module call
    for n in nodes:
        value = n.meta.get("val")
        if n.op == "placeholder":
            if n.name in user_inputs and isinstance(value, torch.Tensor):
                b.input(b.reserve(n.name), value)
            continue
        if n.op == "output":
            outs = [a for a in input_nodes(n) if a.name in user_outputs]
            b.output(b.reserve("output"), [opgraph_node(a, alias, b) for a in outs], loss)
            continue
        if n.name in group_of:
            key, path = group_of[n.name]
            group = members[key]
            if group[0] is not n:
                continue
            names = {m.name for m in group}
            inputs_, seen = [], set()
            for m in group:
                for a in input_nodes(m):
                    if a.name in state_of:  # another module's parameter given as data is read here
                        _mark_read(model, state_of[a.name], b)
                    if a.name in names or a.name in state_of or a.name in seen:
                        continue
                    seen.add(a.name)
                    for t in tensors_in(a.meta.get("val")):
                        inputs_.append((opgraph_node(a, alias, b), t))
            outs = [m for m in group if any(u.name not in names for u in m.users)]
            outputs = [t for m in outs for t in tensors_in(m.meta.get("val"))]
            if not outputs:
                continue
            mod = b.modules[path]
            name = b.unique(path.replace(".", "_"))
            b.op(
                name,
                label=f"nn.{type(mod).__name__}",
                key=type(mod).__name__,
                module=path,
                inputs=inputs_,
                outputs=outputs,
                params=b.leaf_params(path),
                attrs=module_attrs(mod),
            )
            for m in outs:
                alias[m.name] = name
            fused.append((name, [m.name for m in group]))
            continue
        if n.op != "call_function":
            continue
        if alias_tuple_item(n, lambda m: m.meta.get("val"), value, alias, b):
            continue
        outputs = tensors_in(value)
        if not outputs:
            continue
        stack = n.meta.get("nn_module_stack") or {}
        module = list(stack.values())[-1][0] if stack else ""
        label, key = function_label(n.target)
        params, inputs_ = {}, []
        for a in input_nodes(n):
            if a.name in state_of:
                try:
                    state = attribute_at(model, state_of[a.name])
                except AttributeError:  # a constant export lifted out of the code (not an attribute)
                    state = a.meta.get("val")
                if isinstance(state, torch.Tensor):
                    params[b.canonical.get(id(state), state_of[a.name])] = state
                continue
            for t in tensors_in(a.meta.get("val")):
                inputs_.append((opgraph_node(a, alias, b), t))
        concrete = fx.node.map_arg((n.args, n.kwargs), lambda a: a.meta.get("val"))
        b.op(
            b.reserve(n.name) if n.name not in b.graph else b.unique(n.name),
            label=label,
            key=key,
            module=module,
            inputs=inputs_,
            outputs=outputs,
            params=params,
            attrs=call_attrs(key, concrete[0], concrete[1]),
            source=user_frame(n.meta.get("stack_trace")),
        )
    b.reached.add("")
    try:
        return _export_replay(ep, fused, b)
    except Exception as exc:
        b.notes.append(f"no per-op replay for the export capture ({type(exc).__name__}: {str(exc)[:120]})")
        return None


def _export(model: nn.Module, args: tuple, kwargs: dict):
    # Under no_grad a `torch.no_grad()` block in forward (rotary embeddings) changes nothing, so
    # export inlines its ops instead of hiding them in a wrap_with_set_grad_enabled submodule.
    with torch.no_grad():
        return torch.export.export(model, args, kwargs or None, strict=False)


def output_tensors(value: Any, depth: int = 0) -> list[torch.Tensor]:
    """The tensors a forward's output holds, in order, each once: inside tuples, lists, dicts
    (ModelOutput), dataclasses and plain objects (a KV cache's layers of keys and values)."""
    found: dict[int, torch.Tensor] = {}

    def walk(v: Any, depth: int) -> None:
        if isinstance(v, torch.Tensor):
            found.setdefault(id(v), v)
        elif depth > 6 or v is None or isinstance(v, (str, bytes, int, float, bool)):
            return
        elif isinstance(v, dict):
            for item in v.values():
                walk(item, depth + 1)
        elif isinstance(v, (list, tuple)):
            for item in v:
                walk(item, depth + 1)
        elif dataclasses.is_dataclass(v):
            for f in dataclasses.fields(v):
                walk(getattr(v, f.name, None), depth + 1)
        elif hasattr(v, "__dict__") and not isinstance(v, (nn.Module, type)):
            for item in vars(v).values():
                walk(item, depth + 1)

    walk(value, depth)
    return list(found.values())


def _unknown_output(value: Any) -> str | None:
    """The output's first leaf that export refuses, named as its error names it ("Found <class ...> in
    output, which is not a known type": the same pytree leaves, the same known types), or None; None
    too where this torch does not say which types it knows (the refusal is then caught after the trace)."""
    known, custom = getattr(_aot_utils, "KNOWN_TYPES", None), getattr(_aot_utils, "is_custom_class_obj", None)
    if known is None or custom is None:
        return None
    for leaf in pytree.tree_flatten(value)[0]:
        if not (isinstance(leaf, tuple(known)) or custom(leaf)):
            return str(type(leaf))
    return None


@contextlib.contextmanager
def _tensor_outputs(model: nn.Module, only_if_refused: list[str] | None = None):
    """The model's forward, for the time of one export, returns a tuple of its output's tensors;
    with `only_if_refused`, only where export would refuse the output as it is (the refused type is
    appended to the list). Set on the instance and removed after (the class and the caller's model
    stay as they were). Yields a list that gets the position of the output's own loss among the
    tensors (common.own_loss), where the output was reduced."""
    own = model.__dict__.get("forward")
    original = model.forward
    loss: list[int] = []

    @functools.wraps(original)
    def forward(*args, **kwargs):
        out = original(*args, **kwargs)
        if only_if_refused is not None:
            refused = _unknown_output(out)
            if refused is None:
                return out
            only_if_refused.append(refused)
        tensors = output_tensors(out)
        position = own_loss_index(out, tensors)
        loss[:] = [] if position is None else [position]
        return tuple(tensors)

    model.forward = forward
    try:
        yield loss
    finally:
        if own is None:
            del model.forward
        else:
            model.forward = own


def _mark_read(model, path: str, b) -> None:
    """A parameter or buffer an op reads as data counts as read (not an unused parameter)."""
    try:
        state = attribute_at(model, path)
    except AttributeError:  # a constant export lifted out of the code: no parameter
        return
    if isinstance(state, torch.Tensor):
        b.read.add(id(state))


def _export_replay(ep, fused: list[tuple[str, list[str]]], b: GraphBuilder) -> Replay:
    """The exported program as a GraphModule (on the model's own parameter tensors), each leaf-module
    call fused into one submodule call named like its OpGraph node."""
    from torch.fx.passes.utils.fuser_utils import fuse_by_partitions

    gm = ep.module()
    by_name = {n.name: n for n in gm.graph.nodes}
    partitions = [{by_name[m]: None for m in members if m in by_name} for _, members in fused]
    gm = fuse_by_partitions(gm, partitions)
    for n in gm.graph.nodes:
        if n.op == "call_module" and str(n.target).startswith("fused_"):
            n._rename(fused[int(str(n.target).rsplit("_", 1)[1])][0])
    gm.recompile()
    names = {n.name for n in gm.graph.nodes}
    missing = [op for op, d in b.graph.nodes(data=True) if d["kind"] not in ("input", "output") and op not in names]
    if missing:
        raise ValueError(f"{len(missing)} ops have no node of that name in the replay graph, e.g. {missing[0]}")
    return Replay(gm)
