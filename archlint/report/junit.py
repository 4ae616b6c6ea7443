"""--output-format junit: JUnit XML, as ruff writes it: one <testsuite> per file (or model
target), one failing <testcase> per finding; budget and baseline checks are test cases of an
`archlint gate` suite, passing or failing. With nothing to report, one passing test case says so,
so CI test views show the run."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict

from archlint.config import Settings
from archlint.diagnostics import Diagnostic
from archlint.printable import printable
from archlint.report.locations import locate, subject
from archlint.report.wording import price_text, shown
from archlint.result import RunResult


def render(result: RunResult, settings: Settings) -> str:
    suites: dict[str, list[ET.Element]] = defaultdict(list)
    failures: dict[str, int] = defaultdict(int)
    for d in sorted(shown(result.diagnostics, settings), key=Diagnostic.sort_key):
        where = locate(d, settings)
        file = printable(where.file) if where.file else None  # XML takes no control characters or raw bytes
        suite = printable(d.target or "") or file or "archlint"
        case = ET.Element("testcase", name=f"archlint.{d.code}", classname=file or suite)
        if where.line:
            case.set("line", str(where.line))
        if where.column:
            case.set("column", str(where.column))
        position = ", ".join(f"{k} {v}" for k, v in (("line", where.line), ("col", where.column)) if v)
        about = subject(d)
        message = printable(d.message)
        text = "; ".join(bit for bit in (position, f"[{about}]" if about else "", message) if bit) + price_text(d)
        if d.advisory:  # shown with --show-info, never a failure
            ET.SubElement(case, "skipped", message=message).text = text
        else:
            ET.SubElement(case, "failure", message=message).text = text
            failures[suite] += 1
        suites[suite].append(case)
    for g in result.gate:
        case = ET.Element("testcase", name=f"{g.target}: {g.check}", classname="archlint gate")
        if not g.passed:
            ET.SubElement(case, "failure", message=g.message).text = g.message
            failures["archlint gate"] += 1
        suites["archlint gate"].append(case)
    if not suites:
        suites["archlint"].append(ET.Element("testcase", name="No errors found", classname="archlint"))

    root = ET.Element("testsuites", name="archlint")
    for name, cases in suites.items():
        suite = ET.SubElement(
            root, "testsuite", name=name, tests=str(len(cases)), failures=str(failures[name]), errors="0"
        )
        suite.extend(cases)
    root.set("tests", str(sum(len(c) for c in suites.values())))
    root.set("failures", str(sum(failures.values())))
    root.set("errors", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
