"""--output-format github: workflow commands, so findings annotate the pull request's diff.

    ::warning file=train.py,line=12,col=5,endLine=12,endColumn=40,title=archlint AL301::message

Budget and baseline failures have no source line: they become ::error annotations on the run.
"""

from __future__ import annotations

from archlint.config import Settings
from archlint.diagnostics import Diagnostic, Severity
from archlint.printable import printable
from archlint.report.locations import locate, subject
from archlint.report.wording import price_text, shown
from archlint.result import RunResult

_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _data(text: str) -> str:
    """Escape a command's message, as the Actions runner's toolkit does (line breaks as %0A), after
    writing any other control character or undecodable byte as an escape (printable.py)."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return printable(text)


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render(result: RunResult, settings: Settings) -> str:
    lines = []
    for d in sorted(shown(result.diagnostics, settings), key=Diagnostic.sort_key):
        where = locate(d, settings)
        props = []
        if where.file and not where.library:  # a library file cannot annotate the diff: the message names it
            props.append(f"file={_property(where.file)}")
            for key, value in (
                ("line", where.line),
                ("col", where.column),
                ("endLine", where.end_line),
                ("endColumn", where.end_column),
            ):
                if value:
                    props.append(f"{key}={value}")
        props.append(f"title={_property(f'archlint {d.code}')}")
        about = f" [{subject(d)}]" if subject(d) else ""
        if where.library:
            about += f" at {where.file}:{where.line} (library code)"
        if d.cell is not None:
            about += f" at cell {d.cell}, line {d.line}"
        lines.append(
            f"::{_COMMAND[Severity(d.severity)]} {','.join(props)}::{_data(f'{d.code}{about} {d.message}{price_text(d)}')}"
        )
    for g in result.gate:
        if not g.passed:
            title = _property(f"archlint gate: {g.check}")
            lines.append(f"::error title={title}::{_data(f'{g.target}: {g.check}: {g.message}')}")
    return "".join(line + "\n" for line in lines)
