"""libcst's code generation, with its bookkeeping made cheap: a node's text and node positions.

libcst generates code through a state object whose hooks run for every node: `before_codegen`,
`after_codegen` and the `record_syntactic_position` context manager (a generator-based
contextlib one, entered on most nodes even when no position is wanted). Its PositionProvider
state also builds two CodePosition objects and a CodeRange per node, whitespace included, in a
dict keyed by node. Both were most of the linter's time after parsing (positions a sixth of a
cold run). The states here run the same `_codegen_impl` methods, so the text is libcst's own and
the positions are PositionProvider's (tests/code/test_code_large_files.py checks every node of
its corpus against it), with the hooks reduced to what the answer needs: a class-based context
manager, positions packed in one int ((line << 32) | column), and no entry for whitespace and
punctuation tokens (positions.TOKENS), which no check reports.
"""

from __future__ import annotations

import re

import libcst as cst
from libcst._nodes.internal import CodegenState

_NEWLINE = re.compile(r"\r\n?|\n")  # as libcst's position provider counts lines


class _NoRecord:
    """The context manager plain code generation enters around most nodes: it does nothing."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_RECORD = _NoRecord()


class _TextState(CodegenState):
    __slots__ = ()

    def record_syntactic_position(  # type: ignore[override]
        self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None, end_node: cst.CSTNode | None = None
    ) -> _NoRecord:
        return _NO_RECORD


def text(module: cst.Module, node: cst.CSTNode) -> str:
    """`module.code_for_node(node)`: the same tokens, without a generator entered per node."""
    state = _TextState(default_indent=module.default_indent, default_newline=module.default_newline)
    node._codegen(state)
    return "".join(state.tokens)


class _Syntactic:
    """PositionProvidingCodegenState.record_syntactic_position as an object: the node's range is
    where its syntax starts and ends (or its start_node's start, its end_node's end), replacing
    the range after_codegen would give it."""

    __slots__ = ("state", "node", "start_node", "end_node", "start")

    def __init__(
        self, state: RangesState, node: cst.CSTNode, start_node: cst.CSTNode | None, end_node: cst.CSTNode | None
    ) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node

    def __enter__(self) -> None:
        state = self.state
        self.start: int = (state.line << 32) | state.column

    def __exit__(self, *exc: object) -> None:
        state = self.state
        start = self.start if self.start_node is None else state.range(self.start_node)[0]
        end = (state.line << 32) | state.column if self.end_node is None else state.range(self.end_node)[1]
        (state.aside if type(self.node) in state.skip else state.computed)[id(self.node)] = (start, end)


class RangesState(CodegenState):
    """Code generation that records, for each node whose type is not in `skip`, id(node) →
    (start, end) in `computed`, each packed as (line << 32) | column, exactly as PositionProvider's
    CodeRanges (lines from `line`, the state's starting line); the skipped types' ranges go `aside`
    (a statement's range can end at its closing parenthesis). The text itself is not kept."""

    __slots__ = ("line", "column", "stack", "computed", "aside", "skip")

    def __init__(self, module: cst.Module, skip: frozenset[type], line: int = 1) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.line, self.column = line, 0
        self.stack: list[int] = []
        self.computed: dict[int, tuple[int, int]] = {}
        self.aside: dict[int, tuple[int, int]] = {}
        self.skip = skip

    def range(self, node: cst.CSTNode) -> tuple[int, int]:
        key = id(node)
        return self.computed[key] if key in self.computed else self.aside[key]

    def add_token(self, value: str) -> None:
        if "\n" in value or "\r" in value:
            segments = _NEWLINE.split(value)
            self.line += len(segments) - 1
            self.column = len(segments[-1])
        else:
            self.column += len(value)

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self.add_token(token)

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.stack.append((self.line << 32) | self.column)

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self.stack.pop()
        computed = self.aside if type(node) in self.skip else self.computed
        if id(node) not in computed:  # a syntactic range stays
            computed[id(node)] = (start, (self.line << 32) | self.column)

    def record_syntactic_position(  # type: ignore[override]
        self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None, end_node: cst.CSTNode | None = None
    ) -> _Syntactic:
        return _Syntactic(self, node, start_node, end_node)
