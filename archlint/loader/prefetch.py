"""Is the pipeline prefetching, and through what?

Two kinds are recognised:
- a CUDA-stream prefetcher around the DataLoader (apex's `data_prefetcher`, timm's
  `PrefetchLoader`): an object holding the loader whose class makes a CUDA `Stream` and hands work
  over with `wait_stream` or `record_stream` (the code linter's recognition, AL302, read here from
  the live class's source). It copies the next batch to the GPU on its side stream while the model
  computes. The measurement runs on the DataLoader inside it: a CUDA prefetcher cannot run on a
  machine without CUDA (apex's makes its stream in `__init__`, timm's puts its mean and std on the
  GPU there), and its copy is the host→device stage (`--device cuda`) anyway. When building it
  fails for want of CUDA, the DataLoader it was given is taken from the failed call's frame.
- DataLoader workers: num_workers > 0 prepare up to num_workers × prefetch_factor batches ahead
  (pinned by a thread when pin_memory is set). num_workers = 0 prefetches nothing.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass
from pathlib import Path

from torch.utils.data import BatchSampler, DataLoader
from torch.utils.data.dataloader import _BaseDataLoaderIter

from archlint.loader.result import Prefetch

STREAM_SIGNS = ("Stream", "wait_stream", "record_stream")


@dataclass
class Wrapped:
    """A CUDA-stream prefetcher and the DataLoader inside it."""

    wrapper: str  # module.Class of the prefetcher
    signs: list[str]  # what in its code made it one: Stream, wait_stream, record_stream
    loader: DataLoader
    failed: str | None = None  # why it could not be built here (no CUDA), when it could not


def stream_signs(cls: type) -> list[str]:
    """The calls in the class's code (its own and its bases') that make it a CUDA-stream
    prefetcher: a `Stream(...)` made and `wait_stream`/`record_stream` called; [] when not one."""
    called: set[str] = set()
    for klass in cls.__mro__:
        if klass is object or klass.__module__.split(".")[0] in ("torch", "builtins"):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):  # no source (a C class, a REPL): nothing to read
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if name in STREAM_SIGNS:
                    called.add(name)
    if "Stream" not in called or not called & {"wait_stream", "record_stream"}:
        return []
    return [s for s in STREAM_SIGNS if s in called]


def _name(cls: type) -> str:
    """`pipes.py:Prefetcher` for a class of a file archlint imported, `timm.data.loader.PrefetchLoader`
    for an installed one."""
    if cls.__module__.startswith("_archlint_target_"):  # archlint.model.loading.load.import_file's names
        try:
            return f"{Path(inspect.getsourcefile(cls) or '').name}:{cls.__qualname__}"
        except TypeError:
            pass
    return f"{cls.__module__}.{cls.__qualname__}"


def _first_line(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {text[:120]}"


def _loader_in(values) -> DataLoader | None:
    """A DataLoader among these values, or one rebuilt from a DataLoader's iterator (apex keeps
    `iter(loader)`, not the loader)."""
    values = list(values)
    for value in values:
        if isinstance(value, DataLoader):
            return value
    for value in values:
        if isinstance(value, _BaseDataLoaderIter):
            return _from_iterator(value)
    return None


def _from_iterator(it: _BaseDataLoaderIter) -> DataLoader:
    """A DataLoader with the settings an iterator was made with (its dataset, sampling, collate,
    workers, pinning); the iterator's own workers, if any, are stopped."""
    workers = it._num_workers
    kwargs = dict(
        num_workers=workers,
        collate_fn=it._collate_fn,
        pin_memory=it._pin_memory,
        timeout=it._timeout,
        worker_init_fn=getattr(it, "_worker_init_fn", None),
        prefetch_factor=getattr(it, "_prefetch_factor", 2) if workers else None,
    )
    sampler = it._index_sampler
    if isinstance(sampler, BatchSampler):  # the DataLoader's own: give back its batch_size
        kwargs.update(batch_size=sampler.batch_size, sampler=sampler.sampler, drop_last=sampler.drop_last)
    elif it._auto_collation:
        kwargs["batch_sampler"] = sampler
    else:
        kwargs.update(batch_size=None, sampler=it._index_sampler)
    shutdown = getattr(it, "_shutdown_workers", None)
    if shutdown is not None:
        shutdown()
    return DataLoader(it._dataset, **kwargs)


def unwrap(obj: object) -> Wrapped | None:
    """The DataLoader inside a built CUDA-stream prefetcher; None when obj is not one."""
    if isinstance(obj, DataLoader) or not hasattr(obj, "__dict__"):
        return None
    signs = stream_signs(type(obj))
    loader = _loader_in(vars(obj).values()) if signs else None
    return Wrapped(_name(type(obj)), signs, loader) if loader is not None else None


def from_failure(exc: BaseException | None) -> Wrapped | None:
    """Building a CUDA-stream prefetcher failed (no CUDA here): the prefetcher whose method raised,
    and the DataLoader it was given (a local of that call) or already holds; None when the error
    came from elsewhere."""
    tb = exc.__traceback__ if exc is not None else None
    found = None
    while tb is not None:
        local = tb.tb_frame.f_locals
        this = local.get("self")
        if this is not None and not isinstance(this, DataLoader):
            signs = stream_signs(type(this))
            loader = _loader_in([*local.values(), *getattr(this, "__dict__", {}).values()]) if signs else None
            if loader is not None:
                found = Wrapped(_name(type(this)), signs, loader, _first_line(exc))
        tb = tb.tb_next
    return found


def describe(loader: DataLoader, wrapped: Wrapped | None) -> Prefetch | None:
    """What the pipeline prefetches, for the report; None when nothing is prepared ahead."""
    workers = None
    if loader.num_workers > 0:
        factor = loader.prefetch_factor or 2
        workers = (
            f"{loader.num_workers} worker{'s' if loader.num_workers > 1 else ''} × prefetch_factor {factor}: up to {loader.num_workers * factor} batches "
            "prepared ahead; "
            + (
                "pinned by a thread (pin_memory=True), so copies to the GPU can be non_blocking"
                if loader.pin_memory
                else "not pinned (pin_memory=False): a copy to the GPU waits for it"
            )
        )
    if wrapped is not None:
        detail = (
            f"{wrapped.wrapper}, a CUDA-stream prefetcher ({', '.join(wrapped.signs)}): it copies the next batch to "
            "the GPU on a side stream while the model computes; measured: the DataLoader inside it"
        )
        return Prefetch("cuda-stream", detail + (f"; that DataLoader: {workers}" if workers else ""))
    return Prefetch("workers", workers) if workers else None


def note(wrapped: Wrapped) -> str:
    """Say that the measurement ran on the inner DataLoader, and why."""
    if wrapped.failed:
        return (
            f"{wrapped.wrapper} (a CUDA-stream prefetcher) cannot be built on this machine ({wrapped.failed}): "
            "measured the DataLoader it was given instead"
        )
    return (
        f"measured the DataLoader inside {wrapped.wrapper} (a CUDA-stream prefetcher): its side-stream copy is "
        "the host→device stage with --device cuda"
    )
