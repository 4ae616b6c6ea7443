"""Resolve `PATH.py:NAME` into a DataLoader.

NAME may be a DataLoader, a Dataset (instance or class), or a function returning either; classes
and functions are called with the `--init` keyword arguments. A CUDA-stream prefetcher around a
DataLoader (NAME itself, or what a function returns) is unwrapped to that DataLoader (prefetch.py). A Dataset gets its DataLoader from
`--batch-size`, `--num-workers` and `--pin-memory`; a DataLoader keeps its own settings unless
one of those flags overrides it.

Every measurement iterates a copy made by `with_workers` (same dataset, sampler, collate_fn, ...)
with `persistent_workers=False`, so that no worker process outlives it.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch.utils.data import DataLoader, Dataset, IterableDataset

from archlint.errors import UsageError
from archlint.loader import prefetch
from archlint.model.loading.load import import_file

DEFAULT_BATCH_SIZE = 32  # for a bare Dataset, when --batch-size is not given


@dataclass
class LoaderSpec:
    target: str
    init: dict[str, Any] = field(default_factory=dict)
    batch_size: int | None = None  # None: the DataLoader's own (a Dataset: DEFAULT_BATCH_SIZE)
    num_workers: int | None = None
    pin_memory: bool | None = None


def one_line(exc: BaseException) -> str:
    """The error in one line. An error raised in a DataLoader worker carries the worker's
    traceback in its message: its last line is the error itself."""
    text = str(exc)
    if "Original Traceback" in text:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return " ".join(lines[-1].split())[:300]
    return f"{type(exc).__name__}: {' '.join(text.split())[:300]}"


@contextlib.contextmanager
def no_bytecode():
    """Nothing is written: not even a __pycache__ next to the imported target."""
    written = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        yield
    finally:
        sys.dont_write_bytecode = written


def _call(factory, name: str, init: dict[str, Any]):
    try:
        inspect.signature(factory).bind(**init)
    except TypeError as exc:
        raise UsageError(f"{name}(): {exc}; pass its arguments with --init KEY=VALUE") from None
    except ValueError:  # no signature to check (a builtin): let the call say
        pass
    try:
        return factory(**init)
    except UsageError:
        raise
    except Exception as exc:  # the dataset's own error (files it needs and the user lacks, ...)
        raise UsageError(f"building {name}() raised {one_line(exc)}; check its files and --init arguments") from exc


def load(spec: LoaderSpec) -> tuple[DataLoader, list[str], prefetch.Wrapped | None]:
    """The DataLoader to measure, notes on how it was made, and the CUDA-stream prefetcher it was
    taken out of (None: no prefetcher)."""
    file, sep, name = spec.target.rpartition(":")
    if not sep or not name.isidentifier():
        raise UsageError(f"target {spec.target!r} must look like PATH.py:NAME, e.g. data.py:train_loader")
    path = Path(file)
    with no_bytecode():
        module = import_file(path)
    if not hasattr(module, name):
        found = [k for k, v in vars(module).items() if not k.startswith("_") and _is_data(v, module.__name__)]
        hint = f"; it defines {', '.join(found)}" if found else "; it defines no DataLoader or Dataset"
        raise UsageError(f"{path} has no {name!r}{hint}")
    obj = getattr(module, name)
    made, wrapped = obj, None
    if isinstance(obj, (DataLoader, Dataset)):
        if spec.init:
            raise UsageError(f"{name} is an instance: --init applies only to a class or a function")
    elif callable(obj):
        try:
            made = _call(obj, name, spec.init)
        except UsageError as exc:
            wrapped = prefetch.from_failure(exc.__cause__)  # a CUDA prefetcher on a machine without CUDA
            if wrapped is None:
                raise
    wrapped = wrapped or prefetch.unwrap(made)
    if wrapped is not None:
        made = wrapped.loader
    if isinstance(made, DataLoader):
        return (*_override(made, spec), wrapped)
    if isinstance(made, Dataset):
        try:
            loader = DataLoader(
                made,
                batch_size=spec.batch_size or DEFAULT_BATCH_SIZE,
                num_workers=spec.num_workers or 0,
                pin_memory=bool(spec.pin_memory),
            )
        except (TypeError, ValueError) as exc:
            raise UsageError(f"a DataLoader over {name} could not be made: {one_line(exc)}") from exc
        return loader, [], None
    what = f"{name}() returned {type(made).__name__}" if made is not obj else f"{name} is a {type(obj).__name__}"
    raise UsageError(
        f"{what}, not a DataLoader or a Dataset; name a DataLoader, a Dataset, or a function returning one"
    )


def _is_data(value: Any, module: str) -> bool:
    """A DataLoader or Dataset instance, or a Dataset class the file defines (not one it imports)."""
    if isinstance(value, (DataLoader, Dataset)):
        return True
    return inspect.isclass(value) and issubclass(value, Dataset) and value.__module__ == module


def _override(loader: DataLoader, spec: LoaderSpec) -> tuple[DataLoader, list[str]]:
    notes = []
    if spec.batch_size is not None and spec.batch_size != loader.batch_size:
        if loader.batch_size is None:
            raise UsageError("--batch-size: this DataLoader batches in its own batch_sampler; drop the flag")
        notes.append(f"batch_size {loader.batch_size} → {spec.batch_size} (--batch-size)")
    if spec.num_workers is not None and spec.num_workers != loader.num_workers:
        notes.append(f"num_workers {loader.num_workers} → {spec.num_workers} (--num-workers)")
    if spec.pin_memory is not None and spec.pin_memory != loader.pin_memory:
        notes.append(f"pin_memory {loader.pin_memory} → {spec.pin_memory} (--pin-memory)")
    if not notes:
        return loader, []
    rebuilt = with_workers(
        loader,
        loader.num_workers if spec.num_workers is None else spec.num_workers,
        batch_size=spec.batch_size,
        pin_memory=spec.pin_memory,
    )
    return rebuilt, ["the DataLoader's settings were overridden: " + "; ".join(notes)]


def with_workers(
    loader: DataLoader, num_workers: int, batch_size: int | None = None, pin_memory: bool | None = None
) -> DataLoader:
    """A DataLoader like `loader` (same dataset, sampling, collate_fn, worker_init_fn, ...) with
    `num_workers` workers that stop when its iterator ends (never persistent)."""
    kwargs: dict[str, Any] = dict(
        num_workers=num_workers,
        collate_fn=loader.collate_fn,
        pin_memory=loader.pin_memory if pin_memory is None else pin_memory,
        timeout=loader.timeout,
        worker_init_fn=loader.worker_init_fn,
        multiprocessing_context=loader.multiprocessing_context,
        generator=loader.generator,
        persistent_workers=False,
        pin_memory_device=getattr(loader, "pin_memory_device", ""),
    )
    if "in_order" in inspect.signature(DataLoader).parameters:
        kwargs["in_order"] = getattr(loader, "in_order", True)
    if num_workers > 0:
        kwargs["prefetch_factor"] = loader.prefetch_factor or 2
    if isinstance(loader.dataset, IterableDataset):
        kwargs.update(batch_size=batch_size or loader.batch_size, drop_last=loader.drop_last)
    elif batch_size is not None:
        kwargs.update(batch_size=batch_size, sampler=loader.sampler, drop_last=loader.drop_last)
    elif loader.batch_sampler is not None:
        kwargs["batch_sampler"] = loader.batch_sampler
    else:  # no automatic batching: the dataset or sampler yields whole batches
        kwargs.update(batch_size=None, sampler=loader.sampler)
    return DataLoader(loader.dataset, **kwargs)
