"""One file's text → its Diagnostics: parse, run every code check, apply noqa comments.

Pure and independent of selection (--select/--ignore are applied by the caller), so a result can
be cached by content. Never imports or runs the code it reads.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import io
import re
import tokenize
from dataclasses import dataclass

from archlint.code.project_facts import ProjectContext
from archlint.diagnostics import Diagnostic, Severity

PARSE_ERROR = "AL000"  # not a rule: the file could not be read or parsed; always reported
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_FILE_NOQA = re.compile(r"#\s*archlint:\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_MENTIONS_NOQA = re.compile("noqa", re.IGNORECASE)
# Only files that mention torch can hold a finding; the rest are not even parsed (TorchFix does the same).
_PREFILTER = "torch"


@functools.cache
def _severities() -> dict[str, Severity]:
    """Each code's severity, as its rule file declares it (checked against its page when found)."""
    from archlint.code.checks import rules

    return {code: rule.severity for code, rule in rules().items()}


def _codes(text: str | None) -> set[str] | None:
    """None means every code."""
    return None if not text else {c.strip().upper() for c in text.split(",")}


def _suppressed(code: str, codes: set[str] | None) -> bool:
    return codes is None or code in codes


def parse_error(path: str, message: str, line: int | None = None, column: int | None = None) -> Diagnostic:
    return Diagnostic(PARSE_ERROR, message, Severity.ERROR, file=path, line=line, column=column)


def _syntax_error(text: str, path: str, exc) -> Diagnostic:
    try:  # Python's own message and position are what users know
        ast.parse(text, filename=path)
    except SyntaxError as err:
        return parse_error(path, f"syntax error: {err.msg}; fix it so the file can be linted", err.lineno, err.offset)
    except (ValueError, RecursionError) as err:  # null bytes, too deeply nested
        return parse_error(path, f"cannot parse: {err}", 1, 1)
    return parse_error(path, f"libcst cannot parse this file ({exc.message})", exc.editor_line, exc.editor_column)


def comments(text: str) -> dict[int, str]:
    """line → its comment, from Python's tokenizer (a `# noqa` inside a string is no comment);
    read only when the file mentions noqa at all."""
    if not _MENTIONS_NOQA.search(text):
        return {}
    out = {}
    try:  # newline=None: lines end at \r\n, \r and \n, as libcst and split_lines count them
        for token in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
            if token.type == tokenize.COMMENT:
                out[token.start[0]] = token.string
    except (tokenize.TokenError, SyntaxError):
        pass  # not Python: the parse reports it as AL000, which no comment silences
    return out


def _diagnostics(check_module, facts, path: str, file_codes: set[str], notes: dict[int, str]) -> list[Diagnostic]:
    severities = _severities()
    out = []
    for finding in check_module.check(facts):
        if finding.code in file_codes:
            continue
        start, end = facts.position(finding.node)
        noqa = _NOQA.search(notes.get(start.line, ""))
        if noqa and _suppressed(finding.code, _codes(noqa.group("codes"))):
            continue
        out.append(
            Diagnostic(
                finding.code,
                finding.message,
                severities[finding.code],  # a code no rule file declares is an internal error
                file=path,
                line=start.line,
                column=start.column + 1,
                end_line=end.line,
                end_column=end.column + 1,
                fix=finding.fix() if finding.fix else None,
            )
        )
    return out


@dataclass(frozen=True)
class Analysis:
    """One file's lint: its findings and, with `summarize`, its facts for the project join
    (project_facts.FileFacts as JSON; None for a file never parsed or too deeply nested)."""

    diagnostics: list[Diagnostic]
    summary: dict | None = None
    pending: bool = False  # its checks deferred (KeptTrees.finish): `diagnostics` are not all of its findings


class KeptTrees:
    """Parsed files kept from a file's own lint for its lint in project context (project.refine),
    where both run in this process: the second lint then skips the parse (a third of a cold run's
    time, half the files are linted again) and the positions already resolved. Bounded by the
    characters of source kept (on the evaluation projects, ~40 MB of peak memory per MB kept); a
    file past the bound is parsed again, as without it. Exact: the same text gives the same tree.
    A kept file's own checks wait here too, on its facts (`deferred`), until the join says whether
    it has a context: run then (finish) without one, dropped (take) when it is linted in one."""

    def __init__(self, budget_chars: int) -> None:
        self.budget = budget_chars
        self.chars = 0
        self.trees: dict[str, tuple[str, object, object]] = {}  # path → (text, module, positions)
        self.deferred: dict[str, _Deferred] = {}  # path → its own checks, not run yet

    def keep(self, path: str, text: str, module, positions) -> bool:
        if self.chars + len(text) <= self.budget and path not in self.trees:
            self.trees[path] = (text, module, positions)
            self.chars += len(text)
            return True
        return False

    def take(self, path: str, text: str):
        """(module, positions, facts or None) kept for this path and exactly this text, or None;
        forgotten here. A file whose own checks were deferred hands on its facts, as fresh
        (Facts.again): linted in context, it never needs its own findings, nor a second facts walk."""
        kept, deferred = self._pop(path)
        if kept is None or kept[0] != text:
            if deferred is not None:
                deferred.facts.release()
            return None
        return kept[1], kept[2], deferred.facts.again() if deferred is not None else None

    def drop(self, path: str) -> None:
        """Forget what is kept for this path (its tree, its deferred checks' facts), unused."""
        _, deferred = self._pop(path)
        if deferred is not None:
            deferred.facts.release()

    def _pop(self, path: str) -> tuple[tuple[str, object, object] | None, _Deferred | None]:
        kept = self.trees.pop(path, None)
        if kept is not None:
            self.chars -= len(kept[0])
        return kept, self.deferred.pop(path, None)

    def finish(self, path: str) -> list[Diagnostic]:
        """The own findings of a file whose checks were deferred (`analyze_bytes(defer=True)`):
        its checks run now on the facts its summary was read from, as they would have then. Run
        on guard.deep's big-stack thread, as the lint it completes."""
        deferred = self.deferred.pop(path)
        kept = self.trees.pop(path)
        self.chars -= len(kept[0])
        return _checked(deferred.facts, path, deferred.file_codes, deferred.notes, deferred.trouble)


@dataclass
class _Deferred:
    """A file's own checks, deferred until the project join says it has no context (KeptTrees)."""

    facts: object  # facts.Facts, its summary read, no check run on it
    file_codes: set[str] | None
    notes: dict[int, str]
    trouble: list[Diagnostic]


_KEPT: KeptTrees | None = None  # set by keeping_trees, for an in-process run only


@contextlib.contextmanager
def keeping_trees(budget_chars: int):
    """Within the block, files linted with `summarize` keep their trees (up to the budget) and a
    lint in context takes its file's tree. Only for lints in this process: a worker's kept trees
    would never be taken, so lint.py opens it only when the first pass runs here."""
    global _KEPT
    _KEPT = KeptTrees(budget_chars)
    try:
        yield _KEPT
    finally:
        _KEPT = None


def lint_text(text: str, path: str, context: ProjectContext | None = None) -> list[Diagnostic]:
    """The file's findings; `context` is what the project join says about it (project_facts.ProjectContext)."""
    return analyze_text(text, path, context).diagnostics


def analyze_text(
    text: str, path: str, context: ProjectContext | None = None, summarize: bool = False, defer: bool = False
) -> Analysis:
    """The file's findings (and facts, with `summarize`). A file that never mentions torch is
    skipped unless the project says it drives torch code (a context). `defer` (with `summarize`,
    within keeping_trees): its checks wait, with its tree and facts, for KeptTrees.finish or for
    its lint in context; the Analysis says `pending` when they did."""
    if _PREFILTER not in text and not context:
        return Analysis([])
    notes = comments(text)
    file_noqa = next(filter(None, map(_FILE_NOQA.search, notes.values())), None)
    file_codes = _codes(file_noqa.group("codes")) if file_noqa else set()

    from archlint.code import chunks, guard

    kept = _KEPT.take(path, text) if _KEPT is not None and context else None
    if kept is not None:  # parsed (and prechecked) by its own lint in this run
        return guard.deep(
            _lint_parsed, text, path, file_codes, bool(file_noqa), context, summarize, None, notes, kept, None, defer
        )
    plan = chunks.split(text)  # a large file is parsed a chunk at a time (chunks.py says why)
    calls: list | None = [] if plan is None and summarize else None  # for the project facts (summary._call_lines)
    problem = guard.precheck(text, path, plan, calls)
    if problem is not None:
        return Analysis([problem])
    return guard.deep(
        _lint_parsed, text, path, file_codes, bool(file_noqa), context, summarize, plan, notes, None, calls, defer
    )


def _lint_parsed(
    text: str,
    path: str,
    file_codes: set[str] | None,
    file_noqa: bool,
    context: ProjectContext | None,
    summarize: bool,
    plan=None,
    notes: dict[int, str] | None = None,
    kept: tuple | None = None,
    calls: list | None = None,
    defer: bool = False,
) -> Analysis:
    """Parse with libcst (on guard.deep's big-stack thread), extract facts, run every check.
    `kept`: (module, positions) of this text, parsed earlier in this run (KeptTrees); `calls`: the
    precheck's records of its calls (guard.call_record), for the project facts."""
    import libcst as cst

    from archlint.code import chunks, parsing
    from archlint.code.facts import Facts

    facts = None
    if kept is not None:
        module, positions, facts = kept  # facts: those of its deferred own lint (Facts.again), if kept
    else:
        positions = None
        try:
            module = chunks.parse(text, plan) if plan else parsing.parse_module(text)
        except cst.ParserSyntaxError as exc:
            return Analysis([_syntax_error(text, path, exc)])
        except RecursionError:
            return Analysis([parse_error(path, "cannot parse: nesting too deep for the parser", 1, 1)])
    if facts is None:
        try:
            facts = Facts(module, text, positions)
            facts.ast_calls = calls
        except RecursionError:
            return Analysis([parse_error(path, "cannot analyze: nesting too deep", 1, 1)])
    summary, trouble = None, []
    if summarize:
        from archlint.code.summary import summarize as summarize_facts

        try:
            summary = summarize_facts(facts).to_json()
        except RecursionError:
            summary = None  # too deeply nested to follow: linted alone, as its own finding says
        except Exception as exc:  # a bug here must not lose this file's own findings
            trouble.append(
                parse_error(
                    path,
                    f"archlint internal error reading this file's project facts "
                    f"({type(exc).__name__}: {exc}); it is linted alone; please report it",
                    1,
                    1,
                )
            )
    if context:
        facts.project = context
    if file_noqa and file_codes is None:
        return Analysis([], summary)
    if defer and summary is not None and _KEPT is not None and _KEPT.keep(path, text, module, facts.positions):
        # its checks wait for the project join: with a context, it is linted in context instead. Kept
        # as fresh facts (Facts.again): the summary's cached answers dropped now, not held meanwhile
        _KEPT.deferred[path] = _Deferred(facts.again(), file_codes, notes or {}, trouble)
        return Analysis(list(trouble), summary, pending=True)
    out = _checked(facts, path, file_codes, notes or {}, trouble)
    if summarize and _KEPT is not None and summary is not None:  # the project join may lint it again
        _KEPT.keep(path, text, module, facts.positions)
    facts.release()
    return Analysis(out, summary)


def _checked(facts, path: str, file_codes: set[str] | None, notes: dict[int, str], trouble: list[Diagnostic]):
    """Every check's findings on these facts after `trouble` (the summary's), in line order."""
    from archlint.code.checks import modules

    out = list(trouble)
    for check_module in modules():
        try:
            out += _diagnostics(check_module, facts, path, file_codes, notes)
        except Exception as exc:  # a bug in one check must not lose the other files' findings
            name = check_module.__name__.rsplit(".", 1)[-1]
            out.append(
                parse_error(
                    path,
                    f"archlint internal error in check {name!r} on this file "
                    f"({type(exc).__name__}: {exc}); please report it",
                    1,
                    1,
                )
            )
    out.sort(key=lambda d: (d.line, d.column, d.code))
    return out


def analyze_bytes(
    data: bytes, path: str, context: ProjectContext | None = None, summarize: bool = False, defer: bool = False
) -> Analysis:
    from archlint.code.source import SourceError, decode

    if b"torch" not in data and not context:  # cheap for every encoding torch can be spelled in
        return Analysis([])
    try:
        text, _, _ = decode(data)
    except SourceError as exc:
        return Analysis([parse_error(path, str(exc), 1, 1)])
    return analyze_text(text, path, context, summarize, defer)
