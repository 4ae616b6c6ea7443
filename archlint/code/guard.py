"""What stands between a file and libcst, so no input crashes, hangs or swamps the linter.

- Reading: only regular files (a FIFO or /dev/zero would block or never end), and none past the
  size limit (linting costs ~100 MB of RAM and ~13 s of CPU per MB of source, linear in the size;
  see benchmarks/lint_memory.py): such a file is skipped with an info finding. The limit is also
  the ceiling for one top-level statement, which is parsed whole (chunks.py): ~1.2 GB per MB of it.
- Before parsing: CPython's own parser (C, ~0.15 GB/MB, fast; a chunk at a time for a large file)
  says first whether the interpreter accepts the file. What it rejects (a syntax error, 201
  nested brackets, a 100,000-term `a+a+…`) is AL000, as Python words it. What it accepts but
  nests deeper than MAX_DEPTH is skipped with an info finding: libcst's parse time grows with the
  cube of such a chain's length.
- Parsing: libcst's parser and its visitors recurse once or more per nesting level, and overflow
  the main thread's 8 MB C stack (a SIGSEGV) on nesting that CPython accepts: `deep()` runs the
  work on a thread with a large stack, with the recursion limit raised to match.
"""

from __future__ import annotations

import ast
import gc
import os
import stat
import sys
import threading
from pathlib import Path

from archlint.diagnostics import Diagnostic, Severity

# libcst's parse time grows faster than linearly with nesting (500 chained subscripts: 2.2 s, 199
# nested calls: 2 s), so two bounds: the depth of one statement, and the nesting work of the file
# (the sum over syntax nodes of their depth), which keeps time per byte bounded. Real code stays far
# below both: over 2,500 site-packages files, depth ≤ 100 and work ≤ 5.8 per character (median 0.8).
MAX_DEPTH = 500
WORK_PER_CHAR, WORK_BASE = 12, 250_000  # ~6-12 µs of parsing per unit of work
# The default max-file-size (config.py: 2 MB) costs ≈ 0.2 GB of RAM and ~26 s of CPU at the measured slopes.
_STACK_BYTES = 256 * 1024 * 1024  # address space only: pages are touched as the recursion goes
_RECURSION = 50_000


class Skip(Exception):
    """A file that is not linted; the message says why and what to do."""


class NotRegular(Skip):
    """A FIFO, device, socket or folder where a file was expected: info when a folder's walk found
    it, an error when the user named it (`named_error`): a path they asked for was not linted."""


def read_regular(path: Path, max_bytes: int | None, what: str = "") -> bytes:
    """The bytes of a regular file. Raises Skip for anything else (FIFO, device, socket, folder)
    and for a file past max_bytes; OSError when it cannot be opened or read."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)  # opening a FIFO must not wait for a writer
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular(f"not a regular file ({_kind(info.st_mode)}); archlint reads only regular files")
        if max_bytes is not None and info.st_size > max_bytes:
            raise Skip(too_large(info.st_size, max_bytes, what))
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read()
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def too_large(size: int, limit: int, what: str = "") -> str:
    return (
        f"not analyzed: {size / 1e6:.3g} MB{' ' + what if what else ''} is past the size limit of {limit / 1e6:.3g} MB "
        "(generated code, usually); raise max-file-size to lint it (about 13 s of CPU and 0.1 GB of RAM per MB)"
    )


def skipped(path: str, message: str) -> Diagnostic:
    """An info AL000: the file was not analyzed (not a syntax error)."""
    return Diagnostic("AL000", message, Severity.INFO, file=path, line=1, column=1)


def not_linted(path: str, skip: Skip, named: set[str]) -> Diagnostic:
    """The AL000 of a skipped file: an error when it is not a regular file and the user named it on
    the command line (a FIFO given as `train.py`: the run must not pass), else info."""
    if isinstance(skip, NotRegular) and os.path.normpath(path) in named:
        return Diagnostic(
            "AL000", f"{skip}; name a Python file or a folder", Severity.ERROR, file=path, line=1, column=1
        )
    return skipped(path, str(skip))


def named_paths(paths) -> set[str]:
    return {os.path.normpath(str(p)) for p in paths or ()}


def _nesting(tree: ast.AST, calls: list | None = None) -> tuple[int, int]:
    """(deepest node's depth, sum of all nodes' depths), a level of the tree at a time: the nodes
    ast.iter_child_nodes yields, without its two generators per node (a third of the precheck).
    With `calls`, each ast.Call's record (call_record) is added to it, in ast.walk's order."""
    work = depth = 0
    level: list[ast.AST] = [tree]
    node_type, call_type, get = ast.AST, ast.Call, getattr
    while level:
        depth += 1
        work += depth * len(level)
        below: list[ast.AST] = []
        for node in level:
            if calls is not None and node.__class__ is call_type:
                calls.append(call_record(node))
            for name in node._fields:
                value = get(node, name, None)
                if isinstance(value, node_type):
                    below.append(value)
                elif isinstance(value, list):
                    below += [item for item in value if isinstance(item, node_type)]
        level = below
    return depth, work


def call_record(call: ast.Call) -> tuple[int, int, int, int, str | None, str | None]:
    """What summary._call_lines needs of a call of the standard parser's tree: (line, column,
    -end line, -end column, the called name when a Name, the attribute when an Attribute)."""
    func = call.func
    return (
        call.lineno,
        call.col_offset,
        -(call.end_lineno or 0),
        -(call.end_col_offset or 0),
        func.id if isinstance(func, ast.Name) else None,
        func.attr if isinstance(func, ast.Attribute) else None,
    )


def precheck(text: str, path: str, plan=None, calls: list | None = None) -> Diagnostic | None:
    """None when libcst may parse the file; else the finding that replaces linting it. With a
    chunk plan (chunks.py), CPython parses a chunk at a time too: its tree costs ~0.15 GB per MB.
    `calls`, for a file parsed whole: filled with its calls' records (call_record), which the
    project facts pair with libcst's calls (summary._call_lines) instead of parsing it again."""
    depth = work = 0
    spans = plan.spans if plan else [None]
    for span in spans:
        chunk, shift = (text, 0) if span is None else (text[span.start : span.end], span.line - 1)
        try:
            tree = ast.parse(chunk, filename=path)
        except SyntaxError as err:
            # Python's verdict, without asking libcst: past the first error nothing bounds what libcst
            # would be given (the fuzz test found `a()()()…` × 5,000 after a syntax error: minutes).
            return Diagnostic(
                "AL000",
                f"syntax error: {err.msg}; fix it so the file can be linted",
                Severity.ERROR,
                file=path,
                line=(err.lineno or 1) + shift,
                column=err.offset or 1,
            )
        except (RecursionError, MemoryError):  # CPython's parser gives up on the nesting too
            return Diagnostic(
                "AL000",
                "syntax error: Python cannot compile this file either (nesting too deep "
                "for its parser); split the expression",
                Severity.ERROR,
                file=path,
                line=1,
                column=1,
            )
        except ValueError as err:  # null bytes
            return Diagnostic("AL000", f"cannot parse: {err}", Severity.ERROR, file=path, line=1, column=1)
        chunk_depth, chunk_work = _nesting(tree, calls if span is None else None)
        del tree, chunk
        depth, work = max(depth, chunk_depth), work + chunk_work
    work -= len(spans) - 1  # the whole file has one Module node, not one per chunk
    if depth > MAX_DEPTH:
        return skipped(
            path,
            f"not analyzed: too complex (syntax nested {depth} levels deep, the limit is "
            f"{MAX_DEPTH}); valid Python, but the analysis would take minutes",
        )
    budget = WORK_BASE + WORK_PER_CHAR * len(text)
    if work > budget:
        return skipped(
            path,
            f"not analyzed: too complex (deep nesting throughout: {work / len(text):.0f} "
            f"levels per character, the limit is {budget / len(text):.0f}); valid Python, "
            "but the analysis would take minutes",
        )
    return None


_DEEP = threading.local()  # .on: this thread is deep()'s, its stack and recursion limit already large


def deep(fn, *args):
    """fn(*args) on a thread with a large stack and a matching recursion limit, with the cyclic
    garbage collector paused (its passes over a large tree made the time quadratic: 0.5 MB of
    source took 33 s with it, 10 s without). Returns or raises what fn does. Called on such a
    thread already (a batch of files run through one deep() call: workers.lint_many), fn runs
    there: a thread per file cost its start and the page faults of a fresh stack each time."""
    if getattr(_DEEP, "on", False):
        return fn(*args)
    out: list = []

    def run() -> None:
        _DEEP.on = True
        try:
            out.append((True, fn(*args)))
        except BaseException as exc:  # handed to the caller, re-raised there
            out.append((False, exc))

    limit, enabled = sys.getrecursionlimit(), gc.isenabled()
    old_stack = threading.stack_size(_STACK_BYTES)
    try:
        thread = threading.Thread(target=run, name="archlint-lint", daemon=True)
        sys.setrecursionlimit(max(limit, _RECURSION))
        gc.disable()
        thread.start()
        thread.join()
    finally:
        threading.stack_size(old_stack)
        sys.setrecursionlimit(limit)
        if enabled:
            gc.enable()
    ok, value = out[0]
    if ok:
        return value
    raise value
