"""Large files: parsed in chunks of top-level statements (archlint/code/chunks.py) into the same
tree as a whole-file parse, positions resolved a statement at a time (positions.py); findings,
fixes and project facts identical to the whole-file run, memory linear in the file's size."""

from __future__ import annotations

import importlib.util
import tracemalloc
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from archlint.cli import main
from archlint.code import chunks, engine
from archlint.code.positions import Positions

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "tests" / "fixtures" / "code").glob("*.py"))

# Shapes a split must keep: decorators, top-level clauses, __future__, comments between and after
# blocks, a file indented by 2 spaces first and 4 later, mixed line endings, non-ASCII text, no
# final newline.
EDGES = (
    "from __future__ import annotations\n# header\n\nimport torch\nname = 'café → ünïcode 🚀'\n\n\n@decorator\n@other(1)\ndef f(x):\n"
    "  return x.cuda()\n\n    # indented comment after the block\n# top comment\nif torch.cuda.is_available():\n"
    "    y = 1\nelif False:\n    y = 2\nelse:\n    y = 3\ntry:\n    import numpy\nexcept ImportError:\n"
    "    numpy = None\nfinally:\n    pass\nclass A:\n\tdef g(self):\n\t\treturn torch.zeros(3).cuda()\r\n"
    "x = (1,\n2)\r\ns = '''\ncol0 = 'inside a string'\n'''\nz = torch.ones(2).cuda()"
)


def _training_code() -> str:
    """Several training scripts one after another (the fixtures), as a large real-looking file."""
    return "".join(p.read_text() + "\n" for p in FIXTURES)


def _texts():
    yield "edges", EDGES
    yield "training", _training_code()
    for p in FIXTURES:
        yield p.name, p.read_text()


@pytest.mark.parametrize("target", [1, 200, 2_000])
def test_chunked_parse_is_the_whole_file_parse(target):
    for name, text in _texts():
        whole = cst.parse_module(text)
        plan = chunks.split(text, target)
        if plan is None:
            assert len(text) < 2 * target, name
            continue
        assert len(plan.spans) > 1
        for span in plan.spans:  # each chunk begins on the line it says, at column 0
            assert text.count("\n", 0, span.start) + 1 == span.line
        module = chunks.parse(text, plan)
        assert module.deep_equals(whole), name
        assert module.code == text, name
        assert (module.default_indent, module.default_newline, module.has_trailing_newline) == (
            whole.default_indent,
            whole.default_newline,
            whole.has_trailing_newline,
        ), name


def test_decorated_def_and_clauses_are_never_split_off():
    plan = chunks.split(EDGES, 1)
    starts = {EDGES.splitlines()[s.line - 1].split("(")[0].split(" ")[0] for s in plan.spans}
    assert not starts & {"def", "elif", "else:", "except", "finally:"}
    assert EDGES.splitlines()[plan.spans[1].line - 1].startswith("import torch")  # __future__ stays first


def test_positions_match_libcst_position_provider():
    for name, text in _texts():
        module = cst.parse_module(text)
        expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        positions = Positions(module)
        for node, r in expected.items():
            start, end = positions[node]
            assert (start.line, start.column, end.line, end.column) == (
                r.start.line,
                r.start.column,
                r.end.line,
                r.end.column,
            ), (name, node)


def test_chunked_findings_and_project_facts_are_identical(monkeypatch):
    text = _training_code() + EDGES + "\n"
    whole = engine.analyze_text(text, "train.py", summarize=True)
    monkeypatch.setattr(chunks, "CHUNK_CHARS", 500)
    assert len(chunks.split(text).spans) > 20
    chunked = engine.analyze_text(text, "train.py", summarize=True)
    assert len(whole.diagnostics) > 20 and any(d.fix for d in whole.diagnostics)
    assert chunked == whole  # codes, lines, columns, messages, fixes; and the project summary


def test_chunked_syntax_error_is_reported_at_its_line_in_the_file(monkeypatch):
    monkeypatch.setattr(chunks, "CHUNK_CHARS", 200)
    text = _training_code() + "x = (1,\n"  # an unclosed bracket: not tokenizable, parsed whole
    bad = text.replace("import torch\n", "import torch\nx = = 1\n", 2)  # tokenizable, in a later chunk
    for source in (text, bad):
        chunked = engine.analyze_text(source, "t.py").diagnostics
        monkeypatch.setattr(chunks, "split", lambda t, target=0: None)
        expected = engine.analyze_text(source, "t.py").diagnostics
        monkeypatch.undo()
        monkeypatch.setattr(chunks, "CHUNK_CHARS", 200)
        assert chunked == expected and chunked[0].code == "AL000"


def test_fix_on_a_chunked_file_is_byte_exact(tmp_path, monkeypatch):
    text = _training_code()
    for name in ("whole", "chunked"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "train.py").write_text(text)
    assert main([str(tmp_path / "whole"), "--fix", "--unsafe-fixes", "-j", "1", "--no-cache", "--quiet"]) in (0, 1)
    monkeypatch.setattr(chunks, "CHUNK_CHARS", 300)
    assert main([str(tmp_path / "chunked"), "--fix", "--unsafe-fixes", "-j", "1", "--no-cache", "--quiet"]) in (0, 1)
    fixed = (tmp_path / "whole" / "train.py").read_bytes()
    assert fixed != text.encode()
    assert (tmp_path / "chunked" / "train.py").read_bytes() == fixed


def _generated(megabytes: float) -> str:
    spec = importlib.util.spec_from_file_location("lint_memory", ROOT / "benchmarks" / "lint_memory.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench.source(megabytes)


def test_lint_memory_per_megabyte_is_bounded():
    """Python-level peak (tracemalloc) for linting a 0.2 MB training file. Before chunking and
    per-statement positions it was ~280 MB per MB of source (the whole-file PositionProvider alone
    ~140), on top of libcst's native parser (~1.2 GB per MB, not traced here, now one chunk's)."""
    text = _generated(0.2)
    mb = len(text) / 1e6
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        analysis = engine.analyze_text(text, "gen.py", summarize=True)
        findings, summary = analysis.diagnostics, analysis.summary
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert len(findings) > 500 and summary["defs"]
    assert peak / 1e6 / mb < 120, f"{peak / 1e6 / mb:.0f} MB per MB of source"


def test_one_huge_statement_is_one_chunk():
    """A top-level statement is never split: the largest one is the parser's ceiling (the size
    limit, max-file-size, bounds it)."""
    table = "TABLE = {\n" + "    1: torch.zeros(2),\n" * 2_000 + "}\n"
    text = "import torch\n" + "x = 1\n" * 500 + table + "y = torch.ones(2).cuda()\n" * 500
    plan = chunks.split(text, 1_000)
    holding = [s for s in plan.spans if s.start <= text.index("TABLE") < s.end]
    assert len(holding) == 1 and text.index(table) + len(table) <= holding[0].end
    assert chunks.parse(text, plan).deep_equals(cst.parse_module(text))
