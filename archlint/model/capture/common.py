"""Pieces every strategy uses: the CaptureFailed error, Replay, what counts as a leaf module, the
loss a model returns itself, and small tensor and module-path helpers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.fx as fx
from torch import nn
from torch.utils import _pytree as pytree

from archlint.model.cost import LEAF_MODULES


class CaptureFailed(Exception):
    """A strategy could not capture the model. `where` names the op/module and shapes, if known."""

    def __init__(self, strategy: str, error: BaseException, where: str | None = None):
        self.strategy, self.error, self.where = strategy, error, where
        # the first line: an fx TraceError or export error can append a whole graph dump
        text = " ".join((str(error).strip().splitlines() or [""])[0].split())[:300]
        super().__init__(f"{type(error).__name__}: {text}" + (f" (at {where})" if where else ""))


class Replay:
    """Runs the captured graph op by op on the real model: fx node names = OpGraph node names.
    Given `build` instead of the GraphModule, makes it at first use: only --latency's timing runs
    it, and making one copies the module tree (3 ms of a DenseNet's 70 ms analysis)."""

    def __init__(
        self, graph_module: fx.GraphModule | None = None, build: Callable[[], fx.GraphModule] | None = None
    ) -> None:
        if (graph_module is None) == (build is None):
            raise TypeError("Replay takes a GraphModule or a function that builds one")
        self._graph_module, self._build = graph_module, build

    @property
    def graph_module(self) -> fx.GraphModule:
        if self._graph_module is None:
            assert self._build is not None  # (one of the two, by __init__)
            self._graph_module, self._build = self._build(), None
        return self._graph_module

    def release(self) -> None:
        """Let the model go once the analysis is done (`let_go`; the build function holds the model itself)."""
        if self._graph_module is not None:
            let_go(self._graph_module)
        self._graph_module = self._build = None


def let_go(gm: fx.GraphModule) -> None:
    """A GraphModule and its graph refer to each other (graph.owning_module): a cycle that kept the
    user's submodules and weights it shares until the collector's next full pass, after the user
    had let the model go. Broken once the GraphModule is done with, it goes with its last reference."""
    gm.graph.owning_module = None


def is_leaf(module: nn.Module) -> bool:
    cls = type(module)
    # (a float fused ConvReLU2d is a Sequential of its conv and ReLU: traced through, as before fusing)
    return (
        cls.__name__ in LEAF_MODULES
        and cls.__module__.startswith(("torch.nn", "torch.ao.nn"))
        and not isinstance(module, nn.Sequential)
    )


def own_loss(output: Any) -> torch.Tensor | None:
    """The loss a model computes itself and returns as `loss` (a Hugging Face model given `labels`:
    its ModelOutput's `loss` field; a dict's "loss"), a floating-point tensor; None otherwise. A
    training loop backpropagates that one (`out = model(**batch); out.loss.backward()`), not a
    reduction of every output: the step's loss, in its FLOPs (OpGraph output's `loss` attribute,
    archlint.model.train.grad.loss_sources) and its memory (archlint.model.train.memory), is it alone."""
    if isinstance(output, Mapping):
        loss = output.get("loss")
        if isinstance(loss, torch.Tensor) and loss.is_floating_point():
            return loss
    return None


def stepped_own_loss(output: Any) -> torch.Tensor | None:
    """The model's own loss (own_loss) where a training step backpropagates it: it carries a gradient.
    One kept without (`loss.detach()`, for logging) cannot be `out.loss.backward()`-ed: the step then
    takes the outputs that carry one (train.memory.output_tensors), as the FLOPs' loss does where the
    loss node has no gradient (train.grad.loss_sources). The one test of "the step's loss is the
    model's own" on a real output: the memory model's step, its label and the timed step's text."""
    loss = own_loss(output)
    return loss if loss is not None and loss.requires_grad else None


def own_loss_index(output: Any, tensors: list[torch.Tensor]) -> int | None:
    """Where the output's own loss (own_loss) is among `tensors`, the output's tensors as a capture
    lists them; None when it has none."""
    loss = own_loss(output)
    return next((i for i, t in enumerate(tensors) if t is loss), None) if loss is not None else None


def tensors_in(value: Any) -> list[torch.Tensor]:
    """The tensors inside a value (nested tuples, lists, dicts and other pytree containers), in order."""
    if isinstance(value, torch.Tensor):  # most ops' output: no pytree walk
        return [value]
    return [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def shape_of(t: torch.Tensor) -> tuple[int, ...]:
    return tuple(map(int, t.shape))


def dtype_name(t: torch.Tensor) -> str:
    """'float32', not 'torch.float32'."""
    return str(t.dtype).removeprefix("torch.")


def ancestors(path: str) -> list[str]:
    """The root module "" and every module on the dotted path down to `path` itself."""
    parts = path.split(".") if path else []
    return [""] + [".".join(parts[: i + 1]) for i in range(len(parts))]


def to_meta(value: Any) -> Any:
    """The value with every tensor in it replaced by a meta tensor of the same shape and dtype."""
    return pytree.tree_map(lambda t: t.to("meta") if isinstance(t, torch.Tensor) else t, value)
