"""Reading a Python file the way the interpreter would (PEP 263 cookie, BOM, any newline), and
mapping (line, column) positions to offsets for edits."""

from __future__ import annotations

import codecs
import io
import re
import tokenize

_NEWLINE = re.compile(r"\r\n|\r|\n")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


class SourceError(Exception):
    """The file cannot be read or decoded; the message says what to do."""


def decode(data: bytes) -> tuple[str, str, bool]:
    """(text, encoding, had_bom). The text never starts with a BOM."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:  # bad or unknown coding cookie
        raise SourceError(f"{exc.msg}: declare a valid encoding or save the file as UTF-8") from None
    bom = data.startswith(codecs.BOM_UTF8)
    if bom:
        data = data[len(codecs.BOM_UTF8) :]
        encoding = "utf-8"
    try:
        text = data.decode("utf-8" if encoding == "utf-8-sig" else encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise SourceError(
            f"cannot decode as {encoding} ({exc.reason if hasattr(exc, 'reason') else exc}"
            f"); save the file as UTF-8 or declare its encoding"
        ) from None
    return text, encoding, bom


def encode(text: str, encoding: str, bom: bool) -> bytes:
    return (codecs.BOM_UTF8 if bom else b"") + text.encode(encoding)


def split_lines(text: str) -> list[str]:
    """Lines as Python and libcst count them (only \\r\\n, \\r and \\n end a line)."""
    return _NEWLINE.split(text)


def lines_with_ends(text: str) -> list[str]:
    """Lines with their ends, as split_lines counts them (str.splitlines also ends a line at a form
    feed, which would cut `\fx = 1` in two in a diff)."""
    return _LINE.findall(text)


def line_offsets(text: str) -> list[int]:
    offsets = [0]
    offsets += [m.end() for m in _NEWLINE.finditer(text)]
    return offsets
