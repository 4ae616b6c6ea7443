"""Strategy "fx": `torch.fx` symbolic trace, then shape propagation on meta tensors. The user's model
is never run on real values: a leaf module that needs its kernel has its parameters and buffers
swapped for meta copies for the length of its call (no real arithmetic), then put back."""

from __future__ import annotations

import bisect
import builtins
import collections
import contextlib
import dis
import inspect
import sys
from collections.abc import Mapping
from typing import Any

import torch
import torch.fx as fx
from torch import nn

from archlint.model.capture import meta_shapes
from archlint.model.capture.callsite import CallSites, call_site, stack_trace
from archlint.model.capture.common import CaptureFailed, Replay, ancestors, is_leaf, shape_of, tensors_in, to_meta
from archlint.model.capture.describe import call_attrs, function_label, module_attrs
from archlint.model.capture.fxnodes import alias_tuple_item, attribute_at, input_nodes, opgraph_node
from archlint.model.capture.graph import GraphBuilder
from archlint.model.cost import KIND_OF, normalize

try:  # lazy: its Python code is generated at its first call
    from torch.fx._lazy_graph_module import _LazyGraphModule as _GRAPH_MODULE
except ImportError:  # a torch without it (private to torch): the same graph, its code generated at once
    _GRAPH_MODULE = fx.GraphModule
_CONSTANTS = frozenset({int, float, bool, str, type(None)})


class _Tracer(fx.Tracer):
    """fx's tracer with archlint's leaf modules, made cheaper where fx repeats work per node (the
    graph is the same): each node's call site is recorded by a walk of the Python frames
    (callsite.py), not by torch's record_stack_traces (a stack formatted as text per node); a
    parameter's name comes from a table, not a search of every parameter at each access; an
    unpacked proxy's function is disassembled once (_Proxy). One tracer per trace."""

    sites: CallSites | None = None  # set for the trace by _trace_graph

    def __init__(self):
        super().__init__()
        self.scope = _Scope("", None)
        self.module_stack = _ModuleStack()
        self.instructions: dict[Any, list] = {}  # code object → its instructions (_Proxy.__iter__)
        self._parameter_names: dict[int, str] | None = None

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return is_leaf(m)

    def create_node(self, kind, target, args, kwargs, name=None, type_expr=None):
        if (args or kwargs) and not self.check_mutable_operations:
            # Graph.create_node walks the arguments (a pytree walk a node, a tenth of the trace) only
            # to warn of a raw SymInt, which a symbolic trace never makes: the node is made without
            # them and given them after, by the same bookkeeping its constructor does
            node = super().create_node(kind, target, (), {}, name, type_expr)
            if args:
                node.args = args
            if kwargs:
                node.kwargs = kwargs
        else:
            node = super().create_node(kind, target, args, kwargs, name, type_expr)
        if self.sites is not None and not node.stack_trace:  # (as torch: a preserved stack trace is kept)
            self.sites.record(node, sys._getframe())
        return node

    def create_arg(self, a: Any) -> Any:
        # fx's Tracer.create_arg asks a parameter, tensor, module, named tuple and constant
        # attribute of every argument before its own fast path by exact type: these types are none
        # of them, and get what that fast path gives them (a proxy its node, a tuple or list its
        # items' arguments, a constant itself)
        kind = type(a)
        if kind is _Proxy or kind is _Attribute:
            return a.node
        if kind is tuple:
            return tuple([self.create_arg(item) for item in a])
        if kind is list:
            return [self.create_arg(item) for item in a]
        if kind in _CONSTANTS:
            return a
        return super().create_arg(a)

    def proxy(self, node: fx.Node) -> fx.Proxy:
        return _Proxy(node, self)

    def getattr(self, attr, attr_val, parameter_proxy_cache):
        # fx names a parameter by the first entry of root.named_parameters() that is it, searched
        # at every access (a ConvNeXt's or ViT's layer scales and norms: a third of its trace)
        if isinstance(attr_val, nn.Parameter) and not self.param_shapes_constant:
            if self._parameter_names is None:
                self._parameter_names = {}
                for n, p in self.root.named_parameters():
                    self._parameter_names.setdefault(id(p), n)
            name = self._parameter_names.get(id(attr_val))
            if name is not None and _parameter_at(self.root, name) is attr_val:
                if name not in parameter_proxy_cache:
                    parameter_proxy_cache[name] = self.create_proxy("get_attr", name, (), {})
                return parameter_proxy_cache[name]
        return super().getattr(attr, attr_val, parameter_proxy_cache)


def _parameter_at(root: nn.Module, name: str) -> nn.Parameter | None:
    """The parameter `name` of `root` now (None if it is gone: fx's own search decides), read from
    the modules' tables: their attribute lookup is fx's getattr during the trace."""
    *path, leaf = name.split(".")
    module: nn.Module | None = root
    for part in path:
        module = module._modules.get(part) if module is not None else None
    return module._parameters.get(leaf) if module is not None else None


class _Proxy(fx.Proxy):
    """fx's Proxy, but unpacking one (`b, n, c = x.shape`) disassembles the calling function once
    per trace (fx did at every unpack: a fifth of a Swin's trace); the same instruction decides."""

    def __iter__(self):
        calling = sys._getframe(1)
        code = calling.f_code
        found = self.tracer.instructions.get(code)
        if found is None:
            found = self.tracer.instructions[code] = list(dis.get_instructions(code))
        if sys.version_info >= (3, 11):
            at = bisect.bisect_left(found, calling.f_lasti, key=lambda i: i.offset)
        else:
            at = calling.f_lasti // 2
        inst = found[at]
        if inst.opname == "UNPACK_SEQUENCE":
            return (self[i] for i in range(inst.argval))
        return self.tracer.iter(self)

    def __getattr__(self, k: str) -> fx.proxy.Attribute:
        return _Attribute(self, k)


class _Attribute(_Proxy, fx.proxy.Attribute):
    """fx's Attribute (`x.shape` before it is used) with _Proxy's unpacking."""


# fx copies its scope at every module call and its module stack into every node's meta with
# copy.copy, which takes the slow generic path for these classes (__reduce_ex__): a few µs each,
# a tenth of the trace. The same copies, made directly.
class _Scope(fx.proxy.Scope):
    def __copy__(self) -> fx.proxy.Scope:
        return fx.proxy.Scope(self.module_path, self.module_type)


class _ModuleStack(collections.OrderedDict):
    def __copy__(self) -> collections.OrderedDict:
        return collections.OrderedDict(self)  # what nodes held before: a plain OrderedDict


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
    if key in ("cat", "concat", "concatenate"):
        return meta_shapes.cat(args, kwargs)
    if key in meta_shapes.POOL_DIMS and args and len(args) + len(kwargs) == 2 and set(kwargs) <= {"output_size"}:
        size = args[1] if len(args) == 2 else kwargs.get("output_size")
        return meta_shapes.adaptive_avg_pool(args[0], size, meta_shapes.POOL_DIMS[key], none_is_input=False)
    x = args[0] if args else None
    if not isinstance(x, torch.Tensor) or x.device.type != "meta":
        return None
    if key in _SAME_SHAPE and "dtype" not in kwargs:
        if inplace or kwargs.get("inplace") is True:
            return x
        return meta_shapes.like(x)
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


def _fast_module(module: nn.Module, args: tuple, kwargs: dict) -> Any:
    if type(module) is nn.MultiheadAttention:
        return meta_shapes.attention(module, args, kwargs)
    if not is_leaf(module) or kwargs:
        return None
    if type(module) in meta_shapes.CONVS:
        return meta_shapes.conv(module, args)
    name = type(module).__name__
    if name == "Identity" and len(args) == 1 and isinstance(args[0], torch.Tensor):
        return args[0]
    if name in ("Linear", "LazyLinear") and len(args) == 1 and isinstance(args[0], torch.Tensor):
        x = args[0]
        if x.device.type != "meta" or x.dim() == 0 or x.shape[-1] != module.in_features:
            return None  # let the kernel raise its own error
        return torch.empty((*x.shape[:-1], module.out_features), dtype=x.dtype, device="meta")
    if name in _SAME_SHAPE and len(args) == 1:
        return _fast_output(name, getattr(module, "inplace", False) is True, args, {})
    if name in meta_shapes.POOL_DIMS and len(args) == 1:
        return meta_shapes.adaptive_avg_pool(
            args[0], module.output_size, meta_shapes.POOL_DIMS[name], none_is_input=True
        )
    if (
        len(args) == 1
        and isinstance(args[0], torch.Tensor)
        and args[0].device.type == "meta"
        and _norm_fits(module, args[0])
    ):
        return meta_shapes.like(args[0])
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


class _Propagation:
    """One pass of shape propagation over the traced graph on meta tensors, what `fx.Interpreter`
    under `torch.func.functional_call` did, without their per-node and per-parameter bookkeeping
    (a progress bar, a context manager and two submodule look-ups a node; every parameter of the
    model swapped in and out): a get_attr gets the meta copy of its tensor, and a leaf module run by
    its kernel gets meta copies of its own parameters and buffers for the length of its call. The
    copies are made once each (a weight shared by two modules stays one tensor) and only where
    needed: the shape rules above cover most leaf modules without their weights."""

    def __init__(self, root: nn.Module, graph: fx.Graph, modules: dict[str, nn.Module] | None = None) -> None:
        self.root, self.graph = root, graph
        self.modules = modules or {}  # the root's modules by path (GraphBuilder.modules): no attribute walk a call
        self.env: dict[fx.Node, Any] = {}
        self._meta: dict[int, torch.Tensor] = {}

    def run(self, args: tuple) -> dict[fx.Node, Any]:
        env = self.env
        graph = self.graph
        self._args = iter(graph.process_inputs(*args))
        for n in graph.nodes:
            try:
                env[n] = self._run_node(n)
            except Exception as exc:
                raise self._failed(n, exc) from exc
        return env

    def _run_node(self, n: fx.Node) -> Any:
        op, target = n.op, n.target
        if op == "placeholder":
            return self._placeholder(n)
        if op == "get_attr":
            return self._on_meta(self._fetch_attr(target))
        env = self.env
        args, kwargs = fx.node.map_arg((n.args, n.kwargs), env.__getitem__)
        if op == "call_function":
            out = _fast_output(*_call_key(target), args, kwargs)
            return target(*args, **kwargs) if out is None else out
        if op == "call_method":
            out = _fast_output(*_call_key(target), args, kwargs)
            if out is None:
                self_obj, *rest = args
                out = getattr(self_obj, target)(*rest, **kwargs)
            return out
        if op == "call_module":
            module = self.modules.get(target)
            if module is None:
                module = self._fetch_attr(target)
            out = _fast_module(module, args, kwargs)
            return self._call_on_meta(module, args, kwargs) if out is None else out
        if op == "output":
            return args[0]
        raise RuntimeError(f"fx node {n.name} has an unknown op {op!r}")

    def _placeholder(self, n: fx.Node) -> Any:
        """fx.Interpreter.placeholder: the next input, or the parameter's default."""
        target = str(n.target)
        if target.startswith("*"):
            return list(self._args)
        try:
            return next(self._args)
        except StopIteration as stop:
            if n.args:
                return n.args[0]
            raise RuntimeError(
                f"Expected positional argument for parameter {target}, but one was not passed in!"
            ) from stop

    def _fetch_attr(self, target: str) -> Any:
        """fx.Interpreter.fetch_attr: the root's attribute at a dotted path (what the GraphModule holds)."""
        atoms = target.split(".")
        value: Any = self.root
        for i, atom in enumerate(atoms):
            if not hasattr(value, atom):
                raise RuntimeError(f"Node referenced nonexistent target {'.'.join(atoms[: i + 1])}")
            value = getattr(value, atom)
        return value

    def _on_meta(self, value: Any) -> Any:
        """A real tensor's meta copy (made once per tensor: tied weights stay one); anything else as it is."""
        if not isinstance(value, torch.Tensor) or value.device.type == "meta":
            return value
        copy = self._meta.get(id(value))
        if copy is None:
            copy = self._meta[id(value)] = value.to("meta")
        return copy

    def _call_on_meta(self, module: nn.Module, args: tuple, kwargs: dict) -> Any:
        """The module's own forward, its parameters and buffers (its submodules' too) swapped for
        their meta copies in their tables for the call (as functional_call swaps them), then put back."""
        swapped = []
        try:
            for m in module.modules() if module._modules else (module,):
                for table in (m._parameters, m._buffers):
                    for name, t in table.items():
                        if t is not None and t.device.type != "meta":
                            table[name] = self._on_meta(t)
                            swapped.append((table, name, t))
            return module(*args, **kwargs)
        finally:
            for table, name, t in reversed(swapped):
                table[name] = t

    def _failed(self, n: fx.Node, exc: Exception) -> CaptureFailed:
        values = fx.node.map_arg((n.args, n.kwargs), lambda a: self.env.get(a))
        shapes = [list(shape_of(t)) for t in tensors_in(values)]
        stack = n.meta.get("nn_module_stack") or {}
        module = f" in module {list(stack.values())[-1][0]!r}" if stack else ""
        failed = CaptureFailed("fx", exc, f"op {n.name}{module} given input shapes {shapes}")
        # the message as fx.Interpreter extended it (the report's details quote it)
        msg = f"{failed.args[0]}\n\nWhile executing {n.format_node()}\nOriginal traceback:\n{stack_trace(n)}"
        msg += "\nUse tlparse to see full graph. "
        msg += "(https://github.com/pytorch/tlparse?tab=readme-ov-file#tlparse-parse-structured-pt2-logs)"
        failed.args = (msg,)
        return failed


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


def _trace_graph(model: nn.Module, concrete: dict[str, Any] | None = None) -> fx.Graph:
    """The model's fx graph; its targets are paths in `model` (the tracer's root)."""
    # No second try with the wrapped functions left opaque: they would be ops without a formula.
    # When fx cannot trace through them, export (or dispatch) can.
    with _trace_through_wrapped():
        tracer = _Tracer()  # records where in the user's forward each op is called: findings point there
        tracer.sites = CallSites(sys._getframe())  # (no frame of archlint's between it and the trace)
        try:
            return tracer.trace(model, concrete_args=concrete or None)
        finally:
            # torch's trace leaves the tracer in reference cycles (its recursive closures, the
            # proxies): what it holds of the model (the root, its tensors, its submodules; the
            # frames of `sites`) is let go here, so the model goes with its last reference, not at
            # the collector's next full pass (a ViT-B's 344 MB of weights, meanwhile)
            vars(tracer).clear()


def _graph_module(model: nn.Module, graph: fx.Graph, added: dict[str, Any] | None = None) -> fx.GraphModule:
    """The GraphModule of `model`'s traced graph; `added`: what the tracer put on the root (`_constants`),
    which sandbox.preserved has taken off the user's model again by the time --latency builds it."""
    # lazy: its Python code is generated at its first call, not here
    if not added:
        return _GRAPH_MODULE(model, graph, type(model).__name__)
    # the module form, as for any model (fx's dict form assigns a target under another target onto
    # the user's submodule: `self.sub(x) + self.sub.scale` registered `scale` there as a buffer, or
    # raised where it is a plain attribute), with the tracer's constants on the root while it copies
    # them, as they were when the trace set them there
    put = [name for name in added if name not in model.__dict__]
    model.__dict__.update((name, added[name]) for name in put)
    try:
        return _GRAPH_MODULE(model, graph, type(model).__name__)
    finally:
        for name in put:
            del model.__dict__[name]


def _constants(model: nn.Module, before: set[str], graph: fx.Graph) -> dict[str, Any]:
    """The attributes the tracer set on the root that the graph reads (fx keeps a tensor made in
    forward, `x * torch.tensor([2.0])`, as `_tensor_constant0` on the root): `before`, the root's
    attribute names before the trace."""
    now = model.__dict__
    return {
        n.target: now[n.target]
        for n in graph.nodes
        if n.op == "get_attr" and n.target in now and n.target not in before
    }


def _trace(model: nn.Module, concrete: dict[str, Any] | None = None) -> fx.GraphModule:
    return _graph_module(model, _trace_graph(model, concrete))


def _concrete_arguments(model: nn.Module, inputs: tuple) -> dict[str, Any]:
    """forward's parameters that get no tensor, by name, with the value they get: inputs given as
    None (parameters skipped before a keyword input) and the defaults of those not given. Traced as
    constants, so `if mask is not None` takes the branch the real call takes."""
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return {}
    concrete: dict[str, Any] = {}
    for i, p in enumerate(params):
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        if i < len(inputs):
            if inputs[i] is None:
                concrete[p.name] = None
        elif p.default is not p.empty:
            concrete[p.name] = p.default
    return concrete


def capture_fx(model: nn.Module, inputs: tuple, builder: GraphBuilder, kwargs: dict | None = None) -> Replay:
    if kwargs:
        raise CaptureFailed(
            "fx", TypeError(f"keyword-only inputs ({', '.join(kwargs)}): fx traces positional inputs only")
        )
    before = set(model.__dict__)
    try:
        graph = _trace_graph(model, _concrete_arguments(model, inputs))
    except Exception as exc:
        raise CaptureFailed("fx", exc) from exc
    added = _constants(model, before, graph)
    with torch.no_grad():
        env = _Propagation(model, graph, builder.modules).run(to_meta(inputs))

    b = builder
    alias: dict[str, str] = {}  # getitem of a tuple → the op that made the tuple
    attr_of: dict[str, str] = {}  # get_attr node → attribute path
    seen: set[str] = set()  # module paths whose ancestors are in b.reached already
    for n in graph.nodes:
        value = env.get(n)
        stack = n.meta.get("nn_module_stack") or {}
        for path, _ in stack.values():
            if path not in seen:
                seen.add(path)
                b.reached.update(ancestors(path))
        if n.op == "placeholder":
            if isinstance(value, torch.Tensor):
                b.input(b.reserve(n.name), value)
            continue
        if n.op == "get_attr":
            attr_of[n.name] = n.target
            continue
        if n.op == "output":
            b.output(b.reserve(n.name), [opgraph_node(a, alias, b) for a in input_nodes(n)], _loss_position(n))
            continue
        if alias_tuple_item(n, env.get, value, alias, b):
            continue
        outputs = tensors_in(value)
        if not outputs:
            continue
        params: dict[str, torch.Tensor] = {}
        inputs_: list[tuple[str | None, torch.Tensor]] = []
        if n.op == "call_module":
            module = n.target
            mod = b.modules[module]
            label, key, attrs = f"nn.{type(mod).__name__}", type(mod).__name__, module_attrs(mod)
            params = b.leaf_params(module)
            if module not in seen:
                seen.add(module)
                b.reached.update(ancestors(module))
        else:
            module = list(stack.values())[-1][0] if stack else ""
            target = n.target
            if target is builtins.getattr:
                label, key = f"Tensor.{n.args[1]}", normalize(str(n.args[1]))
            else:
                label, key = function_label(target)
            concrete = fx.node.map_arg((n.args, n.kwargs), lambda a: env.get(a))
            attrs = call_attrs(key, concrete[0], concrete[1])
        for a in input_nodes(n):
            if a.name in attr_of:
                real = attribute_at(model, attr_of[a.name])
                if isinstance(real, torch.Tensor):
                    params[b.canonical.get(id(real), attr_of[a.name])] = real
                continue
            for t in tensors_in(env.get(a)):
                inputs_.append((opgraph_node(a, alias, b), t))
        source = call_site(n) if n.op != "call_module" else None
        b.op(
            b.reserve(n.name),
            label=label,
            key=key,
            module=module,
            inputs=inputs_,
            outputs=outputs,
            params=params,
            attrs=attrs,
            source=source,
        )
    b.reached.add("")
    # the GraphModule copies the module tree: made when --latency's timing asks for it
    # (the tracer's constants kept here: sandbox.preserved takes them off the model before it is built)
    return Replay(build=lambda: _graph_module(model, graph, added))


def _loss_position(output: fx.Node) -> int | None:
    """Where a Mapping output's "loss" node (the model's own loss: common.own_loss) is among the
    output node's argument nodes (input_nodes' order: the fields before it, flattened)."""
    value = output.args[0] if output.args else None
    if not isinstance(value, Mapping) or not isinstance(value.get("loss"), fx.Node):
        return None
    before: list[fx.Node] = []
    for key, item in value.items():
        if key == "loss":
            return len(before)
        fx.node.map_arg(item, before.append)
    return None
