"""`archlint trace PATH...`: read torch.profiler traces, report their figures and findings."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from archlint.args import Parser
from archlint.config import OUTPUT_FORMATS
from archlint.errors import UsageError
from archlint.trace.scan import TraceFormatError

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
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="trace file or folder of traces")
    p.add_argument("--select", help="comma-separated codes or prefixes (AL5), or ALL")
    p.add_argument("--extend-select", help="codes or prefixes to add to the selection")
    p.add_argument("--ignore", help="codes or prefixes to skip")
    p.add_argument("--option", action="append", default=[], metavar="CODE.NAME=VALUE",
                   help="set a rule option, e.g. AL509.threshold=0.6 (repeatable)")
    p.add_argument("--config", type=Path, metavar="FILE", help="pyproject.toml to read (default: nearest one upward)")
    p.add_argument("--diff", type=Path, metavar="BASE",
                   help="compare with a baseline trace: per step, by kernel group and by module (one PATH)")
    p.add_argument("--code", action="append", default=[], type=Path, metavar="PATH",
                   help="also lint this training code; a finding both see at the same place is reported once, "
                   "at the code's line with the trace's measured price (repeatable)")
    p.add_argument("--top", type=int, default=15, help="kernels listed per trace (default 15)")
    p.add_argument("--output-format", choices=OUTPUT_FORMATS, help="default: text")
    p.add_argument("-o", "--output-file", type=Path)
    p.add_argument("--html", type=Path, metavar="FILE", help="also write a self-contained HTML report")
    p.add_argument("--baseline", type=Path, metavar="FILE", help="fail only on findings not in FILE (as for code and models)")
    p.add_argument("--save-baseline", type=Path, metavar="FILE", help="write the findings to FILE")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings")
    p.add_argument("--show-info", action="store_true", help="also show info findings")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress display (accepted as by archlint; reading traces shows none)")
    p.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    return p


def trace_files(paths: list[Path]) -> list[Path]:
    """The trace files named: files as given, folders expanded to their *.json / *.json.gz."""
    files = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(TRACE_SUFFIXES))
            if not found:
                raise UsageError(f"{path}: no trace files (*.json, *.json.gz) in this folder")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise UsageError(f"{path}: no such file or folder")
    return files


def _settings(args: argparse.Namespace):
    from archlint import config

    s = config.load(path=args.config)
    config.apply_rule_flags(s, args.select, args.extend_select, args.ignore, args.option, parse=float,
                            example="AL509.threshold=0.6")
    if args.top < 0:
        raise UsageError(f"--top {args.top}: give a number of kernels, 0 or more")
    given = {
        "rule_options": s.rule_options, "output_format": args.output_format, "output_file": args.output_file,
        "html": args.html, "baseline": args.baseline, "save_baseline": args.save_baseline, "exit_zero": args.exit_zero,
        "debug": args.debug, "quiet": True, "show_info": args.show_info or None,
    }
    return config.apply(s, given, label=lambda name: "--option" if name == "rule_options" else f"--{name.replace('_', '-')}")


def lint_trace(path: Path, settings, top: int = 15):
    """One file: its analysis and its findings (those the settings select). Raises UsageError
    for a file that is not a trace or has no GPU events."""
    from archlint.trace.analyze import analyze
    from archlint.trace.checks import modules
    from archlint.trace.read import read_trace

    try:
        data = read_trace(path)
    except TraceFormatError as exc:
        raise UsageError(f"{path}: not a torch.profiler trace: {exc}") from None
    except (OSError, EOFError) as exc:
        raise UsageError(f"{path}: cannot read it ({exc})") from None
    if not data.gpu_events:
        raise UsageError(
            f"{path}: no GPU events (kernels, memcpy, memset) in {data.events} events: record the trace on a GPU with "
            "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])"
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
    from archlint import gate
    from archlint.report import write_report
    from archlint.result import RunResult

    files = trace_files(args.paths)
    if args.diff is not None:
        return _diff_command(args, files, settings)
    result = RunResult()
    errors = 0
    for path in files:
        try:
            analysis, diagnostics = lint_trace(path, settings, args.top)
        except UsageError as exc:  # one bad file never costs the others their results
            print(f"archlint: error: {exc}", file=sys.stderr)
            errors += 1
            continue
        except Exception as exc:  # an internal error on one file: said in one line, the others still read
            if settings.debug:
                raise
            print(f"archlint: internal error: {path}: {type(exc).__name__}: {exc} (rerun with --debug for the "
                  "traceback)", file=sys.stderr)
            errors += 1
            continue
        result.traces.append(analysis)
        result.diagnostics += diagnostics
    if not result.traces:
        return EXIT_ERROR
    if args.code:
        from archlint.code.lint import lint_paths
        from archlint.trace.link import link

        code = lint_paths(args.code, settings)
        code_findings, result.files_checked = code.diagnostics, code.files_checked
        result.diagnostics = link(result.diagnostics, code_findings) + code_findings
    result.gate = gate.evaluate(result, [], settings)  # --baseline / --save-baseline: the findings' fingerprints
    write_report(result, settings)
    if errors:
        return EXIT_ERROR
    if settings.exit_zero:
        return EXIT_CLEAN
    failed = gate.fails(result.diagnostics) or any(not g.passed for g in result.gate)
    return EXIT_FINDINGS if failed else EXIT_CLEAN


def _diff_command(args: argparse.Namespace, files: list[Path], settings) -> int:
    """Compare one trace with a baseline trace: the report is the comparison, then the new
    trace's findings; the exit code is the new trace's, as without --diff."""
    from archlint import gate
    from archlint.trace.diff import diff

    base_files = trace_files([args.diff])
    if len(files) != 1 or len(base_files) != 1:
        raise UsageError(f"--diff compares two traces: give one PATH and one BASE file (got {len(files)} and {len(base_files)})")
    base, _ = lint_trace(base_files[0], settings, args.top)
    new, diagnostics = lint_trace(files[0], settings, args.top)
    result = diff(base, new)
    if settings.output_format == "json":
        import json

        text = json.dumps({"diff": result.to_dict(), "traces": [base.to_dict(), new.to_dict()],
                           "diagnostics": [d.to_dict() for d in diagnostics]}, indent=2) + "\n"
        if settings.output_file is not None:
            settings.output_file.write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text)
    else:
        from archlint.report.text import print_text, terminal
        from archlint.report.trace_table import print_diff
        from archlint.result import RunResult

        console = terminal()
        print_diff(result, console)
        print_text(RunResult(diagnostics=diagnostics), settings, console)  # the new trace's findings
    if settings.exit_zero:
        return EXIT_CLEAN
    return EXIT_FINDINGS if gate.fails(diagnostics) else EXIT_CLEAN
