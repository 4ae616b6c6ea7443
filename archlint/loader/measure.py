"""Time a DataLoader: throughput after warm-up, where one sample's time goes, and the scaling
with num_workers.

Throughput iterates the loader itself (its workers, prefetching and pinning included). The stage
breakdown runs in the main process on a sample of items, with hooks installed only for the
measurement and removed after it: `open` (files opened, bytes read and the time spent reading),
PIL / torchvision.io / cv2 decoding, each transform of a Compose pipeline, the dataset's own code
(whatever is left of `__getitem__`), collate, pin and the host→device copy. Each stage counts its
*exclusive* time (a read inside a decode counts as read only), so the stages add up to the time
of fetching the items.
"""

from __future__ import annotations

import builtins
import functools
import io
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset

from archlint.errors import UsageError
from archlint.loader.load import one_line, with_workers
from archlint.loader.result import Stage, WorkersRow

READ, DECODE, OWN = "open/read", "decode", "other in __getitem__"
COLLATE, PIN, COPY = "collate", "pin", "host→device"


# ---------------------------------------------------------------- throughput


@dataclass
class Throughput:
    samples_per_s: float
    batches_per_s: float
    first_batch_s: float
    spread_ms: list[float]  # [q1, q3] of the time between consecutive timed batches
    batches: int
    samples: int
    notes: list[str] = field(default_factory=list)


def default_warmup(loader: DataLoader) -> int:
    """Untimed batches: enough to drain what the workers prefetched while starting, so that the
    timed window sees the steady state rather than a full queue."""
    if loader.num_workers == 0:
        return 2
    return loader.num_workers * (loader.prefetch_factor or 2) + 1


def throughput(loader: DataLoader, batches: int, warmup: int | None = None, budget_s: float = 5.0) -> Throughput:
    """Iterate `warmup` batches untimed, then up to `batches` timed ones (fewer when the epoch
    ends or `budget_s` seconds have passed). Worker processes are shut down before returning."""
    warmup = default_warmup(loader) if warmup is None else warmup
    notes = []
    try:
        total = len(loader)
    except TypeError:  # an IterableDataset without __len__
        total = None
    if total is not None and total <= warmup + 1:  # keep at least one timed batch
        kept = max(0, total - 2)
        notes.append(f"the loader has {total} batches: {kept} untimed instead of {warmup}")
        warmup = kept
    start = time.perf_counter()
    it = iter(loader)
    try:
        first = next_batch(it)
        if first is None:
            raise UsageError("the loader yields no batch: its dataset is empty")
        first_s = time.perf_counter() - start
        warm_end = time.perf_counter() + budget_s / 2
        for _ in range(warmup):
            if next_batch(it) is None or time.perf_counter() > warm_end:
                break
        gaps, samples = [], 0
        began = last = time.perf_counter()
        for _ in range(batches):
            batch = next_batch(it)
            if batch is None:
                break
            now = time.perf_counter()
            gaps.append(now - last)
            last = now
            samples += batch_len(batch, loader.batch_size)
            if now - began > budget_s:
                notes.append(f"stopped after {len(gaps)} timed batches: the {budget_s:g} s budget ran out")
                break
    finally:
        shutdown(it)
    if not gaps:  # a single-batch loader: the first batch is all there is (start-up included)
        notes.append("only one batch: samples/s is that batch's, worker start-up included")
        gaps, samples = [first_s], batch_len(first, loader.batch_size)
    elapsed = sum(gaps)
    q = statistics.quantiles(gaps, n=4, method="inclusive") if len(gaps) > 1 else [gaps[0]] * 3
    return Throughput(
        samples / elapsed, len(gaps) / elapsed, first_s, [q[0] * 1e3, q[2] * 1e3], len(gaps), samples, notes
    )


def next_batch(it: Iterator) -> Any:
    """The next batch, None at the end; the dataset's own error as one line (UsageError)."""
    try:
        return next(it)
    except StopIteration:
        return None
    except UsageError:
        raise
    except Exception as exc:  # the dataset's own error, raised here or in a worker
        raise UsageError(f"iterating the loader raised {one_line(exc)}; check the dataset's files and code") from exc


def shutdown(it: Iterator) -> None:
    """Stop the iterator's worker processes now (they would otherwise wait for the collector)."""
    stop = getattr(it, "_shutdown_workers", None)
    if stop is not None:
        stop()


def batch_len(batch: Any, default: int | None) -> int:
    """Samples in a batch: the leading size of its first tensor."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else 1
    if isinstance(batch, dict):
        batch = list(batch.values())
    if isinstance(batch, (list, tuple)) and batch:
        for item in batch:
            if isinstance(item, (torch.Tensor, list, tuple, dict)):
                return batch_len(item, default)
        return len(batch)
    return default or 1


def scan_workers(
    loader: DataLoader, settings: list[int], batches: int, budget_s: float, known: dict[int, Throughput]
) -> list[WorkersRow]:
    """One row per num_workers setting, each a fresh loader that stops its workers after."""
    rows = []
    for n in settings:
        t = known.get(n) or throughput(with_workers(loader, n), batches, None, budget_s)
        rows.append(WorkersRow(n, t.samples_per_s, t.first_batch_s, t.batches))
    return rows


def worker_settings(cores: int | None = None) -> list[int]:
    """0, 1, 2, 4, … up to the cores this process may use (and the cores themselves)."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    out, n = [0], 1
    while n < cores:
        out.append(n)
        n *= 2
    return out + [cores]


# ---------------------------------------------------------------- stages of one sample


class Profile:
    """Exclusive time per stage: a region nested in another is taken out of its parent's time."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = defaultdict(float)
        self.files = 0
        self.bytes = 0
        self._stack: list[list] = []  # [stage, start_ns, child_ns]

    def region(self, stage: str) -> _Region:
        return _Region(self, stage)


class _Region:
    __slots__ = ("profile", "stage")

    def __init__(self, profile: Profile, stage: str) -> None:
        self.profile, self.stage = profile, stage

    def __enter__(self) -> None:
        self.profile._stack.append([self.stage, time.perf_counter_ns(), 0])

    def __exit__(self, *exc) -> None:
        stage, start, child = self.profile._stack.pop()
        elapsed = time.perf_counter_ns() - start
        self.profile.ms[stage] += (elapsed - child) / 1e6
        if self.profile._stack:
            self.profile._stack[-1][2] += elapsed


class _CountedRaw(io.RawIOBase):
    """The OS-level side of a file opened for reading while measuring: each read from the OS is
    timed and its bytes counted. A real BufferedReader sits on top, so reads served from its
    buffer (a decoder's header parsing, byte by byte) cost nothing extra and the reader still
    passes every isinstance check."""

    def __init__(self, raw: io.FileIO, profile: Profile) -> None:
        super().__init__()
        self.raw, self.profile = raw, profile

    def readinto(self, buffer) -> int | None:
        with self.profile.region(READ):
            n = self.raw.readinto(buffer)
        self.profile.bytes += n or 0
        return n

    def readall(self) -> bytes:
        with self.profile.region(READ):
            data = self.raw.readall()
        self.profile.bytes += len(data)
        return data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self.raw.seekable()

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.raw.seek(offset, whence)

    def tell(self) -> int:
        return self.raw.tell()

    def fileno(self) -> int:
        return self.raw.fileno()

    def close(self) -> None:
        self.raw.close()
        super().close()

    @property
    def name(self):
        return self.raw.name

    @property
    def mode(self) -> str:
        return self.raw.mode


def _counted_open(file, mode: str, buffering: int, encoding, errors, newline, closefd, opener, profile: Profile):
    """`open` for reading, with the OS reads counted (see _CountedRaw)."""
    with profile.region(READ):
        raw = io.FileIO(file, "r", closefd=closefd, opener=opener)
    size = buffering if buffering > 1 else max(io.DEFAULT_BUFFER_SIZE, getattr(os.fstat(raw.fileno()), "st_blksize", 0))
    reader = io.BufferedReader(_CountedRaw(raw, profile), buffer_size=size)
    if "b" in mode:
        return reader
    return io.TextIOWrapper(reader, encoding=encoding, errors=errors, newline=newline)


class _Hooks:
    """Installs the measuring hooks; `remove` puts every original back."""

    def __init__(self, profile: Profile, wrap_files: bool) -> None:
        self.profile, self.wrap_files = profile, wrap_files
        self._saved: list[tuple[Any, str, Any]] = []

    def patch(self, owner: Any, name: str, make: Callable[[Callable], Callable]) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return
        self._saved.append((owner, name, original))
        setattr(owner, name, make(original))

    def timed(self, stage: str, counts_file: bool = False) -> Callable[[Callable], Callable]:
        profile = self.profile

        def make(original):
            def hooked(*args, **kwargs):
                with profile.region(stage):
                    out = original(*args, **kwargs)
                if counts_file:
                    profile.files += 1
                    if isinstance(out, torch.Tensor):  # torchvision.io.read_file: the bytes
                        profile.bytes += out.numel()
                return out

            return hooked

        return make

    def install(self) -> None:
        profile, wrap = self.profile, self.wrap_files

        def make_open(original):
            def hooked_open(
                file, mode="r", buffering=-1, encoding=None, errors=None, newline=None, closefd=True, opener=None
            ):
                reading = isinstance(mode, str) and set(mode) <= set("rbt") and not isinstance(file, int)
                if not reading:
                    return original(file, mode, buffering, encoding, errors, newline, closefd, opener)
                profile.files += 1
                if wrap and buffering != 0:
                    return _counted_open(file, mode, buffering, encoding, errors, newline, closefd, opener, profile)
                with profile.region(READ):  # unbuffered, or counting turned off: the open alone
                    return original(file, mode, buffering, encoding, errors, newline, closefd, opener)

            return hooked_open

        self.patch(builtins, "open", make_open)
        self.patch(io, "open", make_open)
        if "PIL.Image" in sys.modules:  # decoding is lazy in PIL: open parses the header, load decodes
            image, image_file = sys.modules["PIL.Image"], sys.modules.get("PIL.ImageFile")
            self.patch(image, "open", self.timed(DECODE))
            self.patch(image.Image, "convert", self.timed(DECODE))
            if image_file is not None:
                self.patch(image_file.ImageFile, "load", self.timed(DECODE))
        for name in ("torchvision.io", "torchvision.io.image"):
            mod = sys.modules.get(name)
            if mod is not None:
                self.patch(mod, "read_file", self.timed(READ, counts_file=True))
                for fn in ("decode_image", "decode_jpeg", "decode_png", "decode_webp"):
                    self.patch(mod, fn, self.timed(DECODE))
        if "cv2" in sys.modules:
            cv2 = sys.modules["cv2"]
            self.patch(cv2, "imread", self.timed(DECODE, counts_file=True))
            self.patch(cv2, "imdecode", self.timed(DECODE))

    def remove(self) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()


class _TimedTransform:
    """One transform of a pipeline, timed as its own stage."""

    def __init__(self, transform: Callable, stage: str, profile: Profile) -> None:
        self.transform, self.stage, self.profile = transform, stage, profile

    def __call__(self, *args, **kwargs):
        with self.profile.region(self.stage):
            return self.transform(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self.transform, name)


TRANSFORM_ATTRS = ("transform", "transforms", "target_transform")
# Packages whose callables are transforms, whatever attribute holds them.
TRANSFORM_PACKAGES = ("torchvision.transforms", "albumentations", "kornia.augmentation", "monai.transforms")
_ABSENT = object()


def _is_transform(value: Any) -> bool:
    """A transform by what it is: a callable object of a transform package, or of a class of the
    user's with a __call__ (a custom transform, a Compose of their own). Not a function (a reader
    such as ImageFolder's `loader` is one), a class, a Dataset or a DataLoader."""
    import types

    if not callable(value) or isinstance(
        value, (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial)
    ):
        return False
    module = type(value).__module__ or ""
    if module.startswith(TRANSFORM_PACKAGES):
        return True
    root = module.split(".")[0]
    if root in sys.stdlib_module_names or root in ("torch", "numpy", "PIL", "cv2", "h5py", "pandas"):
        return False  # a cache (functools.lru_cache), a reader, an array: not a transform
    return not isinstance(value, (torch.utils.data.Dataset, DataLoader, torch.nn.Module))


def _used_in_getitem(owner: Any) -> set[str] | None:
    """The `self.NAME` attributes that the class's __getitem__ reads (None: source not available)."""
    import inspect
    import re

    getitem = getattr(type(owner), "__getitem__", None)
    try:
        source = inspect.getsource(getitem)
    except (OSError, TypeError):
        return None
    return set(re.findall(r"\bself\.(\w+)", source))


def _transform_name(t: Any) -> str:
    name = type(t).__name__
    if name in ("function", "builtin_function_or_method", "partial"):
        name = getattr(t, "__name__", None) or getattr(getattr(t, "func", None), "__name__", name)
    return name


class _Pipelines:
    """Finds the dataset's transform pipelines (its `transform`/`transforms`/`target_transform`,
    also of a wrapped dataset such as a Subset) and times each step while installed."""

    def __init__(self, dataset: Any, profile: Profile) -> None:
        self.dataset, self.profile = dataset, profile
        self._saved: list[tuple[Any, str, Any]] = []
        self.names: list[str] = []

    def install(self) -> None:
        seen: set[int] = set()
        owner, depth = self.dataset, 0
        while owner is not None and depth < 4:
            for attr in self._transform_attrs(owner):
                value = getattr(owner, attr, None)
                if value is not None and callable(value) and id(value) not in seen:
                    seen.add(id(value))
                    prefix = "target_transform" if attr == "target_transform" else "transform"
                    self._wrap(owner, attr, value, prefix, seen)
            owner, depth = getattr(owner, "dataset", None), depth + 1

    @staticmethod
    def _transform_attrs(owner: Any) -> list[str]:
        """The conventional names, then any other attribute of the instance that holds a transform
        (by what it is, `_is_transform`) and that __getitem__ reads (`self.tf`, `self.augment`)."""
        names = [a for a in TRANSFORM_ATTRS if getattr(owner, a, None) is not None]
        used = _used_in_getitem(owner)
        for attr, value in (getattr(owner, "__dict__", None) or {}).items():
            if attr not in names and (used is None or attr in used) and _is_transform(value):
                names.append(attr)
        return names

    def _wrap(self, owner: Any, attr: str, value: Any, prefix: str, seen: set[int]) -> None:
        steps = getattr(value, "transforms", None)
        if isinstance(steps, (list, tuple)) and steps and all(callable(s) for s in steps):
            # a Compose (torchvision v1 or v2): time each step where the pipeline calls it
            timed = [_TimedTransform(s, self._stage(prefix, s), self.profile) for s in steps]
            self._set(value, "transforms", type(steps)(timed) if isinstance(steps, tuple) else timed)
        elif type(value).__name__ == "StandardTransform":  # VisionDataset.transforms: the two inside
            for inner in ("transform", "target_transform"):
                step = getattr(value, inner, None)
                if step is not None and id(step) not in seen:
                    seen.add(id(step))
                    self._wrap(value, inner, step, "target_transform" if inner == "target_transform" else prefix, seen)
        else:
            self._set(owner, attr, _TimedTransform(value, self._stage(prefix, value), self.profile))

    def _set(self, owner: Any, attr: str, value: Any) -> None:
        """Set in the instance's __dict__ (past nn.Module.__setattr__ and properties); `remove`
        puts back what was there, or deletes the entry when the value lived elsewhere."""
        own = getattr(owner, "__dict__", None)
        if own is None:  # __slots__ only: left untimed, its time stays with its caller
            return
        self._saved.append((owner, attr, own.get(attr, _ABSENT)))
        own[attr] = value

    def _stage(self, prefix: str, step: Any) -> str:
        base = f"{prefix}: {_transform_name(step)}"
        name, n = base, 1
        while name in self.names:
            n += 1
            name = f"{base} #{n}"
        self.names.append(name)
        return name

    def remove(self) -> None:
        for owner, attr, value in reversed(self._saved):
            if value is _ABSENT:
                del vars(owner)[attr]
            else:
                vars(owner)[attr] = value
        self._saved.clear()


@dataclass
class Stages:
    stages: list[Stage]
    items: int
    ms_per_sample: float  # the sum of the stages
    files_per_sample: float
    bytes_per_sample: float
    notes: list[str] = field(default_factory=list)


def stage_indices(n: int, batch_size: int, items: int) -> list[list[int]]:
    """Whole batches of indices spread evenly over the dataset, about `items` in all."""
    count = max(1, min(n, items))
    batch = max(1, min(batch_size, count))
    per = [round(i * (n - 1) / max(1, count - 1)) if count > 1 else 0 for i in range(count)]
    return [per[i : i + batch] for i in range(0, len(per), batch)]


def stages(loader: DataLoader, items: int = 64, device: str | None = None) -> Stages | None:
    """Where one sample's time goes, measured in the main process on about `items` items of the
    dataset, fetched in batches of the loader's batch size. None for an IterableDataset (no
    items to pick) or a dataset without a length."""
    dataset = loader.dataset
    if isinstance(dataset, IterableDataset) or not hasattr(dataset, "__len__") or len(dataset) == 0:
        return None
    batches = stage_indices(len(dataset), loader.batch_size or 1, items)
    batched = loader.batch_size is not None
    notes: list[str] = []
    try:
        profile = _measure(loader, batches, batched, device, wrap_files=True)
    except UsageError:
        raise
    except Exception as exc:  # the counting file object did not suit this dataset's reader
        notes.append(f"file reads not separated from the code that reads them ({one_line(exc)[:120]})")
        profile = _measure(loader, batches, batched, device, wrap_files=False)
    n = sum(len(b) for b in batches)
    if loader.pin_memory and not torch.cuda.is_available():
        notes.append("pin_memory=True has no effect without CUDA: no pin stage")
    total = sum(profile.ms.values())
    order = [READ, DECODE] + [k for k in profile.ms if k.startswith(("transform", "target_transform"))]
    order += [OWN, COLLATE, PIN, COPY]
    out = [
        Stage(name, profile.ms[name] / n, profile.ms[name] / total if total else 0.0)
        for name in order
        if name in profile.ms
    ]
    return Stages(out, n, total / n, profile.files / n, profile.bytes / n, notes)


def _measure(
    loader: DataLoader, batches: list[list[int]], batched: bool, device: str | None, wrap_files: bool
) -> Profile:
    dataset = loader.dataset
    _fetch(dataset, batches[0][0])  # untimed: first-call costs (lazy imports, caches) are not per-sample
    profile = Profile()
    pipelines, hooks = _Pipelines(dataset, profile), _Hooks(profile, wrap_files)
    pin = loader.pin_memory and torch.cuda.is_available()
    dev = torch.device(device) if device else None
    try:
        pipelines.install()
        hooks.install()
        for indices in batches:
            samples = []
            for i in indices:
                with profile.region(OWN):
                    samples.append(_fetch(dataset, i))
            with profile.region(COLLATE):
                batch = loader.collate_fn(samples) if batched else loader.collate_fn(samples[0])
            if pin:
                with profile.region(PIN):
                    batch = _apply(batch, lambda t: t.pin_memory())
            if dev is not None and dev.type != "cpu":
                with profile.region(COPY):
                    _apply(batch, lambda t: t.to(dev, non_blocking=pin))
                    torch.cuda.synchronize(dev)
    finally:
        hooks.remove()
        pipelines.remove()
    return profile


def _fetch(dataset: Any, index: int) -> Any:
    try:
        return dataset[index]
    except Exception as exc:
        raise UsageError(
            f"reading item {index} of the dataset raised {one_line(exc)}; check its files and code"
        ) from exc


def _apply(batch: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(batch, torch.Tensor):
        return fn(batch)
    if isinstance(batch, dict):
        return {k: _apply(v, fn) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return (
            type(batch)(_apply(v, fn) for v in batch)
            if not hasattr(batch, "_fields")
            else type(batch)(*(_apply(v, fn) for v in batch))
        )
    return batch
