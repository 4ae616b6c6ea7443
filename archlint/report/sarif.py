"""--output-format sarif: SARIF 2.1.0, the format GitHub code scanning accepts.

Every rule of the catalog goes in tool.driver.rules (so a result's ruleIndex is stable and the
rule's help shows in the code-scanning UI); paths are relative to the project root, which is the
repository root in CI; partialFingerprints carry archlint's own line-independent fingerprint, so
code scanning tracks a finding across edits the same way `--baseline` does.
"""

from __future__ import annotations

import json
import re
from typing import Any

from archlint import __version__
from archlint.config import Settings
from archlint.diagnostics import Diagnostic, Severity
from archlint.gate import fingerprint
from archlint.printable import file_uri, printable
from archlint.registry import RuleInfo, catalog
from archlint.report.json import finite  # NaN is no JSON number: null
from archlint.report.locations import Where, locate, subject
from archlint.report.wording import price_text
from archlint.result import RunResult

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


# A lone surrogate (a kernel name in a trace's evidence, a non-UTF-8 file name) has no UTF-8 form:
# written as its JSON escape, the document means the same and can be written anywhere.
_SURROGATE = re.compile("[\ud800-\udfff]")


def render(result: RunResult, settings: Settings) -> str:
    text = json.dumps(finite(to_sarif(result, settings), "", {}), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def to_sarif(result: RunResult, settings: Settings) -> dict[str, Any]:
    rules = sorted(catalog().values(), key=lambda r: r.code)
    index = {r.code: i for i, r in enumerate(rules)}
    failed_gate = [g for g in result.gate if not g.passed]
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "archlint",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": [_rule(r) for r in rules],
            }
        },
        "results": [_result(d, index, settings) for d in sorted(result.diagnostics, key=Diagnostic.sort_key)],
        "invocations": [
            {
                "executionSuccessful": True,
                # Budget and baseline failures are not findings at a source line: they travel as
                # notifications, and the job's exit code fails the check.
                "toolExecutionNotifications": [
                    {"level": "error", "message": {"text": f"gate failed: {g.target}: {g.check}: {g.message}"}}
                    for g in failed_gate
                ],
            }
        ],
        "columnKind": "unicodeCodePoints",
    }
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}


def _rule(rule: RuleInfo) -> dict[str, Any]:
    body = rule.body
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary or rule.name},
        "fullDescription": {"text": _first_paragraph(body) or rule.summary or rule.name},
        "help": {"text": body, "markdown": body},
        "defaultConfiguration": {"level": rule.severity.sarif_level},
        "properties": {"tags": ["efficiency", "performance", rule.scope], "fix": rule.fix},
    }


def _first_paragraph(markdown: str) -> str:
    """The first prose paragraph under 'What it does' (else of the page), not a heading."""
    _, found, after = markdown.partition("## What it does")
    for block in (after if found else markdown).split("\n\n"):
        text = block.strip()
        if text and not text.startswith(("#", "```", "---")):
            return " ".join(text.split())
    return ""


def _result(d: Diagnostic, index: dict[str, int], settings: Settings) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ruleId": d.code,
        "level": Severity(d.severity).sarif_level,
        "message": {"text": printable((f"[{subject(d)}] {d.message}" if subject(d) else d.message) + price_text(d))},
        "partialFingerprints": {"archlintFingerprint/v1": fingerprint(d, settings)},
    }
    if d.code in index:
        out["ruleIndex"] = index[d.code]
    where = locate(d, settings)
    location: dict[str, Any] = {}
    if where.file:
        location["physicalLocation"] = {"artifactLocation": {"uri": file_uri(where.file)}, **_region(where)}
    name = subject(d)
    if name:
        location["logicalLocations"] = [
            {"name": name, "fullyQualifiedName": f"{d.target}::{name}" if d.target else name, "kind": "member"}
        ]
    if location:
        out["locations"] = [location]
    if d.fix and d.fix.edits and where.file and not where.library and d.cell is None:
        out["fixes"] = [
            {
                "description": {"text": d.fix.message},
                "artifactChanges": [
                    {
                        "artifactLocation": {"uri": file_uri(where.file)},
                        "replacements": [
                            {
                                "deletedRegion": {
                                    "startLine": e.start_line,
                                    "startColumn": e.start_column,
                                    "endLine": e.end_line,
                                    "endColumn": e.end_column,
                                },
                                "insertedContent": {"text": e.content},
                            }
                            for e in d.fix.edits
                        ],
                    }
                ],
            }
        ]
    properties = {k: v for k, v in (("evidence", d.evidence), ("price", d.price.to_dict() if d.price else None)) if v}
    if where.fallback:
        properties["location"] = "the target's class: the finding had no source line inside the project"
    if where.library:
        properties["location"] = "library code, not in this repository: the class that defines the module"
    if where.trace:
        properties["location"] = (
            "the trace file: the trace has no stacks that place the finding in the code "
            "(record it with torch.profiler.profile(with_stack=True))"
        )
    if d.cell is not None:  # a notebook: SARIF regions count lines of the file, not of a cell
        properties["notebook"] = {"cell": d.cell, "line": d.line, "column": d.column}
    if properties:
        out["properties"] = json.loads(json.dumps(properties, default=str))
    return out


def _region(where: Where) -> dict[str, Any]:
    if not where.line:
        return {}
    region = {"startLine": where.line}
    if where.column:
        region["startColumn"] = where.column
    if where.end_line:
        region["endLine"] = where.end_line
    if where.end_column and where.end_line:
        region["endColumn"] = where.end_column
    return {"region": region}
