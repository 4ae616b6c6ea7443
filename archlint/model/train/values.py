"""Real values for the meta tensors that depend on the inputs alone.

The memory model runs the step on the meta device, where no tensor has data. Some models ask for
data all the same: Hugging Face's attention masks test `padding_mask.all()` (an `.item()`) to
choose a kernel, a model may index with `nonzero()`. Those values come from the inputs (token ids,
an attention mask, positions from `arange`), never from the weights, and they are small. So the
real values of the inputs (and of small buffers) are kept beside their meta copies, and each op
whose tensors all have a real value is also run on those values: its meta outputs get theirs. An
`.item()` or a data-dependent shape on such a tensor is then answered with the real result, as
the real step would compute it. An op that reads any tensor without a value (a weight, an
activation) gives none; an op that writes one loses its value.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch

from archlint.model.train.metacache import tensors_of

# Values are kept and computed only for tensors up to this size: masks and positions, not images
# of a large batch or weight-sized buffers.
VALUE_LIMIT_BYTES = 16 << 20
_META, _CPU = torch.device("meta"), torch.device("cpu")


class _ById:
    """Values by the identity of their meta tensor (torch's WeakIdKeyDictionary makes a weak
    reference on every lookup: too slow for a lookup per op argument)."""

    def __init__(self):
        self._items: dict[int, tuple[weakref.ref, torch.Tensor]] = {}

    def __setitem__(self, meta: torch.Tensor, value: torch.Tensor) -> None:
        key = id(meta)
        items = self._items

        def gone(ref, key=key):
            if key in items and items[key][0] is ref:
                del items[key]

        self._items[key] = (weakref.ref(meta, gone), value)

    def __getitem__(self, meta: torch.Tensor) -> torch.Tensor:
        ref, value = self._items[id(meta)]
        if ref() is not meta:
            raise KeyError(id(meta))
        return value

    def __contains__(self, meta: torch.Tensor) -> bool:
        item = self._items.get(id(meta))
        return item is not None and item[0]() is meta

    def pop(self, meta: torch.Tensor, default=None):
        if meta in self:
            return self._items.pop(id(meta))[1]
        return default


class KnownValues:
    def __init__(self):
        self.values = _ById()

    def know(self, meta: torch.Tensor, real: torch.Tensor) -> None:
        """`meta` has the value `real` (a copy is kept: the step may write to it)."""
        if meta.device.type == "meta" and real.device.type != "meta" and real.nbytes <= VALUE_LIMIT_BYTES:
            self.values[meta] = real.detach().to(_CPU, copy=True)

    def know_all(self, pairs) -> None:
        """`know` for each (meta, real) pair, the copies made on this thread alone: an input of a few
        hundred kB is over ATen's grain for a parallel copy, whose threads wait on each other for
        milliseconds on a busy machine (4-8 ms of CPU time a step on 2 cores at load 20, against
        0.1-0.4 ms on one thread)."""
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for meta, real in pairs:
                self.know(meta, real)
        finally:
            torch.set_num_threads(threads)

    def _real(self, value, found: list) -> Any:
        """`value` with meta tensors replaced by their values (raises KeyError for one without)."""
        if isinstance(value, torch.Tensor):
            if value.device.type != "meta":
                return value
            found.append(True)
            return self.values[value]
        if isinstance(value, (list, tuple)):
            return type(value)(self._real(v, found) for v in value)
        if isinstance(value, torch.device) and value.type == "meta":
            found.append(True)  # a factory op on meta (arange, full): computable on the CPU
            return _CPU
        return value

    def run(self, func, args: tuple, kwargs: dict, meta_run: Callable) -> Any:
        """func on meta (by `meta_run`), and on the real values when every meta tensor it reads has
        one; a meta kernel that needs data (.item(), nonzero) is answered from the real result."""
        values = self.values
        for arg in args:  # the common case first: an activation or a weight, with no value
            if isinstance(arg, torch.Tensor) and arg.is_meta and arg not in values:
                if _written(func):
                    self._forget_written(func, args, kwargs)
                return meta_run(func, args, kwargs)
        found: list = []
        try:
            real_args = self._real(args, found)
            real_kwargs = {k: self._real(v, found) for k, v in kwargs.items()}
        except KeyError:  # a tensor without a value: it writes no value, and those it writes lose theirs
            self._forget_written(func, args, kwargs)
            return meta_run(func, args, kwargs)
        if not found:  # no meta tensor at all (the real-tensor run, a CPU step counter)
            return meta_run(func, args, kwargs)
        try:
            out = meta_run(func, args, kwargs)
        except (RuntimeError, NotImplementedError):  # a data-dependent op: the real result gives the answer
            real_out = func(*real_args, **real_kwargs)
            out = _as_meta(real_out)
        else:
            if sum(t.nbytes for t in tensors_of(out) if t.device.type == "meta") > VALUE_LIMIT_BYTES:
                self._forget_written(func, args, kwargs)
                return out
            real_out = func(*real_args, **real_kwargs)
        for meta_t, real_t in zip(tensors_of(out), tensors_of(real_out)):
            if meta_t.device.type == "meta" and meta_t.shape == real_t.shape:
                self.values[meta_t] = real_t
        return out

    def _forget_written(self, func, args: tuple, kwargs: dict) -> None:
        for i, name in _written(func):
            value = args[i] if i < len(args) else kwargs.get(name)
            if isinstance(value, torch.Tensor):  # the common case: an in-place op's self
                self.values.pop(value, None)
                continue
            for t in tensors_of(value):
                self.values.pop(t, None)


_WRITTEN: dict = {}


def _written(func) -> list[tuple[int, str]]:
    """(position, name) of the arguments the op writes to."""
    written = _WRITTEN.get(id(func))  # by id: an op lives as long as the process (metacache)
    if written is None:
        written = _WRITTEN[id(func)] = [
            (i, a.name)
            for i, a in enumerate(func._schema.arguments)
            if a.alias_info is not None and a.alias_info.is_write
        ]
    return written


def _as_meta(value: Any) -> Any:
    """A real op's result as the meta kernel would give it: tensors on meta, other values as they are."""
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device=_META)
    if isinstance(value, (list, tuple)):
        return type(value)(_as_meta(v) for v in value)
    return value
