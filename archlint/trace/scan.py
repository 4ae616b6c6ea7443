"""Stream the events of a Chrome trace file one at a time, with memory bounded by one chunk.

A torch.profiler trace is one JSON object, `{"schemaVersion": 1, "deviceProperties": [...],
"traceEvents": [ {...}, {...}, ... ], ...}`, often gigabytes long. `json.load` would hold all of
it (and ten times its size in Python objects). Here the file is read in chunks; the C decoder
(`JSONDecoder.raw_decode`) decodes one array element or one top-level value at a time, so only
the current chunk and the event in hand are in memory. Stdlib only; never imports torch.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import sys
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

CHUNK_CHARS = 1 << 20
PIECE_CHARS = 1 << 16
# One event or header value; bounds memory on a malformed file (a trace's largest value, an
# event with its input shapes, is a few KB; a gzip bomb of one 300M-character string is not a trace).
MAX_VALUE_CHARS = 64 << 20
_SEPARATORS = re.compile(r"[\s,]*")
_SPACE = re.compile(r"\s*")
_DECODER = json.JSONDecoder()
STDIN = "-"  # the path that means standard input


class TraceFormatError(ValueError):
    """The file is not a Chrome trace (or is not JSON at all)."""


class _Prefixed(io.RawIOBase):
    """A non-seekable stream (a FIFO, stdin) with the bytes already read from it put back in front:
    its first bytes say whether it is gzip, and it cannot be opened a second time."""

    def __init__(self, prefix: bytes, rest) -> None:
        super().__init__()
        self.prefix, self.rest = prefix, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.prefix:
            n = min(len(buffer), len(self.prefix))
            buffer[:n], self.prefix = self.prefix[:n], self.prefix[n:]
            return n
        return self.rest.readinto(buffer)

    def close(self) -> None:
        self.rest.close()
        super().close()


class _Gzip(gzip.GzipFile):
    """A GzipFile over an open stream that closes that stream too (GzipFile leaves a given one open)."""

    def __init__(self, source) -> None:
        super().__init__(fileobj=source, mode="rb")
        self.source = source

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.source.close()


def open_text(path: Path | str) -> TextIO:
    """A trace as text: `.gz` content is decompressed on the fly (checked by its magic bytes, not
    the name); `-` is standard input; a FIFO or other non-seekable file is read once, as it comes."""
    if str(path) == STDIN:
        if sys.stdin is None:
            raise OSError("standard input is closed")
        raw = open(os.dup(sys.stdin.fileno()), "rb", buffering=0)  # our own descriptor: closing it leaves stdin be
    else:
        raw = open(path, "rb", buffering=0)
    try:
        seekable = raw.seekable()
        magic = raw.read(2) or b""
        if seekable:
            raw.seek(0)
            stream = io.BufferedReader(raw, buffer_size=1 << 16)
        else:  # a pipe: the two bytes read go back in front
            while len(magic) < 2 and (more := raw.read(2 - len(magic))):
                magic += more
            stream = io.BufferedReader(_Prefixed(magic, raw), buffer_size=1 << 16)
    except BaseException:
        raw.close()
        raise
    if magic == b"\x1f\x8b":
        stream = _Gzip(stream)
    # a BOM is not part of the JSON; a byte that is not UTF-8 becomes U+FFFD, never an error
    return io.TextIOWrapper(stream, encoding="utf-8-sig", errors="replace")


class _Buffer:
    """A window on the text: `text[pos:]` is what has not been consumed yet."""

    def __init__(self, stream: TextIO) -> None:
        self.stream, self.text, self.pos, self.eof = stream, "", 0, False
        self.batch_failed = False  # one failed batch per window: the rest of it goes event by event
        self.cut = False  # the gzip stream ended before its end marker (a .gz cut while being written)

    def more(self, at_least: int = 0) -> bool:
        """Read at least one more chunk (and at least `at_least` characters), dropping the consumed
        part; False at the end of the file. The window is joined once per call, so a value that
        needs many chunks costs one copy per doubling (see value_here), not one per chunk."""
        if self.eof:
            return False
        pending = len(self.text) - self.pos
        pieces, size = [], 0
        while size < max(CHUNK_CHARS, at_least):  # in pieces: a .gz cut mid-stream loses only the last piece
            if pending + size > MAX_VALUE_CHARS:
                raise TraceFormatError(f"one JSON value is over {MAX_VALUE_CHARS >> 20} MB long (not a profiler trace)")
            try:
                piece = self.stream.read(PIECE_CHARS)
            except EOFError:  # a .gz cut while being written: what came before it still counts
                self.cut = True
                break
            except (gzip.BadGzipFile, zlib.error) as exc:
                raise TraceFormatError(f"corrupt gzip data ({exc}): the .gz file is damaged") from None
            if not piece:
                break
            pieces.append(piece)
            size += len(piece)
        if not pieces:
            self.eof = True
            return False
        pieces.insert(0, self.text[self.pos :])
        self.text = "".join(pieces)
        self.pos = 0
        self.batch_failed = False
        return True

    def skip(self, pattern: re.Pattern) -> None:
        while True:
            self.pos = pattern.match(self.text, self.pos).end()
            if self.pos < len(self.text) or not self.more():
                return

    def peek(self) -> str:
        self.skip(_SPACE)
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            got = self.text[self.pos : self.pos + 20] or "the end of the file"
            raise TraceFormatError(f"expected {char!r}, found {got!r}{self.cut_note()}")
        self.pos += 1

    def cut_note(self) -> str:
        return " (the .gz file is cut short: truncated or corrupt gzip)" if self.cut else ""

    def value(self) -> Any:
        """Decode the next JSON value, reading more chunks while it is incomplete."""
        self.skip(_SPACE)
        return self.value_here()

    def value_here(self) -> Any:
        """Decode the JSON value that starts exactly at pos. An incomplete value is retried only
        once the window has doubled: each retry decodes the whole value again, so the retries of a
        long value cost a constant multiple of its length (linear), not one decode per chunk."""
        while True:
            try:
                value, end = _DECODER.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as exc:
                # Incomplete at the end of the window: read on. Anything else is malformed.
                if (exc.pos >= len(self.text) - 1 or _truncated(exc)) and self.more(len(self.text) - self.pos):
                    continue
                raise TraceFormatError(f"not valid JSON near character {exc.pos}: {exc.msg}{self.cut_note()}") from None
            except RecursionError:
                raise TraceFormatError(
                    "JSON nested too deeply to decode (a profiler trace nests a few levels)"
                ) from None
            except ValueError as exc:  # a number past the interpreter's integer-digit limit
                raise TraceFormatError(f"a JSON value that cannot be read: {_first_line(exc)}") from None
            # A number can end at the window's edge with more digits in the next chunk.
            if end == len(self.text) and not self.eof and self.more():
                continue
            self.pos = end
            return value


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


def _truncated(exc: json.JSONDecodeError) -> bool:
    """An error a value cut at the window's end gives: an unterminated string (reported where the
    string starts), or a literal or number cut short (`tr`, `-`: "Expecting value" a few characters
    before the end). Anywhere else "Expecting" is malformed JSON: said at once, not read on."""
    if exc.msg.startswith("Unterminated string"):
        return True
    return exc.msg.startswith("Expecting") and exc.pos >= len(exc.doc) - 16


class Truncated(Exception):
    """Raised from `events` when the file ends inside the traceEvents array (a trace cut while
    being written): the events before the cut were all delivered."""


def events(path: Path, on_header: Callable[[str, Any], None]) -> Iterator[dict]:
    """Yield each element of the top-level `traceEvents` array; every other top-level key is
    passed to `on_header(key, value)` as it is met (before or after the array)."""
    with open_text(path) as stream:
        buf = _Buffer(stream)
        if not buf.more() or buf.peek() != "{":
            if buf.cut:
                raise TraceFormatError("the .gz file is cut short before its JSON begins (truncated or corrupt gzip)")
            if buf.text.startswith("\x1f\ufffd"):  # the gzip magic again, after one decompression
                raise TraceFormatError("compressed twice (gzip inside gzip): decompress it once (gunzip) and read that")
            raise TraceFormatError("does not start with a JSON object '{' (a Chrome trace is one)")
        buf.pos += 1
        found = False
        while buf.peek() not in ("}", ""):
            key = buf.value()
            if not isinstance(key, str):
                raise TraceFormatError("a top-level key is not a string")
            buf.expect(":")
            if key == "traceEvents":
                found = True
                yield from _array(buf)
            else:
                on_header(key, buf.value())
            buf.skip(_SEPARATORS)
        if not found:
            raise TraceFormatError("has no 'traceEvents' array (not a Chrome trace)")


# Where one element of the array may end and the next begin: "}" "," "{" with only whitespace.
_BOUNDARY = re.compile(r"\}\s*,\s*\{")
BATCH_MIN_CHARS = 1 << 16


def _batch(buf: _Buffer) -> list | None:
    """The elements from pos to the last element boundary of the window, decoded in one call, or
    None. A boundary inside an element (a nested object in a list) or inside a string leaves the
    slice unbalanced, so it only decodes when the cut is between elements."""
    text, pos = buf.text, buf.pos
    if buf.batch_failed or len(text) - pos < BATCH_MIN_CHARS:
        return None
    last = None
    for last in _BOUNDARY.finditer(text, max(pos, len(text) - BATCH_MIN_CHARS)):  # noqa: B007 (the loop keeps the last match)
        pass
    if last is None:
        return None
    end = last.start() + 1
    try:
        items = json.loads("[" + text[pos:end] + "]")
    except (ValueError, RecursionError):  # not a clean cut, or a value the decoder refuses: event by event
        buf.batch_failed = True
        return None
    buf.pos = end
    return items


def _array(buf: _Buffer) -> Iterator[dict]:
    buf.expect("[")
    while True:
        buf.skip(_SEPARATORS)
        if buf.pos >= len(buf.text):
            raise Truncated
        if buf.text[buf.pos] == "]":
            buf.pos += 1
            return
        items = _batch(buf)  # most of the window at once: the C decoder, no per-event Python
        if items is not None:
            for item in items:
                if isinstance(item, dict):
                    yield item
            if buf.pos >= len(buf.text) - BATCH_MIN_CHARS:
                buf.more()
            continue
        try:
            item = buf.value_here()
        except TraceFormatError:
            if buf.eof:
                raise Truncated from None
            raise
        if isinstance(item, dict):
            yield item
