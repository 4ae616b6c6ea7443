"""The one finding type both halves of archlint produce and every reporter reads."""

from __future__ import annotations

import math
from collections.abc import Iterable
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


BASES = ("measured", "estimated", "static")
NOT_ANALYZED = "AL000"  # the code a file gets that could not be, or was not, analyzed


@dataclass
class Price:
    """What following a finding's advice saves, against `alternative` (in words: the concrete
    change compared, which keeps the layer's or block's input and output shapes). A saving, never
    a total. `basis` says where the figures come from:
      measured   saving_ms timed with --latency on `device` (a what-if, or the measured time of
                 ops the alternative removes); saving_share = saving_ms / the model's latency;
      estimated  saving_ms from a model of the device (roofline, device spec), labelled as such;
      static     no time: saving_share = mac_bytes_saved / the model's MAC.
    A measured saving can be ≤ 0 (the alternative is no faster): it is reported as it is. One
    inside the timing noise is 0 with `noise_share` set: the noise's half-width as a share of the
    model's time (the saving could not be told apart from 0 on this machine).
    `claims` names the ops (or "op#part") whose cost this saving is made of: one op's saving is
    claimed by one finding only. It is internal (not in the JSON)."""

    basis: str
    saving_share: float
    alternative: str
    saving_ms: float | None = None
    mac_bytes_saved: int | None = None
    flops_saved: int | None = None
    device: str | None = None  # where saving_ms was measured or estimated
    claims: tuple[str, ...] = field(default=(), repr=False, compare=False)
    # An additive price: claim → (bytes saved, ms saved or None); lets a claim owned by a more
    # specific finding be taken out of this one (internal, not in the JSON).
    parts: dict[str, tuple[int, float | None]] | None = field(default=None, repr=False, compare=False)
    whole: str = "model time"  # what saving_share is a share of ("step time" for a profiler trace)
    noise_share: float | None = None  # set when the measured saving was inside the noise

    def __post_init__(self) -> None:
        if self.basis not in BASES:
            raise ValueError(f"price basis must be one of {BASES}, got {self.basis!r}")
        self.saving_share = min(1.0, float(self.saving_share))  # a part never exceeds the whole

    @classmethod
    def static(
        cls,
        alternative: str,
        *,
        mac_bytes_saved: int | None,
        model_mac_bytes: int,
        flops_saved: int | None = None,
        claims: Iterable[str] = (),
    ) -> Price:
        """A price from exact counts: the MAC the alternative saves, as a share of the model's."""
        share = mac_bytes_saved / model_mac_bytes if mac_bytes_saved and model_mac_bytes else 0.0
        return cls("static", share, alternative, None, _int(mac_bytes_saved), _int(flops_saved), None, tuple(claims))

    @classmethod
    def timed(
        cls,
        alternative: str,
        *,
        saving_ms: float,
        model_ms: float,
        basis: str = "measured",
        mac_bytes_saved: int | None = None,
        flops_saved: int | None = None,
        device: str | None = None,
        claims: Iterable[str] = (),
    ) -> Price:
        """A price in time (measured or estimated), as a share of the model's time."""
        share = saving_ms / model_ms if model_ms else 0.0
        noise = getattr(saving_ms, "noise", None)  # a paired.WithinNoise: measured, inside the noise
        noise_share = noise / model_ms if noise is not None and model_ms and math.isfinite(noise) else None
        return cls(
            basis,
            share,
            alternative,
            float(saving_ms),
            _int(mac_bytes_saved),
            _int(flops_saved),
            device,
            tuple(claims),
            noise_share=noise_share,
        )

    @property
    def pays(self) -> bool:
        """True when the saving is positive on its basis (time when timed, else bytes)."""
        if self.saving_ms is not None:
            return self.saving_ms > 0
        return bool(self.mac_bytes_saved and self.mac_bytes_saved > 0)

    def without(self, claims: set[str]) -> None:
        """Take the given claims' parts out of an additive price (its share scales with it)."""
        if not self.parts:
            return
        before = self.saving_ms if self.saving_ms is not None else self.mac_bytes_saved
        self.parts = {c: v for c, v in self.parts.items() if c not in claims}
        self.claims = tuple(c for c in self.claims if c not in claims)
        self.mac_bytes_saved = sum(b for b, _ in self.parts.values())
        if self.saving_ms is not None:
            self.saving_ms = sum(ms or 0.0 for _, ms in self.parts.values())
        after = self.saving_ms if self.saving_ms is not None else self.mac_bytes_saved
        self.saving_share = self.saving_share * after / before if before else 0.0

    def sort_key(self) -> tuple[float, float]:
        return (self.saving_ms or 0.0, float(self.mac_bytes_saved or 0))

    def to_dict(self) -> dict[str, Any]:
        out = {
            "basis": self.basis,
            "saving_ms": self.saving_ms,
            "saving_share": self.saving_share,
            "mac_bytes_saved": self.mac_bytes_saved,
            "flops_saved": self.flops_saved,
            "alternative": self.alternative,
        }
        if self.device is not None:
            out["device"] = self.device
        if self.whole != "model time":
            out["share_of"] = self.whole
        if self.noise_share is not None:
            out["noise_share"] = self.noise_share
        return out


def _int(value: float | None) -> int | None:
    return int(value) if value is not None else None


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
    cell: int | None = None  # a notebook's cell (1-based among all its cells); line and column are in it
    evidence: dict[str, Any] = field(default_factory=dict)
    price: Price | None = None
    fix: Fix | None = None

    @property
    def advisory(self) -> bool:
        """An info finding, from the code linter or the model analyzer alike: advice. It never
        fails a run (nor a gate); the text reporters hide it unless --show-info (see `hidden`);
        JSON and SARIF keep it, with its severity, for tools that filter on their own."""
        return self.severity is Severity.INFO

    @property
    def hidden(self) -> bool:
        """Hidden by default in text, GitHub and JUnit output: advice, except a note that a file was
        not analyzed (AL000 info: too large, too deep), which is always said so that a run never
        reads as a pass for a file it did not lint."""
        return self.advisory and self.code != NOT_ANALYZED

    def sort_key(self) -> tuple[float, float, str, int, int, str]:
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
        } | ({"cell": self.cell} if self.cell is not None else {})
