"""Building the OpGraph: input/op/output nodes with shapes, params and edges (shared by the three
strategies), and the table of the model's modules."""

from __future__ import annotations

import functools
import inspect
import itertools
import re
from pathlib import Path
from typing import Any

import networkx as nx
import torch
from torch import nn
from torch.nn.parameter import UninitializedTensorMixin

import archlint
from archlint.model.capture.common import dtype_name, shape_of
from archlint.model.cost import kind_of
from archlint.model.loading.created import site_of


@functools.cache
def class_source(cls: type) -> tuple[str | None, int | None]:
    """File and line of a class definition, the `class` line itself, after any decorators (once
    per class: inspect is slow)."""
    try:
        lines, start = inspect.getsourcelines(cls)
        offset = next((i for i, text in enumerate(lines) if text.lstrip().startswith("class ")), 0)
        return inspect.getsourcefile(cls), start + offset
    except (OSError, TypeError):
        return None, None


class GraphBuilder:
    """Adds input/op/output nodes with shapes, params and edges; shared by the three strategies."""

    def __init__(self, model: nn.Module):
        self.graph = nx.DiGraph()
        self.model = model
        self.modules = dict(model.named_modules())
        self.canonical = {id(t): n for n, t in self.named_tensors("_parameters")}
        self.param_ids = set(self.canonical)
        self.canonical.update({id(t): n for n, t in self.named_tensors("_buffers")})
        self.counted: set[int] = set()
        self.read: set[int] = set()
        # a quantized layer's weights, unpacked at each call (new tensors): counted once per name
        self.packed: dict[int, tuple[str, torch.Tensor]] = {}
        self.packed_counted: dict[str, int] = {}
        self.reached: set[str] = set()
        self._used_names: dict[str, int] = {}
        self.notes: list[str] = []

    def named_tensors(self, table: str) -> list[tuple[str, torch.Tensor]]:
        """model.named_parameters() ("_parameters") or named_buffers() ("_buffers"), read from the
        tables of the modules found once (`modules`: named_modules' order): each tensor once, under
        its first name; torch's own walk where the model's class has its own."""
        model = self.model
        if table == "_parameters" and type(model).named_parameters is not nn.Module.named_parameters:
            return list(model.named_parameters())
        if table == "_buffers" and type(model).named_buffers is not nn.Module.named_buffers:
            return list(model.named_buffers())
        found: list[tuple[str, torch.Tensor]] = []
        seen: set[int] = set()
        for path, module in self.modules.items():
            for name, t in getattr(module, table).items():
                if t is not None and id(t) not in seen:
                    seen.add(id(t))
                    found.append((f"{path}.{name}" if path else name, t))
        return found

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
            name,
            kind="input",
            op="input",
            key="input",
            module="",
            module_type=None,
            in_shapes=[],
            out_shapes=[shape_of(value)],
            dtype=dtype_name(value),
            itemsize=value.element_size(),
            in_bytes=0,
            param_shapes={},
            params=0,
            attrs={},
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
        source: list | None = None,
    ) -> None:
        owner = self.modules.get(module)
        count = 0
        param_bytes = 0
        for t in params.values():
            if isinstance(t, UninitializedTensorMixin):
                continue
            param_bytes += t.numel() * t.element_size()
            self.read.add(id(t))
            if id(t) in self.param_ids and id(t) not in self.counted:
                self.counted.add(id(t))
                count += t.numel()
            elif id(t) in self.packed and self.packed[id(t)][0] not in self.packed_counted:
                self.packed_counted[self.packed[id(t)][0]] = t.numel()
                count += t.numel()
        # a parameter passed in as data (DeBERTa's LayerNorm(self.rel_embeddings.weight)) is read too
        self.read.update(id(t) for _, t in inputs if id(t) in self.param_ids)
        first = outputs[0]
        self.graph.add_node(
            name,
            kind=kind or kind_of(key),
            op=label,
            key=key,
            module=module,
            module_type=type(owner).__name__ if module and owner is not None else None,
            in_shapes=[shape_of(t) for _, t in inputs],
            in_bytes=sum(t.numel() * t.element_size() for t in {id(t): t for _, t in inputs}.values()),
            out_shapes=[shape_of(t) for t in outputs],
            dtype=dtype_name(first),
            itemsize=first.element_size(),
            param_shapes={n: shape_of(t) for n, t in params.items()},
            param_bytes=param_bytes,
            params=count,
            attrs=attrs,
            source=source,  # [file, line] of the user's code that called the op (functional ops), when known
        )
        self._edges([producer for producer, _ in inputs], name)

    def _edges(self, producers: list[str | None], name: str) -> None:
        """An edge from each producer to `name`, its index the producer's first position; added
        in one call (networkx's add_edge a time was a tenth of the capture's walk)."""
        first: dict[str, int] = {}
        for index, producer in enumerate(producers):
            if producer is not None and producer not in first and not self.graph.has_edge(producer, name):
                first[producer] = index
        if first:
            self.graph.add_edges_from((producer, name, {"index": index}) for producer, index in first.items())

    def output(self, name: str, producers: list[str | None], loss: int | None = None) -> None:
        """The model's output, read from `producers` in order; `loss`: the position of the loss the
        model returns itself (common.own_loss), which the step's loss is then alone (attrs["loss"]:
        its producer)."""
        own = producers[loss] if loss is not None and loss < len(producers) else None
        self.graph.add_node(
            name,
            kind="output",
            op="output",
            key="output",
            module="",
            module_type=None,
            in_shapes=[],
            out_shapes=[],
            dtype=None,
            itemsize=0,
            in_bytes=0,
            param_shapes={},
            params=0,
            attrs={"loss": own} if own is not None else {},
        )
        self._edges(producers, name)

    def leaf_params(self, path: str) -> dict[str, torch.Tensor]:
        """A leaf module's parameters and buffers; its submodules count as reached (it uses them
        internally, as MultiheadAttention does its out_proj, without calling their forward)."""
        module = self.modules[path]
        if module._modules:
            self.reached.update(f"{path}.{sub}" for sub, _ in module.named_modules() if sub)
            own = dict(itertools.chain(module.named_parameters(), module.named_buffers()))
        else:  # no submodules (most leaves): named_parameters() and named_buffers() read from the tables
            own = {**_named(module._parameters), **_named(module._buffers)}
        if own:
            return own
        packed = packed_weights(module)
        self.packed.update(
            {id(t): (f"{path}.{name}", t) for name, t in packed.items()}
        )  # the tensor kept: its id stays its own
        return packed

    def finish(self, strategy: str) -> nx.DiGraph:
        g = self.graph
        g.graph["strategy"] = strategy
        if self.packed_counted:  # torch's parameters() lists none of them: say what the params total holds
            layers = sorted({name.rpartition(".")[0] for name in self.packed_counted})
            self.notes.append(
                f"params include the packed weights and biases of {len(layers)} quantized layer(s) "
                f"({', '.join(layers[:5])}{', ...' if len(layers) > 5 else ''}: {sum(self.packed_counted.values()):,} "
                "elements), which torch's model.parameters() does not list; as many as the float layers they replace"
            )
        g.graph["notes"] = list(self.notes)
        g.graph["reached_modules"] = self.reached
        named = self.named_tensors("_parameters")  # one walk of the module tree for the three below
        g.graph["unused_params"] = [n for n, t in named if id(t) in self.param_ids and id(t) not in self.read]
        g.graph.update(
            parameter_counts(self.model, {id(t) for _, t in named if id(t) not in self.read}, [t for _, t in named])
        )
        g.graph["param_count"] += sum(self.packed_counted.values())  # quantized layers' packed weights (noted above)
        # the modules that existed before the forward ran: one it creates (`self.extra = nn.Linear(...)`
        # in forward) is not the model's structure, and the capture's sandbox removes it afterwards
        g.graph["modules"] = {
            p: info for p, info in modules_table(self.model).items() if self.modules.get(p) is not None
        }
        return g


def _named(table: dict[str, torch.Tensor | None]) -> dict[str, torch.Tensor]:
    """A module's own table as named_parameters()/named_buffers() list it: no empty slot, a tensor
    under two names once (the first)."""
    found: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for name, t in table.items():
        if t is not None and id(t) not in seen:
            seen.add(id(t))
            found[name] = t
    return found


def parameter_counts(model: nn.Module, unread: set[int], parameters: list[torch.Tensor]) -> dict[str, Any]:
    """torch's count of the model's parameters (`sum(p.numel() for p in model.parameters())`: a shared
    one once; a lazy module's, not yet made, none), the part no op of the forward read, and the
    outermost modules all of whose parameters are unread, largest first: (path, elements).
    `parameters`: model.parameters(), as the caller walked them (GraphBuilder.named_tensors)."""

    def size(t) -> int:
        return 0 if isinstance(t, UninitializedTensorMixin) else t.numel()

    unused_modules = []
    # every parameter read (the usual case): no module can have all of its unread
    for path, module in model.named_modules() if unread else ():
        if not path or any(path.startswith(p + ".") for p, _ in unused_modules):
            continue
        params = list(module.parameters())
        if params and all(id(t) in unread for t in params):
            unused_modules.append((path, sum(size(t) for t in params)))
    return {
        "param_count": sum(size(t) for t in parameters),
        "unused_param_count": sum(size(t) for t in parameters if id(t) in unread),
        "unused_modules": sorted(unused_modules, key=lambda m: (-m[1], m[0])),
    }


def packed_weights(module: nn.Module) -> dict[str, torch.Tensor]:
    """A quantized module keeps its weights packed, not as parameters (torch.ao.nn.quantized's
    Conv2d and Linear, the dynamic LSTM): unpacked here so the FLOPs formulas see their shapes
    (and MAC their int8 bytes) instead of counting the op as 0, and params count them (weights and
    biases: the float layer's parameters, which torch's parameters() counts before quantizing)."""
    if not type(module).__module__.startswith(
        (
            "torch.ao.nn.quantized",
            "torch.nn.quantized",
            "torch.ao.nn.intrinsic.quantized",
            "torch.nn.intrinsic.quantized",
        )
    ):
        return {}
    try:
        if callable(getattr(module, "get_weight", None)):  # dynamic RNNs: {"weight_ih_l0": ..., ...}
            weights = module.get_weight()
            if isinstance(weights, dict):
                biases = module.get_bias() if callable(getattr(module, "get_bias", None)) else {}
                both = {**weights, **(biases if isinstance(biases, dict) else {})}
                return {k: v for k, v in both.items() if isinstance(v, torch.Tensor)}
        weight = module.weight() if callable(getattr(module, "weight", None)) else None
        bias = module.bias() if callable(getattr(module, "bias", None)) else None
    except (RuntimeError, TypeError, AttributeError):  # not unpackable: the op stays unknown, and is listed so
        return {}
    if not isinstance(weight, torch.Tensor):
        return {}
    return {"weight": weight, **({"bias": bias} if isinstance(bias, torch.Tensor) else {})}


def modules_table(model: nn.Module) -> dict[str, dict[str, Any]]:
    table = {}
    for path, m in model.named_modules():
        file, line = class_source(type(m))
        # m.parameters(recurse=False), read from its table (a walk of the module tree each, otherwise)
        own = {id(p): p for p in m._parameters.values() if p is not None}.values()
        table[path] = {
            "type": type(m).__name__,
            # a lazy module never run holds no weights yet (its size is unknown until a first forward)
            "params": sum(p.numel() for p in own if not isinstance(p, UninitializedTensorMixin)),
            "file": file,
            "line": line,
            "reparam": _reparam(type(m)),
            "created": site_of(m),  # (file, line) in the user's code, when recorded at build
        }
    return table


@functools.cache
def _reparam(cls: type) -> str | None:
    """A re-parameterisation method of the class (RepVGG, MobileOne, FastViT): AL205 names it as the fix."""
    return next((name for name in REPARAM_METHODS if callable(getattr(cls, name, None))), None)


REPARAM_METHODS = ("reparameterize", "switch_to_deploy", "fuse")


_SKIP_SOURCES = tuple(str(Path(m.__file__).resolve().parent) for m in (torch, archlint))


def user_frame(stack_trace: str | None) -> list | None:
    """[file, line] of the innermost frame outside torch and archlint in an fx/export node's
    `stack_trace` ('File "/x/net.py", line 28, in forward' lines, outermost first)."""
    if not stack_trace:
        return None
    found = None
    for match in _FRAME.finditer(stack_trace):
        file = match["file"]
        if user_file(file):
            found = [file, int(match["line"])]
    return found


def user_file(file: str) -> bool:
    """A file of the user's code: not torch's, not archlint's, not generated (`<string>`)."""
    return not file.startswith(_SKIP_SOURCES) and not file.startswith("<")


_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
