"""Real values for the meta tensors that depend on the inputs alone.

The memory model runs the step on the meta device, where no tensor has data. Some models ask for
data all the same: Hugging Face's attention masks test `padding_mask.all()` (an `.item()`) to
choose a kernel, a model may index with `nonzero()`. Those values come from the inputs (token ids,
an attention mask, positions from `arange`), never from the weights, and they are small. So the
real values of the inputs (and of small buffers) are kept beside their meta copies, and each op
whose tensors all have a real value is also run on those values: its meta outputs get theirs. An
`.item()` or a data-dependent shape on such a tensor is then answered with the real result, as
the real step would compute it. An op that reads any tensor without a value (a weight, an
activation) gives none; an op that writes one loses its value. Which of the starting values (inputs,
buffers) each value was computed from is kept: an answer computed from one that the step changed (a
BatchNorm's `num_batches_tracked`) may differ in the next step, which is then not replayed (steady.plan).

Each layer repeats the same op on the same values (a Llama layer's attention turns the one causal
mask into a float bias: a 16 MiB `where` per layer, a fifth of an 8B model's analysis), so a large
functional result is kept by its operands (their bytes: storage, view, and the writes to it since)
and handed out again as a copy-on-write clone (_Results).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch

from archlint.model.train.metacache import is_count_step, tensors_of

# Values are kept and computed only for tensors up to this size: masks and positions, not images
# of a large batch or weight-sized buffers.
VALUE_LIMIT_BYTES = 16 << 20
# Real results kept for reuse (_Results): a few masks' worth
RESULT_LIMIT_BYTES = 64 << 20
REUSE_MIN_BYTES = 1 << 20
SMALL_BY_VALUE = 16  # elements
_CACHEABLE: dict[int, bool] = {}  # by id: an op lives as long as the process (metacache)
_LAZY_CLONE = getattr(torch, "_lazy_clone", None)  # copy-on-write (torch 2.3 and later)
_NONDETERMINISTIC = getattr(torch.Tag, "nondeterministic_seeded", None)
_META, _CPU = torch.device("meta"), torch.device("cpu")
_TENSOR = torch.Tensor


class _ById:
    """Values by the identity of their meta tensor (torch's WeakIdKeyDictionary makes a weak
    reference on every lookup: too slow for a lookup per op argument)."""

    def __init__(self):
        self._items: dict[int, tuple[weakref.ref, torch.Tensor]] = {}

    def __setitem__(self, meta: torch.Tensor, value: torch.Tensor) -> None:
        key = id(meta)
        self._items[key] = (weakref.ref(meta, self.gone(key)), value)

    def gone(self, key: int) -> Callable:
        """The callback that drops the item at `key` when its meta tensor goes."""
        items = self._items

        def gone(ref, key=key):
            if key in items and items[key][0] is ref:
                del items[key]

        return gone

    def __getitem__(self, meta: torch.Tensor) -> torch.Tensor:
        ref, value = self._items[id(meta)]
        if ref() is not meta:
            raise KeyError(id(meta))
        if value is _UNMADE:  # an `empty`'s value, made when first read
            value = _made(meta)
            self._items[id(meta)] = (ref, value)
        elif type(value) is _Borrowed:  # a start value, copied when first read
            value = value.copied()
            self._items[id(meta)] = (ref, value)
        return value

    def __contains__(self, meta: torch.Tensor) -> bool:
        item = self._items.get(id(meta))
        return item is not None and item[0]() is meta

    def discard(self, meta: torch.Tensor) -> None:
        """Drop the value of `meta` if there is one (nothing made or copied)."""
        if meta in self:
            del self._items[id(meta)]


# The value of an `empty` on meta until something reads it (_made): most are never read (BatchNorm's
# `reserve`, one a layer), and making one costs what the op costs on the CPU. Every op that writes the
# meta tensor reads its value first (KnownValues.run) or drops it, so its shape is the empty's then.
_UNMADE: Any = object()


class _Borrowed:
    """A start value (KnownValues.know_all) not copied yet: the real tensor itself, copied when first
    read (`copied`, as know copies it). Most are never read: a BatchNorm's running statistics (two
    buffers a layer) are written by its first op, which drops their values unread; the inputs are
    read by the first op only where every other tensor it reads has a value too. The real tensors are
    the model's buffers and the caller's inputs, which the step never writes (it runs on their meta
    copies): the copy made when read is the copy know_all would have made.
    `added`: the in-place adds of a number the step has made to it since (KnownValues._deferred_count_step), run
    on the copy in their order when it is made: a BatchNorm's `num_batches_tracked += 1`, one a
    layer, is rarely read (momentum=None reads it)."""

    __slots__ = ("real", "added")

    def __init__(self, real: torch.Tensor):
        self.real = real
        self.added: list[tuple[Any, int]] | None = None  # (a list made at the first add: most have none)

    def plus(self, func, number: int) -> None:
        """`func(value, number)` (an in-place add) to run on the copy when it is made (appended: a
        counter a loop adds to many times costs an add each)."""
        if self.added is None:
            self.added = []
        self.added.append((func, number))

    def copied(self) -> torch.Tensor:
        return _one_thread(self._made, (), {})

    def _made(self) -> torch.Tensor:
        value = _copy_to_cpu(self.real)
        for func, number in self.added or ():
            func(value, number)
        return value


def _copy_to_cpu(real: torch.Tensor) -> torch.Tensor:
    return real.detach().to(_CPU, copy=True)


def _made(meta: torch.Tensor) -> torch.Tensor:
    """An `empty`'s value: an uninitialized CPU tensor of the meta tensor's shape, strides and dtype,
    what computing the op on the CPU gives (its bytes are whatever the allocator hands out either way)."""
    return torch.empty_strided(tuple(meta.shape), meta.stride(), dtype=meta.dtype, device=_CPU)


class _Results:
    """Real results of functional, deterministic ops, by op and operands: an operand is its storage's
    address, its view of it (offset, shape, stride, dtype) and how many times the storage has been
    written (the operands are kept alive by the entry, so an address is not reused; torch's version
    counter does not move under a dispatch mode), a number its type and repr (1, 1.0, True and -0.0 are different arguments), a tensor of
    a few elements its value (the scalar tensors the math attention makes afresh for each call).
    What is kept and what a hit hands out are copy-on-write clones of the result (torch._lazy_clone):
    no bytes are copied, and a write to one (the step may write to an op's output) copies it first
    and leaves the others as they were; a copy would cost what the op costs (a fresh 16 MiB takes
    its pages from the system each time). Without lazy clones nothing is kept. At most
    RESULT_LIMIT_BYTES are kept, the oldest dropped first."""

    def __init__(self):
        self._items: dict[tuple, tuple[Any, Any]] = {}
        self._bytes = 0
        self._writes: dict[int, int] = {}  # storage address -> writes seen
        self.hits = 0

    @staticmethod
    def cacheable(func) -> bool:
        ok = _CACHEABLE.get(id(func))
        if ok is None:
            schema = func._schema
            ok = _CACHEABLE[id(func)] = (
                _LAZY_CLONE is not None
                and not schema.is_mutable
                and all(r.alias_info is None for r in schema.returns)
                and _NONDETERMINISTIC not in getattr(func, "tags", ())
            )
        return ok

    def key(self, func, args: tuple, kwargs: dict) -> tuple | None:
        try:
            key = (id(func), self._key_of(args), self._key_of(tuple(sorted(kwargs.items()))))
            hash(key)
        except TypeError:  # an argument with no value key (an object the op reads by identity)
            return None
        return key

    def _key_of(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if value.numel() <= SMALL_BY_VALUE:  # made afresh for each call (torch.where's scalar_tensor): by value
                return ("small", value.dtype, tuple(value.shape), value.stride(), repr(value.tolist()))
            # the storage and the view of it (each layer slices the mask afresh: a new tensor, the same bytes)
            address = _address(value)
            return (
                "tensor",
                value.dtype,
                address,
                value.storage_offset(),
                tuple(value.shape),
                value.stride(),
                self._writes.get(address, 0),
            )
        if isinstance(value, (list, tuple)):
            return (type(value).__name__, *(self._key_of(v) for v in value))
        if isinstance(value, (bool, int, float, complex)):
            return (type(value).__name__, repr(value))
        return (type(value).__name__, value)

    def written(self, tensors: list[torch.Tensor]) -> None:
        """These tensors' storages are written (called before and after the write, so that both
        addresses count: a copy-on-write clone moves to its own storage when written). With nothing
        kept no count is read: a result kept later is keyed by the counts from then on, and a
        write after that still moves its key (the step's in-place ops on values: a step counter)."""
        if not self._items:
            return
        for t in tensors:
            address = _address(t)
            self._writes[address] = self._writes.get(address, 0) + 1

    def get(self, key: tuple) -> Any | None:
        item = self._items.get(key)
        if item is None:
            return None
        self.hits += 1
        return _cloned(item[1])

    def put(self, key: tuple, operands: tuple, result: Any) -> None:
        nbytes = sum(t.nbytes for t in tensors_of(result))
        if nbytes > RESULT_LIMIT_BYTES:
            return
        if key in self._items:
            self._drop(key)
        self._items[key] = (operands, _cloned(result))
        self._bytes += nbytes
        while self._bytes > RESULT_LIMIT_BYTES:
            self._drop(next(iter(self._items)))

    def _drop(self, key: tuple) -> None:
        _, result = self._items.pop(key)
        self._bytes -= sum(t.nbytes for t in tensors_of(result))


def _address(t: torch.Tensor) -> int:
    """The address of the tensor's storage, read without writing it (a copy-on-write clone's `data_ptr()`
    copies its bytes first; clones share the address until one is written)."""
    start = t.const_data_ptr()  # type: ignore[attr-defined]  # not in torch's stubs (torch 2.1 and later)
    return start - t.storage_offset() * t.element_size()


def _cloned(value: Any) -> Any:
    """`value` with its tensors replaced by copy-on-write clones (_Results)."""
    if isinstance(value, torch.Tensor):
        clone = _LAZY_CLONE
        assert clone is not None  # nothing is kept without it (_Results.cacheable)
        return clone(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_cloned(v) for v in value)
    return value


class KnownValues:
    def __init__(self):
        self.values = _ById()
        self.results = _Results()
        # The values the step starts from (know_all: the inputs, the buffers), by index; which of
        # them each value was computed from (by id of its meta tensor; none: not kept); which of them
        # a data-dependent answer (.item(), nonzero) was computed from. The step's replay (steady.plan)
        # holds only if those are the values the next step starts from.
        self.start: list[tuple[weakref.ref, torch.Tensor]] = []
        self.origin: dict[int, frozenset[int]] = {}
        self.read: set[int] = set()

    def know(self, meta: torch.Tensor, real: torch.Tensor) -> None:
        """`meta` has the value `real` (a copy is kept: the step may write to it)."""
        if meta.device.type == "meta" and real.device.type != "meta" and real.nbytes <= VALUE_LIMIT_BYTES:
            self.values[meta] = real.detach().to(_CPU, copy=True)
            self.origin.pop(id(meta), None)

    def know_all(self, pairs) -> None:
        """`know` for each (meta, real) pair, each copy made when the value is first read (_Borrowed;
        most are never read), on this thread alone: an input of a few hundred kB is over ATen's grain
        for a parallel copy, whose threads wait on each other for milliseconds on a busy machine (4-8
        ms of CPU time a step on 2 cores at load 20, against 0.1-0.4 ms on one thread): _one_thread."""
        items, gone = self.values._items, self.values.gone
        # the originals: the real model's buffers and the inputs, which the meta step never writes;
        # each value's origin is its own index among them
        self.start, self.origin = [], {}
        for meta, real in pairs:
            if meta.is_meta and not real.is_meta and real.nbytes <= VALUE_LIMIT_BYTES:  # know's test
                key = id(meta)
                items[key] = (weakref.ref(meta, gone(key)), _Borrowed(real))
                self.origin[key] = frozenset((len(self.start),))
                self.start.append((weakref.ref(meta), real))

    def stale_answers(self) -> bool:
        """Whether a data-dependent answer was computed from a value the step started from that is
        not what it was now: written, or lost (an unknown written into it). The next step starts
        from the new value and may answer otherwise (a BatchNorm's num_batches_tracked, 1 then 2)."""
        for i in sorted(self.read):
            ref, real = self.start[i]
            meta = ref()
            if meta is None:
                continue  # gone: no later step reads it
            value = self.values[meta] if meta in self.values else None
            if value is None or not _one_thread(torch.equal, (value, real.detach().to(_CPU)), {}):
                return True
        return False

    def _origin_of(self, args: tuple, kwargs: dict) -> frozenset[int]:
        """The start values the op's meta arguments were computed from."""
        origin = self.origin
        found = [origin[id(t)] for t in tensors_of([args, list(kwargs.values())]) if id(t) in origin]
        return frozenset().union(*found) if found else frozenset()

    def _real(self, value, found: list) -> Any:
        """`value` with meta tensors replaced by their values (raises KeyError for one without)."""
        if isinstance(value, torch.Tensor):
            if not value.is_meta:
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
        items = self.values._items  # `arg in self.values`, inlined: this loop runs for every op of the step
        plain = not kwargs  # no meta tensor with a value, no list, no device: nothing to compute on values
        for arg in args:  # the common case first: an activation or a weight, with no value
            if type(arg) is _TENSOR or isinstance(arg, torch.Tensor):  # (the exact type first: no metaclass check)
                if arg.is_meta:
                    item = items.get(id(arg))
                    if item is None or item[0]() is not arg:
                        # (_written's cache read first: most ops write nothing, and are known not to)
                        if _WRITTEN.get(id(func), True) and _written(func):
                            self._forget_written(func, args, kwargs)
                        return meta_run(func, args, kwargs)
                    plain = False
            elif isinstance(arg, (list, tuple, torch.device)):
                plain = False
        if plain:  # a CPU step counter's add_, a real scalar's .item()
            return meta_run(func, args, kwargs)
        if id(func) in _EMPTY:
            out = self._empty(func, args, kwargs, meta_run)
            if out is not None:
                return out
        elif not kwargs and _writes_self(func) and args[0].is_meta:
            out = self._small_inplace(func, args, meta_run)
            if out is not None:
                return out
        found: list = []
        try:
            real_args = self._real(args, found)
            real_kwargs = {k: self._real(v, found) for k, v in kwargs.items()}
        except KeyError:  # a tensor without a value: it writes no value, and those it writes lose theirs
            self._forget_written(func, args, kwargs)
            return meta_run(func, args, kwargs)
        if not found:  # no meta tensor at all (the real-tensor run, a CPU step counter)
            return meta_run(func, args, kwargs)
        answered = False
        try:
            out = meta_run(func, args, kwargs)
        except (RuntimeError, NotImplementedError):  # a data-dependent op: the real result gives the answer
            real_out = self._computed(func, real_args, real_kwargs, reuse=False)
            out = _as_meta(real_out)
            answered = True
        else:
            nbytes = sum(t.nbytes for t in tensors_of(out) if t.is_meta)
            if nbytes > VALUE_LIMIT_BYTES:
                self._forget_written(func, args, kwargs)
                return out
            real_out = self._computed(func, real_args, real_kwargs, reuse=nbytes >= REUSE_MIN_BYTES)
        origin = self._origin_of(args, kwargs)
        if answered:
            self.read |= origin
        for meta_t, real_t in zip(tensors_of(out), tensors_of(real_out)):
            if meta_t.is_meta and meta_t.shape == real_t.shape:
                item = items.get(id(meta_t))
                if item is None or item[1] is not real_t or item[0]() is not meta_t:  # (an in-place op's: kept)
                    self.values[meta_t] = real_t
                if origin:
                    self.origin[id(meta_t)] = origin
                else:
                    self.origin.pop(id(meta_t), None)
        return out

    def _empty(self, func, args: tuple, kwargs: dict, meta_run: Callable) -> Any:
        """An `empty` on meta (size and dtype its only data): its meta result with an unmade value
        (_UNMADE), as the general path would give it a CPU `empty`; None where that path is needed (a
        device, layout or pinning it would treat otherwise, a meta kernel that refuses)."""
        device = kwargs.get("device")
        if (
            not isinstance(device, torch.device)
            # (compared, not read as device.type: a string made per read, 0.2 us measured on this
            # project's 2-core test machine; an indexed meta:0 takes the general path)
            or device != _META
            or kwargs.get("pin_memory") not in (None, False)
            or kwargs.get("layout") not in (None, torch.strided)
        ):
            return None
        for a in args:  # (a loop, not any() over a generator: one a BatchNorm)
            if not isinstance(a, (int, list, tuple)):
                return None
        try:
            out = meta_run(func, args, kwargs)
        except (RuntimeError, NotImplementedError):
            return None
        if not isinstance(out, torch.Tensor) or not out.is_meta:
            return None
        if out.nbytes <= VALUE_LIMIT_BYTES:
            self.values._items[id(out)] = (weakref.ref(out, self.values.gone(id(out))), _UNMADE)
            self.origin.pop(id(out), None)
        return out

    def _small_inplace(self, func, args: tuple, meta_run: Callable) -> Any:
        """An in-place op on a known tensor of a few elements whose other arguments are known meta
        tensors, CPU tensors or numbers (BatchNorm's `num_batches_tracked += 1`, one a layer;
        stochastic depth's `bernoulli_` and `div_` on its noise, one a block): the general path's
        result, the real op run on the values without its generic walk (no list, no device, no
        keyword to translate); None where that path is needed."""
        if self._deferred_count_step(func, args):
            return args[0]
        origins = self.origin
        real_args: list = []
        origin: frozenset[int] = frozenset()
        for arg in args:
            if isinstance(arg, torch.Tensor):
                if arg.is_meta:
                    origin |= origins.get(id(arg), origin)
                    arg = self.values[arg]  # known (run's first loop); made or copied when unread
            elif isinstance(arg, (list, tuple, torch.device)):
                return None
            real_args.append(arg)
        real_self = real_args[0]
        if real_self.numel() > SMALL_BY_VALUE:
            return None
        try:
            out = meta_run(func, args, {})
        except (RuntimeError, NotImplementedError):
            return None
        if out is not args[0]:
            return None
        written = [real_self]
        self.results.written(written)
        _one_thread(func, tuple(real_args), {})  # (another operand may be large: one thread, as _computed)
        self.results.written(written)
        if origin:  # its own and its operands'
            origins[id(out)] = origin
        return out

    def _deferred_count_step(self, func, args: tuple) -> bool:
        """Whether the op is a count's step (metacache.is_count_step) on an int64 start value not
        copied yet, now kept to run when the value is read (_Borrowed.plus): the same add on the same
        value, without the copy, the meta kernel and the real kernel now (a BatchNorm's, one a layer).
        The real add can only add, and nothing kept by _Results reads the value (its copy is not made
        yet), so no write is counted."""
        if not is_count_step(func, args, {}):
            return False
        value = self.values._items[id(args[0])][1]  # known (run's first loop)
        if type(value) is not _Borrowed or value.real.dtype is not torch.int64:
            return False
        value.plus(func, args[1])
        return True

    def _computed(self, func, real_args: tuple, real_kwargs: dict, reuse: bool) -> Any:
        """func on real values: from the results kept when it has run on these operands (_Results),
        where `reuse` (a large result: a small one costs less to compute than to look up)."""
        written = [
            t
            for i, name in _written(func)
            for t in tensors_of(real_args[i] if i < len(real_args) else real_kwargs.get(name))
        ]
        if written:
            self.results.written(written)
            real_out = _one_thread(func, real_args, real_kwargs)
            self.results.written(written)
            return real_out
        key = self.results.key(func, real_args, real_kwargs) if reuse and self.results.cacheable(func) else None
        if key is not None:
            kept = self.results.get(key)
            if kept is not None:
                return kept
        real_out = _one_thread(func, real_args, real_kwargs)
        if key is not None:
            self.results.put(key, (real_args, real_kwargs), real_out)
        return real_out

    def _forget_written(self, func, args: tuple, kwargs: dict) -> None:
        values = self.values
        items = values._items
        for i, name in _written(func):
            value = args[i] if i < len(args) else kwargs.get(name)
            if isinstance(value, torch.Tensor):  # the common case: an in-place op's self
                if id(value) in items:  # (most have none: a BatchNorm's running stats after its first step)
                    values.discard(value)
                continue
            for t in tensors_of(value):
                values.discard(t)


def _one_thread(func, args: tuple, kwargs: dict) -> Any:
    """func run by ATen on this thread alone: the values are masks and positions, a few kB, and a
    parallel kernel's threads wait on each other for milliseconds on a busy machine (GPT-2's causal
    `tril` of a 128x128 mask: 1-21 ms on 2 threads at load 1-2, 5 us on one), as for the copies of
    `know_all`. (Setting the count costs a fraction of a microsecond.)"""
    threads = torch.get_num_threads()
    if threads == 1:
        return func(*args, **kwargs)
    torch.set_num_threads(1)
    try:
        return func(*args, **kwargs)
    finally:
        torch.set_num_threads(threads)


_WRITTEN: dict = {}
# ops with a fast path in KnownValues.run, by id
_EMPTY = {id(torch.ops.aten.empty.memory_format)}
_WRITES_SELF: dict[int, bool] = {}


def _writes_self(func) -> bool:
    """Whether the op writes its `self` alone and returns it (add_, div_, bernoulli_, fill_), as
    KnownValues._small_inplace runs it."""
    writes = _WRITES_SELF.get(id(func))  # by id: an op lives as long as the process (metacache)
    if writes is None:
        returns = func._schema.returns
        writes = _WRITES_SELF[id(func)] = (
            [i for i, _ in _written(func)] == [0]
            and len(returns) == 1
            and returns[0].alias_info is not None
            and returns[0].alias_info.is_write
        )
    return writes


def _written(func) -> list[tuple[int, str]]:
    """(position, name) of the arguments the op writes to."""
    written = _WRITTEN.get(id(func))  # by id: an op lives as long as the process (metacache)
    if written is None:
        arguments = func._schema.arguments
        trains = any(a.name == "training" for a in arguments)  # not its backward, not the no-training form
        written = _WRITTEN[id(func)] = [
            (i, a.name)
            for i, a in enumerate(arguments)
            if (a.alias_info is not None and a.alias_info.is_write) or (trains and a.name in _RUNNING_STATS)
        ]
    return written


# Arguments written though the schema does not say so: native_batch_norm's (and cudnn's, miopen's)
# running statistics, updated in place in training (a value kept for them would go stale)
_RUNNING_STATS = ("running_mean", "running_var")


def _as_meta(value: Any) -> Any:
    """A real op's result as the meta kernel would give it: tensors on meta, other values as they are."""
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device=_META)
    if isinstance(value, (list, tuple)):
        return type(value)(_as_meta(v) for v in value)
    return value
