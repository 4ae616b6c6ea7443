"""What loading a model gives (Loaded), and building one without allocating its weights
(meta_build): shared by the two loaders, load.py (`PATH.py:NAME`) and hf.py (`hf:NAME`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn


@dataclass
class Loaded:
    """A model and its inputs, ready to capture; `build` says how the model was made."""

    model: nn.Module
    inputs: tuple
    build: str  # "meta" | "real" | "given"
    dtype: torch.dtype
    notes: list[str] = field(default_factory=list)
    factory: Callable[[], nn.Module] | None = None  # a real build, for strategies that run the model
    kwargs: dict[str, Any] = field(default_factory=dict)  # keyword-only inputs (see bind_inputs)
    # Real inputs, made only when a strategy or measurement runs the model (`inputs` and `kwargs`
    # hold meta placeholders until then: a 1×3×20000×20000 input costs nothing to count).
    make_inputs: Callable[[], tuple[tuple, dict[str, Any]]] | None = None

    @property
    def on_meta(self) -> bool:
        return any(t.device.type == "meta" for t in _state(self.model))

    def real_inputs(self) -> tuple:
        """The positional inputs as real tensors (made now if they were placeholders); `kwargs` too."""
        if self.make_inputs is not None:
            (self.inputs, self.kwargs), self.make_inputs = self.make_inputs(), None
        return self.inputs

    def real_model(self) -> nn.Module:
        """The model with real weights (built again if it was built on meta)."""
        if self.on_meta and self.factory is not None:
            with seeded_build():
                self.model = self.factory()
            self.build = "real"
        return self.model


# Random weights drawn from this seed: a model archlint builds gets the same weights on every run,
# so a count that depends on their values (a detector's heads run on the boxes they produce) is the
# same on every run too.
BUILD_SEED = 0


@contextlib.contextmanager
def seeded_build():
    """Build under torch.manual_seed(BUILD_SEED), torch's RNG state given back after (fork_rng):
    the caller's own random stream is not moved by archlint's build."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(BUILD_SEED)
        yield


def _state(model: nn.Module):
    yield from model.parameters()
    yield from model.buffers()


def one_line(exc: BaseException) -> str:
    """An error in one line for the user: its type, then its message with whitespace collapsed, cut at 300 characters."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


@contextlib.contextmanager
def _meta_parameters():
    """Parameters and buffers go to meta as they are registered; other tensors stay real (a
    constructor computing widths with `.tolist()`, as regnet does, still works)."""
    register_parameter, register_buffer = nn.Module.register_parameter, nn.Module.register_buffer

    def parameter(self, name, param):
        if param is not None and param.device.type != "meta":
            param = nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
        register_parameter(self, name, param)

    def buffer(self, name, tensor, persistent=True):
        if tensor is not None:
            tensor = tensor.to("meta")
        register_buffer(self, name, tensor, persistent)

    nn.Module.register_parameter, nn.Module.register_buffer = parameter, buffer
    try:
        yield
    finally:
        nn.Module.register_parameter, nn.Module.register_buffer = register_parameter, register_buffer


def meta_build(factory: Callable, kwargs: dict[str, Any]) -> tuple[nn.Module, str | None]:
    """Build without allocating weights: under torch.device("meta"), else with only parameters and
    buffers on meta. Returns the model and a note when the second way was needed; raises when
    neither works."""
    try:
        with torch.device("meta"):
            return factory(**kwargs), None
    except Exception as exc:
        first = exc
    with _meta_parameters():
        model = factory(**kwargs)
    return (
        model,
        f"built with parameters on meta (under torch.device('meta') the constructor failed: {one_line(first)[:100]})",
    )


def dtype_of(model: nn.Module) -> torch.dtype:
    """The dtype a model given as an object is analyzed in: its first floating-point parameter's."""
    for p in model.parameters():
        if p.is_floating_point():
            return p.dtype
    return torch.float32
