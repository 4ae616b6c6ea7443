"""Command line: parse args → run → report → exit code (0 clean, 1 findings or gate, 2 error).

    archlint model.py:Net [--input-shape 1,3,224,224] [--latency] ...   analyze a model
    archlint train.py src/ [--fix]                                      lint training code
    archlint rule AL101 | archlint rules | archlint calibrate           the catalog, the device

Everything heavy is imported lazily: linting code never imports torch.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path

from archlint import __version__
from archlint.errors import UsageError

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
SUBCOMMANDS = ("rule", "rules", "calibrate")
FORMATS = ("text", "json", "sarif", "github", "junit")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse prints usage + exits 2; we want one line, exit 2
        raise UsageError(f"{message} (see `archlint --help`)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="archlint",
        description="Efficiency linter for PyTorch: `archlint model.py:Net` analyzes a model, "
        "`archlint train.py src/` lints training code. Also: `archlint rule CODE`, "
        "`archlint rules`, `archlint calibrate`.",
    )
    p.add_argument("--version", action="version", version=f"archlint {__version__}")
    p.add_argument("targets", nargs="*", help="PATH.py:NAME for a model; files or directories to lint")
    p.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    p.add_argument("--config", type=Path, help="pyproject.toml to read (default: nearest one upward)")

    sel = p.add_argument_group("rule selection")
    sel.add_argument("--select", help="comma-separated codes or prefixes (AL3), or ALL")
    sel.add_argument("--extend-select", help="codes or prefixes to add to the selection")
    sel.add_argument("--ignore", help="codes or prefixes to skip")
    sel.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="CODE.NAME=VALUE",
        help="set a rule option, e.g. AL101.threshold=0.2 (repeatable)",
    )

    out = p.add_argument_group("output")
    out.add_argument("--output-format", choices=FORMATS, help="default: text")
    out.add_argument("-o", "--output-file", type=Path)
    out.add_argument("--html", type=Path, metavar="FILE", help="also write a self-contained HTML report")
    out.add_argument("--statistics", action="store_true", help="count findings per rule")
    out.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings (report only)")

    code = p.add_argument_group("code linter")
    code.add_argument("--fix", action="store_true", help="apply safe fixes")
    code.add_argument("--unsafe-fixes", action="store_true", help="with --fix or --diff: include unsafe fixes")
    code.add_argument("--diff", action="store_true", help="print fixes as a diff, write nothing")
    code.add_argument("--no-cache", action="store_true", help="parse every file again")
    code.add_argument("-j", "--jobs", type=int, help="worker processes (default: all cores)")
    code.add_argument("--max-file-size", type=float, metavar="MB",
                      help="skip larger files with an info finding (default 2; ~1.2 GB of RAM per MB linted)")

    model = p.add_argument_group("model analyzer")
    model.add_argument(
        "--input-shape", action="append", default=[], metavar="1,3,224,224", help="one per model input"
    )
    model.add_argument("--dtype", help="float32 (default), float16, bfloat16, float64")
    model.add_argument("--init", action="append", default=[], metavar="KEY=VALUE", help="constructor argument")
    model.add_argument("--mode", choices=("eval", "train"), help="forward mode to trace (default: eval)")
    model.add_argument("--models", action="store_true", help="analyze the models listed in the config")
    model.add_argument("--top", type=int, default=15, help="layers shown in the text table")
    model.add_argument(
        "--strategy", choices=("fx", "export", "dispatch"), help="force one capture strategy (default: first that works)"
    )
    model.add_argument("--latency", action="store_true", help="measure per-op latency on the device")
    model.add_argument("--device", help="cpu (default), cuda, cuda:N")
    model.add_argument("--warmup", type=int, help="untimed runs before timing (default 10)")
    model.add_argument("--repeat", type=int, help="timed runs; the median is reported (default 50)")
    model.add_argument("--timeout", type=float, metavar="SECONDS",
                       help="limit for importing, building and capturing each model (default: none)")
    model.add_argument("--trace", type=Path, metavar="DIR", help="write a torch.profiler trace to DIR")

    gate = p.add_argument_group("CI gate")
    for name in ("max-flops", "max-mac", "max-params", "max-latency-ms"):
        gate.add_argument(f"--{name}", type=float, metavar="N")
    gate.add_argument("--baseline", type=Path, help="fail on metric growth or new findings versus FILE")
    gate.add_argument("--save-baseline", type=Path, metavar="FILE", help="write metrics and findings")
    return p


def _split(text: str | None) -> list[str]:
    return [t.strip().upper() for t in (text or "").split(",") if t.strip()]


def _parse_value(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def _settings(args: argparse.Namespace):
    from archlint import config

    s = config.load(path=args.config)
    if args.select:
        s.select = _split(args.select)
    s.extend_select += _split(args.extend_select)
    s.ignore += _split(args.ignore)
    for flag in ("select", "extend_select", "ignore"):
        config.check_selectors(_split(getattr(args, flag)), f"--{flag.replace('_', '-')}")
    for item in args.option:
        key, eq, value = item.partition("=")
        code, dot, name = key.partition(".")
        if not (eq and dot and code and name):
            raise UsageError(f"--option {item!r} must look like CODE.NAME=VALUE, e.g. AL101.threshold=0.2")
        s.rule_options.setdefault(code.upper(), {})[name.replace("-", "_")] = _parse_value(value)
    for attr in ("output_format", "output_file", "html", "mode", "warmup", "repeat", "jobs"):
        value = getattr(args, attr)
        if value is not None:
            setattr(s, attr, value)
    s.trace_dir = args.trace
    for flag in ("max_file_size", "timeout"):
        value = getattr(args, flag)
        if value is not None and not value > 0:  # also rejects nan
            raise UsageError(f"--{flag.replace('_', '-')} must be a number > 0, got {value:g}")
    if args.max_file_size is not None:
        s.max_file_size = int(args.max_file_size * 1e6)
    if args.timeout is not None:
        s.timeout = args.timeout
    s.top, s.strategy = args.top, args.strategy
    s.fix, s.unsafe_fixes, s.diff = args.fix, args.unsafe_fixes, args.diff
    s.cache = s.cache and not args.no_cache
    s.latency = args.latency or args.trace is not None
    s.baseline, s.save_baseline = args.baseline, args.save_baseline
    config.check_rule_options(s.rule_options, "--option")
    config.check_baseline(s.baseline)
    s.exit_zero, s.statistics, s.debug = args.exit_zero, args.statistics, args.debug
    if s.warmup < 0 or s.repeat < 1:
        raise UsageError("--warmup must be ≥ 0 and --repeat ≥ 1")
    return s


def is_model_target(target: str) -> bool:
    """`path.py:Name` names a model; anything else is a file or directory to lint."""
    path, sep, name = target.rpartition(":")
    return bool(sep and name and path.endswith(".py") and name.isidentifier())


def _model_specs(args: argparse.Namespace, settings) -> list:
    from archlint.config import ModelSpec, parse_shape

    if args.models and not settings.models:
        raise UsageError("--models: no [[tool.archlint.models]] in pyproject.toml; add one with a target")
    specs = [m for m in settings.models if args.models]
    for target in args.targets:
        if is_model_target(target):
            known = next((m for m in settings.models if m.target == target), None)
            specs.append(known or ModelSpec(target=target))
    for spec in specs:
        if args.input_shape:
            spec.input_shapes = [parse_shape(s) for s in args.input_shape]
        if args.dtype:
            spec.dtype = args.dtype
        if args.device:
            spec.device = args.device
        for item in args.init:
            key, eq, value = item.partition("=")
            if not eq or not key.isidentifier():
                raise UsageError(f"--init {item!r} must look like KEY=VALUE, e.g. num_classes=10")
            spec.init[key] = _parse_value(value)
        for name in ("max_flops", "max_mac", "max_params", "max_latency_ms"):
            value = getattr(args, name)
            if value is not None:
                spec.budgets[name.replace("_", "-")] = value
    return specs


def run(args: argparse.Namespace) -> int:
    from archlint.result import RunResult

    settings = _settings(args)
    paths = [t for t in args.targets if not is_model_target(t)]
    specs = _model_specs(args, settings)
    if not paths and not specs:
        raise UsageError("nothing to check: give PATH.py:NAME for a model or files/directories to lint")

    result = RunResult()
    if paths:
        from archlint.code.lint import lint_paths

        diagnostics, result.files_checked = lint_paths([Path(p) for p in paths], settings)
        result.diagnostics += diagnostics
    for spec in specs:
        try:
            from archlint.model.analyze import analyze
        except ImportError as exc:
            raise UsageError(
                f"the model analyzer needs torch ({exc.name} is missing): pip install 'archlint[models]'"
            ) from None
        model_result, diagnostics = analyze(spec, settings)
        result.models.append(model_result)
        result.diagnostics += diagnostics

    from archlint import gate  # budgets for models; baselines for models and code alike

    result.gate = gate.evaluate(result, specs, settings)

    from archlint.report import write_report

    write_report(result, settings)
    if settings.exit_zero:
        return EXIT_CLEAN
    failed = bool(result.diagnostics) or any(not g.passed for g in result.gate)
    return EXIT_FINDINGS if failed else EXIT_CLEAN


def run_subcommand(argv: list[str]) -> int:
    from archlint import registry

    name, rest = argv[0], argv[1:]
    if name == "rule":
        if len(rest) != 1:
            raise UsageError("usage: archlint rule CODE (e.g. archlint rule AL101)")
        sys.stdout.write(registry.get(rest[0]).body)
        return EXIT_CLEAN
    if name == "rules":
        from archlint.report.text import print_rules

        print_rules(registry.catalog().values())
        return EXIT_CLEAN
    # calibrate
    p = _Parser(prog="archlint calibrate", description="measure and cache the device's roofline peaks")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--debug", action="store_true")
    a = p.parse_args(rest)
    from archlint.model.roofline import calibrate_command

    return calibrate_command(a.device, a.dtype)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv
    try:
        if argv and argv[0] in SUBCOMMANDS:
            return run_subcommand(argv)
        return run(build_parser().parse_args(argv))
    except UsageError as exc:
        if debug:
            traceback.print_exc()
        print(f"archlint: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("archlint: interrupted", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:  # `archlint ... | head`: the reader left; nothing more to say to it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit-time flush stays quiet
        return EXIT_ERROR
    except Exception as exc:  # an internal error: one line, the traceback only under --debug
        if debug:
            traceback.print_exc()
        print(
            f"archlint: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
