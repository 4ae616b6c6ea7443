"""Node positions for findings and fixes, resolved a top-level statement at a time and kept
compactly (in arrays of numbers, for each node that can carry a finding).

libcst's PositionProvider over a whole module costs ~140 MB of RAM per MB of source (three objects
per node, whitespace included) and is what most linted files never need in full. Here each
top-level statement is generated alone from the line it starts on (a top-level statement starts at
column 0), by codegen.RangesState, when a first position is asked for, and only the numbers are
kept; whitespace and punctuation nodes are left out.
"""

from __future__ import annotations

from array import array

import libcst as cst
from libcst._position import CodePosition
from libcst.metadata import MetadataWrapper, PositionProvider

from archlint.code.source import split_lines

_MASK = (1 << 32) - 1  # a packed position: (line << 32) | column
# Whitespace and punctuation tokens: nodes no check reports or edits, about half of a tree, not worth
# keeping positions for (the facts walk, code/walk.py, skips them too).
TOKENS = frozenset(
    {
        cst.SimpleWhitespace,
        cst.ParenthesizedWhitespace,
        cst.Newline,
        cst.TrailingWhitespace,
        cst.EmptyLine,
        cst.Comma,
        cst.Dot,
        cst.AssignEqual,
        cst.Colon,
        cst.Semicolon,
        cst.LeftParen,
        cst.RightParen,
        cst.LeftSquareBracket,
        cst.RightSquareBracket,
        cst.LeftCurlyBrace,
        cst.RightCurlyBrace,
        cst.ImportStar,
    }
)


class Positions:
    """node → (start, end) CodePositions, as PositionProvider gives them for the whole module."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.ids: array | None = None  # id(node); tree nodes live as long as the module
        self.starts = self.ends = array("Q")  # (line << 32) | column, in the order of ids
        self.table = array("I")  # open addressing over ids: index + 1, 0 for an empty slot
        self.whole = None  # PositionProvider over the module: only for a node not kept here

    def __getitem__(self, node: cst.CSTNode) -> tuple[CodePosition, CodePosition]:
        if self.ids is None:
            self._resolve()
        i = self._find(id(node))
        if i < 0:  # whitespace, the module: no check asks, but stay exact
            if self.whole is None:
                self.whole = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
            r = self.whole[node]
            return r.start, r.end
        start, end = self.starts[i], self.ends[i]
        return CodePosition(start >> 32, start & _MASK), CodePosition(end >> 32, end & _MASK)

    def _find(self, key: int) -> int:
        """The index of a node id in self.ids, or -1 (open addressing in `table`: index + 1, 0 empty)."""
        table, mask = self.table, len(self.table) - 1
        slot = (key >> 4) & mask  # ids of live objects are 16-byte aligned
        while table[slot]:
            if self.ids[table[slot] - 1] == key:
                return table[slot] - 1
            slot = (slot + 1) & mask
        return -1

    def _resolve(self) -> None:
        """Every kept node's range, a top-level statement at a time (~33 bytes a node, in arrays:
        a dict of packed ints took 76, PositionProvider's CodeRanges ~190), by codegen.RangesState:
        PositionProvider's ranges, each statement generated from the line it starts on (a top-level
        statement starts at column 0)."""
        from archlint.code.codegen import RangesState

        m = self.module
        ids, starts, ends = array("Q"), array("Q"), array("Q")
        state = RangesState(m, TOKENS)
        line = len(m.header)  # lines of the file before the statement
        for statement in m.body:
            state.line, state.column, state.computed, state.aside = line + 1, 0, {}, {}
            statement._codegen(state)
            for key, (start, end) in state.computed.items():
                ids.append(key)
                starts.append(start)
                ends.append(end)
            line = state.line - 1  # it ends on the line after the statement, column 0
        self.ids, self.starts, self.ends = ids, starts, ends
        size = 1 << (len(ids) + len(ids) // 2).bit_length()  # an index of 4-byte slots, not a dict
        table, mask = array("I", bytes(4 * size)), size - 1
        for i, key in enumerate(ids):
            slot = (key >> 4) & mask
            while table[slot]:
                slot = (slot + 1) & mask
            table[slot] = i + 1
        self.table = table


def dropped_indent(lines: list[str], module: cst.Module) -> dict[int, int]:
    """line → characters of its indentation libcst left out of the tree (and of every column on
    that line): it drops a form feed, and the whitespace around it, from the start of a statement's
    line (`\\fx = 1`), so its columns are off by those characters in the user's file."""
    own = split_lines(module.code)
    if len(own) != len(lines):  # not only indentation differs: leave the columns as they are
        return {}
    shifts = {}
    for number, (theirs, mine) in enumerate(zip(lines, own), start=1):
        if theirs != mine and "\f" in theirs:
            lead_theirs = len(theirs) - len(theirs.lstrip(" \t\f"))
            lead_mine = len(mine) - len(mine.lstrip(" \t\f"))
            if theirs[lead_theirs:] == mine[lead_mine:]:
                shifts[number] = lead_theirs - lead_mine
    return shifts
