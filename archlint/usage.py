"""Argparse's complaints made helpful: a did-you-mean for a mistyped option (`--lantency` →
`--latency`), and the option that does what an invalid choice asked for (`--output-format html` →
`--html FILE`)."""

from __future__ import annotations

import argparse
import difflib
import re

# An --output-format the user may try that archlint writes with another option.
FORMAT_ELSEWHERE = {"html": "--html FILE (it writes a file, next to any --output-format)"}


def explain(message: str, parser: argparse.ArgumentParser) -> str:
    """The message, with a hint where one is known."""
    unknown = re.match(r"unrecognized arguments: (.+)", message)
    if unknown:
        options = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
        flags = [w.split("=", 1)[0] for w in unknown.group(1).split() if w.startswith("-")]
        hints = {}
        for flag in flags:
            close = difflib.get_close_matches(flag, options, n=1, cutoff=0.75)
            if close:
                hints[flag] = close[0]
        if len(flags) == 1 and hints:
            return f"{message}; did you mean {hints[flags[0]]}?"
        if hints:
            return f"{message}; did you mean " + ", ".join(f"{v} for {k}" for k, v in hints.items()) + "?"
    choice = re.match(r"argument (--[\w-]+): invalid choice: '([^']*)'", message)
    if choice and choice.group(1) == "--output-format" and choice.group(2).lower() in FORMAT_ELSEWHERE:
        return f"{message}; for {choice.group(2)} use {FORMAT_ELSEWHERE[choice.group(2).lower()]}"
    return message
