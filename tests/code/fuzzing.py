"""Fuzzing the code linter: hypothesis strategies for Python sources (generated training-like
programs, and the repository's real-shaped training scripts mutated at the text level), and the
property every batch of them must keep when linted through the command line with -j 2.

Shared by tests/code/test_fuzz.py (a bounded run) and benchmarks/lint_fuzz.py (a long one).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

from hypothesis import strategies as st

from archlint.cli import main
from archlint.code.engine import analyze_bytes
from archlint.code.workers import PARALLEL_MIN_FILES

SEEDS = [p.read_text(encoding="utf-8") for p in sorted((Path(__file__).parents[1] / "fixtures" / "code").glob("*.py"))]

# Fragments that break parsers: brackets, string and line delimiters, odd whitespace and bytes.
NASTY = [
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ":",
    ",",
    "\n",
    "\t",
    " ",
    "\\",
    "'",
    '"',
    '"""',
    "\x00",
    "\r",
    "\x0c",
    "lambda:",
    "yield ",
    "await ",
    "async ",
    "@",
    "=",
    "+",
    "*",
    "**",
    "if ",
    "else ",
    "# noqa",
    "# archlint: noqa",
    "torch.",
    ".cuda()",
    ".to('cuda')",
    ".item()",
    "é",
    "\ufeff",
    "🙂",
    "\u2028",
    "f'{",
    "}'",
    "match x:\n    case 1:\n        pass\n",
    "global x\n",
    "del ",
    "...",
    ";",
    "\\\n",
]

ATTRS = [
    "cuda",
    "to",
    "item",
    "cpu",
    "numpy",
    "zero_grad",
    "backward",
    "step",
    "sum",
    "tolist",
    "pin_memory",
    "half",
    "float",
    "detach",
    "clone",
    "eval",
    "train",
    "parameters",
]
NAMES = ["x", "y", "model", "loader", "opt", "loss", "batch", "torch", "F", "device", "i"]


def _expressions():
    leaves = st.one_of(
        st.sampled_from(NAMES),
        st.integers(-3, 10**6).map(str),
        st.sampled_from(["'cuda'", "'cpu'", "None", "True", "1.5", "torch.float16", "torch.cuda.synchronize()"]),
    )

    def grow(inner):
        return st.one_of(
            st.tuples(inner, st.sampled_from(ATTRS)).map(lambda t: f"{t[0]}.{t[1]}"),
            st.tuples(inner, st.lists(inner, max_size=3)).map(lambda t: f"{t[0]}({', '.join(t[1])})"),
            st.tuples(inner, st.sampled_from(ATTRS), inner).map(lambda t: f"{t[0]}.{t[1]}({t[2]})"),
            st.tuples(inner, st.sampled_from(["+", "*", "-", "/", "@", "==", "and"]), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"
            ),
            st.tuples(inner, inner).map(lambda t: f"{t[0]}[{t[1]}]"),
            st.lists(inner, max_size=4).map(lambda xs: f"[{', '.join(xs)}]"),
            inner.map(lambda e: f"torch.zeros({e})"),
            inner.map(lambda e: f"torch.tensor({e}, device='cuda')"),
            inner.map(lambda e: f"(lambda: {e})"),
        )

    return st.recursive(leaves, grow, max_leaves=12)


def _statements():
    expr = _expressions()
    simple = st.one_of(
        st.tuples(st.sampled_from(NAMES[:-3]), expr).map(lambda t: f"{t[0]} = {t[1]}"),
        expr,
        expr.map(lambda e: f"print({e})"),
        st.just("opt.zero_grad()"),
        st.just("loss.backward()"),
        st.just("opt.step()"),
        st.just("torch.backends.cudnn.benchmark = True"),
        st.just("loader = torch.utils.data.DataLoader(ds, batch_size=32, num_workers=0)"),
    )

    def block(head: str, body: list[str]) -> str:
        lines = "\n".join("    " + line for stmt in body for line in stmt.splitlines())
        return f"{head}\n{lines or '    pass'}"

    def grow(inner):
        body = st.lists(inner, min_size=1, max_size=4)
        return st.one_of(
            body.map(lambda b: block("for x, y in loader:", b)),
            body.map(lambda b: block("with torch.no_grad():", b)),
            body.map(lambda b: block("def train(model, loader, opt):", b)),
            body.map(lambda b: block("if torch.cuda.is_available():", b)),
            body.map(lambda b: block("class Net(torch.nn.Module):\n    def forward(self, x):", b)),
        )

    return st.recursive(simple, grow, max_leaves=20)


def generated_programs():
    return st.lists(_statements(), min_size=1, max_size=12).map(lambda ss: "import torch\n" + "\n".join(ss) + "\n")


# Nesting near the limits (CPython's 200 brackets, the guard's depth 500) costs libcst seconds per
# statement: only the long run (heavy=True) draws those; the bounded test draws both sides of the
# limits at cheap sizes.
NEST = {False: [1, 20, 60, 201, 400, 3000], True: [1, 20, 150, 199, 200, 201, 400, 3000]}
CHAIN = {False: [10, 100, 501, 5000], True: [10, 450, 499, 501, 1500, 5000, 100_000]}


@st.composite
def _mutate(draw, text: str, heavy: bool) -> str:
    n = len(text)
    kind = draw(
        st.sampled_from(["delete", "duplicate", "insert", "nest", "chain", "truncate", "newlines", "indent", "cookie"])
    )
    i = draw(st.integers(0, n))
    j = draw(st.integers(i, min(n, i + 400)))
    if kind == "delete":
        return text[:i] + text[j:]
    if kind == "duplicate":
        return text[:j] + text[i:j] + text[j:]
    if kind == "insert":
        return text[:i] + "".join(draw(st.lists(st.sampled_from(NASTY), min_size=1, max_size=6))) + text[i:]
    if kind == "nest":  # around 200: CPython's limit on nested brackets
        k = draw(st.sampled_from(NEST[heavy]))
        open_, close = draw(st.sampled_from([("(", ")"), ("[", "]"), ("{", "}"), ("f(", ")")]))
        return text[:i] + open_ * k + "x" + close * k + text[i:]
    if kind == "chain":  # deep trees without brackets
        k = draw(st.sampled_from(CHAIN[heavy]))
        op = draw(st.sampled_from(["+", " and ", ".a", "[0]", "()"]))
        line = "z = a" + (op.join(["a"] * k) if op in ("+", " and ") else op * k)
        return text[:i] + "\n" + line + "\n" + text[i:]
    if kind == "truncate":
        return text[:i]
    if kind == "newlines":
        return text.replace("\n", draw(st.sampled_from(["\r\n", "\r", "\n\n"])))
    if kind == "indent":
        return text[:i] + text[i:j].replace("\n", "\n" + " " * draw(st.integers(1, 8))) + text[j:]
    cookie = draw(
        st.sampled_from(["# -*- coding: latin-1 -*-\n", "# coding: nope\n", "# vim: set fileencoding=utf-8 :\n"])
    )
    return cookie + text


@st.composite
def mutated_scripts(draw, heavy: bool = False) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        text = draw(_mutate(text, heavy))
    return text


def sources(heavy: bool = False):
    """Bytes of one file: a generated program or a mutated training script, in an encoding."""
    text = st.one_of(generated_programs(), mutated_scripts(heavy))
    encoded = st.tuples(text, st.sampled_from(["utf-8", "utf-8-sig", "latin-1"])).map(
        lambda t: t[0].encode(t[1], errors="replace") if t[1] != "latin-1" else t[0].encode("latin-1", "replace")
    )
    return encoded


def batches(heavy: bool = False):
    return st.lists(sources(heavy), min_size=PARALLEL_MIN_FILES, max_size=PARALLEL_MIN_FILES + 4)


def check_batch(folder: Path, files: list[bytes]) -> None:
    """Lint the files with -j 2 through the CLI: no internal error, and each file's findings are
    exactly what it gets linted alone (isolation); a file CPython compiles never gets an AL000 error."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, data in enumerate(files):
        path = folder / f"f{k:02d}.py"
        path.write_bytes(data)
        paths.append(path)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([*map(str, paths), "-j", "2", "--no-cache", "--output-format", "json"])
    assert rc in (0, 1), err.getvalue()
    assert "internal error" not in err.getvalue(), err.getvalue()
    together: dict[str, list] = {str(p): [] for p in paths}
    for d in json.loads(out.getvalue())["diagnostics"]:
        assert "internal error" not in d["message"], d
        together[next(str(p) for p in paths if os.path.samefile(p, d["file"]))].append(
            (d["code"], d["severity"], d["line"], d["column"], d["message"])
        )
    for path, data in zip(paths, files):
        alone = sorted(
            (d.code, d.severity.value, d.line, d.column, d.message) for d in analyze_bytes(data, str(path)).diagnostics
        )
        assert sorted(together[str(path)]) == alone, path
        if any(code == "AL000" and severity == "error" for code, severity, *_ in alone):
            try:
                compile(data, str(path), "exec", dont_inherit=True)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            raise AssertionError(f"{path}: AL000 error for a file CPython compiles: {alone}")
