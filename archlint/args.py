"""What every archlint command shares in reading its command line: a parser whose errors are one
line and exit 2 (never argparse's usage block), and KEY=VALUE flags read into a dict."""

from __future__ import annotations

import argparse
from typing import Any

from archlint.errors import UsageError


class Parser(argparse.ArgumentParser):
    def __init__(self, **kwargs):
        super().__init__(allow_abbrev=False, **kwargs)  # `--input-shap` is a typo, not `--input-shape`

    def error(self, message: str):  # argparse prints usage + exits 2; we want one line, exit 2
        from archlint.usage import explain

        raise UsageError(f"{explain(message, self)} (see `{self.prog} --help`)")


def key_values(items: list[str], flag: str, example: str) -> dict[str, Any]:
    """`--init KEY=VALUE` items → {key: value}, each value an int, float, bool or text
    (config.parse_value); a malformed item is an error that shows `example`."""
    from archlint.config import parse_value

    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.isidentifier():
            raise UsageError(f"{flag} {item!r} must look like KEY=VALUE, e.g. {example}")
        out[key] = parse_value(value)
    return out
