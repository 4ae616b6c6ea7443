"""A model's inputs, in this order of preference:
  1. `--input-shape SHAPE[:DTYPE]` (one per positional input) and `--input NAME=SHAPE[:DTYPE]`
     (keyword inputs), or the same in `[[tool.archlint.models]]`: random tensors. Float inputs
     are normal samples in `--dtype`; integer inputs are token ids drawn uniformly from [0, V),
     V the smallest `nn.Embedding` of the model (so every lookup is in range; 2 without one);
     boolean inputs, and integer inputs whose name contains "mask", are all ones (attend everywhere);
  2. an `example_inputs` attribute of the target itself (e.g. a staticmethod of the class);
  3. in the target file, a function `example_inputs()` or an attribute `EXAMPLE_INPUTS`:
     a tensor, a tuple/list of positional arguments, a dict of keyword arguments, or a pair
     `(args, kwargs)`.
Keyword inputs are bound to `forward`'s signature: those that are positional parameters become
positional arguments (skipped parameters get their defaults), so every capture strategy can run
them; only keyword-only ones (or ones caught by `**kwargs`) stay keywords.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import nn

from archlint.config import InputSpec, ModelSpec
from archlint.errors import UsageError
from archlint.model.loading.loaded import one_line

EXAMPLE_NAMES = ("example_inputs", "EXAMPLE_INPUTS")


def token_range(model: nn.Module) -> int:
    """Integer inputs are drawn from [0, V): V the smallest embedding table, so every lookup is valid."""
    sizes = [m.num_embeddings for m in model.modules() if isinstance(m, (nn.Embedding, nn.EmbeddingBag))]
    return min(sizes) if sizes else 2


def random_input(
    spec: InputSpec, name: str, default: str | None, dtype: torch.dtype, vocab: int, generator, meta: bool = False
) -> torch.Tensor:
    """A tensor for one input given by shape (rules in the module docstring); with `meta`, a
    placeholder of the same shape and dtype that allocates nothing."""
    named = spec.dtype or default
    kind = getattr(torch, named) if named else dtype
    if meta:
        return torch.empty(spec.shape, dtype=kind, device="meta")
    if kind == torch.bool or (not kind.is_floating_point and "mask" in name.lower()):
        return torch.ones(spec.shape, dtype=kind)
    if kind.is_floating_point:
        return torch.randn(spec.shape, generator=generator, dtype=kind)
    return torch.randint(0, vocab, spec.shape, generator=generator, dtype=kind)


def _as_inputs(value: Any, where: str) -> tuple[tuple, dict[str, Any]]:
    """What an example_inputs() gave: a tensor, a tuple/list, a dict, or (args, kwargs)."""
    if callable(value) and not isinstance(value, torch.Tensor):
        try:
            value = value()
        except Exception as exc:
            raise UsageError(f"{where}() raised {one_line(exc)}") from exc
    if isinstance(value, torch.Tensor):
        return (value,), {}
    if isinstance(value, dict) and value and all(isinstance(k, str) for k in value):
        return (), dict(value)
    if (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and isinstance(value[0], (tuple, list))
        and isinstance(value[1], dict)
    ):
        return tuple(value[0]), dict(value[1])
    if isinstance(value, (tuple, list)) and value:
        return tuple(value), {}
    raise UsageError(
        f"{where} must give a tensor, a tuple of positional inputs, a dict of keyword inputs or "
        f"(args, kwargs), got {type(value).__name__}"
    )


def example_inputs(
    spec: ModelSpec,
    module: ModuleType,
    obj: Any,
    path: Path,
    dtype: torch.dtype,
    model: nn.Module,
    meta: bool = False,
) -> tuple[tuple, dict[str, Any]]:
    if spec.input_shapes or spec.keyword_inputs:
        generator = torch.Generator().manual_seed(0)
        vocab = token_range(model)
        names = _positional_names(model)
        args = tuple(
            random_input(
                InputSpec(shape, spec.input_dtypes[i] if i < len(spec.input_dtypes) else None),
                names[i] if i < len(names) else "",
                spec.input_dtype,
                dtype,
                vocab,
                generator,
                meta,
            )
            for i, shape in enumerate(spec.input_shapes)
        )
        kwargs = {
            name: random_input(i, name, spec.input_dtype, dtype, vocab, generator, meta)
            for name, i in spec.keyword_inputs.items()
        }
        return args, kwargs
    if getattr(obj, "example_inputs", None) is not None and not isinstance(obj, nn.Module):
        return _as_inputs(obj.example_inputs, f"{spec.target}.example_inputs")
    for attr in EXAMPLE_NAMES:
        if hasattr(module, attr):
            return _as_inputs(getattr(module, attr), f"{path}:{attr}")
    raise UsageError(
        f"no inputs for {spec.target}: pass --input-shape 1,3,224,224 (once per input; 1,128:int64 for "
        f"token ids), --input NAME=SHAPE[:DTYPE] for keyword inputs, or define example_inputs() in {path}"
    )


def _forward_parameters(model: nn.Module) -> list[inspect.Parameter] | None:
    try:
        return list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return None


def _positional_names(model: nn.Module) -> list[str]:
    params = _forward_parameters(model) or []
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def bind_inputs(model: nn.Module, args: tuple, kwargs: dict[str, Any], source: str) -> tuple[tuple, dict[str, Any]]:
    """Check the inputs against forward's signature; keyword inputs that name positional parameters
    become positional arguments, the parameters skipped before them their defaults. Returns the
    positional arguments and the keyword-only rest."""
    params = _forward_parameters(model)
    if params is None:
        return args, kwargs
    kind = inspect.Parameter
    positional = [p for p in params if p.kind in (kind.POSITIONAL_ONLY, kind.POSITIONAL_OR_KEYWORD)]
    varargs = any(p.kind == kind.VAR_POSITIONAL for p in params)
    varkw = any(p.kind == kind.VAR_KEYWORD for p in params)
    owner = f"{type(model).__name__}.forward"
    takes = ", ".join(p.name for p in params if p.kind not in (kind.VAR_POSITIONAL, kind.VAR_KEYWORD)) or "nothing"
    if len(args) > len(positional) and not varargs:
        raise UsageError(
            f"{len(args)} positional inputs given with {source}, but {owner} takes {len(positional)} "
            f"({', '.join(p.name for p in positional) or 'none'}); drop the extra {source}"
            + ("" if not positional else " or give inputs by name with --input NAME=SHAPE[:DTYPE]")
        )
    names = {p.name for p in params}
    for name in kwargs:
        if name not in names and not varkw:
            raise UsageError(f"keyword input {name!r}: {owner} has no such parameter; it takes {takes}")
        if name in [p.name for p in positional[: len(args)]]:
            raise UsageError(f"input {name!r} is given both by position and by name; give it once")
    index = {p.name: i for i, p in enumerate(positional)}
    last = max((index[n] for n in kwargs if n in index), default=-1)
    if last < len(args):
        return args, kwargs
    filled = list(args)
    for p in positional[len(args) : last + 1]:
        if p.name in kwargs:
            filled.append(kwargs[p.name])
        elif p.default is not p.empty:
            filled.append(p.default)
        else:
            raise UsageError(f"{owner} needs its input {p.name!r}: give it with --input {p.name}=SHAPE[:DTYPE]")
    rest = {k: v for k, v in kwargs.items() if k not in index}
    return tuple(filled), rest
