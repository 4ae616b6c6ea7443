"""Ops the meta step cannot run as written, run as the real step on the CPU runs them.

The memory model runs the step on the meta device. Two kinds of op fail there that run on the
model's real device, and the failure says nothing about memory:

  a meta kernel stricter than the real kernel: `_grouped_mm` (Mixture-of-Experts layers in
      transformers 5.x) takes float32 on the CPU, but its meta kernel checks CUDA's rule
      ("Expected mat_a to be BFloat16"); the output's shape does not depend on the dtype, so it is
      taken from the meta kernel on bfloat16 operands and given the operands' dtype back;
  a tensor made on the CPU inside forward (`torch.arange(n)` without `device=`: a U-Net's timestep
      embedding) meeting the model's meta tensors ("not on the expected device meta"): on the real
      CPU both are CPU tensors, so it is moved to meta (its value kept, archlint.model.train.values)
      as the real step would hold it beside them.

Each is retried only on its own error and said in the output (`memory.adapted_ops`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from archlint.model.train.metacache import tensors_of

_META = torch.device("meta")
_HALF_ONLY = {"_grouped_mm": "bfloat16"}  # op (overload packet) -> the dtype its meta kernel takes

GROUPED_MM_NOTE = (
    "_grouped_mm (a Mixture-of-Experts layer) in {dtype}: its meta kernel takes only bfloat16 (CUDA's "
    "rule), the CPU kernel takes {dtype}; the output's shape taken from it on bfloat16 operands, in {dtype}"
)
CPU_TENSOR_NOTE = (
    "a tensor made on the CPU inside forward (e.g. torch.arange without device=) met the model's "
    "tensors: moved beside them, as on the real CPU, where both are CPU tensors (on a GPU it would "
    "have to be made on the GPU)"
)


def retry(func, args: tuple, kwargs: dict, exc: BaseException, run: Callable, know: Callable | None) -> tuple[Any, str]:
    """`func` run again by `run` with its arguments adapted to the meta device, where `exc` is one
    of the failures above; (its outputs, the note that says so). Raises `exc` for any other."""
    name = getattr(getattr(func, "overloadpacket", None), "__name__", "")
    message = str(exc)
    if name in _HALF_ONLY and "BFloat16" in message:
        dtype = next((t.dtype for t in tensors_of(list(args)) if t.is_floating_point()), torch.float32)
        half = getattr(torch, _HALF_ONLY[name])

        def cast(value):
            if isinstance(value, torch.Tensor) and value.is_meta and value.is_floating_point():
                return torch.empty_strided(value.shape, value.stride(), dtype=half, device=_META)
            return value

        out = run(func, tuple(cast(a) for a in args), {k: cast(v) for k, v in kwargs.items()})
        back = (
            torch.empty_strided(out.shape, out.stride(), dtype=dtype, device=_META)
            if isinstance(out, torch.Tensor) and out.dtype == half
            else out
        )
        return back, GROUPED_MM_NOTE.format(dtype=str(dtype).replace("torch.", ""))
    if "expected device meta" in message or ("device" in message and "meta" in message and "cpu" in message):
        if not any(isinstance(t, torch.Tensor) and t.is_meta for t in tensors_of(list(args) + list(kwargs.values()))):
            raise exc

        def move(value):
            if isinstance(value, torch.Tensor) and not value.is_meta and value.dim() > 0:
                meta = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device=_META)
                if know is not None:
                    know(meta, value)
                return meta
            if isinstance(value, (list, tuple)):
                return type(value)(move(v) for v in value)
            return value

        moved_args, moved_kwargs = move(args), {k: move(v) for k, v in kwargs.items()}
        return run(func, moved_args, moved_kwargs), CPU_TENSOR_NOTE
    raise exc
