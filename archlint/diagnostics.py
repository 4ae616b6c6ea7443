"""The one finding type both halves of archlint produce and every reporter reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def sarif_level(self) -> str:
        return "note" if self is Severity.INFO else self.value


class Applicability(str, Enum):
    """Like ruff: safe fixes run with --fix, unsafe ones only with --unsafe-fixes."""

    SAFE = "safe"
    UNSAFE = "unsafe"


@dataclass(frozen=True)
class Edit:
    """Replace the text between two 1-based (line, column) positions; column counts characters."""

    start_line: int
    start_column: int
    end_line: int
    end_column: int
    content: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "location": {"row": self.start_line, "column": self.start_column},
            "end_location": {"row": self.end_line, "column": self.end_column},
            "content": self.content,
        }


@dataclass(frozen=True)
class Fix:
    message: str
    applicability: Applicability
    edits: tuple[Edit, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "applicability": self.applicability.value,
            "edits": [e.to_dict() for e in self.edits],
        }


@dataclass
class Price:
    """What a finding costs. Static figures always; measured ones only with --latency.

    `mac_bytes`/`flops` are the excess the finding causes (exact, from the cost formulas);
    `latency_ms` is measured on `device` (never modelled), `latency_share` its share of the
    model's end-to-end latency; `whatif_ms` is the measured saving of the local alternative.
    """

    mac_bytes: int | None = None
    mac_share: float | None = None
    flops: int | None = None
    latency_ms: float | None = None
    latency_share: float | None = None
    whatif_ms: float | None = None
    device: str | None = None

    def sort_key(self) -> tuple[float, float]:
        measured = self.whatif_ms if self.whatif_ms is not None else self.latency_ms
        return (measured or 0.0, float(self.mac_bytes or 0))

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class Diagnostic:
    code: str
    message: str
    severity: Severity = Severity.WARNING
    # Code findings have a file span; model findings name an OpGraph node and its module path
    # (and, when it can be found, the source file and line of the module's definition).
    file: str | None = None
    line: int | None = None
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None
    node: str | None = None
    module: str | None = None
    target: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    price: Price | None = None
    fix: Fix | None = None

    def sort_key(self) -> tuple:
        price = self.price.sort_key() if self.price else (0.0, 0.0)
        return (-price[0], -price[1], self.file or "", self.line or 0, self.column or 0, self.code)

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity.value,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "node": self.node,
            "module": self.module,
            "target": self.target,
            "evidence": self.evidence,
            "price": self.price.to_dict() if self.price else None,
            "fix": self.fix.to_dict() if self.fix else None,
        }
