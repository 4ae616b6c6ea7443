"""The rule catalog. Each rule is one page in rules/ (its metadata and documentation) plus one
check module (its logic); this module reads the pages, so listing rules never imports torch.

A page starts with a front-matter block:

    ---
    code: AL101
    name: unbalanced-channels
    scope: model            # model | code | trace | train
    severity: warning       # error | warning | info
    fix: none               # none | safe | unsafe: the strongest fix its findings carry
    price: static, measured # the bases its findings' prices may have (diagnostics.BASES), or none
    summary: one line that says what it flags
    ---
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from archlint.diagnostics import Severity
from archlint.errors import UsageError

_PACKAGE = Path(__file__).resolve().parent


def rules_dir() -> Path:
    """The pages: inside the wheel (archlint/_rules) or, in a checkout, the repository's rules/."""
    for candidate in (_PACKAGE / "_rules", _PACKAGE.parent / "rules"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("archlint's rule pages are missing from this installation")


@dataclass(frozen=True)
class RuleInfo:
    code: str
    name: str
    scope: str
    severity: Severity
    fix: str
    summary: str
    path: Path
    price: tuple[str, ...] | None = None  # None: the page says no `price:` (archlint.declarations reports it)

    @property
    def page(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def body(self) -> str:
        """The page without its front matter."""
        text = self.page
        if text.startswith("---"):
            text = text.split("---", 2)[2]
        return text.strip() + "\n"


def _front_matter(path: Path) -> dict[str, str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or lines[0].strip() != "---":
        raise ValueError(f"{path}: rule page must start with a '---' front-matter block")
    meta: dict[str, str] = {}
    for line in lines[1:]:
        if line.strip() == "---":
            return meta
        key, _, value = line.partition(":")
        meta[key.strip()] = value.split("  #")[0].strip()
    raise ValueError(f"{path}: front-matter block is not closed with '---'")


def _price(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    return () if text == "none" else tuple(b.strip() for b in text.split(","))


@functools.cache
def catalog() -> dict[str, RuleInfo]:
    rules = {}
    for path in sorted(rules_dir().glob("AL*.md")):
        meta = _front_matter(path)
        rules[meta["code"]] = RuleInfo(
            code=meta["code"],
            name=meta["name"],
            scope=meta.get("scope", "model"),
            severity=Severity(meta.get("severity", "warning")),
            fix=meta.get("fix", "none"),
            summary=meta.get("summary", ""),
            path=path,
            price=_price(meta.get("price")),
        )
    return rules


def get(code: str) -> RuleInfo:
    rule = catalog().get(code.upper())
    if rule is None:
        by_name = {r.name: r for r in catalog().values()}
        rule = by_name.get(code)
    if rule is None:
        raise UsageError(f"unknown rule {code!r}: `archlint rules` lists them all")
    return rule
