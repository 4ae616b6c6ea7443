"""AL303: a CUDA training/inference entry point with convolutions that never turns on
cudnn.benchmark."""

from __future__ import annotations

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.checks import Finding
from archlint.code.checks._edits import insert
from archlint.code.cudnn import chooses_algorithms, used_convolutions, varying_sizes
from archlint.code.facts import Facts, children
from archlint.code.names import dotted
from archlint.diagnostics import Applicability, Fix, Severity

CODES = ("AL303",)
SEVERITY = Severity.INFO  # as its page says (archlint.declarations checks)
PRICE = ()
FIX = "unsafe"


def _runs_loops(node: cst.CSTNode, facts: Facts, runners: set[str]) -> bool:
    """A top-level statement that is, or calls a function of this file that holds, a batch loop."""
    loops = {id(bl.loop.node) for bl in (*df.batch_loops(facts), *df.step_loops(facts))}
    if id(node) in loops:
        return True
    if isinstance(node, (cst.For, cst.While)):
        return any(
            id(loop.node) in loops or any(dotted(c.node.func) in runners for c in loop.calls)
            for loop in facts.loops
            if loop.scope is facts.module_scope and _within(loop.node, node)
        )
    body = node.body if isinstance(node, cst.SimpleStatementLine) else ()
    for small in body:
        value = getattr(small, "value", None)
        if isinstance(value, cst.Call) and dotted(value.func) in runners:
            return True
    return False


def _within(inner: cst.CSTNode, outer: cst.CSTNode) -> bool:
    return inner is outer or any(
        _within(inner, child)
        for child in children(outer)
        if isinstance(child, (cst.BaseSuite, cst.BaseStatement, cst.BaseSmallStatement))
    )


def entry_point(facts: Facts) -> cst.CSTNode | None:
    """Where the file runs as a program: its `if __name__ == "__main__":` block, or else (a tutorial or
    a notebook exported to .py) the first top-level statement that runs a batch loop, directly or
    through a function of this file."""
    if facts.main_guard is not None:
        return facts.main_guard
    loops = [*df.batch_loops(facts), *df.step_loops(facts)]
    if not loops:
        return None
    runners = {loop.loop.scope.qualname.split(".")[0] for loop in loops if loop.loop.scope.kind != "module"}
    for stmt in facts.module.body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            continue
        if _runs_loops(stmt, facts, runners):
            return stmt
    return None


def check(facts: Facts):
    if not facts.uses_cuda or chooses_algorithms(facts) or facts.project.cudnn:
        return
    if varying_sizes(facts) or facts.project.varying:  # fixed input sizes are what benchmark mode needs
        return
    if not (df.batch_loops(facts) or df.step_loops(facts) or (facts.project.trains and facts.main_guard)):
        return
    if not (used_convolutions(facts) or facts.project.conv):
        return
    entry = entry_point(facts)
    if entry is None:
        return
    yield Finding(
        "AL303",
        entry,
        "entry point runs convolutions on CUDA without torch.backends.cudnn.benchmark = True: with "
        "fixed input sizes cuDNN can pick the fastest algorithm per layer once, then reuse it",
        (lambda: _fix(facts)) if entry is facts.main_guard else None,
    )


def _fix(facts: Facts) -> Fix | None:
    torch_name = facts.imports.names.get("torch")
    nl = facts.module.default_newline
    line = f"torch.backends.cudnn.benchmark = True{nl}"
    if torch_name is None:
        if "torch" in facts.bound:
            return None  # `torch` means something else here
        line = f"import torch{nl}" + line
    elif torch_name != "torch":
        return None
    anchor = None  # the last import statement at the top level of the module
    for stmt in facts.module.body:
        if isinstance(stmt, cst.SimpleStatementLine) and any(
            isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
        ):
            anchor = stmt
    if anchor is None:
        return None
    _, end = facts.position(anchor)
    if end.line >= len(facts.lines):
        return None  # no line after it: the entry point cannot be below
    # unsafe: benchmark mode may pick other convolution algorithms from run to run, whose results
    # differ in the last bits, so a seeded run is no longer bitwise reproducible
    return Fix(
        "Insert torch.backends.cudnn.benchmark = True after the imports",
        Applicability.UNSAFE,
        (insert(end.line + 1, 1, line),),
    )
