"""Strategy "dispatch": one real forward pass under a TorchFunctionMode, with module hooks tracking
the current module (handles data-dependent models such as detection)."""

from __future__ import annotations

import functools
import inspect
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

import archlint
from archlint.model.capture.common import CaptureFailed, ancestors, is_leaf, own_loss_index, shape_of, tensors_in
from archlint.model.capture.describe import (
    HOST_READS,
    SYNC_REASONS,
    call_attrs,
    function_label,
    host_sync,
    module_attrs,
)
from archlint.model.capture.graph import GraphBuilder


class _Recorder(TorchFunctionMode):
    """Records every torch function / Tensor method called outside leaf modules; hooks add the
    leaf-module calls and track which module is running."""

    def __init__(self, builder: GraphBuilder):
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
        for t in tensors_in(value):
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
        outputs = tensors_in(out)
        if not outputs:
            self._host_side(func, args, kwargs)
            return out
        label, key = function_label(func)
        inputs, params = self.resolve((args, kwargs))
        name = self.b.unique(key)
        attrs = call_attrs(key, args, kwargs)
        caller = _caller()
        if "host_sync" in attrs:
            attrs["source"] = caller
        self.b.op(
            name,
            label=label,
            key=key,
            module=self.stack[-1],
            inputs=inputs,
            outputs=outputs,
            params=params,
            attrs=attrs,
            source=caller,
        )
        self.produced(name, outputs)
        return out

    def _host_side(self, func, args: tuple, kwargs: dict) -> None:
        """Calls that return no tensor but make the host wait: a value read (`.item()`, `if t:`),
        recorded as a "sync" op whose output is the tensor read; and an assignment into a tensor
        (`x[mask] = v`, `x[a:b] = v`), recorded as the in-place write it is (later reads of x come from it)."""
        name = getattr(func, "__name__", "")
        tensor = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if tensor is None:
            return
        if name in HOST_READS:
            key = HOST_READS[name]
            attrs = {"host_sync": SYNC_REASONS[0]}
        elif name == "__setitem__" and host_sync("setitem", args, kwargs):
            key, attrs = "index_put", call_attrs("setitem", args, kwargs)
        elif name == "__setitem__" and len(args) > 2 and isinstance(args[2], torch.Tensor):
            # `canvas[y0:y1, x0:x1] = m`: a copy kernel into x; recorded as the write it is, so that
            # what reads x later reads the written tensor (a zeroed canvas filled per call is no constant)
            key, attrs = "setitem", call_attrs("setitem", args, kwargs)
        else:
            return
        attrs["source"] = _caller()
        label = function_label(func)[0]
        op = self.b.unique(key)
        inputs, params = self.resolve((args, kwargs))
        self.b.op(
            op, label=label, key=key, module=self.stack[-1], inputs=inputs, outputs=[tensor], params=params, attrs=attrs
        )
        if key in ("index_put", "setitem"):
            self.produced(op, [tensor])

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
        self.shapes.append([list(shape_of(t)) for t in tensors_in((args, kwargs))])
        self.b.reached.update(ancestors(path))
        if is_leaf(module):
            if self.leaf_depth == 0:
                inputs, given = self.resolve((args, kwargs))
                self.b.read.update(id(t) for t in given.values())  # a parameter passed in as data is read
                self.pending.append(inputs)
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
        outputs = tensors_in(out)
        if not outputs:
            return
        name = self.b.unique(path.replace(".", "_"))
        self.b.op(
            name,
            label=f"nn.{type(module).__name__}",
            key=type(module).__name__,
            module=path,
            inputs=inputs,
            outputs=outputs,
            params=self.b.leaf_params(path),
            attrs=module_attrs(module),
        )
        self.produced(name, outputs)


def capture_dispatch(model: nn.Module, inputs: tuple, builder: GraphBuilder, kwargs: dict | None = None) -> None:
    b = builder
    rec = _Recorder(b)
    kwargs = kwargs or {}
    names = _arg_names(model, len(inputs))
    for arg_name, arg in [*zip(names, inputs), *kwargs.items()]:
        leaves = tensors_in(arg)
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
                out = model(*inputs, **kwargs)
        except Exception as exc:
            path = rec.stack[-1]
            mod = b.modules.get(path)
            shapes = rec.shapes[-1] if path else [list(shape_of(t)) for t in tensors_in(inputs)]
            where = f"layer {path!r}" if path else "the model's own forward"
            raise CaptureFailed("dispatch", exc, f"{where} ({type(mod).__name__}) given input shapes {shapes}") from exc
    finally:
        for h in handles:
            h.remove()
        with torch.no_grad():
            for t, copy in saved:
                t.copy_(copy)
    tensors = tensors_in(out)
    b.output(b.unique("output"), [rec.producer.get(id(t), (None,))[0] for t in tensors], own_loss_index(out, tensors))
    b.reached.add("")


def _arg_names(model: nn.Module, count: int) -> list[str]:
    try:
        params = [
            p.name
            for p in inspect.signature(model.forward).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"input_{i}" for i in range(count)]


_SKIP = tuple(str(Path(m.__file__).resolve().parent) for m in (torch, archlint))


def _caller() -> list | None:
    """[file, line] of the innermost frame outside torch and archlint: the line of forward that
    made the call (a sync's finding points there)."""
    frame = sys._getframe(1)
    while frame is not None:
        file = frame.f_code.co_filename
        if not file.startswith(_SKIP) and not file.startswith("<"):
            return [file, frame.f_lineno]
        frame = frame.f_back
    return None
