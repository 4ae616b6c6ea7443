"""One `archlint loader` run: load → throughput → stages → workers → (verdict)."""

from __future__ import annotations

from archlint.config import ModelSpec
from archlint.errors import UsageError
from archlint.loader import measure, prefetch
from archlint.loader.load import LoaderSpec, load, no_bytecode, with_workers
from archlint.loader.options import LoaderOptions
from archlint.loader.result import LoaderResult


def run_loader(opts: LoaderOptions) -> LoaderResult:
    spec = LoaderSpec(opts.target, opts.init, opts.batch_size, opts.num_workers, opts.pin_memory)
    loader, notes, wrapped = load(spec)
    if wrapped is not None:
        notes.append(prefetch.note(wrapped))
    if opts.device and opts.device != "cpu":
        _check_device(opts.device)
    main = measure.throughput(with_workers(loader, loader.num_workers), opts.batches, opts.warmup, opts.seconds)
    notes += main.notes
    if getattr(loader, "persistent_workers", False):
        notes.append("persistent_workers=True: measured without (each measurement starts and stops its workers)")
    st = measure.stages(loader, opts.stage_items, opts.device)
    rows = measure.scan_workers(loader, opts.workers, opts.batches, opts.seconds, {loader.num_workers: main})
    result = LoaderResult(
        target=opts.target,
        batch_size=loader.batch_size,
        num_workers=loader.num_workers,
        samples_per_s=main.samples_per_s,
        batches_per_s=main.batches_per_s,
        first_batch_s=main.first_batch_s,
        spread=main.spread_ms,
        stages=st.stages if st else [],
        files_per_sample=st.files_per_sample if st else None,
        bytes_per_sample=st.bytes_per_sample if st else None,
        workers=rows,
        prefetch=prefetch.describe(loader, wrapped),
        batches=main.batches,
        pin_memory=bool(loader.pin_memory),
        device=opts.device,
        stage_items=st.items if st else 0,
        stage_sum_ms=st.ms_per_sample if st else None,
        notes=notes + (st.notes if st else ["no stage breakdown: an IterableDataset has no items to pick"]),
    )
    result.notes += _coverage_note(result) + _superlinear_note(result)
    if opts.model:
        result.verdict = _verdict(opts, loader, result)
    result.notes += _busy_note()
    return result


def _coverage_note(result: LoaderResult) -> list[str]:
    """The stages are timed apart from the loader: say when they fall short of its per-sample time."""
    at0 = next((r.samples_per_s for r in result.workers if r.num_workers == 0), None)
    if at0 is None and result.num_workers == 0:
        at0 = result.samples_per_s
    if not result.stage_sum_ms or not at0:
        return []
    covered = result.stage_sum_ms / (1e3 / at0)
    if 0.8 <= covered <= 1.25:
        return []
    if covered < 1:
        return [
            f"the stages sum to {covered:.0%} of the loader's per-sample time at num_workers=0: the rest is the "
            "DataLoader's own per-batch work (sampling, fetching), or noise"
        ]
    # Never "the stages sum to 422%": the shares always sum to 100%; it is their timing that ran slower.
    return [
        f"the stages, timed one item at a time in this process, took {covered:.1f}× the loader's per-sample "
        "time at num_workers=0 (the machine was busier while they ran, or the items picked cost more): "
        "their shares still say where a sample's time goes, their ms are high by that factor"
    ]


def _superlinear_note(result: LoaderResult) -> list[str]:
    """k workers cannot beat k× the main process on the same work unless something else differs."""
    base = next((r.samples_per_s for r in result.workers if r.num_workers == 0), None)
    fast = [r for r in result.workers if base and r.num_workers > 0 and r.samples_per_s > 1.2 * r.num_workers * base]
    if not fast:
        return []
    r = max(fast, key=lambda r: r.samples_per_s / r.num_workers)
    return [
        f"num_workers={r.num_workers} is {r.samples_per_s / base:.1f}× num_workers=0: more than its workers can "
        "explain; on a busy machine each process gets its own share of the CPU, and workers run one intra-op "
        "thread where the main process runs several: compare on an idle machine"
    ]


def _busy_note() -> list[str]:
    import os

    from archlint.model.timing.timer import load_average

    load, cores = load_average(), os.cpu_count() or 1
    if load is not None and load > cores:
        return [
            f"the machine was busy (load average {load:.1f} on {cores} cores): the figures are disturbed; rerun when it is quieter"
        ]
    return []


def _check_device(device: str) -> None:
    import torch

    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise UsageError(f"--device {device!r}: {exc}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {device}: no CUDA device here; drop --device to measure on the CPU")


def _verdict(opts: LoaderOptions, loader, result: LoaderResult):
    from archlint.loader.verdict import estimated_step, measure_step, verdict

    shapes = opts.input_shapes or [_batch_shape(loader)]
    spec = ModelSpec(
        target=opts.model,
        input_shapes=shapes,
        dtype=opts.dtype,
        device=opts.device or "cpu",
        init=opts.model_init,
    )
    if opts.device_spec:
        with no_bytecode():
            step = estimated_step(spec, opts.device_spec, opts.step)
    else:
        with no_bytecode():
            step = measure_step(spec, opts.step)
    if not opts.input_shapes:
        how = "estimated" if step.basis == "estimated" else "timed"
        step.notes.append(
            f"model {how} on the loader's batch shape {'×'.join(map(str, shapes[0]))} (--input-shape to change)"
        )
    return verdict(result, opts.model, step, opts.step)


def _batch_shape(loader) -> list[int]:
    """The shape of the first tensor of one batch (the images of an (images, labels) pair)."""
    import torch

    it = iter(with_workers(loader, 0))
    try:
        batch = measure.next_batch(it)
    finally:
        measure.shutdown(it)
    while isinstance(batch, (list, tuple, dict)) and batch:
        batch = next(iter(batch.values())) if isinstance(batch, dict) else batch[0]
    if not isinstance(batch, torch.Tensor):
        raise UsageError("the loader's batch holds no tensor to shape the model's input: pass --input-shape")
    return list(batch.shape)
