"""`--config KEY=VALUE` for a [tool.archlint] setting, as ruff's `--config`: KEY is the key as the
table spells it (dotted for nested ones: `rules.AL101.threshold`), VALUE a TOML value
(`'select=["AL4"]'`, `max-file-size=5`). For the code lists (select, extend-select, ignore) a
bare comma list works too (`select=AL4,AL3`), and any value that is not TOML is read as a string.
It overrides the pyproject.toml; flags such as --select override it in turn.

A KEY that is not a [tool.archlint] key is not a setting: it is a config field of an hf:NAME
model (`--config n_layer=4`), which cli.py handles.
"""

from __future__ import annotations

import re
import sys
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from archlint.errors import UsageError

CODE_LISTS = ("select", "extend-select", "ignore")


def setting(item: str, keys: frozenset[str]) -> dict[str, Any] | None:
    """The nested table `item` sets, or None when its first key is not one of `keys`."""
    key, eq, value = item.partition("=")
    key = key.strip()
    if not eq or key.split(".", 1)[0] not in keys:
        return None
    if not _BARE_KEY.fullmatch(key):
        raise UsageError(
            f"--config {item!r}: {key!r} is not a TOML key; give KEY=VALUE, e.g. "
            "'select=[\"AL4\"]' or rules.AL101.threshold=0.2"
        )
    parsed = _one_value(value.strip(), item)
    table: dict[str, Any] = {}
    inner = table
    *parents, last = key.split(".")
    for part in parents:  # rules.AL101.threshold → {"rules": {"AL101": {"threshold": value}}}
        inner = inner.setdefault(part, {})
    inner[last] = parsed
    if key in CODE_LISTS and isinstance(table[key], str):
        table[key] = [c.strip() for c in table[key].split(",") if c.strip()]
    return table


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")


def _one_value(text: str, item: str) -> Any:
    """VALUE as one TOML value, and nothing more: a value whose newlines would start other keys or
    tables (`select=["AL4"]\nper-file-ignores = ...`) is refused, never read as settings of its own.
    Text that is not TOML is the string it is (`mode=train`, `select=AL4,AL3`)."""
    try:
        document = tomllib.loads(f"value = {text}")
    except tomllib.TOMLDecodeError:
        return text  # not a TOML value: the text as a string
    if list(document) != ["value"]:
        raise UsageError(
            f"--config {item!r}: the value is more than one TOML value (it sets "
            f"{', '.join(repr(k) for k in document if k != 'value')} too); give one value per --config"
        )
    return document["value"]


def merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`base` with `override` laid over it; nested tables merge key by key (rules.AL101.threshold
    keeps the rule's other options), anything else is replaced."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out
