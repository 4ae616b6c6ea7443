"""Capture a model into an OpGraph, by the first strategy that works:

1. "fx": `torch.fx` symbolic trace, then shape propagation on meta tensors. The user's model is
   never run and never changed: its parameters are swapped for meta copies by
   `torch.func.functional_call` for the one propagation pass (no real arithmetic).
2. "export": `torch.export.export(strict=False)` (FakeTensor shapes; handles much Python control
   flow fx cannot).
3. "dispatch": one real forward pass under a TorchFunctionMode, with module hooks tracking the
   current module (handles data-dependent models such as detection).

All three record at the same granularity (the one fx uses): a torch.nn "leaf" module
(cost.LEAF_MODULES: Conv2d, Linear, MultiheadAttention, ...) is one op; everything else is traced
through down to torch functions, Tensor methods and operators. So the same model gives the same
kinds, module paths and totals whatever the strategy.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import inspect
import itertools
import operator
from dataclasses import dataclass
from typing import Any

import networkx as nx
import torch
import torch.fx as fx
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

from archlint.model.cost import KIND_OF, LEAF_MODULES, kind_of, normalize

STRATEGIES = ("fx", "export", "dispatch")


class CaptureFailed(Exception):
    """A strategy could not capture the model. `where` names the op/module and shapes, if known."""

    def __init__(self, strategy: str, error: BaseException, where: str | None = None):
        self.strategy, self.error, self.where = strategy, error, where
        text = " ".join(str(error).split())[:300]
        super().__init__(f"{type(error).__name__}: {text}" + (f" (at {where})" if where else ""))


@dataclass
class Replay:
    """Runs the captured graph op by op on the real model: fx node names = OpGraph node names."""

    graph_module: fx.GraphModule


def is_leaf(module: nn.Module) -> bool:
    cls = type(module)
    return cls.__name__ in LEAF_MODULES and cls.__module__.startswith(("torch.nn", "torch.ao.nn"))


# ---------------------------------------------------------------- describing a call


_MODULE_ATTRS = (
    "in_channels out_channels kernel_size stride padding dilation groups output_padding "
    "in_features out_features num_heads embed_dim kdim vdim batch_first num_features "
    "normalized_shape num_groups affine elementwise_affine output_size inplace p mode "
    "scale_factor upscale_factor num_embeddings embedding_dim dim"
).split()

# Positional names of the non-tensor arguments of functional calls whose attributes checks read.
_POSITIONAL = {
    "conv1d": ("input", "weight", "bias", "stride", "padding", "dilation", "groups"),
    "conv2d": ("input", "weight", "bias", "stride", "padding", "dilation", "groups"),
    "conv3d": ("input", "weight", "bias", "stride", "padding", "dilation", "groups"),
    "conv_transpose1d": ("input", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"),
    "conv_transpose2d": ("input", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"),
    "conv_transpose3d": ("input", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"),
    "convolution": ("input", "weight", "bias", "stride", "padding", "dilation", "transposed", "output_padding", "groups"),
    "_convolution": ("input", "weight", "bias", "stride", "padding", "dilation", "transposed", "output_padding", "groups"),
    "einsum": ("equation",),
    "max_pool1d": ("input", "kernel_size", "stride", "padding", "dilation"),
    "max_pool2d": ("input", "kernel_size", "stride", "padding", "dilation"),
    "max_pool3d": ("input", "kernel_size", "stride", "padding", "dilation"),
    "max_pool2d_with_indices": ("input", "kernel_size", "stride", "padding", "dilation"),
    "avg_pool1d": ("input", "kernel_size", "stride", "padding"),
    "avg_pool2d": ("input", "kernel_size", "stride", "padding"),
    "avg_pool3d": ("input", "kernel_size", "stride", "padding"),
    "interpolate": ("input", "size", "scale_factor", "mode"),
    "batch_norm": ("input", "running_mean", "running_var", "weight", "bias"),
    "layer_norm": ("input", "normalized_shape", "weight", "bias"),
    "group_norm": ("input", "num_groups", "weight", "bias"),
}
_SIMPLE = (int, float, bool, str, type(None))


def _simple(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return all(isinstance(v, _SIMPLE) for v in value)
    return isinstance(value, _SIMPLE) or isinstance(value, (torch.dtype, torch.memory_format))


def module_attrs(module: nn.Module) -> dict[str, Any]:
    attrs = {a: getattr(module, a) for a in _MODULE_ATTRS if hasattr(module, a)}
    attrs = {k: (list(v) if isinstance(v, tuple) else v) for k, v in attrs.items() if _simple(v)}
    if isinstance(module, nn.modules.conv._ConvNd):
        attrs["transposed"] = module.transposed
    if hasattr(module, "bias") and not isinstance(module, nn.MultiheadAttention):
        attrs["bias"] = isinstance(getattr(module, "bias"), torch.Tensor)
    if "elementwise_affine" in attrs:
        attrs["affine"] = attrs.pop("elementwise_affine")
    return attrs


def call_attrs(key: str, args: tuple, kwargs: dict) -> dict[str, Any]:
    """Attributes of a functional call: its non-tensor arguments, named where the signature is known."""
    names = _POSITIONAL.get(key, ())
    attrs: dict[str, Any] = {}
    for i, value in enumerate(args):
        if i < len(names):
            name = names[i]
            if name in ("weight",) and key in ("batch_norm", "layer_norm", "group_norm"):
                attrs["affine"] = value is not None
            elif name == "bias" and key.startswith(("conv", "_conv")):
                attrs["bias"] = value is not None
            elif _simple(value):
                attrs[name] = list(value) if isinstance(value, tuple) else value
    for name, value in kwargs.items():
        if _simple(value):
            attrs[name] = list(value) if isinstance(value, tuple) else value
    if key.startswith("conv_transpose"):
        attrs["transposed"] = True
    attrs.pop("input", None)
    return {k: (str(v) if isinstance(v, (torch.dtype, torch.memory_format)) else v) for k, v in attrs.items()}


def function_label(fn: Any) -> tuple[str, str]:
    """(readable label, normalized key) of a called function, method or aten op."""
    if isinstance(fn, str):  # fx call_method
        return f"Tensor.{fn}", normalize(fn)
    if isinstance(fn, torch._ops.OpOverload):
        return str(fn), normalize(fn._opname)
    name = getattr(fn, "__name__", None) or str(fn)
    if name == "__get__":  # a Tensor property (x.T, x.shape) seen by the torch-function mode
        name = getattr(getattr(fn, "__self__", None), "__name__", name)
    owner = getattr(fn, "__objclass__", None)
    module = getattr(fn, "__module__", None) or ""
    if owner is torch.Tensor or (owner is None and module == "" and hasattr(torch.Tensor, name)):
        label = f"Tensor.{name}"
    elif module in ("torch.nn.functional", "torch._C._nn"):
        label = f"F.{name}"
    elif module == "torch" or module.startswith("torch."):
        label = f"torch.{name}"
    elif module in ("_operator", "operator"):
        label = f"operator.{name}"
    else:
        label = f"{module}.{name}" if module else name
    return label, normalize(name)


def _tensors(value: Any) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def _shape(t: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(s) for s in t.shape)


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


@functools.cache
def class_source(cls: type) -> tuple[str | None, int | None]:
    """File and line of a class definition (once per class: inspect is slow)."""
    try:
        return inspect.getsourcefile(cls), inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):
        return None, None


# ---------------------------------------------------------------- building the OpGraph


class _Builder:
    """Adds input/op/output nodes with shapes, params and edges; shared by the three strategies."""

    def __init__(self, model: nn.Module):
        self.graph = nx.DiGraph()
        self.model = model
        self.modules = dict(model.named_modules())
        self.canonical = {id(t): n for n, t in model.named_parameters()}
        self.param_ids = set(self.canonical)
        self.canonical.update({id(t): n for n, t in model.named_buffers()})
        self.counted: set[int] = set()
        self.read: set[int] = set()
        self.reached: set[str] = set()
        self._used_names: dict[str, int] = {}
        self.notes: list[str] = []

    def unique(self, base: str) -> str:
        """fx-style names: 'add', 'add_1', ... (dots and odd characters become '_')."""
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base).strip("_") or "op"
        if base[0].isdigit():
            base = "_" + base
        n = self._used_names.get(base)
        self._used_names[base] = 0 if n is None else n + 1
        name = base if n is None else f"{base}_{n + 1}"
        if name in self.graph:  # a clash with a name that already had a suffix
            return self.unique(name)
        return name

    def reserve(self, name: str) -> str:
        self._used_names.setdefault(name, 0)
        return name

    def input(self, name: str, value: torch.Tensor) -> None:
        self.graph.add_node(
            name, kind="input", op="input", key="input", module="", module_type=None,
            in_shapes=[], out_shapes=[_shape(value)], dtype=_dtype(value),
            itemsize=value.element_size(), in_bytes=0, param_shapes={}, params=0, attrs={},
        )

    def op(
        self,
        name: str,
        *,
        label: str,
        key: str,
        module: str,
        inputs: list[tuple[str | None, torch.Tensor]],
        outputs: list[torch.Tensor],
        params: dict[str, torch.Tensor],
        attrs: dict[str, Any],
        kind: str | None = None,
    ) -> None:
        owner = self.modules.get(module)
        count = 0
        param_bytes = 0
        for t in params.values():
            param_bytes += t.numel() * t.element_size()
            self.read.add(id(t))
            if id(t) in self.param_ids and id(t) not in self.counted:
                self.counted.add(id(t))
                count += t.numel()
        first = outputs[0]
        self.graph.add_node(
            name,
            kind=kind or kind_of(key),
            op=label,
            key=key,
            module=module,
            module_type=type(owner).__name__ if module and owner is not None else None,
            in_shapes=[_shape(t) for _, t in inputs],
            in_bytes=sum(t.numel() * t.element_size() for t in {id(t): t for _, t in inputs}.values()),
            out_shapes=[_shape(t) for t in outputs],
            dtype=_dtype(first),
            itemsize=first.element_size(),
            param_shapes={n: _shape(t) for n, t in params.items()},
            param_bytes=param_bytes,
            params=count,
            attrs=attrs,
        )
        for index, (producer, _) in enumerate(inputs):
            if producer is not None and not self.graph.has_edge(producer, name):
                self.graph.add_edge(producer, name, index=index)

    def output(self, name: str, producers: list[str | None]) -> None:
        self.graph.add_node(
            name, kind="output", op="output", key="output", module="", module_type=None,
            in_shapes=[], out_shapes=[], dtype=None, itemsize=0, in_bytes=0, param_shapes={},
            params=0, attrs={},
        )
        for index, producer in enumerate(producers):
            if producer is not None and not self.graph.has_edge(producer, name):
                self.graph.add_edge(producer, name, index=index)

    def leaf_params(self, path: str) -> dict[str, torch.Tensor]:
        """A leaf module's parameters and buffers; its submodules count as reached (it uses them
        internally, as MultiheadAttention does its out_proj, without calling their forward)."""
        module = self.modules[path]
        self.reached.update(f"{path}.{sub}" for sub, _ in module.named_modules() if sub)
        return dict(itertools.chain(module.named_parameters(), module.named_buffers()))

    def finish(self, strategy: str) -> nx.DiGraph:
        g = self.graph
        g.graph["strategy"] = strategy
        g.graph["notes"] = list(self.notes)
        g.graph["reached_modules"] = self.reached
        g.graph["unused_params"] = [n for n, t in self.model.named_parameters() if id(t) not in self.read]
        g.graph["modules"] = modules_table(self.model)
        return g


def modules_table(model: nn.Module) -> dict[str, dict[str, Any]]:
    table = {}
    for path, m in model.named_modules():
        file, line = class_source(type(m))
        table[path] = {
            "type": type(m).__name__,
            "params": sum(p.numel() for p in m.parameters(recurse=False)),
            "file": file,
            "line": line,
        }
    return table


def _ancestors(path: str) -> list[str]:
    parts = path.split(".") if path else []
    return [""] + [".".join(parts[: i + 1]) for i in range(len(parts))]


# ---------------------------------------------------------------- strategy 1: fx


class _Tracer(fx.Tracer):
    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return is_leaf(m)


class _Propagate(nn.Module):
    """Wraps the traced GraphModule so functional_call can swap in meta parameters for one run."""

    def __init__(self, gm: fx.GraphModule):
        super().__init__()
        self.gm = gm

    def forward(self, *args):
        interp = _Interpreter(self.gm)
        interp.run(*args)
        return interp.env


# Shape rules for the commonest ops: many meta kernels are Python decompositions costing ms per
# call (batch_norm, layer_norm, relu, linear); these ops' output shapes need no kernel at all.
_SAME_SHAPE = frozenset(k for k, kind in KIND_OF.items() if kind in ("activation", "dropout")) - {"GLU", "glu"}
_BINARY = frozenset({"add", "sub", "mul", "div", "rsub"})
_KEYS: dict[Any, tuple[str, bool]] = {}


def _call_key(target: Any) -> tuple[str, bool]:
    """(normalized key, in-place) of an fx call target, cached."""
    try:
        return _KEYS[target]
    except (KeyError, TypeError):
        pass
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    inplace = name.startswith("__i") or (name.endswith("_") and not name.endswith("__"))
    found = (function_label(target)[1], inplace)
    try:
        _KEYS[target] = found
    except TypeError:
        pass
    return found


def _fast_output(key: str, inplace: bool, args: tuple, kwargs: dict) -> torch.Tensor | None:
    x = args[0] if args else None
    if not isinstance(x, torch.Tensor) or x.device.type != "meta":
        return None
    if key in _SAME_SHAPE and "dtype" not in kwargs:
        if inplace or kwargs.get("inplace") is True:
            return x
        return torch.empty_like(x)
    if key in _BINARY and len(args) == 2 and not kwargs:
        y = args[1]
        if isinstance(y, torch.Tensor):
            if y.device.type != "meta":
                return None
            shape = torch.broadcast_shapes(x.shape, y.shape)
        elif isinstance(y, (int, float)) and not isinstance(y, bool):
            shape = x.shape
        else:
            return None
        dtype = torch.result_type(x, y)
        if inplace:
            return x if shape == x.shape and dtype == x.dtype else None
        return torch.empty(shape, dtype=dtype, device="meta")
    return None


def _fast_module(module: nn.Module, args: tuple, kwargs: dict) -> torch.Tensor | None:
    if not is_leaf(module) or kwargs:
        return None
    name = type(module).__name__
    if name == "Identity" and len(args) == 1 and isinstance(args[0], torch.Tensor):
        return args[0]
    if name in ("Linear", "LazyLinear") and len(args) == 1 and isinstance(args[0], torch.Tensor):
        x = args[0]
        if x.device.type != "meta" or x.dim() == 0 or x.shape[-1] != module.in_features:
            return None  # let the kernel raise its own error
        return x.new_empty((*x.shape[:-1], module.out_features))
    if name in _SAME_SHAPE and len(args) == 1:
        return _fast_output(name, getattr(module, "inplace", False) is True, args, {})
    if len(args) == 1 and isinstance(args[0], torch.Tensor) and args[0].device.type == "meta" and _norm_fits(module, args[0]):
        return torch.empty_like(args[0])
    return None


def _norm_fits(module: nn.Module, x: torch.Tensor) -> bool:
    """A norm module whose input has the shape it expects (else the kernel raises its own error)."""
    if isinstance(module, nn.modules.batchnorm._BatchNorm):
        return x.dim() >= 2 and x.shape[1] == module.num_features
    if isinstance(module, nn.LayerNorm):
        n = len(module.normalized_shape)
        return tuple(x.shape[-n:]) == tuple(module.normalized_shape)
    if isinstance(module, nn.GroupNorm):
        return x.dim() >= 2 and x.shape[1] == module.num_channels
    return False


class _Interpreter(fx.Interpreter):
    def __init__(self, gm):
        super().__init__(gm, garbage_collect_values=False)

    def call_module(self, target, args, kwargs):
        out = _fast_module(self.module.get_submodule(target), args, kwargs)
        return super().call_module(target, args, kwargs) if out is None else out

    def call_function(self, target, args, kwargs):
        out = _fast_output(*_call_key(target), args, kwargs)
        return super().call_function(target, args, kwargs) if out is None else out

    def call_method(self, target, args, kwargs):
        out = _fast_output(*_call_key(target), args, kwargs)
        return super().call_method(target, args, kwargs) if out is None else out

    def fetch_attr(self, target: str):
        value = super().fetch_attr(target)  # plain tensor attributes are not swapped: move them
        if isinstance(value, torch.Tensor) and value.device.type != "meta":
            value = value.to("meta")
        return value

    def run_node(self, n: fx.Node):
        try:
            return super().run_node(n)
        except Exception as exc:
            values = fx.node.map_arg((n.args, n.kwargs), lambda a: self.env.get(a))
            shapes = [list(_shape(t)) for t in _tensors(values)]
            stack = n.meta.get("nn_module_stack") or {}
            module = f" in module {list(stack.values())[-1][0]!r}" if stack else ""
            raise CaptureFailed("fx", exc, f"op {n.name}{module} given input shapes {shapes}") from exc


def _to_meta(value: Any) -> Any:
    return pytree.tree_map(lambda t: t.to("meta") if isinstance(t, torch.Tensor) else t, value)


@contextlib.contextmanager
def _trace_through_wrapped():
    """Libraries hide functions from fx with `torch.fx.wrap` (torchvision's
    shifted_window_attention): trace through the ones without a cost formula, so their matmuls
    are counted; keep the ones the cost table knows (stochastic_depth)."""
    wrapped = fx._symbolic_trace._wrapped_fns_to_patch
    removed = {k: v for k, v in wrapped.items() if k[1] not in KIND_OF}
    for key in removed:
        del wrapped[key]
    try:
        yield
    finally:
        wrapped.update(removed)  # imports during the trace may have added entries: keep them


def _trace(model: nn.Module) -> fx.GraphModule:
    # No second try with the wrapped functions left opaque: they would be ops without a formula.
    # When fx cannot trace through them, export (or dispatch) can.
    with _trace_through_wrapped():
        tracer = _Tracer()
        graph = tracer.trace(model)
    return fx.GraphModule(tracer.root, graph, type(model).__name__)


def capture_fx(model: nn.Module, inputs: tuple, builder: _Builder) -> Replay:
    try:
        gm = _trace(model)
    except Exception as exc:
        raise CaptureFailed("fx", exc) from exc
    state = {
        f"gm.{n}": t.to("meta")
        for n, t in itertools.chain(gm.named_parameters(remove_duplicate=False), gm.named_buffers(remove_duplicate=False))
        if t.device.type != "meta"
    }
    wrapper = _Propagate(gm)
    with torch.no_grad():
        env = torch.func.functional_call(wrapper, state, _to_meta(inputs), strict=False, tie_weights=True)

    b = builder
    alias: dict[str, str] = {}  # getitem of a tuple → the op that made the tuple
    attr_of: dict[str, str] = {}  # get_attr node → attribute path
    for n in gm.graph.nodes:
        value = env.get(n)
        stack = n.meta.get("nn_module_stack") or {}
        for path, _ in stack.values():
            b.reached.update(_ancestors(path))
        if n.op == "placeholder":
            if isinstance(value, torch.Tensor):
                b.input(b.reserve(n.name), value)
            continue
        if n.op == "get_attr":
            attr_of[n.name] = n.target
            continue
        if n.op == "output":
            b.output(b.reserve(n.name), [_resolve(a, alias, b) for a in _node_args(n)])
            continue
        if n.op == "call_function" and n.target is operator.getitem and not isinstance(env.get(n.args[0]), torch.Tensor):
            source = _resolve(n.args[0], alias, b)
            if source is not None and _tensors(value):
                alias[n.name] = source
            continue
        outputs = _tensors(value)
        if not outputs:
            continue
        params: dict[str, torch.Tensor] = {}
        inputs_: list[tuple[str | None, torch.Tensor]] = []
        if n.op == "call_module":
            module = n.target
            mod = b.modules[module]
            label, key, attrs = f"nn.{type(mod).__name__}", type(mod).__name__, module_attrs(mod)
            params = b.leaf_params(module)
            b.reached.update(_ancestors(module))
        else:
            module = list(stack.values())[-1][0] if stack else ""
            target = n.target
            if target is builtins.getattr:
                label, key = f"Tensor.{n.args[1]}", normalize(str(n.args[1]))
            else:
                label, key = function_label(target)
            concrete = fx.node.map_arg((n.args, n.kwargs), lambda a: env.get(a))
            attrs = call_attrs(key, concrete[0], concrete[1])
        for a in _node_args(n):
            if a.name in attr_of:
                real = _fetch(model, attr_of[a.name])
                if isinstance(real, torch.Tensor):
                    params[b.canonical.get(id(real), attr_of[a.name])] = real
                continue
            for t in _tensors(env.get(a)):
                inputs_.append((_resolve(a, alias, b), t))
        b.op(b.reserve(n.name), label=label, key=key, module=module, inputs=inputs_, outputs=outputs, params=params, attrs=attrs)
    b.reached.add("")
    return Replay(gm)


def _node_args(n: fx.Node) -> list[fx.Node]:
    found: list[fx.Node] = []
    fx.node.map_arg((n.args, n.kwargs), found.append)
    return found


def _resolve(a: Any, alias: dict[str, str], b: _Builder) -> str | None:
    if not isinstance(a, fx.Node):
        return None
    if a.name in alias:
        return alias[a.name]
    return a.name if a.name in b.graph else None


def _fetch(model: nn.Module, path: str) -> Any:
    obj = model
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


# ---------------------------------------------------------------- strategy 2: torch.export


def capture_export(model: nn.Module, inputs: tuple, builder: _Builder) -> Replay | None:
    meta = any(t.device.type == "meta" for t in itertools.chain(model.parameters(), model.buffers()))
    args = _to_meta(inputs) if meta else inputs
    try:
        ep = torch.export.export(model, args, strict=False)
    except Exception as exc:
        raise CaptureFailed("export", exc) from exc
    b = builder
    sig = ep.graph_signature
    state_of = {**sig.inputs_to_parameters, **sig.inputs_to_buffers, **sig.inputs_to_lifted_tensor_constants}
    user_inputs, user_outputs = set(sig.user_inputs), set(sig.user_outputs)
    nodes = list(ep.graph.nodes)

    # Group the aten ops of each leaf-module call (one nn_module_stack key per call).
    group_of: dict[str, tuple[str, str]] = {}
    for n in nodes:
        for key, (path, _) in (n.meta.get("nn_module_stack") or {}).items():
            b.reached.update(_ancestors(path))
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
            outs = [a for a in _node_args(n) if a.name in user_outputs]
            b.output(b.reserve("output"), [_resolve(a, alias, b) for a in outs])
            continue
        if n.name in group_of:
            key, path = group_of[n.name]
            group = members[key]
            if group[0] is not n:
                continue
            names = {m.name for m in group}
            inputs_, seen = [], set()
            for m in group:
                for a in _node_args(m):
                    if a.name in names or a.name in state_of or a.name in seen:
                        continue
                    seen.add(a.name)
                    for t in _tensors(a.meta.get("val")):
                        inputs_.append((_resolve(a, alias, b), t))
            outs = [m for m in group if any(u.name not in names for u in m.users)]
            outputs = [t for m in outs for t in _tensors(m.meta.get("val"))]
            if not outputs:
                continue
            mod = b.modules[path]
            name = b.unique(path.replace(".", "_"))
            b.op(
                name, label=f"nn.{type(mod).__name__}", key=type(mod).__name__, module=path,
                inputs=inputs_, outputs=outputs, params=b.leaf_params(path), attrs=module_attrs(mod),
            )
            for m in outs:
                alias[m.name] = name
            fused.append((name, [m.name for m in group]))
            continue
        if n.op != "call_function":
            continue
        if n.target is operator.getitem and not isinstance(n.args[0].meta.get("val"), torch.Tensor):
            source = _resolve(n.args[0], alias, b)
            if source is not None and _tensors(value):
                alias[n.name] = source
            continue
        outputs = _tensors(value)
        if not outputs:
            continue
        stack = n.meta.get("nn_module_stack") or {}
        module = list(stack.values())[-1][0] if stack else ""
        label, key = function_label(n.target)
        params, inputs_ = {}, []
        for a in _node_args(n):
            if a.name in state_of:
                try:
                    state = _fetch(model, state_of[a.name])
                except AttributeError:  # a constant export lifted out of the code (not an attribute)
                    state = a.meta.get("val")
                if isinstance(state, torch.Tensor):
                    params[b.canonical.get(id(state), state_of[a.name])] = state
                continue
            for t in _tensors(a.meta.get("val")):
                inputs_.append((_resolve(a, alias, b), t))
        concrete = fx.node.map_arg((n.args, n.kwargs), lambda a: a.meta.get("val"))
        b.op(
            b.reserve(n.name) if n.name not in b.graph else b.unique(n.name), label=label, key=key,
            module=module, inputs=inputs_, outputs=outputs, params=params,
            attrs=call_attrs(key, concrete[0], concrete[1]),
        )
    b.reached.add("")
    try:
        return _export_replay(ep, fused, b)
    except Exception as exc:
        b.notes.append(f"no per-op replay for the export capture ({type(exc).__name__}: {str(exc)[:120]})")
        return None


def _export_replay(ep, fused: list[tuple[str, list[str]]], b: _Builder) -> Replay:
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


# ---------------------------------------------------------------- strategy 3: dispatch recording


class _Recorder(TorchFunctionMode):
    """Records every torch function / Tensor method called outside leaf modules; hooks add the
    leaf-module calls and track which module is running."""

    def __init__(self, builder: _Builder):
        super().__init__()
        self.b = builder
        self.producer: dict[int, tuple[str, torch.Tensor]] = {}
        self.stack: list[str] = [""]  # the module running now, and the shapes it was given
        self.shapes: list[list[list[int]]] = [[]]
        self.leaf_depth = 0
        self.pending: list[list[tuple[str | None, torch.Tensor]]] = []
        self.busy = False

    def resolve(self, value: Any) -> tuple[list[tuple[str | None, torch.Tensor]], dict[str, torch.Tensor]]:
        inputs, params = [], {}
        for t in _tensors(value):
            if id(t) in self.b.canonical:
                params[self.b.canonical[id(t)]] = t
            elif id(t) in self.producer:
                inputs.append((self.producer[id(t)][0], t))
            else:
                inputs.append((None, t))
        return inputs, params

    def produced(self, name: str, outputs: list[torch.Tensor]) -> None:
        for t in outputs:
            self.producer[id(t)] = (name, t)  # holding t keeps its id from being reused

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.leaf_depth or self.busy:  # inside a leaf module, or our own hooks' bookkeeping
            return out
        outputs = _tensors(out)
        if not outputs:
            return out
        label, key = function_label(func)
        inputs, params = self.resolve((args, kwargs))
        name = self.b.unique(key)
        self.b.op(
            name, label=label, key=key, module=self.stack[-1], inputs=inputs, outputs=outputs,
            params=params, attrs=call_attrs(key, args, kwargs),
        )
        self.produced(name, outputs)
        return out

    def pre_hook(self, path: str, module: nn.Module, args, kwargs):
        self.busy = True
        try:
            self._enter(path, module, args, kwargs)
        finally:
            self.busy = False

    def post_hook(self, path: str, module: nn.Module, args, kwargs, out):
        self.busy = True
        try:
            self._leave(path, module, out)
        finally:
            self.busy = False

    def _enter(self, path: str, module: nn.Module, args, kwargs):
        self.stack.append(path)
        self.shapes.append([list(_shape(t)) for t in _tensors((args, kwargs))])
        self.b.reached.update(_ancestors(path))
        if is_leaf(module):
            if self.leaf_depth == 0:
                self.pending.append(self.resolve((args, kwargs))[0])
            self.leaf_depth += 1

    def _leave(self, path: str, module: nn.Module, out):
        self.stack.pop()
        self.shapes.pop()
        if not is_leaf(module):
            return
        self.leaf_depth -= 1
        if self.leaf_depth:
            return
        inputs = self.pending.pop()
        outputs = _tensors(out)
        if not outputs:
            return
        name = self.b.unique(path.replace(".", "_"))
        self.b.op(
            name, label=f"nn.{type(module).__name__}", key=type(module).__name__, module=path,
            inputs=inputs, outputs=outputs, params=self.b.leaf_params(path), attrs=module_attrs(module),
        )
        self.produced(name, outputs)


def capture_dispatch(model: nn.Module, inputs: tuple, builder: _Builder) -> None:
    b = builder
    rec = _Recorder(b)
    names = _arg_names(model, len(inputs))
    for arg_name, arg in zip(names, inputs):
        leaves = _tensors(arg)
        for i, t in enumerate(leaves):
            name = b.unique(arg_name if len(leaves) == 1 else f"{arg_name}_{i}")
            b.input(name, t)
            rec.produced(name, [t])
    handles = []
    # A real forward may write buffers (BatchNorm running stats in train mode): keep and restore them.
    saved = [(t, t.clone()) for t in model.buffers()]
    try:
        for path, module in model.named_modules():
            if path == "":
                continue
            handles.append(module.register_forward_pre_hook(functools.partial(rec.pre_hook, path), with_kwargs=True))
            handles.append(module.register_forward_hook(functools.partial(rec.post_hook, path), with_kwargs=True))
        try:
            with torch.no_grad(), rec:
                out = model(*inputs)
        except Exception as exc:
            path = rec.stack[-1]
            mod = b.modules.get(path)
            shapes = rec.shapes[-1] if path else [list(_shape(t)) for t in _tensors(inputs)]
            where = f"layer {path!r}" if path else "the model's own forward"
            raise CaptureFailed(
                "dispatch", exc, f"{where} ({type(mod).__name__}) given input shapes {shapes}"
            ) from exc
    finally:
        for h in handles:
            h.remove()
        with torch.no_grad():
            for t, copy in saved:
                t.copy_(copy)
    b.output(b.unique("output"), [rec.producer.get(id(t), (None,))[0] for t in _tensors(out)])
    b.reached.add("")


def _arg_names(model: nn.Module, count: int) -> list[str]:
    try:
        params = [
            p.name for p in inspect.signature(model.forward).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"input_{i}" for i in range(count)]


CAPTURE = {"fx": capture_fx, "export": capture_export, "dispatch": capture_dispatch}


def capture(model: nn.Module, inputs: tuple, strategy: str) -> tuple[nx.DiGraph, Replay | None]:
    """One strategy; raises CaptureFailed. The model's training flags are the caller's business."""
    builder = _Builder(model)
    try:
        replay = CAPTURE[strategy](model, inputs, builder)
    except CaptureFailed:
        raise
    except Exception as exc:
        raise CaptureFailed(strategy, exc) from exc
    graph = builder.finish(strategy)
    graph.graph["replay"] = replay
    return graph, replay
