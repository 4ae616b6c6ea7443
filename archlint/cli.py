"""Command line: parse args → run → report → exit code (0 clean, 1 findings or gate, 2 error).

    archlint model.py:Net [--input-shape 1,3,224,224] [--latency] ...   analyze a model
    archlint train.py src/ [--fix]                                      lint training code
    archlint rule AL101 | archlint rules | archlint calibrate           the catalog, the device
    archlint device-specs                                               built-in specs for --device-spec
    archlint loader data.py:train_loader [--model model.py:Net]        measure a data pipeline
    archlint trace trace.json.gz traces/                                what wastes the GPU in a profiler trace

Everything heavy is imported lazily: linting code never imports torch.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import traceback
from pathlib import Path

from archlint import __version__, progress
from archlint.args import Parser, key_values
from archlint.config import MODES, OUTPUT_FORMATS
from archlint.errors import UsageError
from archlint.train_names import MIXED_PRECISIONS, PARALLEL_STRATEGIES
from archlint.whatif_names import NAMES as WHAT_IF_NAMES

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
SUBCOMMANDS = ("rule", "rules", "calibrate", "device-specs", "loader", "trace")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="archlint",
        description="Efficiency linter for PyTorch: `archlint model.py:Net` analyzes a model, "
        "`archlint train.py src/` lints training code, `archlint loader data.py:train_loader [--model model.py:Net]` "
        "measures a data pipeline (see `archlint loader --help`), `archlint trace TRACE.json.gz` reads torch.profiler "
        "traces of GPU runs (see `archlint trace --help`). Also: `archlint rule CODE`, "
        "`archlint rules`, `archlint calibrate`, `archlint device-specs`.",
    )
    p.add_argument("--version", action="version", version=f"archlint {__version__}")
    p.add_argument("targets", nargs="*", help="PATH.py:NAME for a model; files or directories to lint")
    p.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="FILE|KEY=VALUE",
        help="pyproject.toml to read (default: nearest one upward); KEY=VALUE: a [tool.archlint] setting "
        "over the file's, e.g. select=AL4 or 'rules.AL101.threshold=0.2' (a TOML value), or else a config "
        "field of an hf:NAME model, e.g. n_layer=4 (repeatable)",
    )

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
    out.add_argument("--output-format", choices=OUTPUT_FORMATS, help="default: text")
    out.add_argument("-o", "--output-file", type=Path)
    out.add_argument("--html", type=Path, metavar="FILE", help="also write a self-contained HTML report")
    out.add_argument("--statistics", action="store_true", help="count findings per rule")
    out.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings (report only)")
    out.add_argument("--show-info", action="store_true", help="also show info findings (they never fail the run)")
    out.add_argument("-q", "--quiet", action="store_true", help="no progress display on the terminal")
    out.add_argument(
        "-v", "--verbose", action="store_true", help="also say why a fallback was taken (e.g. a failed capture)"
    )

    code = p.add_argument_group("code linter")
    code.add_argument("--fix", action="store_true", help="apply safe fixes")
    code.add_argument("--unsafe-fixes", action="store_true", help="with --fix or --diff: include unsafe fixes")
    code.add_argument("--diff", action="store_true", help="print fixes as a diff, write nothing")
    code.add_argument("--no-cache", action="store_true", help="parse every file again")
    code.add_argument("-j", "--jobs", type=int, help="worker processes (default: all cores)")
    code.add_argument(
        "--max-file-size",
        type=float,
        metavar="MB",
        help="skip larger files with an info finding (default 2; linting takes ~13 s of CPU and 0.1 GB of RAM per MB)",
    )

    model = p.add_argument_group("model analyzer")
    model.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="SHAPE[:DTYPE]",
        help="one per positional input of forward, in order: 1,3,224,224 or 1,128:int64",
    )
    model.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=SHAPE[:DTYPE]",
        help="a keyword input of forward, e.g. input_ids=1,128:int64 attention_mask=1,128:bool (repeatable)",
    )
    model.add_argument(
        "--input-dtype",
        metavar="DTYPE",
        help="dtype of inputs given without one: int64 for token ids, bool for masks (default: --dtype)",
    )
    model.add_argument(
        "--decode",
        type=int,
        metavar="N",
        help="also analyze one decode step of a causal LM with a KV cache of N tokens (a second model)",
    )
    model.add_argument("--dtype", help="float32 (default), float16, bfloat16, float64: weights and float inputs")
    model.add_argument("--init", action="append", default=[], metavar="KEY=VALUE", help="constructor argument")
    model.add_argument("--mode", choices=MODES, help="forward mode to trace (default: eval)")
    model.add_argument("--models", action="store_true", help="analyze the models listed in the config")
    model.add_argument(
        "--train",
        action="store_true",
        help="analyze one training step: forward (train mode), loss, backward, optimizer.step()",
    )
    model.add_argument(
        "--optimizer",
        metavar="NAME",
        help="optimizer of the --train step: sgd, sgd-momentum, adam, adamw (default), each also "
        "-foreach or -fused (adamw-fused)",
    )
    model.add_argument(
        "--loss", choices=("mean", "sum"), help="loss of the --train step over the outputs (default: mean)"
    )
    model.add_argument(
        "--memory-budget", metavar="SIZE", help="memory for the --train step, e.g. 24GB or 16GiB: does it fit"
    )
    model.add_argument("--top", type=int, default=15, help="layers shown in the text table (0: none, -1: all)")
    model.add_argument("--tree", action="store_true", help="show the module hierarchy with summed costs")
    model.add_argument("--depth", type=int, metavar="N", help="levels of the --tree (default 3; implies --tree)")
    model.add_argument(
        "--strategy",
        choices=("fx", "export", "dispatch", *PARALLEL_STRATEGIES),
        help="force one capture strategy (fx, export, dispatch; default: first that works), or with --train the "
        "data-parallel strategy of the per-rank step (ddp, fsdp, hsdp, zero1, zero2, zero3)",
    )
    model.add_argument(
        "--world-size", type=int, metavar="N", help="--train over N ranks (GPUs); the input is one rank's batch"
    )
    model.add_argument(
        "--nodes", type=int, metavar="N", help="hosts the --world-size ranks are spread over (default 1)"
    )
    model.add_argument(
        "--shard-unit",
        metavar="CLASS",
        help="module class FSDP2/ZeRO-3 shard and gather as one unit (default: the repeated block found)",
    )
    model.add_argument(
        "--mixed-precision",
        choices=MIXED_PRECISIONS,
        help="the distributed step in bf16/fp16 compute with fp32 master weights and optimizer state",
    )
    model.add_argument(
        "--cpu-offload",
        action="store_true",
        help="optimizer state (and master weights) on the host: ZeRO-Offload, FSDP CPUOffloadPolicy",
    )
    model.add_argument(
        "--trainable",
        metavar="PATTERN",
        help="regular expression: the parameters whose name matches train, the rest are frozen",
    )
    model.add_argument("--latency", action="store_true", help="measure per-op latency on the device")
    model.add_argument("--device", help="cpu (default), cuda, cuda:N")
    model.add_argument("--warmup", type=int, help="untimed runs before timing (default 10)")
    model.add_argument("--repeat", type=int, help="timed runs; the median is reported (default 50)")
    model.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="limit for each stage that runs a model's code: import, build and capture; latency; "
        "what-ifs; pricing findings (default: none)",
    )
    model.add_argument(
        "--latency-budget",
        type=float,
        metavar="SECONDS",
        help="wall time --latency may spend timing each model; stages cut short say so (default 120)",
    )
    model.add_argument("--trace", type=Path, metavar="DIR", help="write a torch.profiler trace to DIR")
    model.add_argument(
        "--device-spec",
        metavar="NAME|FILE",
        help="estimate latency on this device from its spec (see `archlint device-specs`)",
    )
    model.add_argument(
        "--what-if",
        nargs="?",
        const="all",
        metavar="LIST",
        help="time standard speed-ups on a copy of the model (implies --latency): all (default) or some of "
        + ",".join(WHAT_IF_NAMES),
    )

    gate = p.add_argument_group("CI gate")
    for name in ("max-flops", "max-mac", "max-params", "max-latency-ms"):
        gate.add_argument(f"--{name}", type=float, metavar="N")
    gate.add_argument("--baseline", type=Path, help="fail on metric growth or new findings versus FILE")
    gate.add_argument("--save-baseline", type=Path, metavar="FILE", help="write metrics and findings")
    return p


def _settings(args: argparse.Namespace):
    from archlint import config

    files = [c for c in args.config if "=" not in c]
    if len(files) > 1:
        raise UsageError(f"--config names two files ({files[0]}, {files[1]}); give one pyproject.toml")
    s = config.load(path=Path(files[0]) if files else None, overrides=_setting_overrides(args))
    config.apply_rule_flags(s, args.select, args.extend_select, args.ignore, args.option)
    if args.top < -1:
        raise UsageError(f"--top {args.top}: give a number of layers, 0 for none or -1 for all")
    if args.depth is not None and args.depth < 0:
        raise UsageError(f"--depth {args.depth}: give the levels of the tree to show, 0 or more")
    # outputs are where the user meant when typing them, whatever a model's code does to the cwd
    output_file, html = (Path(os.path.abspath(p)) if p is not None else None for p in (args.output_file, args.html))
    given = {
        "rule_options": s.rule_options,
        "output_format": args.output_format,
        "output_file": output_file,
        "html": html,
        "mode": args.mode,
        "warmup": args.warmup,
        "repeat": args.repeat,
        "jobs": args.jobs,
        "trace_dir": args.trace,
        "device_spec": args.device_spec,
        "top": sys.maxsize if args.top == -1 else args.top,
        "strategy": args.strategy,
        "tree": args.tree or args.depth is not None,
        "tree_depth": args.depth,
        "max_file_size": args.max_file_size,
        "timeout": args.timeout,
        "latency_budget": args.latency_budget,
        "fix": args.fix,
        "unsafe_fixes": args.unsafe_fixes,
        "diff": args.diff,
        "cache": False if args.no_cache else None,
        "what_if": args.what_if,
        "latency": args.latency or None,
        "baseline": args.baseline,
        "save_baseline": args.save_baseline,
        "exit_zero": args.exit_zero,
        "statistics": args.statistics,
        "debug": args.debug,
        "quiet": args.quiet,
        "verbose": args.verbose,
        "show_info": args.show_info or None,
        "train": args.train or None,
        "optimizer": args.optimizer,
        "loss": args.loss,
        "memory_budget": args.memory_budget,
        "world_size": args.world_size,
        "nodes": args.nodes,
        "shard_unit": args.shard_unit,
        "mixed_precision": args.mixed_precision,
        "cpu_offload": args.cpu_offload or None,
        "trainable": args.trainable,
    }
    return config.apply(
        s, given, label=lambda name: "--option" if name == "rule_options" else f"--{name.replace('_', '-')}"
    )


def _setting_overrides(args: argparse.Namespace) -> list[str]:
    """The --config KEY=VALUE items that set a [tool.archlint] key (the others are hf: config fields)."""
    from archlint.config import SETTING_KEYS

    return [c for c in args.config if "=" in c and c.partition("=")[0].strip().split(".", 1)[0] in SETTING_KEYS]


def is_model_target(target: str) -> bool:
    """`path.py:Name` or `hf:NAME` names a model; anything else is a file or directory to lint."""
    if target.startswith("hf:") and len(target) > 3:
        return True
    path, sep, name = target.rpartition(":")
    return bool(sep and name and path.endswith(".py") and name.isidentifier())


def _no_models_where(args: argparse.Namespace) -> str:
    """Where --models looked for [[tool.archlint.models]], as it was: the file named or found, or none."""
    from archlint.config import find_pyproject

    files = [c for c in args.config if "=" not in c]
    found = Path(files[0]) if files else find_pyproject(Path.cwd().resolve())
    if found is None:
        return f"no pyproject.toml with a [tool.archlint] table in {Path.cwd()} or the folders above it"
    return f"{found} has no [[tool.archlint.models]]"


def _model_specs(args: argparse.Namespace, settings) -> list:
    from archlint import config
    from archlint.config import ModelSpec, parse_input, parse_input_dtype

    specs = [m for m in settings.models if args.models]
    for target in args.targets:
        if is_model_target(target):
            known = next((m for m in settings.models if m.target == target), None)
            specs.append(known or ModelSpec(target=target))
    fields = [c for c in args.config if "=" in c and c not in _setting_overrides(args)]
    if fields and not any(s.target.startswith("hf:") for s in specs):
        from archlint.config import SETTING_KEYS

        key = fields[0].partition("=")[0]
        raise UsageError(
            f"--config {fields[0]}: {key!r} is not a [tool.archlint] setting ({', '.join(sorted(SETTING_KEYS))}) "
            "and there is no hf:NAME model to take it as a config field"
        )
    for spec in specs:
        if args.input_shape or args.input:
            positional = [parse_input(s, "--input-shape") for s in args.input_shape]
            keyword = [parse_input(s, "--input", keyword=True) for s in args.input]
            names = [i.name for i in keyword]
            twice = next((n for n in names if names.count(n) > 1), None)
            if twice:
                raise UsageError(f"--input {twice}=... is given twice; give each keyword input once")
            spec.input_shapes = [i.shape for i in positional]
            spec.input_dtypes = [i.dtype for i in positional]
            spec.keyword_inputs = {i.name: i for i in keyword}
            spec.inputs_source = "--input-shape"
        if args.input_dtype:
            spec.input_dtype = parse_input_dtype(args.input_dtype, "--input-dtype")
        if args.dtype:
            spec.dtype = args.dtype
        if args.device:
            spec.device = args.device
        if args.decode is not None:
            spec.decode = args.decode
        for item in (c for c in args.config if "=" in c and c not in _setting_overrides(args)):
            key, _, value = item.partition("=")
            if not key.isidentifier():
                raise UsageError(f"--config {item!r} must look like KEY=VALUE (a config field), e.g. n_layer=4")
            if not spec.target.startswith("hf:"):
                raise UsageError(
                    f"--config {item}: config fields apply to hf:NAME targets; use --init for {spec.target}"
                )
            spec.hf_config[key] = config.parse_value(value)
        spec.init.update(key_values(args.init, "--init", "num_classes=10"))
        if args.device_spec:
            spec.device_spec = args.device_spec
        for name in ("max_flops", "max_mac", "max_params", "max_latency_ms"):
            value = getattr(args, name)
            if value is not None:
                config.check_budget(f"--{name.replace('_', '-')}", value)
                spec.budgets[name.replace("_", "-")] = value
    return specs


MODEL_ONLY_GROUPS = ("model analyzer", "CI gate")
NOT_MODEL_ONLY = ("models", "baseline", "save_baseline")  # these have a meaning for code too


def _model_only_flags(args: argparse.Namespace) -> list[str]:
    """The model-analyzer flags the user gave (value differs from its default), as typed."""
    given = []
    for group in build_parser()._action_groups:
        if group.title not in MODEL_ONLY_GROUPS:
            continue
        for action in group._group_actions:
            if action.dest not in NOT_MODEL_ONLY and getattr(args, action.dest, None) != action.default:
                given.append(action.option_strings[-1])
    return given


def _check_model_flags(args: argparse.Namespace, paths: list[str]) -> None:
    """A model flag with no model to apply it to is a mistake (e.g. `model.py` without `:Net`)."""
    flags = _model_only_flags(args)
    if not flags:
        return
    from archlint.suggest import target_hint

    files = [p for p in paths if p.endswith(".py")]
    hint = next((h for h in map(target_hint, files) if h), "")
    if not hint and not files:
        hint = "; e.g. model.py:Net"
    raise UsageError(
        f"{', '.join(flags)} {'applies' if len(flags) == 1 else 'apply'} to a model, but no model was "
        f"named: give PATH.py:NAME{hint}"
    )


def run(args: argparse.Namespace) -> int:
    from archlint.check import check, failed

    settings = _settings(args)
    if args.models and not settings.models:
        # like a pre-commit hook with no files to check: nothing configured passes, saying so
        print(
            f"archlint: --models: {_no_models_where(args)}; nothing to analyze "
            '(add a [[tool.archlint.models]] table with a target, e.g. target = "model.py:Net")',
            file=sys.stderr,
        )
        if not args.targets:
            return EXIT_CLEAN
    paths = [Path(t) for t in args.targets if not is_model_target(t)]
    specs = _model_specs(args, settings)
    if paths and not specs:
        _check_model_flags(args, [str(p) for p in paths])
        if _program:  # a code lint, and the process ends with its report
            from archlint import collector

            collector.off_to_the_end()
    from archlint import outputs, writeguard
    from archlint.report import write_report

    with writeguard.run_inputs():  # no output may replace a file this run reads
        outputs.guard_run(
            settings,
            {
                "a linted file": paths,
                "the config file": [Path(c) for c in args.config if "=" not in c],
                "the model's file": [
                    Path(s.target.rpartition(":")[0]) for s in specs if not s.target.startswith("hf:")
                ],
                "the device spec": [
                    Path(s.device_spec) for s in specs if s.device_spec and Path(s.device_spec).is_file()
                ],
            },
        )
        result = check(paths, specs, settings)
        write_report(result, settings)
    for error in result.errors:  # models that failed in a run with others: those were reported
        print(f"archlint: error: {error}", file=sys.stderr)
    if result.errors:
        return EXIT_ERROR
    if settings.exit_zero:
        return EXIT_CLEAN
    return EXIT_FINDINGS if failed(result) else EXIT_CLEAN


def run_subcommand(argv: list[str]) -> int:
    from archlint import registry

    name, rest = argv[0], argv[1:]
    if name == "loader":  # measure a data pipeline (and whether it can feed a model)
        from archlint.loader.command import loader_command

        return loader_command(rest)
    if name == "trace":  # read torch.profiler traces of real runs (never imports torch)
        from archlint.trace.command import trace_command

        return trace_command(rest)
    if name == "rule":
        p = Parser(
            prog="archlint rule",
            description="print a rule's page: what it flags, why it is slow, "
            "an example and what to use instead (`archlint rules` lists them)",
        )
        p.add_argument("code", metavar="CODE", help="a rule code, e.g. AL101")
        sys.stdout.write(registry.get(p.parse_args(rest).code).body)
        return EXIT_CLEAN
    if name == "device-specs":
        Parser(
            prog="archlint device-specs",
            description="list the built-in device specs for --device-spec: "
            "each device's datasheet figures and their sources",
        ).parse_args(rest)
        from archlint.devices import list_command

        return list_command()
    if name == "rules":
        p = Parser(prog="archlint rules", description="list every rule: code, name, scope, severity, fix, summary")
        p.add_argument("--output-format", choices=("text", "json"), default="text", help="default: text")
        p.add_argument(
            "-q", "--quiet", action="store_true", help="accepted for symmetry; the list has no progress display"
        )
        a = p.parse_args(rest)
        from archlint.report.text import print_rules, rules_json

        rules = list(registry.catalog().values())
        if a.output_format == "json":
            sys.stdout.write(rules_json(rules))
        else:
            print_rules(rules)
        return EXIT_CLEAN
    # calibrate
    p = Parser(
        prog="archlint calibrate",
        description="measure and cache the device's roofline peaks; "
        "--families: also what each op family reaches of the roofs, as device-spec TOML",
    )
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--debug", action="store_true")
    p.add_argument("--families", action="store_true", help="also time one kernel per op family; print device-spec TOML")
    p.add_argument(
        "--device-spec", help="--families: shares of this spec's roofs (a name or TOML file), not the measured peaks"
    )
    p.add_argument("--batch", type=int, help="--families: the batch of the model-like sizes (256 on cuda, 8 on cpu)")
    p.add_argument("--repeat", type=int, default=10, help="--families: runs per kernel, the median is kept")
    p.add_argument(
        "--write-spec", metavar="PATH", help="--families: write a copy of --device-spec with the measured figures"
    )
    p.add_argument("--force", action="store_true", help="--write-spec: replace an existing file")
    a = p.parse_args(rest)
    stray = [
        flag
        for flag, given in (
            ("--device-spec", a.device_spec),
            ("--batch", a.batch),
            ("--write-spec", a.write_spec),
            ("--force", a.force),
            ("--repeat", a.repeat != 10),
        )
        if given
    ]
    if stray and not a.families:
        raise UsageError(f"{stray[0]} applies to `archlint calibrate --families`; add --families")
    if a.families:
        from archlint.model.estimating.calibration import families_command

        return families_command(a.device, a.dtype, a.batch, a.repeat, a.device_spec, a.write_spec, a.force)
    from archlint.model.timing.roofline import calibrate_command

    return calibrate_command(a.device, a.dtype)


_program = False  # main() runs as the program itself, not called from Python


def main(argv: list[str] | None = None) -> int:
    global _program
    if argv is None:  # the program itself (not a call from Python): it ends when its report is out
        _program = True
        heap_gives_back()
        return _exit_past_threads(_main(sys.argv[1:]))
    return _main(argv)


def heap_gives_back() -> bool:
    """Fix glibc's threshold for serving a block by mmap at 1 MiB (mallopt M_MMAP_THRESHOLD); True
    where it was set. Its default adapts: each freed mmapped block raises it to that block's size
    (up to 32 MiB), and blocks that size then come from the heap, which glibc cannot hand back while
    smaller ones sit above them. The training step's memory model makes and frees a real causal-mask
    value of 4-16 MiB per attention layer (model/train/values.py): on an 8B-sized model the process
    kept 0.8 GB of freed heap (issue 45). Only the program sets it (a process-wide setting), and
    only on Linux with glibc."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # another C library (musl): its own allocator, nothing to set
        return False
    m_mmap_threshold = -3  # malloc.h
    return bool(mallopt(m_mmap_threshold, 1 << 20))


def _exit_past_threads(code: int) -> int:
    """Threads a model's code started and left running (not daemons) would keep the process
    alive after its report: flush the outputs and end it, saying so."""
    alive = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if not alive:
        return code
    try:
        sys.stdout.flush()
    except (OSError, ValueError):  # stdout closed or gone: nothing more can reach it
        pass
    # archlint's own (torch.compile's workers in --what-if) are not the model's doing: not blamed on it
    left = [t.name for t in alive if not progress.is_own(t)]
    if not left:
        sys.stderr.flush()
        os._exit(code)
    print(
        f"archlint: note: {len(left)} thread(s) still running after the report ({', '.join(left[:3])}), started "
        "by the model's code or a library it called; archlint exits without waiting for them",
        file=sys.stderr,
        flush=True,
    )
    os._exit(code)


def _main(argv: list[str]) -> int:
    debug = "--debug" in argv
    progress.command_line = True  # what archlint says ahead of a long stage goes to stderr (progress.say)
    try:
        if argv and argv[0] in SUBCOMMANDS:
            return run_subcommand(argv)
        # intermixed: options and paths in any order (`archlint src/ --select AL4 tests/`), as ruff/pytest
        return run(build_parser().parse_intermixed_args(argv))
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
    finally:
        progress.command_line = False  # a later library call in the same process says nothing


if __name__ == "__main__":
    sys.exit(main())
