"""Every `scope: code` rule page: its Example fires the rule, its Use-instead does not (Fixit style)."""

from __future__ import annotations

import re

import pytest

from archlint import registry
from archlint.code.engine import lint_text

CODE_RULES = [r for r in registry.catalog().values() if r.scope == "code"]


def block_under(page: str, heading: str) -> str:
    """The first ```python block after `## heading`, before the next `## ` heading."""
    section = re.search(rf"^## {re.escape(heading)}\s*$(.*?)(?=^## |\Z)", page, re.MULTILINE | re.DOTALL)
    assert section, f"page has no '## {heading}' section"
    block = re.search(r"^```python\n(.*?)^```", section.group(1), re.MULTILINE | re.DOTALL)
    assert block, f"'## {heading}' has no ```python block"
    return block.group(1)


def codes(source: str) -> set[str]:
    return {d.code for d in lint_text(source, "example.py")}


def test_every_code_check_has_a_page():
    from archlint.code.checks import modules
    from archlint.code.engine import PARSE_ERROR

    reported = {code for m in modules() for code in m.CODES} | {PARSE_ERROR}
    assert reported == {r.code for r in CODE_RULES}


@pytest.mark.parametrize("rule", CODE_RULES, ids=lambda r: r.code)
def test_example_fires(rule):
    assert rule.code in codes(block_under(rule.page, "Example"))


@pytest.mark.parametrize("rule", CODE_RULES, ids=lambda r: r.code)
def test_use_instead_is_silent(rule):
    assert rule.code not in codes(block_under(rule.page, "Use instead"))


@pytest.mark.parametrize("rule", CODE_RULES, ids=lambda r: r.code)
def test_page_sections(rule):
    for heading in ("What it does", "Why it is slow", "Example", "Use instead", "Options", "Fix safety", "References"):
        assert re.search(rf"^## {heading}\s*$", rule.page, re.MULTILINE), f"{rule.code}: no '## {heading}'"
    assert rule.path.name.startswith(f"{rule.code}-{rule.name}")
