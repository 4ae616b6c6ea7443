"""Text from outside archlint (file names, messages read back from a cache) made safe to show.

A file name is bytes on POSIX: one that is not UTF-8 reaches Python with lone surrogates
(surrogateescape), which no UTF-8 writer accepts; one with an escape sequence would recolour or
rewrite the user's terminal. Shown, each such character is written as its Python escape
(`bad\\xff.py`, `\\x1b[31m`), which says exactly what is in the name.
"""

from __future__ import annotations

import os
import re
from urllib.parse import quote_from_bytes

# C0 and C1 controls (tab kept: harmless and common in messages), DEL, lone surrogates, and the
# characters that reorder text on screen (bidirectional overrides, "Trojan Source").
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match) -> str:
    char = match.group()
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape): show the byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with control characters, undecodable bytes and bidi overrides written as escapes."""
    return _UNSAFE.sub(_escape, text)


def file_uri(path: str) -> str:
    """A POSIX path as an RFC 3986 URI, its bytes percent-encoded as pathlib's as_uri does: a
    relative one as a reference (`a b#%.py` → `a%20b%23%25.py`), an absolute one as file://."""
    quoted = quote_from_bytes(os.fsencode(path), safe="/")
    return "file://" + quoted if path.startswith("/") else quoted
