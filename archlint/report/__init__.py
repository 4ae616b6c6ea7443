"""Reporters: each turns a RunResult into text and knows nothing of where findings came from."""

from __future__ import annotations

import importlib
import sys

from archlint.config import Settings
from archlint.result import RunResult

# format → module in this package with `render(result, settings) -> str`
FORMATS = {"text": "text", "json": "json", "sarif": "sarif", "github": "github", "junit": "junit"}


def render(result: RunResult, settings: Settings) -> str:
    module = importlib.import_module(f"archlint.report.{FORMATS[settings.output_format]}")
    return module.render(result, settings)


def write_report(result: RunResult, settings: Settings) -> None:
    if settings.html is not None:
        from archlint.report.html import write_html

        write_html(result, settings, settings.html)
    if settings.output_format == "text" and settings.output_file is None:
        from archlint.report.text import print_text

        print_text(result, settings)  # rich, straight to the terminal
        return
    text = render(result, settings)
    if settings.output_file is None:
        sys.stdout.write(text)
    else:
        from archlint.outputs import write_text

        write_text(settings.output_file, text)
        # The report went to a file: the CI log still says why the run fails.
        n = len(result.diagnostics)
        print(
            f"archlint: wrote {settings.output_format} to {settings.output_file}: {n} finding{'s' * (n != 1)}",
            file=sys.stderr,
        )
        for g in result.gate:
            if not g.passed:
                print(f"archlint: gate failed: {g.target}: {g.check}: {g.message}", file=sys.stderr)
