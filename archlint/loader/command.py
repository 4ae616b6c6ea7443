"""`archlint loader PATH.py:NAME [--model model.py:Net]`: the subcommand, its flags and its run."""

from __future__ import annotations

import argparse
from pathlib import Path

from archlint.args import Parser, key_values
from archlint.config import parse_shape
from archlint.errors import UsageError
from archlint.loader.options import LoaderOptions

DEFAULT_BATCHES = 30
DEFAULT_BUDGET_S = 5.0
DEFAULT_STAGE_ITEMS = 64
DEFAULT_TIMEOUT_S = 600.0  # the whole run; its timed parts are bounded by --seconds, so only a hang meets it


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="archlint loader",
        description="Measure a data pipeline: throughput, where one sample's time goes, the scaling "
        "with num_workers; with --model, whether the model or the input bounds the run. "
        "NAME is a DataLoader, a Dataset, or a function returning one. Nothing is written.",
    )
    p.add_argument("target", help="PATH.py:NAME")
    p.add_argument(
        "--init", action="append", default=[], metavar="KEY=VALUE", help="argument of a class or function NAME"
    )
    p.add_argument("--batch-size", type=int, help="for a Dataset (default 32), or to override a DataLoader's")
    p.add_argument("--num-workers", type=int, help="for a Dataset (default 0), or to override a DataLoader's")
    p.add_argument(
        "--pin-memory", action=argparse.BooleanOptionalAction, default=None, help="for a Dataset (default off)"
    )
    p.add_argument(
        "--batches", type=int, default=DEFAULT_BATCHES, help=f"timed batches per setting (default {DEFAULT_BATCHES})"
    )
    p.add_argument("--warmup", type=int, help="untimed batches first (default: 2, or what the workers prefetch + 1)")
    p.add_argument(
        "--seconds",
        type=float,
        default=DEFAULT_BUDGET_S,
        help=f"time budget per setting (default {DEFAULT_BUDGET_S:g})",
    )
    p.add_argument(
        "--workers",
        default="auto",
        metavar="0,1,2|auto|none",
        help="num_workers settings to compare (default auto: 0, 1, 2, 4, … up to the cores)",
    )
    p.add_argument(
        "--stage-items", type=int, default=DEFAULT_STAGE_ITEMS, help="items behind the stage breakdown (default 64)"
    )
    p.add_argument("--device", help="copy batches to this device (cuda, cuda:N) as a stage; the model's device too")
    v = p.add_argument_group("input-bound verdict")
    v.add_argument("--model", metavar="PATH.py:NAME", help="the model the loader feeds")
    v.add_argument(
        "--input-shape", action="append", default=[], metavar="32,3,224,224", help="default: the loader's batch"
    )
    v.add_argument("--model-init", action="append", default=[], metavar="KEY=VALUE", help="model constructor argument")
    v.add_argument("--dtype", default="float32")
    v.add_argument("--step", choices=("train", "eval"), default="train", help="the model step to time (default train)")
    v.add_argument(
        "--device-spec",
        help="estimate the model's step on a device you do not have, from its spec (NAME or TOML file: "
        "`archlint device-specs`) instead of timing it here",
    )
    out = p.add_argument_group("output")
    out.add_argument("--output-format", choices=("text", "json"), default="text")
    out.add_argument("-o", "--output-file", type=Path)
    out.add_argument("--html", type=Path, metavar="FILE", help="also write a self-contained HTML report")
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"limit for the whole run; a dataset that blocks is stopped (default {DEFAULT_TIMEOUT_S:g})",
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress display (accepted as by archlint; the measurement shows none)",
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    return p


def _worker_list(text: str) -> list[int]:
    from archlint.loader.measure import worker_settings

    if text == "auto":
        return worker_settings()
    if text == "none":
        return []
    try:
        values = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        values = [-1]
    if not values or values[0] < 0:
        raise UsageError(f"--workers {text!r}: give settings such as 0,1,2,4, or auto, or none")
    return values


def _check(args: argparse.Namespace) -> None:
    for flag, value, low in (
        ("--batches", args.batches, 1),
        ("--stage-items", args.stage_items, 1),
        ("--batch-size", args.batch_size, 1),
        ("--num-workers", args.num_workers, 0),
        ("--warmup", args.warmup, 0),
    ):
        if value is not None and value < low:
            raise UsageError(f"{flag} must be ≥ {low}, got {value}")
    if args.seconds <= 0:
        raise UsageError(f"--seconds must be > 0, got {args.seconds:g}")
    if not args.timeout > 0:  # also rejects nan
        raise UsageError(f"--timeout must be a number > 0, got {args.timeout:g}")
    if (args.input_shape or args.model_init or args.device_spec) and not args.model:
        raise UsageError("--input-shape, --model-init and --device-spec describe the model: give --model PATH.py:NAME")
    if args.device_spec:
        from archlint.devices import resolve

        resolve(args.device_spec)  # a bad name or file is an error before anything is measured


def options(args: argparse.Namespace) -> LoaderOptions:
    """The parsed flags, checked, as the typed options a run takes."""
    _check(args)
    return LoaderOptions(
        target=args.target,
        init=key_values(args.init, "--init", "root=data/train"),
        batch_size=args.batch_size,
        num_workers=args.num_workers,
        pin_memory=args.pin_memory,
        batches=args.batches,
        warmup=args.warmup,
        seconds=args.seconds,
        workers=_worker_list(args.workers),
        stage_items=args.stage_items,
        device=args.device,
        model=args.model,
        input_shapes=[parse_shape(s) for s in args.input_shape],
        model_init=key_values(args.model_init, "--model-init", "root=data/train"),
        dtype=args.dtype,
        step=args.step,
        device_spec=args.device_spec,
        output_format=args.output_format,
        output_file=args.output_file,
        html=args.html,
        timeout=args.timeout,
        debug=args.debug,
    )


def loader_command(argv: list[str]) -> int:
    opts = options(build_parser().parse_args(argv))
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        raise UsageError(
            f"archlint loader needs torch ({exc.name} is missing): pip install 'archlint[models]'"
        ) from None
    from archlint import outputs, writeguard
    from archlint.config import Settings
    from archlint.loader.run import run_loader
    from archlint.model.runtime.sandbox import user_code
    from archlint.report import write_report
    from archlint.result import RunResult

    settings = Settings(
        output_format=opts.output_format, output_file=opts.output_file, html=opts.html, debug=opts.debug
    )
    with writeguard.run_inputs():  # no report may replace the loader's or the model's code
        outputs.guard_run(
            settings,
            {
                "the loader's file": [Path(opts.target.rpartition(":")[0])],
                "the model's file": [Path(opts.model.rpartition(":")[0])] if opts.model else [],
                "the device spec": [Path(opts.device_spec)] if opts.device_spec else [],
            },
        )
        with user_code(opts.target, opts.timeout) as guard:  # a __getitem__ that blocks must not hang the run
            guard.doing = "loading and timing batches"
            loader_result = run_loader(opts)
        write_report(RunResult(loaders=[loader_result]), settings)
    return 0
