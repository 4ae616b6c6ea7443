"""Meta kernels answered from a cache: the training step's memory model runs thousands of ops on
the meta device, and many of their meta kernels are Python decompositions (batch norm forward and
backward, type-promoting division, lerp, addcmul) that cost a millisecond or more each.

On the meta device an op's result is a function of its arguments' metadata alone (shape, stride,
dtype, storage offset, which arguments share a storage) and its other arguments' values: there is
no data. So once an op has run for one such key its result can be rebuilt without running it:

  functional ops (no argument written, no output aliasing an input): fresh outputs with the
      recorded shape, stride and dtype (torch.empty_strided on meta: the same storage size);
  in-place pointwise ops (add_, mul_, lerp_, addcdiv_, ...): `self`, returned as the kernel
      returns it (they change no metadata; the first run has already checked the broadcast).

Anything else (views, in-place view ops, out= ops, ops touching a real tensor, outputs that are
not plain fresh tensors) runs its kernel every time. The step repeats one block's ops per layer
and one parameter's ops per optimizer update, so most ops are answered from the cache.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

MAX_ENTRIES = 100_000
_NOT_CACHEABLE = object()
_cache: dict[tuple, Any] = {}
_kinds: dict[Any, str] = {}
# ops answered from the cache and ops whose kernel ran (for tests and benchmarks)
stats = {"hits": 0, "runs": 0}


def _kind(func) -> str:
    """'functional', 'inplace' (pointwise, writes only `self`, returns it) or '' (always run)."""
    kind = _kinds.get(func)
    if kind is None:
        schema, tags = func._schema, set(getattr(func, "tags", ()))
        written = [a for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
        if not schema.is_mutable and all(r.alias_info is None for r in schema.returns) \
                and torch.Tag.dynamic_output_shape not in tags and torch.Tag.data_dependent_output not in tags:
            kind = "functional"
        elif (torch.Tag.inplace in tags and torch.Tag.pointwise in tags and torch.Tag.inplace_view not in tags
              and len(written) == 1 and written[0].name == "self" and len(schema.returns) == 1):
            kind = "inplace"
        else:
            kind = ""
        _kinds[func] = kind
    return kind


def _key(func, args, kwargs) -> tuple | None:
    """The op's arguments as metadata, or None if one is a non-meta tensor or not hashable."""
    leaves, spec = tree_flatten((args, kwargs))
    storages: dict[int, int] = {}
    parts: list[Any] = [func, spec]
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            if leaf.device.type != "meta" or type(leaf) is not torch.Tensor and not isinstance(leaf, torch.nn.Parameter):
                return None
            # which earlier argument (if any) shares this one's storage: aliasing can change a result
            shared = storages.setdefault(id(leaf.untyped_storage()), len(storages))
            parts.append((tuple(leaf.shape), leaf.stride(), leaf.dtype, leaf.storage_offset(), shared))
        elif leaf is None or isinstance(leaf, (bool, int, float, str, torch.dtype, torch.device,
                                               torch.memory_format, torch.layout)):
            parts.append((type(leaf), leaf))
        else:
            return None
    return tuple(parts)


def _record(out, args: tuple, kwargs: dict) -> Any:
    """How to rebuild `out` (fresh meta tensors, None), or _NOT_CACHEABLE: an output that shares a
    storage with an input (aten._unsafe_view's schema says fresh, its kernel returns a view) or
    with another output, or is not a plain tensor with its own storage."""
    leaves, spec = tree_flatten(out)
    seen = {id(t.untyped_storage()) for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
    shapes = []
    for leaf in leaves:
        if leaf is None:
            shapes.append(None)
            continue
        if type(leaf) is not torch.Tensor or leaf.device.type != "meta" or leaf.storage_offset() != 0:
            return _NOT_CACHEABLE
        storage = leaf.untyped_storage()
        fresh = torch.empty_strided(leaf.shape, leaf.stride(), dtype=leaf.dtype, device="meta")
        if id(storage) in seen or storage.nbytes() != fresh.untyped_storage().nbytes():
            return _NOT_CACHEABLE
        seen.add(id(storage))
        shapes.append((tuple(leaf.shape), leaf.stride(), leaf.dtype))
    return spec, shapes


def _rebuild(recorded) -> Any:
    spec, shapes = recorded
    return tree_unflatten([None if s is None else torch.empty_strided(s[0], s[1], dtype=s[2], device="meta")
                           for s in shapes], spec)


def run(func, args: tuple, kwargs: dict) -> Any:
    """func(*args, **kwargs), answered from the cache when the op and its arguments allow it."""
    kind = _kind(func)
    key = _key(func, args, kwargs) if kind else None
    hit = _cache.get(key) if key is not None else None
    if hit is not None and hit is not _NOT_CACHEABLE:
        stats["hits"] += 1
        return (args[0] if args else kwargs["self"]) if kind == "inplace" else _rebuild(hit)
    stats["runs"] += 1
    if key is None or hit is _NOT_CACHEABLE:
        return func(*args, **kwargs)
    out = func(*args, **kwargs)
    if len(_cache) >= MAX_ENTRIES:
        _cache.clear()
    _cache[key] = True if kind == "inplace" else _record(out, args, kwargs)
    return out
