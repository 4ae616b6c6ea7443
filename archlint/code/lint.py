"""`archlint train.py src/`: find the files, lint the ones the cache does not know (in parallel),
join the project (project.py), apply --select/--ignore/per-file-ignores, and hand back the
findings (and, with --fix/--diff, fix). The cache is cache.py; the process pool, workers.py.

This module imports neither torch nor libcst: a run where every file is cached starts and ends
without loading the parser.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from archlint import collector, writeguard
from archlint.code import cache as cache_files
from archlint.code import guard, notebook, project
from archlint.code.discover import discover
from archlint.code.engine import Analysis, analyze_bytes, keeping_trees, parse_error
from archlint.code.project_facts import ProjectContext
from archlint.code.selection import selected
from archlint.code.workers import PARALLEL_MIN_FILES, jobs, lint_many
from archlint.config import Settings
from archlint.diagnostics import Diagnostic


def _read(path: Path, max_bytes: int | None = None) -> bytes:
    return guard.read_regular(path, max_bytes)


def _work(item: tuple[str, bytes] | tuple[str, bytes, bool]) -> Analysis:
    """A file's own findings and its facts for the project join (project.py); with a third item
    True, its checks deferred (engine.analyze_bytes `defer`: run once the join says it has no context)."""
    return analyze_bytes(item[1], item[0], summarize=True, defer=len(item) > 2 and bool(item[2]))


def _work_died(dead: Diagnostic) -> Analysis:
    return Analysis([dead])


@dataclass
class Linted:
    """Every finding of a run's files (before selection), with what the run did to find them: the
    project contexts (by absolute path), how many files were extracted (not in the cache) and how
    many were linted again in their project context."""

    diagnostics: list[Diagnostic]
    contexts: dict[str, ProjectContext]
    extracted: int
    relinted: int


@dataclass
class CodeRun:
    """What `archlint PATH...` found in code: the selected findings (with --fix, those that remain),
    how many files were checked, and with --fix/--diff how many findings were fixed, with how many
    edits (None without)."""

    diagnostics: list[Diagnostic]
    files_checked: int
    fixed: int | None = None
    edits: int | None = None


# Source kept parsed between a file's own lint and its lint in project context (engine.KeptTrees),
# when both run in this process (the eval projects' 0.29 MB kept: +11 MB of peak RSS, -20% CPU).
KEEP_CHARS = 1_000_000


def lint_files(files: list[Path], settings: Settings, paths: list[Path] | None = None) -> Linted:
    """Every finding in these files (before selection), using and refreshing the cache."""
    # the collector paused for the whole run (archlint.collector): resumed between the first
    # pass and the join, it went over every tree kept for the join
    with collector.paused(), keeping_trees(0) as kept:
        return _lint_files(files, settings, paths, kept)


def _lint_files(files: list[Path], settings: Settings, paths: list[Path] | None, kept) -> Linted:
    cache_path = cache_files.folder(settings) / cache_files.CODE_FILE
    cache = cache_files.load(cache_path) if settings.cache else {}
    store = cache_files.ProjectStore(settings)
    first = project.FirstPass(files, [None] * len(files), {}, {})
    results, summaries, keys = first.results, first.summaries, first.keys
    todo: list[tuple[int, str, bytes, str]] = []
    pending: dict[int, tuple[str, bytes | None]] = {}  # own findings not known yet: (name, its bytes when not kept)
    notebooks: dict[int, notebook.Notebook] = {}
    named = guard.named_paths(paths)
    for i, path in enumerate(files):
        name = str(path)
        is_notebook = notebook.is_notebook(path)
        try:
            data = (
                guard.read_regular(path, notebook.file_limit(settings.max_file_size), notebook.FILE_WHAT)
                if is_notebook
                else _read(path, settings.max_file_size)
            )
        except guard.Skip as exc:
            results[i] = [guard.not_linted(name, exc, named)]
            continue
        except OSError as exc:
            results[i] = [parse_error(name, f"cannot read file: {exc.strerror or exc}; check its permissions", 1, 1)]
            continue
        if is_notebook:  # its code cells, as one Python text
            try:
                notebooks[i] = notebook.Notebook.parse(data)
            except notebook.NotebookError as exc:
                results[i] = [parse_error(name, f"{exc}; archlint reads Jupyter notebooks (nbformat 4)", 1, 1)]
                continue
            data = notebooks[i].python.encode("utf-8")
            if settings.max_file_size is not None and len(data) > settings.max_file_size:  # the code, not the outputs
                del notebooks[i]
                results[i] = [guard.skipped(name, guard.too_large(len(data), settings.max_file_size, "of code cells"))]
                continue
        key = store.key(data)
        keys[i] = key
        hit = cache.get(key)
        summary = store.summary(key)
        if summary is not None or key in store.facts:
            try:
                if hit is None:  # its own findings never needed yet (always linted in context): found below
                    results[i] = []
                    pending[i] = (name, data)
                else:
                    results[i] = [cache_files.from_record(r, name) for r in hit]
                summaries[i] = summary
                continue
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                print(
                    f"archlint: warning: malformed cache entry for {name} ({exc!r}); linting it again", file=sys.stderr
                )
        todo.append((i, name, data, key))
    if todo:
        here = jobs(settings) <= 1 or len(todo) < PARALLEL_MIN_FILES  # linted here (workers.lint_many), not in workers
        if here:
            kept.budget = KEEP_CHARS
        # linted here, a file's checks wait for the join (a file with a context is linted once, in it)
        items = [(name, data, here and i not in notebooks) for i, name, data, _ in todo]
        fresh = lint_many(items, jobs(settings), _work, _work_died)
        kept.budget = 0  # only files linted on their own are kept: the join's extra modules never are linted
        for (i, name, _, key), analysis in zip(todo, fresh):
            results[i] = analysis.diagnostics
            summaries[i] = analysis.summary
            store.put_summary(key, analysis.summary)
            if analysis.pending:
                pending[i] = (name, None)
            else:
                cache[key] = [cache_files.to_record(d) for d in analysis.diagnostics]
    # the project join: files whose names mean something elsewhere are linted again in context
    for i in notebooks:  # a notebook is linted on its own: no module imports it
        summaries[i] = None
    first.keys = [None if i in notebooks else key for i, key in enumerate(keys)]
    try:
        refined = project.refine(first, settings, store, jobs(settings), paths)
    except project.JoinFailed as failure:
        refined = _join_again(failure, first, {i for i, _, _, _ in todo}, settings, store, paths)
    store.save()
    results = refined.results
    own = [i for i in pending if i not in refined.in_context]  # no context after all: its own findings
    found = set()
    if own:
        results.update(_own_findings(own, pending, kept))
        for i in own:
            own_key = keys[i]
            assert own_key is not None  # pending files are read and keyed
            cache[own_key] = [cache_files.to_record(d) for d in results[i]]
            found.add(own_key)
    for i in pending:
        if i in refined.in_context:  # its own checks never ran: nothing of it kept past the join
            kept.drop(pending[i][0])
    if settings.cache and (todo or own):
        cache_files.save(cache_path, cache, {key for _, _, _, key in todo} | found)
    for i, nb in notebooks.items():
        results[i] = [nb.locate(d) for d in results[i]]
    return Linted([d for i in range(len(files)) for d in results[i]], refined.contexts, len(todo), refined.relinted)


def _own_findings(own: list[int], pending: dict[int, tuple[str, bytes | None]], kept) -> dict[int, list[Diagnostic]]:
    """The own findings of files the join gave no context: their deferred checks (engine.KeptTrees),
    or a lint alone of the bytes read (own findings not cached, summary cached)."""
    from archlint.code.guard import deep

    def run() -> dict[int, list[Diagnostic]]:
        out = {}
        for i in own:
            name, data = pending[i]
            out[i] = kept.finish(name) if data is None else analyze_bytes(data, name).diagnostics
        return out

    with collector.paused():
        return deep(run)


def _join_again(
    failure: project.JoinFailed,
    first: project.FirstPass,
    fresh: set[int],
    settings: Settings,
    store: cache_files.ProjectStore,
    paths: list[Path] | None,
) -> project.Refined:
    """After a failed project join: when facts read from the cache took part, they are evicted, the
    files they came from are extracted again and the join retried (a cache written by a buggy
    version heals itself); otherwise, or when it fails again, each file keeps its own findings.
    `fresh`: the files linted in this run (their facts are not the cache's)."""
    files, keys, results, summaries = first.files, first.keys, first.results, first.summaries
    stale = [i for i in range(len(files)) if keys[i] is not None and i not in fresh and i in summaries]
    evicted = store.evict()
    if evicted or stale:
        if settings.verbose:
            print(
                f"archlint: note: the project facts cached for {evicted} file{'s' * (evicted != 1)} could not "
                f"be joined ({failure}); extracted them again",
                file=sys.stderr,
            )
        items = []
        for i in stale:
            try:
                items.append((i, str(files[i]), _read(files[i])))
            except (OSError, guard.Skip):
                summaries[i] = None  # gone or replaced since: linted alone
        again = lint_many([(name, data) for _, name, data in items], jobs(settings), _work, _work_died) if items else []
        for (i, _, _), analysis in zip(items, again):
            results[i], summaries[i] = analysis.diagnostics, analysis.summary
            key = keys[i]
            assert key is not None  # stale files are those with a key
            store.put_summary(key, analysis.summary)
        try:
            return project.refine(first, settings, store, jobs(settings), paths)
        except project.JoinFailed as exc:
            failure = exc
    print(
        f"archlint: warning: project-wide analysis failed ({failure}); each file was linted alone; please report this",
        file=sys.stderr,
    )
    return project.Refined(dict(results))


def lint_paths(paths: list[Path], settings: Settings) -> CodeRun:
    """Lint (with --fix/--diff: fix) the Python files and notebooks under `paths`."""
    problems: list[tuple[Path, str]] = []
    files = discover(paths, problems)
    writeguard.note_inputs(files, "a linted file")  # a report never replaces one (archlint/outputs.py)
    # a folder that could not be listed fails the run as an unreadable file does (its files unseen)
    unlisted = selected([parse_error(str(folder), why, 1, 1) for folder, why in problems], settings)
    if settings.fix or settings.diff:
        from archlint.code.fix import fix_files  # with its diff and write-back, only when fixing

        linted = lint_files(files, settings, paths)  # the project join: each file's context
        contexts = {f: linted.contexts.get(os.path.abspath(f)) for f in files}
        fixed = fix_files(files, settings, contexts, paths)
        return CodeRun(unlisted + fixed.remaining, len(files), fixed.fixed, fixed.edits)
    return CodeRun(unlisted + selected(lint_files(files, settings, paths).diagnostics, settings), len(files))
