"""The code linter's faster paths (issue 45) answer exactly what the slower ones did: node text by
codegen.text, positions by codegen.RangesState (also checked node by node against libcst's
PositionProvider in test_code_large_files), the precheck's nesting figures; and the costs they
remove stay removed: a linted file leaves no reference cycle holding its tree for the garbage
collector, and a batch of files runs on one big-stack thread."""

from __future__ import annotations

import ast
import gc
import threading
from pathlib import Path

import libcst as cst

from archlint.code import codegen, engine, guard, workers

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "tests" / "fixtures" / "code").rglob("*.py"))
EVAL = sorted((ROOT / "benchmarks" / "eval_data" / "training_projects").rglob("*.py"))


def _modules():
    for path in FIXTURES + EVAL[:60]:
        try:
            yield path, cst.parse_module(path.read_text())
        except cst.ParserSyntaxError:
            continue


def test_node_text_is_libcst_code_for_node():
    checked = 0
    for path, module in _modules():
        stack: list[cst.CSTNode] = [module]
        while stack:
            node = stack.pop()
            if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Call, cst.For, cst.If, cst.Module)):
                assert codegen.text(module, node) == module.code_for_node(node), (path, type(node).__name__)
                checked += 1
            stack.extend(node.children)
    assert checked > 2_000


def _nesting_reference(tree: ast.AST) -> tuple[int, int]:
    """The precheck's figures as they were computed before: depth first, ast.iter_child_nodes."""
    best = work = 0
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        work += depth
        best = max(best, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return best, work


def test_precheck_nesting_figures_are_unchanged():
    texts = [p.read_text() for p in FIXTURES + EVAL]
    texts += ["x = " + "(" * 150 + "1" + ")" * 150, "a" + "[0]" * 400, "", "def f():\n    return [i for i in x if i]\n"]
    for text in texts:
        tree = ast.parse(text)
        assert guard._nesting(tree) == _nesting_reference(tree)


def test_a_linted_file_leaves_no_cycle_holding_its_tree():
    """Before Facts.release, a file's scopes, loops, calls and the checks' caches formed cycles
    that kept the whole tree (~1,500 objects per KB of source) until a full collection."""
    text = (ROOT / "tests" / "fixtures" / "code" / "projects" / "unet_seg" / "train.py").read_text()
    engine.analyze_text(text, "warm.py", summarize=True)  # imports and one-time caches first
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        analysis = engine.analyze_text(text, "train.py", summarize=True)
        left = gc.collect()
    finally:
        if enabled:
            gc.enable()
    assert analysis.diagnostics and analysis.summary
    assert left < 100, f"{left} objects freed only by the collector ({len(text)} characters of source)"


def test_a_batch_of_files_runs_on_one_big_stack_thread():
    seen: list[tuple[int, bool]] = []

    def work(item):
        seen.append((threading.get_ident(), guard.deep(lambda: getattr(guard._DEEP, "on", False))))
        return item

    assert workers.lint_many([(str(i), b"") for i in range(5)], 1, work, lambda dead: dead) == [
        (str(i), b"") for i in range(5)
    ]
    assert len({ident for ident, _ in seen}) == 1 and seen[0][0] != threading.get_ident()
    assert all(on for _, on in seen)


def test_call_lines_from_the_precheck_are_those_of_a_fresh_parse():
    """summary._call_lines pairs libcst's calls with the standard parser's; the precheck's records
    (guard.call_record, gathered while it measures the nesting) give the same lines."""
    from archlint.code import summary
    from archlint.code.facts import Facts

    paired = 0
    for path, module in _modules():
        text = path.read_text()
        records: list = []
        assert guard.precheck(text, str(path), None, records) is None
        fresh, shared = Facts(module, text), Facts(module, text)
        shared.ast_calls = records
        lines = summary._call_lines(fresh)
        assert summary._call_lines(shared) == lines, path
        paired += len(lines)
    assert paired > 1_000


def _conv_source(names: list[str], used: set[str]) -> str:
    parts = ["import torch\n"]
    for name in names:
        parts.append(
            f"\nclass {name}(torch.nn.Module):\n    def __init__(self):\n        self.c = torch.nn.Conv2d(3, 8, 3)\n"
        )
    parts += [f"model = {name}()\n" for name in names if name in used]
    return "".join(parts)


def test_used_convolutions_counts_the_words_once(monkeypatch):
    """cudnn.used_convolutions asked whether each conv def's name appears twice with a regex search
    of the whole file per def: quadratic in the file's size (2.8 s of 3.5 s on a 0.3 MB file). One
    count of the file's words answers the same."""
    import re

    from archlint.code import cudnn
    from archlint.code.facts import Facts

    names = [f"Net{i}" for i in range(40)]
    searches = []
    real = re.findall

    def counted(pattern, string, *args):
        searches.append(pattern)
        return real(pattern, string, *args)

    monkeypatch.setattr(cudnn.re, "findall", counted)
    for used, expected in (({"Net39"}, True), (set(), False), ({"Net0", "Net7"}, True)):
        source = _conv_source(names, used)
        assert cudnn.used_convolutions(Facts(cst.parse_module(source), source)) is expected
    assert searches == []
    # a name the word count cannot answer (not all word characters) is still searched for
    facts = Facts(cst.parse_module("x = 1\n"), "Net.Inner Net.Inner")
    assert cudnn._mentions(facts, "Net.Inner") == 2 and searches
    source = "café = 1\ncafé2 = café\n_café_ = 3\n"
    facts = Facts(cst.parse_module(source), source)
    assert cudnn._mentions(facts, "café") == 2


def test_ref_names_answers_as_refs_does():
    """tensors.flow asks dataflow.refs about the same expressions with a growing set of names, once
    per round of its fixed point; dataflow.ref_names walks each once. Every expression of the
    corpus, with the names it reads, each of them alone, none, and names it does not read."""
    from archlint.code import dataflow as df

    checked = comprehensions = 0
    for _, module in _modules():
        stack: list[cst.CSTNode] = [module]
        while stack:
            node = stack.pop()
            stack.extend(node.children)
            if not isinstance(node, cst.BaseExpression):
                continue
            read = df.ref_names(node)
            if read is None:
                comprehensions += 1
                continue
            every = {n.value for n in _names_in(node)}
            for names in (every, set(), {"__absent__"}, *({n} for n in sorted(every)[:6])):
                assert df.refs(node, names) is (not read.isdisjoint(names)), (type(node).__name__, names)
            checked += 1
    assert checked > 20_000 and comprehensions > 50


def _names_in(node: cst.CSTNode):
    stack = [node]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            yield node
        stack.extend(node.children)


def test_parse_without_validation_is_libcsts_parse():
    """parsing.parse_module builds libcst's tree with the nodes' own checks off while it parses:
    the same tree and code, the same syntax errors; nodes built anywhere else are still checked."""
    from archlint.code import parsing

    for path, module in _modules():
        text = path.read_text()
        fast = parsing.parse_module(text)
        assert fast.deep_equals(module) and fast.code == module.code == text, path
    for bad in ("def f(:\n", "x = (1,\n", "return return\n"):
        try:
            cst.parse_module(bad)
        except cst.ParserSyntaxError as exc:
            expected = str(exc)
        else:
            raise AssertionError(bad)
        try:
            parsing.parse_module(bad)
        except cst.ParserSyntaxError as exc:
            assert str(exc) == expected
        else:
            raise AssertionError(bad)
    try:
        cst.Name("")  # validated: outside a parse
    except cst.CSTValidationError:
        pass
    else:
        raise AssertionError("a node built by hand was not validated")
    seen: list[bool] = []

    def other_thread():
        try:
            cst.Name("")
        except cst.CSTValidationError:
            seen.append(True)
        else:
            seen.append(False)

    worker = threading.Thread(target=other_thread)
    parsing._PARSING.on = True  # as during a parse on this thread
    try:
        worker.start()
        worker.join()
    finally:
        parsing._PARSING.on = False
    assert seen == [True]


def test_the_program_linting_code_leaves_the_collector_off(tmp_path):
    """`archlint PATH` as a program, linting code only, turns the collector off for good
    (collector.off_to_the_end): turned back on, its first pass went over every object the lint
    kept, ~20 ms of a run. main() called from Python, and a run with a model, leave it as it was."""
    import subprocess
    import sys

    (tmp_path / "train.py").write_text("import torch\nx = torch.zeros(1)\n")
    probe = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('collector', gc.isenabled(), file=sys.stderr))\n"
        "sys.argv = ['archlint', *sys.argv[1:]]\n"
        "from archlint.cli import main\n"
        "sys.exit(main({argv}))\n"
    )

    def collector_at_exit(argv: str, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", probe.format(argv=argv), *args, "--exit-zero", "--no-cache"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
        )
        assert done.returncode == 0, done.stderr
        return done.stderr.strip().splitlines()[-1]

    assert collector_at_exit("", "train.py") == "collector False"  # the program, code only
    assert collector_at_exit("sys.argv[1:]", "train.py") == "collector True"  # main() called from Python
    model = f"{ROOT / 'examples' / 'nets.py'}:TinyNet"
    assert collector_at_exit("", "train.py", model, "--input-shape", "1,3,56,56") == "collector True"
