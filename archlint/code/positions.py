"""Node positions for findings and fixes, resolved a top-level statement at a time and kept
compactly (one packed int per node that can carry a finding).

libcst's PositionProvider over a whole module costs ~140 MB of RAM per MB of source (three objects
per node, whitespace included) and is what most linted files never need in full. Here each
top-level statement is resolved alone (wrapped in a Module with the file's defaults: a top-level
statement starts at column 0, so only its lines shift) when a position in it, or after it, is
first asked for; whitespace and punctuation nodes are not kept.
"""

from __future__ import annotations

import libcst as cst
from libcst._position import CodePosition
from libcst.metadata import MetadataWrapper, PositionProvider

try:  # the code generation PositionProvider runs, without MetadataWrapper's extra pass over the tree
    from libcst.metadata.position_provider import PositionProvidingCodegenState
except ImportError:  # pragma: no cover - a libcst that moved it: the public way, twice as slow
    PositionProvidingCodegenState = None

_BITS = 32  # per line or column number in a packed position
_MASK = (1 << _BITS) - 1
# Nodes no check reports or edits: about half of a tree, not worth keeping positions for.
_SKIP = frozenset({
    cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.Newline, cst.TrailingWhitespace,
    cst.EmptyLine, cst.Comma, cst.Dot, cst.AssignEqual, cst.Colon, cst.Semicolon, cst.LeftParen,
    cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace,
    cst.RightCurlyBrace, cst.ImportStar,
})


class Positions:
    """node → (start, end) CodePositions, as PositionProvider gives them for the whole module."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.found: dict[cst.CSTNode, int] = {}
        self.done = 0  # statements resolved so far (in order)
        self.line = len(module.header)  # lines of the file before statement `done`
        self.whole = None  # PositionProvider over the module: only for a node not kept here

    def __getitem__(self, node: cst.CSTNode) -> tuple[CodePosition, CodePosition]:
        packed = self.found.get(node)
        body = self.module.body
        while packed is None and self.done < len(body):
            self._resolve(body[self.done])
            packed = self.found.get(node)
        if packed is None:  # whitespace, or the module itself: no check asks, but stay exact
            if self.whole is None:
                self.whole = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
            r = self.whole[node]
            return r.start, r.end
        start, end = packed >> (2 * _BITS), packed & ((1 << (2 * _BITS)) - 1)
        return (CodePosition(start >> _BITS, start & _MASK), CodePosition(end >> _BITS, end & _MASK))

    def _resolve(self, statement: cst.BaseStatement) -> None:
        m = self.module
        wrapper = cst.Module(body=(statement,), header=(), footer=(), encoding=m.encoding,
                             default_indent=m.default_indent, default_newline=m.default_newline)
        ranges = _ranges(wrapper)
        shift, found = self.line, self.found
        for node, r in ranges.items():
            if type(node) in _SKIP or node is wrapper:
                continue
            s, e = r.start, r.end
            found[node] = ((((s.line + shift) << _BITS) | s.column) << (2 * _BITS)) | \
                ((e.line + shift) << _BITS) | e.column
        end = ranges[wrapper].end  # the line after the statement, column 0
        self.line += end.line - 1
        self.done += 1


class _Sink:
    """Where libcst's position-tracking code generation writes each node's range."""

    def __init__(self) -> None:
        self._computed: dict = {}


def _ranges(module: cst.Module):
    """PositionProvider's answer for a small module."""
    if PositionProvidingCodegenState is None:  # pragma: no cover
        return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    sink = _Sink()
    module._codegen(PositionProvidingCodegenState(default_indent=module.default_indent,
                                                  default_newline=module.default_newline, provider=sink))
    return sink._computed
