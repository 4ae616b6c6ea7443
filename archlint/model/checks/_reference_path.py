"""Modules whose forward, captured on a CPU, ran the Python reference path of a custom GPU kernel.

GAN and vocoder repositories ship their own CUDA kernels (StyleGAN2's fused bias + leaky ReLU
and upfirdn2d FIR filter, BigVGAN's fused anti-aliased activation) with a pure-PyTorch path the
code takes off the GPU: `if input.device.type == "cpu": <reference> else: Fn.apply(...)`,
`impl = 'cuda' if x.is_cuda else 'ref'`, `if self.use_cuda_kernel: ...`. archlint captures on the
CPU, so the element-wise chain it sees is the reference path; on the GPU one fused kernel runs
instead. Recognised from the source: a module's forward (or a function it calls, in its file or
one it imports from) branching on the device or a cuda switch, with a custom kernel call on the
other side (an autograd Function's `.apply`, or a compiled extension's function).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_DEVICE_WORDS = ("is_cuda", "device", "cuda", "impl")


@dataclass(frozen=True)
class ReferencePath:
    function: str  # the function (or forward) that branches
    file: str
    line: int
    test: str  # the branch's condition, as written


@lru_cache(maxsize=64)
def _parse(file: str) -> ast.Module | None:
    try:
        return ast.parse(Path(file).read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None


def _kernel_call(nodes: list[ast.stmt]) -> bool:
    """A custom kernel call in these statements: `X.apply(...)` (an autograd Function), or a
    call on a name bound to a compiled extension (`fused.fused_bias_act(...)`, `_C.op(...)`)."""
    for node in (n for stmt in nodes for n in ast.walk(stmt)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "apply":
                return True
            base = node.func.value
            if isinstance(base, ast.Name) and base.id in ("fused", "_C", "_plugin", "upfirdn2d_op", "cuda_kernel"):
                return True
            if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id.startswith("_init"):
                return True  # stylegan2-ada: `_plugin` reached through an _init() helper
    return False


def _branch(fn: ast.AST) -> ast.If | None:
    """An `if` (or conditional expression) in the function testing the device or a cuda switch,
    with a custom kernel call in the function (on its other side, or after it: `if cpu: return ref(...)`
    then `return Fn.apply(...)`)."""
    if not _kernel_call(getattr(fn, "body", [])):
        return None
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and any(w in ast.unparse(node.test) for w in _DEVICE_WORDS):
            return node
    return None


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def _imported(tree: ast.Module, file: str) -> dict[str, str]:
    """Names a file imports from its own package (relative imports): name → file."""
    out = {}
    here = Path(file).parent
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level and node.module:
            base = here
            for _ in range(node.level - 1):
                base = base.parent
            target = base.joinpath(*node.module.split("."))
            source = target.with_suffix(".py") if target.with_suffix(".py").is_file() else target / "__init__.py"
            for alias in node.names:
                out[alias.asname or alias.name] = str(source)
    return out


@lru_cache(maxsize=256)
def reference_path(file: str, cls: str) -> ReferencePath | None:
    """The reference path a module class's forward runs off the GPU, when it has one."""
    tree = _parse(file)
    if tree is None:
        return None
    klass = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls), None)
    forward = next(
        (n for n in (klass.body if klass else []) if isinstance(n, ast.FunctionDef) and n.name == "forward"), None
    )
    if forward is None:
        return None
    own = _branch(forward)
    if own is not None:
        return ReferencePath(f"{cls}.forward", file, own.lineno, ast.unparse(own.test))
    local, imported = _functions(tree), _imported(tree, file)
    called = [n.func.id for n in ast.walk(forward) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    for name in dict.fromkeys(called):
        where, fn = file, local.get(name)
        if fn is None and name in imported:
            other = _parse(imported[name])
            where, fn = imported[name], _functions(other).get(name) if other else None
        branch = _branch(fn) if fn is not None else None
        if branch is not None:
            return ReferencePath(name, where, branch.lineno, ast.unparse(branch.test))
    return None


@lru_cache(maxsize=256)
def cuda_switch(file: str, cls: str) -> ReferencePath | None:
    """A construction-time switch to a custom CUDA implementation in a class's __init__: an `if`
    testing a cuda flag (`if self.h.get("use_cuda_kernel", False):`) that imports the other
    implementation (BigVGAN's fused anti-aliased activation). Off, the PyTorch path is the one
    that runs, on the GPU too: the switch is the fix to name."""
    tree = _parse(file)
    if tree is None:
        return None
    klass = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls), None)
    init = next(
        (n for n in (klass.body if klass else []) if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None
    )
    for node in ast.walk(init) if init is not None else ():
        if isinstance(node, ast.If) and "cuda" in ast.unparse(node.test).lower():
            if any(isinstance(n, (ast.Import, ast.ImportFrom)) for stmt in node.body for n in ast.walk(stmt)):
                return ReferencePath(f"{cls}.__init__", file, node.lineno, ast.unparse(node.test))
    return None


def switch_modules(graph) -> dict[str, ReferencePath]:
    """Module path → the construction-time cuda switch of the class that built it (user files only)."""
    out = {}
    for path, info in (graph.graph.get("modules") or {}).items():
        file, cls = info.get("file"), info.get("type")
        if file and cls and file.endswith(".py") and "site-packages" not in file:
            found = cuda_switch(file, cls)
            if found is not None:
                out[path] = found
    return out


def reference_modules(graph) -> dict[str, ReferencePath]:
    """Module path → the reference path its forward ran in this capture (user files only)."""
    out = {}
    for path, info in (graph.graph.get("modules") or {}).items():
        file, cls = info.get("file"), info.get("type")
        if file and cls and file.endswith(".py") and "site-packages" not in file:
            found = reference_path(file, cls)
            if found is not None:
                out[path] = found
    return out


# Words of an `if` that picks the attention implementation (transformers' config._attn_implementation,
# a use_flash_attn flag, xformers, a varlen/unpadded path).
_ATTENTION_WORDS = ("attn_implementation", "attention_implementation", "flash", "xformers", "varlen", "unpad")


def _spans(node: ast.stmt | ast.expr, line: int) -> bool:
    return node.lineno <= line <= (node.end_lineno or node.lineno)


@lru_cache(maxsize=256)
def implementation_branch(file: str, line: int) -> ReferencePath | None:
    """The `if` choosing the attention implementation that the statement at `file:line` sits on one
    side of (ModernBERT-style encoders: `if config._attn_implementation == "flash_attention_2":`
    unpad and pass the window to the kernel, `else:` build the mask): the statement runs on one
    implementation only. The innermost such `if` of the function holding the line."""
    tree = _parse(file)
    if tree is None:
        return None
    fns = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and _spans(n, line)]
    if not fns:
        return None
    fn = max(fns, key=lambda n: n.lineno)  # the innermost function holding the line
    found = None
    for node in ast.walk(fn):
        if not isinstance(node, ast.If) or not any(w in ast.unparse(node.test).lower() for w in _ATTENTION_WORDS):
            continue
        sides = [node.body, node.orelse]
        if any(_spans(stmt, line) for side in sides for stmt in side) and (found is None or node.lineno > found.lineno):
            found = node
    if found is None:
        return None
    return ReferencePath(fn.name, file, found.lineno, ast.unparse(found.test))
