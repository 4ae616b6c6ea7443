"""A large file parsed in chunks of consecutive top-level statements, assembled into the one Module
that parsing it whole would give (the same nodes, whitespace and comments: `.code` is the text).

Why: libcst's native parser needs ~1.2 GB of RAM per MB of source while it parses (its own
tokens and tree, freed afterwards), against ~45 MB per MB for the Python tree it hands back. Parsed
a chunk at a time, the parser's peak is one chunk's, whatever the file's size; everything after the
parse (facts, checks, the project summary, fixes) sees the whole file as before, so the findings
are those of a whole-file parse. The ceiling left is one top-level statement: it is never split
(a 1 MB dict literal still costs ~1.2 GB while it parses; the size limit bounds it).

Split points come from Python's tokenizer (streamed, little memory): the first line of a logical
line at indentation 0, not a clause of the statement before (`else:`, `except`, ...), not the
`def` under a decorator, and not a `from __future__` import (which must stay where the
interpreter checks its place).
"""

from __future__ import annotations

import io
import tokenize
from typing import NamedTuple

CHUNK_CHARS = 32_000  # target chunk size: the parser's peak is ~1.2 GB per MB of one chunk
_CLAUSES = frozenset({"else", "elif", "except", "finally"})


class Span(NamedTuple):
    """One chunk of the text."""

    start: int  # offset of its first character
    end: int
    line: int  # its first line in the file


class Plan(NamedTuple):
    spans: list[Span]
    indent: str | None  # the file's first indentation: libcst's default_indent for the whole file


def split(text: str, target: int | None = None) -> Plan | None:
    """Chunks of about `target` characters (each whole top-level statements), or None when the
    file is under two chunks (parsed whole, as it always was), cannot be tokenized (a syntax
    error: parsed whole, so Python's own message is reported), or has lone carriage returns (the
    tokenizer and libcst would count lines apart)."""
    target = target or CHUNK_CHARS
    if len(text) < 2 * target or text.count("\r") != text.count("\r\n"):
        return None
    offsets: list[int] = []  # offset of each line the tokenizer has read
    stream = io.StringIO(text)

    def readline() -> str:
        offsets.append(stream.tell())
        return stream.readline()

    spans: list[Span] = []
    start, start_line, statements = 0, 1, 0

    def statement(row: int, splittable: bool) -> None:
        """A top-level statement begins on `row`: close the chunk before it when it is big enough."""
        nonlocal start, start_line, statements
        at = offsets[row - 1]
        if splittable and statements and at - start >= target:
            spans.append(Span(start, at, start_line))
            start, start_line, statements = at, row, 0
        statements += 1

    depth, line_start, after_decorator, future, first_indent = 0, True, False, None, None
    try:
        for tok in tokenize.generate_tokens(readline):
            kind = tok.type
            if future is not None:  # the token after a top-level `from`
                statement(future, tok.string != "__future__")
                future = None
            if kind in (tokenize.NL, tokenize.COMMENT):
                continue
            if kind == tokenize.INDENT:
                depth += 1
                first_indent = first_indent or tok.string
            elif kind == tokenize.DEDENT:
                depth -= 1
            elif kind == tokenize.NEWLINE:
                line_start = True
            elif kind == tokenize.ENDMARKER:
                break
            elif line_start:
                line_start = False
                if depth == 0 and tok.start[1] == 0 and tok.string not in _CLAUSES:
                    if not after_decorator:
                        if tok.string == "from":
                            future = tok.start[0]  # decided on the next token
                        else:
                            statement(tok.start[0], True)
                    after_decorator = tok.string == "@"
    except (tokenize.TokenError, SyntaxError):  # IndentationError is a SyntaxError
        return None
    spans.append(Span(start, len(text), start_line))
    return Plan(spans, first_indent) if len(spans) > 1 else None


def parse(text: str, plan: Plan):
    """The Module of the whole text, parsed chunk by chunk. Raises what libcst's parser raises,
    a ParserSyntaxError with the file's line number."""
    import libcst as cst

    from archlint.code.parsing import parse_module

    body: list = []
    first = last = None
    footer: tuple = ()
    for span in plan.spans:
        try:
            module = parse_module(text[span.start : span.end])
        except cst.ParserSyntaxError as exc:
            exc.raw_line += span.line - 1
            raise
        if first is None:
            first = module
        else:
            module = _as_in_file(module, plan.indent or module.default_indent, first.default_newline)
        statements = list(module.body)
        if body and statements:
            # lines between two statements: the earlier chunk's footer, the next statement's leading lines
            statements[0] = statements[0].with_changes(
                leading_lines=(*footer, *module.header, *statements[0].leading_lines)
            )
            footer = ()
        footer = (*footer, *module.footer) if statements else (*footer, *module.header, *module.footer)
        body.extend(statements)
        last = module
        del module, statements
    return first.with_changes(
        body=body,
        footer=footer,
        has_trailing_newline=last.has_trailing_newline,
        default_indent=plan.indent or first.default_indent,
    )


def _as_in_file(module, indent: str, newline: str):
    """A chunk's nodes as the whole file's parse has them: libcst leaves an IndentedBlock's indent
    and a Newline's value out (None) where they equal the module's default, and a chunk detects its
    own defaults (a file indented by 2 spaces at first and 4 later, or mixing line endings)."""
    if module.default_indent == indent and module.default_newline == newline:
        return module
    import libcst as cst

    class Defaults(cst.CSTTransformer):
        def leave_IndentedBlock(self, original, updated):
            own = updated.indent if updated.indent is not None else module.default_indent
            return updated.with_changes(indent=None if own == indent else own)

        def leave_Newline(self, original, updated):
            own = updated.value if updated.value is not None else module.default_newline
            return updated.with_changes(value=None if own == newline else own)

    return module.visit(Defaults()).with_changes(default_indent=indent, default_newline=newline)
