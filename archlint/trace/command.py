"""`archlint trace PATH...`: read torch.profiler traces, report their figures and findings."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from archlint.args import Parser
from archlint.config import OUTPUT_FORMATS
from archlint.errors import UsageError
from archlint.printable import printable
from archlint.trace.deadline import TimedOut, limit
from archlint.trace.scan import STDIN, TraceFormatError

TRACE_SUFFIXES = (".json", ".json.gz")
EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="archlint trace",
        description="Read torch.profiler traces (export_chrome_trace / tensorboard_trace_handler: .json, "
        ".json.gz, or a folder of per-rank traces) and say what wastes the GPU's time: the temporal breakdown "
        "(as Holistic Trace Analysis computes it), per-step figures, top kernels, and findings priced as a "
        "measured share of step time. Never imports torch.",
    )
    p.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="trace file or folder of traces; - reads one trace from standard input (a FIFO is read too)",
    )
    p.add_argument("--select", help="comma-separated codes or prefixes (AL5), or ALL")
    p.add_argument("--extend-select", help="codes or prefixes to add to the selection")
    p.add_argument("--ignore", help="codes or prefixes to skip")
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="CODE.NAME=VALUE",
        help="set a rule option, e.g. AL509.threshold=0.6 (repeatable)",
    )
    p.add_argument("--config", type=Path, metavar="FILE", help="pyproject.toml to read (default: nearest one upward)")
    p.add_argument(
        "--diff",
        type=Path,
        metavar="BASE",
        help="compare with a baseline trace: per step, by kernel group and by module (one PATH); text and "
        "json hold the comparison, the other formats, --html and the baselines the new trace's findings",
    )
    p.add_argument(
        "--code",
        action="append",
        default=[],
        type=Path,
        metavar="PATH",
        help="also lint this training code; a finding both see at the same place is reported once, "
        "at the code's line with the trace's measured price (repeatable)",
    )
    p.add_argument("--top", type=int, default=15, help="kernels listed per trace (default 15)")
    p.add_argument("--output-format", choices=OUTPUT_FORMATS, help="default: text")
    p.add_argument("-o", "--output-file", type=Path)
    p.add_argument("--html", type=Path, metavar="FILE", help="also write a self-contained HTML report")
    p.add_argument(
        "--baseline", type=Path, metavar="FILE", help="fail only on findings not in FILE (as for code and models)"
    )
    p.add_argument("--save-baseline", type=Path, metavar="FILE", help="write the findings to FILE")
    p.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="limit for reading and analysing each trace file; a file past it is an error (exit 2) and the "
        "others are still reported (default: none)",
    )
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings")
    p.add_argument("--show-info", action="store_true", help="also show info findings")
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress display (accepted as by archlint; reading traces shows none)",
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    return p


def trace_files(paths: list[Path]) -> list[Path]:
    """The trace files named: files as given (a FIFO or device too, read as it comes; `-` for
    standard input), folders expanded to their *.json / *.json.gz; each file once."""
    files = []
    for path in paths:
        if str(path) == STDIN:
            files.append(path)
        elif path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(TRACE_SUFFIXES))
            if not found:
                raise UsageError(f"{printable(str(path))}: no trace files (*.json, *.json.gz) in this folder")
            files += found
        elif path.exists():  # a regular file, a FIFO, /dev/stdin: whatever can be read
            files.append(path)
        else:
            raise UsageError(f"{printable(str(path))}: no such file or folder")
    if sum(str(f) == STDIN for f in files) > 1:
        raise UsageError("- (standard input) is named twice: it holds one trace")
    seen: dict = {}
    for f in files:  # the same file named twice (or also inside a named folder) is read once
        seen.setdefault(f if str(f) == STDIN else _identity(f), f)
    return list(seen.values())


def _identity(path: Path):
    try:
        info = path.stat()
        return info.st_dev, info.st_ino
    except OSError:
        return str(path)


def _settings(args: argparse.Namespace):
    from archlint import config

    s = config.load(path=args.config)
    config.apply_rule_flags(
        s, args.select, args.extend_select, args.ignore, args.option, parse=float, example="AL509.threshold=0.6"
    )
    if args.top < 0:
        raise UsageError(f"--top {args.top}: give a number of kernels, 0 or more")
    if args.timeout is not None and not (0 < args.timeout < 1e9):  # also NaN and inf
        raise UsageError(f"--timeout {args.timeout:g}: give a number of seconds greater than 0")
    given = {
        "rule_options": s.rule_options,
        "output_format": args.output_format,
        "output_file": args.output_file,
        "html": args.html,
        "baseline": args.baseline,
        "save_baseline": args.save_baseline,
        "exit_zero": args.exit_zero,
        "debug": args.debug,
        "quiet": True,
        "show_info": args.show_info or None,
    }
    return config.apply(
        s, given, label=lambda name: "--option" if name == "rule_options" else f"--{name.replace('_', '-')}"
    )


def lint_trace(path: Path, settings, top: int = 15, timeout: float | None = None):
    """One file: its analysis and its findings (those the settings select). Raises UsageError
    for a file that is not a trace, has no GPU events, or takes longer than `timeout` seconds."""
    shown = "<stdin>" if str(path) == STDIN else printable(str(path))
    try:
        with limit(timeout):
            return _lint_trace(path, shown, settings, top)
    except TimedOut:
        raise UsageError(
            f"{shown}: not read and analysed within --timeout {timeout:g} s; raise --timeout (the "
            "reader takes about 2 s per 100 MB of trace) or check the file"
        ) from None


def _lint_trace(path: Path, shown: str, settings, top: int):
    from archlint.trace.analyze import analyze
    from archlint.trace.checks import modules
    from archlint.trace.read import read_trace

    try:
        data = read_trace(path)
    except TraceFormatError as exc:
        raise UsageError(f"{shown}: not a torch.profiler trace: {printable(str(exc))}") from None
    except (OSError, EOFError) as exc:
        raise UsageError(f"{shown}: cannot read it ({printable(str(exc))})") from None
    if not data.gpu_events and not data.steps:  # a CPU-only trace with steps gets the host's report
        raise UsageError(
            f"{shown}: no GPU events (kernels, memcpy, memset) and no ProfilerStep ranges in {data.events} events: record "
            "the trace with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) and "
            "prof.step() once per iteration"
        )
    analysis = analyze(data, top=top)
    diagnostics = []
    for module in modules():
        if settings.enabled(module.CODE):
            diagnostics += module.check(analysis, settings.options(module.CODE, module.OPTIONS))
    return analysis, diagnostics


def trace_command(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    settings = _settings(args)
    from archlint import outputs, writeguard

    files = trace_files(args.paths)
    with writeguard.run_inputs():  # no output may replace a trace, the config or the code it reads
        outputs.guard_run(
            settings,
            {
                "a trace": files + ([args.diff] if args.diff is not None else []),
                "the config file": [args.config],
                "a linted file": args.code,
            },
        )
        if args.diff is not None:
            return _diff_command(args, files, settings)
        return _report(args, files, settings)


def _report(args: argparse.Namespace, files: list[Path], settings) -> int:
    from archlint import gate
    from archlint.report import write_report
    from archlint.result import RunResult

    result = RunResult()
    errors = 0
    for path in files:
        try:
            analysis, diagnostics = lint_trace(path, settings, args.top, args.timeout)
        except UsageError as exc:  # one bad file never costs the others their results
            print(f"archlint: error: {exc}", file=sys.stderr)
            errors += 1
            continue
        except Exception as exc:  # an internal error on one file: said in one line, the others still read
            if settings.debug:
                raise
            print(
                f"archlint: internal error: {printable(str(path))}: {type(exc).__name__}: {printable(str(exc))} "
                "(rerun with --debug for the traceback)",
                file=sys.stderr,
            )
            errors += 1
            continue
        result.traces.append(analysis)
        result.diagnostics += diagnostics
    if not result.traces:
        return EXIT_ERROR
    _across_ranks(result, settings)
    _with_code(result, args, settings)
    result.gate = gate.evaluate(result, [], settings)  # --baseline / --save-baseline: the findings' fingerprints
    write_report(result, settings)
    if errors:
        return EXIT_ERROR
    if settings.exit_zero:
        return EXIT_CLEAN
    failed = gate.fails(result.diagnostics) or any(not g.passed for g in result.gate)
    return EXIT_FINDINGS if failed else EXIT_CLEAN


def _across_ranks(result, settings) -> None:
    """Traces of two or more ranks of one job: the cross-rank report and its findings (AL512)."""
    from archlint.trace.checks import rank_modules
    from archlint.trace.ranks import cross_rank, jobs

    for group in jobs(result.traces):
        report = cross_rank(group)
        if report is None:
            continue
        result.ranks.append(report)
        for module in rank_modules():
            if settings.enabled(module.CODE):
                found = module.check(report, group, settings.options(module.CODE, module.OPTIONS))
                result.diagnostics += found
                if found and module.CODE == "AL512":
                    _wait_owned_by_al512(result, report, group, settings)


def _wait_owned_by_al512(result, report, group, settings) -> None:
    """AL512 prices the others' wait for the straggler; each waiting rank's AL507 prices its exposed
    communication less that wait (carved into a bucket of its own), so the two never overlap."""
    from archlint.trace import waterfall
    from archlint.trace.checks import communication_exposed

    s = report.straggler
    for t in group:
        wait = s.others_wait_us.get(t.rank, 0.0)
        if (
            t.rank == s.rank
            or not t.waterfall
            or not waterfall.carve(
                t.waterfall,
                "exposed_communication",
                "peer_wait",
                wait,
                "AL512",
                f"waiting in collectives for rank {s.rank}, the straggler: priced once, by AL512 on its trace",
            )
        ):
            continue
        before = [d for d in result.diagnostics if d.code == communication_exposed.CODE and d.target == t.file]
        if not before:
            continue
        result.diagnostics = [d for d in result.diagnostics if all(d is not b for b in before)]
        if settings.enabled(communication_exposed.CODE):
            result.diagnostics += communication_exposed.check(
                t, settings.options(communication_exposed.CODE, communication_exposed.OPTIONS)
            )


def _with_code(result, args: argparse.Namespace, settings) -> None:
    """--code: lint the training code too; a finding both see at the same place becomes one."""
    if not args.code:
        return
    from archlint.code.lint import lint_paths
    from archlint.trace.link import link

    code = lint_paths(args.code, settings)
    code_findings, result.files_checked = code.diagnostics, code.files_checked
    result.diagnostics = link(result.diagnostics, code_findings) + code_findings


def _diff_command(args: argparse.Namespace, files: list[Path], settings) -> int:
    """Compare one trace with a baseline trace. Text and JSON: the comparison, then the new
    trace's findings (JSON also both traces' figures). SARIF, GitHub, JUnit, --html, --baseline
    and --save-baseline: the new trace's findings, as without --diff. The exit code is the new
    trace's, as without --diff. Every file goes through archlint.outputs."""
    from archlint import gate
    from archlint.report import write_report
    from archlint.result import RunResult
    from archlint.trace.diff import diff

    base_files = trace_files([args.diff])
    if len(files) != 1 or len(base_files) != 1:
        raise UsageError(
            f"--diff compares two traces: give one PATH and one BASE file (got {len(files)} and {len(base_files)})"
        )
    if str(files[0]) == STDIN and str(base_files[0]) == STDIN:
        raise UsageError("--diff -: standard input holds one trace; give the other as a file")
    base, _ = lint_trace(base_files[0], settings, args.top, args.timeout)
    new, diagnostics = lint_trace(files[0], settings, args.top, args.timeout)
    comparison = diff(base, new)
    result = RunResult(diagnostics=diagnostics)
    result.traces = [new]
    _with_code(result, args, settings)  # --code: with the new trace's findings
    result.gate = gate.evaluate(result, [], settings)  # --baseline / --save-baseline, on the new trace's findings
    if settings.output_format == "json":
        import json

        from archlint.report import render

        if settings.html is not None:
            from archlint.report.html import write_html

            write_html(result, settings, settings.html)
        both = RunResult(diagnostics=result.diagnostics, gate=result.gate, files_checked=result.files_checked)
        both.traces = [base, new]
        _emit(
            settings,
            json.dumps({"diff": comparison.to_dict(), **json.loads(render(both, settings))}, indent=2) + "\n",
            len(result.diagnostics),
        )
    elif settings.output_format == "text":
        import io

        from rich.console import Console

        from archlint.report.text import print_text, terminal
        from archlint.report.trace_table import print_diff

        if settings.html is not None:
            from archlint.report.html import write_html

            write_html(result, settings, settings.html)
        buffer = io.StringIO() if settings.output_file is not None else None
        console = (
            terminal()
            if buffer is None
            else Console(file=buffer, width=160, highlight=False, soft_wrap=True, emoji=False)
        )
        print_diff(comparison, console)
        print_text(
            RunResult(diagnostics=result.diagnostics, gate=result.gate, files_checked=result.files_checked),
            settings,
            console,
        )  # the new trace's findings (and the code's, with --code)
        if buffer is not None:
            _emit(settings, buffer.getvalue(), len(result.diagnostics))
    else:  # sarif, github, junit: findings formats; the comparison has no place in them
        write_report(result, settings)
    if settings.exit_zero:
        return EXIT_CLEAN
    failed = gate.fails(result.diagnostics) or any(not g.passed for g in result.gate)
    return EXIT_FINDINGS if failed else EXIT_CLEAN


def _emit(settings, text: str, findings: int) -> None:
    """The report to -o (through the one writer) or to stdout."""
    if settings.output_file is None:
        sys.stdout.write(text)
        return
    from archlint.outputs import write_text

    write_text(settings.output_file, text)
    print(
        f"archlint: wrote {settings.output_format} to {settings.output_file}: {findings} finding{'s' * (findings != 1)}",
        file=sys.stderr,
    )
