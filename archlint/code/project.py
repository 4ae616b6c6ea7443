"""The project join: from every file's facts (summary.py), what each linted file's names mean in
the rest of the project, as a context; then the files whose context says anything are linted again
with it. Both are typed in project_facts.py.

Cheap by construction: it reads only the JSON summaries (extracted in the workers and cached by
content hash), resolves imports by looking for files on disk (never importing anything), and a
file's context-dependent findings are cached under its content and its context together. Touching
one file re-extracts that file alone; the files whose context it changes are re-linted.

Imports are resolved like Python would from the project's roots: relative imports from the file's
package; absolute ones from the file's folder, the folder above its package, the configuration
root and its `src/`, and the folders named on the command line; the folders a file adds to
`sys.path` itself (syspath.py) are tried for its imports where Python would try them (`insert(0, ...)`
before its folder, the others after it and before the guessed roots). Modules found that way but not
linted (`archlint train.py` alone) are read for their facts only: their findings are not reported.
"""

from __future__ import annotations

import ast
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from archlint.code.cache import ProjectStore, from_record
from archlint.code.project_facts import (
    LIBRARIES,
    FileFacts,
    FunctionFacts,
    ImportFact,
    NameFacts,
    NameLoader,
    PerStep,
    PinRef,
    ProjectContext,
    Step,
)
from archlint.code.syspath import added_paths
from archlint.code.workers import lint_many
from archlint.config import Settings
from archlint.diagnostics import Diagnostic

MAX_EXTRA_FILES = 400  # modules read only for their facts, per run
MAX_DEPTH = 6  # re-exports followed per name


def _installed(folder: str) -> bool:
    name = os.path.basename(folder)
    return name in ("site-packages", "dist-packages") or folder.startswith(sys.prefix + os.sep + "lib")


class Resolved(NamedTuple):
    """What a name means in the project: a def, a class, a module-level CUDA device, or a module."""

    file: str  # absolute path of the module that defines it
    qualname: str  # in that module ("" for a module)
    kind: str  # "def" | "class" | "cuda" | "module"


class JoinFailed(Exception):
    """The project join failed (on facts read from the cache, or a bug); each file keeps its own
    findings. The message names the error."""


class Index:
    """Summaries by absolute path, import resolution, and name resolution across modules."""

    def __init__(self, summaries: dict[str, FileFacts | None], roots: list[Path], store: ProjectStore) -> None:
        self.summaries = summaries
        self.roots = roots
        self.store = store
        self.extra = 0
        self._modules: dict[tuple, str | None] = {}
        self._resolved: dict[tuple[str, str], Resolved | None] = {}
        self._light: set[str] = set()
        self.extracted: list[str] = []  # modules read for their facts only

    # files ----------------------------------------------------------------------------------------
    def summary(self, path: str) -> FileFacts | None:
        if path in self.summaries:
            found = self.summaries[path]
            if found is None and path not in self._light:
                self._light.add(path)  # no torch in it: its imports may still lead to modules that have
                found = self.summaries[path] = self._light_summary(path)
            return found
        if self.extra >= MAX_EXTRA_FILES:
            return None
        self.extra += 1
        summary = None
        try:
            data = Path(path).read_bytes()
        except OSError:
            data = None
        if data is not None:
            key = self.store.key(data)
            summary = self.store.summary(key)
            if summary is None and key not in self.store.facts:
                from archlint.code.engine import analyze_bytes

                summary = analyze_bytes(data, path, summarize=True).summary
                self.store.put_summary(key, summary)
                self.extracted.append(path)
        self.summaries[path] = FileFacts.from_json(summary)
        return self.summary(path)

    def _light_summary(self, path: str) -> FileFacts | None:
        from archlint.code.source import SourceError, decode

        try:
            text, _, _ = decode(Path(path).read_bytes())
        except (OSError, SourceError):
            return None
        return light(text) if "import" in text else None

    def _bases(self, folder: str) -> list[str]:
        bases = [folder]
        up = folder
        while os.path.isfile(os.path.join(up, "__init__.py")):  # the folder above the package
            up = os.path.dirname(up)
            bases.append(up)
        # the folders above, nearest first, with their src/ (a src-layout project inside a larger
        # tree), up to the project's roots (or three levels for a file outside them)
        roots = [str(r) for r in self.roots]  # a list: tried in the order given, never in hash order
        up, climb = folder, 0
        while climb < 8:
            parent = os.path.dirname(up)
            if parent == up or (climb >= 3 and not any(up.startswith(r + os.sep) or up == r for r in roots)):
                break
            bases += [os.path.join(up, "src"), parent] if climb else [os.path.join(up, "src")]
            if up in roots:
                break
            up, climb = parent, climb + 1
        # installed packages are libraries, not the project: never resolved into
        seen, out = set(), []
        for b in [*bases, *roots]:
            if b not in seen and not _installed(b):
                seen.add(b)
                out.append(b)
        return out

    def _added(self, importer: str) -> tuple[tuple[str, str], ...]:
        """The folders `importer` adds to sys.path (syspath.py), made absolute: (where, folder)."""
        summary = self.summaries.get(importer)  # its own facts, read already (it is the one importing)
        if not summary or not summary.sys_path:
            return ()
        folder = os.path.dirname(importer)
        return tuple(
            (entry.where, os.path.normpath(os.path.join(folder, *entry.folder.split("/"))))
            for entry in summary.sys_path
        )

    def module_path(self, importer: str, module: str, level: int) -> str | None:
        folder = os.path.dirname(importer)
        added = () if level else self._added(importer)
        key = (folder, module, level, added)
        if key in self._modules:
            return self._modules[key]
        parts = module.split(".") if module else []
        if not level and parts and parts[0] in LIBRARIES:
            self._modules[key] = None
            return None
        if level:
            base = folder
            for _ in range(level - 1):
                base = os.path.dirname(base)
            bases = [base]
        else:
            bases = self._bases(folder)
            if added:
                # as Python searches them: `insert(0, ...)` before the script's folder; the others after
                # it (and its packages' parents), and before the roots guessed for a src layout or a
                # PYTHONPATH, which a script that sets its own path evidently does not rely on
                own = 1
                while own < len(bases) and os.path.isfile(os.path.join(bases[own - 1], "__init__.py")):
                    own += 1
                bases = (
                    [p for w, p in added if w == "front"]
                    + bases[:own]
                    + [p for w, p in added if w != "front"]
                    + bases[own:]
                )
                bases = [b for i, b in enumerate(bases) if b not in bases[:i] and not _installed(b)]
        found = None
        for base in bases:
            target = os.path.join(base, *parts)
            # Python's order within one folder: a package (`data/__init__.py`) before a module
            # of the same name (`data.py`)
            if os.path.isfile(os.path.join(target, "__init__.py")):
                found = os.path.join(target, "__init__.py")
                break
            if parts and os.path.isfile(target + ".py"):
                found = target + ".py"
                break
        self._modules[key] = found
        return found

    # names ----------------------------------------------------------------------------------------
    def resolve(self, path: str, name: str, depth: int = 0) -> Resolved | None:
        """What `name` means in `path`."""
        if depth:
            return self._resolve(path, name, depth)
        key = (path, name)  # the join asks the same names several times (calls, steps, loaders)
        if key not in self._resolved:
            self._resolved[key] = self._resolve(path, name, 0)
        return self._resolved[key]

    def _resolve(self, path: str, name: str, depth: int) -> Resolved | None:
        summary = self.summary(path)
        if not summary or depth > MAX_DEPTH:
            return None
        if name in summary.self_calls:
            return Resolved(path, summary.self_calls[name], "def")
        head = name.split(".")[0]
        if name in summary.defs:
            return Resolved(path, name, "def")
        if head in summary.classes:
            return Resolved(path, head, "class")
        if head in summary.cuda_names and name == head:
            return Resolved(path, head, "cuda")
        best: ImportFact | None = None
        for entry in summary.imports:
            if entry.name != "*" and (name == entry.local or name.startswith(entry.local + ".")):
                if best is None or len(entry.local) > len(best.local):
                    best = entry
        if best is not None:
            local, module, imported, level = best
            rest = name[len(local) + 1 :]
            if imported is None:
                target = self.module_path(path, module, level)
                if target is None:
                    return None
                return Resolved(target, "", "module") if not rest else self.resolve(target, rest, depth + 1)
            base = self.module_path(path, module, level)
            if base is not None:
                found = self.resolve(base, f"{imported}.{rest}" if rest else imported, depth + 1)
                if found is not None:
                    return found
            sub = self.module_path(path, f"{module}.{imported}" if module else imported, level)
            if sub is not None:
                return Resolved(sub, "", "module") if not rest else self.resolve(sub, rest, depth + 1)
            return None
        for _local, module, imported, level in summary.imports:
            if imported == "*":
                base = self.module_path(path, module, level)
                if base is not None and base != path:
                    found = self.resolve(base, name, depth + 1)
                    if found is not None:
                        return found
        return None

    def project_modules(self, path: str, depth: int) -> list[str]:
        """Project modules `path` imports, directly and (up to `depth`) through them."""
        seen, frontier = {path}, [path]
        for _ in range(depth):
            nxt = []
            for p in frontier:
                summary = self.summary(p)
                if not summary:
                    continue
                for _local, module, imported, level in summary.imports:
                    targets = [self.module_path(p, module, level)]
                    if imported not in (None, "*"):
                        targets.append(self.module_path(p, f"{module}.{imported}" if module else imported, level))
                    for t in targets:
                        if t is not None and t not in seen and len(seen) < 60:
                            seen.add(t)
                            nxt.append(t)
            frontier = nxt
        seen.discard(path)
        return sorted(seen)


def light(text: str) -> FileFacts | None:
    """The imports and names of a file that never mentions torch (a package's `__init__.py` that
    re-exports its models), read with the standard parser when the join needs them. Not cached: such
    files are small and only read when an import leads to them."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # MemoryError: CPython's nesting limit
        return None
    imports: list[ImportFact] = []
    defs: dict[str, FunctionFacts] = {}
    classes: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    imports.append(ImportFact(alias.asname, alias.name, None, 0))
                else:
                    top = alias.name.split(".")[0]
                    imports.append(ImportFact(top, top, None, 0))
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                local = "*" if alias.name == "*" else alias.asname or alias.name
                imports.append(ImportFact(local, node.module or "", alias.name, node.level))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs[node.name] = {"params": [a.arg for a in node.args.posonlyargs + node.args.args]}
        elif isinstance(node, ast.ClassDef):
            classes.append(node.name)
    return FileFacts(light=True, imports=imports, defs=defs, classes=classes, sys_path=added_paths(tree))


def _def(index: Index, found: Resolved | None) -> FunctionFacts | None:
    if found is None or found.kind != "def":
        return None
    summary = index.summary(found.file)
    return summary.defs.get(found.qualname) if summary else None


def _is_method_call(callee: str, qualname: str, params: list[str]) -> bool:
    return bool(params) and params[0] in ("self", "cls") and "." in qualname and "." in callee


def _parameter(callee: str, qualname: str, params: list[str], arg: int | str) -> str | None:
    """The parameter a call's argument binds: a keyword as it is, a position counted past `self` for
    a method call; None for a position past the last parameter."""
    if not isinstance(arg, int):
        return arg
    arg += 1 if _is_method_call(callee, qualname, params) else 0
    return params[arg] if arg < len(params) else None


def _name_info(index: Index, path: str, name: str, display: Callable[[str], str]) -> NameFacts:
    found = index.resolve(path, name)
    if found is None:
        return {}
    if found.kind == "cuda":
        return {"cuda": 1}
    if found.kind == "class":
        home = index.summary(found.file)
        if home and found.qualname in home.prefetchers:
            return {"yields": 0}  # a CUDA-stream prefetcher built on a loader: `data_prefetcher(train_loader)`
        if home and found.qualname in home.loader_classes:
            return {"dataloader": 1}  # `AudioDataLoader(dataset, ...)`: a DataLoader subclass
    info = _def(index, found)
    if not info:
        return {}
    out: NameFacts = {}
    if (
        "loader" in info and found.file != path
    ):  # this file's own loaders are read from its text (and --fix changes them)
        loader = info["loader"]
        out["loader"] = NameLoader(loader.pin, loader.workers, f"{display(found.file)}:{loader.line}")
    if "yields" in info:
        shift = 1 if _is_method_call(name, found.qualname, info["params"]) else 0
        if info["yields"] - shift >= 0:
            out["yields"] = info["yields"] - shift
    for flag in ("batch", "backward", "step", "cuda", "plain"):
        if flag in info:
            out[flag] = 1
    if "backward" in info and index.summary(found.file).amp:
        out["amp"] = 1
    return out


def _passed_classes(index: Index) -> dict[tuple, set]:
    """(file, function qualname, parameter) → {(file of the call, project class)}: the objects of a
    project class the project's calls pass for that parameter (`log_writer=log_writer`)."""
    out: dict[tuple, set] = {}
    for caller, summary in list(index.summaries.items()):
        for passed in summary.arg_classes if summary else ():
            found = index.resolve(caller, passed.callee)
            info = _def(index, found)
            if not info:
                continue
            param = _parameter(passed.callee, found.qualname, info["params"], passed.arg)
            if param is not None:
                out.setdefault((found.file, found.qualname, param), set()).add((caller, passed.cls))
    return out


@dataclass
class Join:
    """The project join's state while it works out the contexts: the index, every linted file's
    context so far (by absolute path), and how a path is shown in a context's messages."""

    index: Index
    contexts: dict[str, ProjectContext]  # every linted file's, empty ones included
    display: Callable[[str], str]

    def linted(self, path: str) -> bool:
        return path in self.contexts


def _per_step(join: Join, caller: str, callee: str, line: int, args: list, found: Resolved | None) -> None:
    """Record that `found` (a project function) runs once per training step, called from caller:line."""
    info = _def(join.index, found)
    if not info or not join.linted(found.file) or not (info.get("sync") or info.get("backward") or info.get("calls")):
        return
    params = info["params"]
    shift = 1 if _is_method_call(callee, found.qualname, params) else 0
    tensors = []
    for a in args:
        if a == "**" or (isinstance(a, str) and a not in params):
            a = info.get("kwargs")  # a dict of tensors, or keywords gathered by **kwargs
        elif isinstance(a, int):
            a = params[a + shift] if a + shift < len(params) else None
        if a and a not in tensors:
            tensors.append(a)
    per_step = join.contexts[found.file].per_step
    site = f"{join.display(caller)}:{line}"
    entry = per_step.setdefault(found.qualname, PerStep([], site))
    if tensors and not entry.tensors:
        entry = per_step[found.qualname] = entry._replace(site=site)  # name a call site that passes tensors
    entry.tensors.extend([t for t in tensors if t not in entry.tensors])


def _nested_steps(join: Join, depth: int = 2) -> None:
    """A function run once per step runs its own unconditional project calls once per step too
    (detectron2's run_step → self._write_metrics(loss_dict)): followed `depth` calls further."""
    index, out = join.index, join.contexts
    frontier = [(path, qual) for path in sorted(out) for qual in out[path].per_step]  # sorted: never hash order
    for _ in range(depth):
        reached = []
        for path, qual in frontier:
            summary = index.summary(path)
            info = summary.defs.get(qual) if summary else None
            if not info or "calls" not in info:
                continue
            tensors = set(out[path].per_step[qual].tensors)
            for call in info["calls"]:
                args = [key for key, spec in call.specs if spec == "*" or tensors & set(spec)]
                found = Resolved(path, call.local, "def") if call.local else index.resolve(path, call.callee)
                if found is None or not join.linted(found.file):
                    continue
                before = out[found.file].per_step.get(found.qualname)
                before_tensors = list(before.tensors) if before else None
                _per_step(join, path, call.callee, call.line, args, found)
                after = out[found.file].per_step.get(found.qualname)
                if after and (before_tensors is None or before_tensors != after.tensors):
                    reached.append((found.file, found.qualname))
        frontier = reached


def _on_param_targets(index: Index, caller: str, callee: str, on_param, passed: dict) -> list[Resolved | None]:
    """The methods a call on a parameter's object may run: `callee`'s method of each project class
    the project's calls pass for that parameter (`model(x)`: its forward)."""
    method = callee.split(".", 1)[1] if "." in callee else "forward"
    key = (caller, on_param.function, on_param.param)
    return [index.resolve(where, f"{cls}.{method}") for where, cls in sorted(passed.get(key, ()))]


def _batches(join: Join, passed: dict) -> None:
    """Functions handed a loop's batch (`x, y = model.parse_batch(batch)`), with the pin of the loader
    it comes from (after `pinned` is known: a loader parameter takes its callers' pin)."""
    index, out = join.index, join.contexts
    for caller, summary in list(index.summaries.items()):
        for handed in summary.batch_args if summary else ():
            pin = handed.pin
            if isinstance(pin, PinRef):  # kind "param": what the callers pass
                pinned = out[caller].pinned if caller in out else {}
                pin = pinned.get(pin.name, {}).get(pin.param, "unknown")
            if handed.on_param:
                targets = _on_param_targets(index, caller, handed.callee, handed.on_param, passed)
            else:
                targets = [
                    Resolved(caller, handed.local, "def") if handed.local else index.resolve(caller, handed.callee)
                ]
            for found in targets:
                info = _def(index, found)
                if not info or not join.linted(found.file):
                    continue
                params, name = info["params"], handed.arg
                if isinstance(name, int):
                    name += 1 if params and params[0] in ("self", "cls") and "." in found.qualname else 0
                    if name >= len(params):
                        continue
                    name = params[name]
                batches = out[found.file].batches.setdefault(found.qualname, {})
                before = batches.get(name, pin)
                # one caller handing it pinned batches is enough: non_blocking costs nothing on the others
                batches[name] = "true" if "true" in (pin, before) else pin if before == pin else "unknown"


def _any_module(index: Index, modules: list[str], fact: Callable[[FileFacts], bool]) -> bool:
    """Does `fact(facts)` hold for the facts of any of these modules?"""
    return any((s := index.summary(m)) and fact(s) for m in modules)


def _called_names(join: Join, path: str, summary: FileFacts) -> None:
    """What the names a file calls are elsewhere (`names`), and whether a CUDA device is among them."""
    index, ctx = join.index, join.contexts[path]
    names: dict[str, NameFacts] = {}
    for name in summary.uses:
        info = _name_info(index, path, name, join.display)
        if info:
            names[name] = info
    for name, typed in summary.aliases.items():  # `logger.log_every` of a project class
        if typed in names:
            names[name] = names[typed]
    for imported in summary.imports:
        if imported.name not in (None, "*"):
            found = index.resolve(path, imported.local)
            if found is not None and found.kind == "cuda":
                ctx.cuda = True
    if names:
        ctx.names = names
        if any(i.get("cuda") for i in names.values()):
            ctx.cuda = True


def _uses_conv(index: Index, path: str, modules: list[str]) -> bool:
    """Do the entry point's project modules build convolutions the program uses: at module level, or
    in a def or class that one of them (or the entry point) calls? A package re-exporting another
    model's Conv1d class does not give the model the loop trains a convolution (issue 44)."""
    wanted: dict[str, set[str]] = {}
    for module in modules:
        s = index.summary(module)
        if s and s.conv and module != path:
            if "<module>" in s.conv_defs or not s.conv_defs:
                return True
            wanted[module] = set(s.conv_defs)
    if not wanted:
        return False
    for module in sorted({path, *modules}):
        s = index.summary(module)
        if s and s.light and (s.classes or s.defs):
            # read without its calls (no torch in its text: `class UNet(nn.Module)` over `from .unet_parts
            # import *`): its defs may build whatever it imports. A re-exporting __init__ defines nothing.
            for imported in s.imports:
                target = index.module_path(module, imported.module, imported.level)
                if target in wanted and (imported.name == "*" or imported.name in wanted[target]):
                    return True
        for name in s.uses if s else ():
            found = index.resolve(module, name)
            # a conv module's own uses are in its conv_defs already (module-level ones as "<module>")
            if found and found.file != module and found.qualname.split(".")[0] in wanted.get(found.file, ()):
                return True
    return False


def _entry_point_choices(index: Index, path: str, summary: FileFacts, ctx: ProjectContext) -> None:
    """What an entry point's project modules choose for it: the device, a precision, convolutions,
    varying input sizes, a training loop run from its __main__ block, and cuDNN's mode."""
    if (summary.entry or summary.main) and not summary.cuda:
        # the device is chosen where the objects it trains are built (`create_model(opt)` → a model
        # class that moves itself to `cuda:0`): a module it calls, or one that module calls
        for name in summary.uses:
            found = index.resolve(path, name)
            if found is None or found.file == path:
                continue
            callee = index.summary(found.file)
            if (callee and callee.cuda) or _any_module(index, index.project_modules(found.file, 1), lambda s: s.cuda):
                ctx.cuda = True
                break
    if summary.entry and _any_module(index, index.project_modules(path, 3), lambda s: s.amp):
        ctx.amp = True  # a project module chooses a precision: training through its objects may use it
    if (summary.entry or summary.main) and not summary.cudnn:
        modules = index.project_modules(path, 3)
        if _uses_conv(index, path, modules):
            ctx.conv = True
        if _any_module(index, modules, lambda s: s.varying):
            ctx.varying = True  # CTC loss: speech batches, input sizes change per batch
        if not summary.entry and _any_module(index, modules, lambda s: s.trains):
            ctx.trains = True  # the __main__ block runs a training loop written in another module
        direct = modules  # a choice made where the model is built counts (CycleGAN's BaseModel)
        called = [found for n in summary.uses if (found := index.resolve(path, n)) and found.file != path]
        if _any_module(index, direct, lambda s: s.cudnn) or any(
            (_def(index, found) or {}).get("cudnn") for found in called
        ):
            ctx.cudnn = True


def _cuda_callees(join: Join) -> None:
    """A module runs on the GPU when it names one, or when a module that does calls into it (the
    device arrives as a parameter): main.py → engine.train_one_epoch → misc.MetricLogger.update.
    Followed four calls deep; a loader factory called from such a module feeds CUDA (`feeds_cuda`)."""
    index, out = join.index, join.contexts
    cuda = {p for p, s in index.summaries.items() if s and (s.cuda or (p in out and out[p].cuda))}
    frontier = sorted(cuda)
    for _ in range(4):
        reached = []
        for caller in frontier:
            for name in index.summaries[caller].uses:
                found = index.resolve(caller, name)
                if found is None or found.file == caller or found.kind not in ("def", "class"):
                    continue
                if join.linted(found.file):
                    ctx = out[found.file]
                    loader = (_def(index, found) or {}).get("loader")
                    if loader:
                        for holder in (found.qualname, loader.holder):  # the factory, and where its DataLoader is built
                            if holder not in ctx.feeds_cuda:
                                ctx.feeds_cuda.append(holder)
                    callee = index.summaries[found.file]
                    if not (callee and callee.cuda):
                        ctx.cuda = True  # the devices it is given are CUDA ones
                if found.file not in cuda and index.summaries.get(found.file):
                    cuda.add(found.file)
                    reached.append(found.file)
        frontier = reached


def _is_step(index: Index, caller: str, step: Step) -> bool:
    """Is the function a loop's call runs a project step (one backward per call)?"""
    found = Resolved(caller, step.local, "def") if step.local else index.resolve(caller, step.callee)
    return bool((_def(index, found) or {}).get("step"))


def _training_steps(join: Join, caller: str, summary: FileFacts, passed: dict) -> None:
    """The project functions a file's training loops call once per step (`per_step` of their files),
    including the calls of loops that train only through such a function (`agent.learn(batch)`)."""
    index = join.index
    groups: dict[int, list[Step]] = {}
    for entry in summary.maybe_steps:
        groups.setdefault(entry.loop, []).append(entry.step)
    steps = list(summary.steps)
    learners = set()
    for entry in summary.rate_steps:  # `if T % 4 == 0: agent.learn()`: each call is a step of the learner
        if entry.step.on_param is None and _is_step(index, caller, entry.step):
            steps.append(entry.step)
            learners.add(entry.loop)
    for n, entries in groups.items():  # a loop that trains through a project step (`agent.learn(batch)`)
        if n in learners or any(_is_step(index, caller, e) for e in entries if e.on_param is None):
            steps += entries
    for step in steps:
        if step.on_param:  # `log_writer.update(...)` on a parameter: the classes the project passes for it
            targets = _on_param_targets(index, caller, step.callee, step.on_param, passed)
        else:
            targets = [Resolved(caller, step.local, "def") if step.local else index.resolve(caller, step.callee)]
        for found in targets:
            _per_step(join, caller, step.callee, step.line, step.args, found)


def _loaders_passed(join: Join) -> None:
    """The pin of the loaders each function's parameters receive from other files' callers
    (`pinned`; a file's own calls are followed by its checks, which see them fresh while --fix edits
    the file). A caller passes a loader, a factory's, or a parameter of its own (a wrapper passing
    it on, fed by its callers in any file): followed to a fixed point, as deep as MAX_DEPTH wrappers."""
    index, out = join.index, join.contexts
    passes = []  # (caller, callee's (file, qualname), parameter, pin): resolved once, not once per round
    for caller, summary in list(index.summaries.items()):
        for handed in summary.loader_args if summary else ():
            pin = handed.pin
            if isinstance(pin, PinRef) and pin.kind == "from":  # a loader a project factory built
                loader = (_def(index, index.resolve(caller, pin.name)) or {}).get("loader")
                pin = loader.pin if loader else None
                if pin is None:
                    continue
            found = index.resolve(caller, handed.callee)
            info = _def(index, found)
            param = _parameter(handed.callee, found.qualname, info["params"], handed.arg) if info else None
            if param is not None:
                passes.append((caller, (found.file, found.qualname), param, pin))
    received: dict[tuple[str, str], dict[str, str]] = {}  # every caller's, for the wrappers passing them on
    for _ in range(MAX_DEPTH + 1):
        changed = False
        for caller, (home, qualname), param, pin in passes:
            if isinstance(pin, PinRef):  # kind "param": what this wrapper's own callers pass
                pin = received.get((caller, pin.name), {}).get(pin.param)
                if pin is None:
                    continue
            changed |= _merge(received.setdefault((home, qualname), {}), param, pin)
            if home != caller and join.linted(home):
                _merge(out[home].pinned.setdefault(qualname, {}), param, pin)
        if not changed:
            break


def _merge(pins: dict[str, str], param: str, pin: str) -> bool:
    """The callers' pins agree, or it is "unknown". True when it changed."""
    merged = pin if pins.get(param, pin) == pin else "unknown"
    changed = pins.get(param) != merged
    pins[param] = merged
    return changed


def contexts(linted: list[str], index: Index, display: Callable[[str], str]) -> dict[str, ProjectContext]:
    """Context of every linted file (absolute paths), only the non-empty ones."""
    join = Join(index, {p: ProjectContext() for p in linted}, display)
    for path in linted:  # what each file calls
        summary = index.summary(path)
        if summary:
            _called_names(join, path, summary)
            _entry_point_choices(index, path, summary, join.contexts[path])
    _cuda_callees(join)  # what the other files do with this file's functions
    passed = _passed_classes(index)
    for caller, summary in list(index.summaries.items()):
        if summary:
            _training_steps(join, caller, summary, passed)
    _loaders_passed(join)
    _batches(join, passed)
    _nested_steps(join)
    return {p: c for p, c in join.contexts.items() if c}


def roots(settings: Settings, paths: list[Path]) -> list[Path]:
    found = [settings.root, settings.root / "src"]
    for p in paths:
        folder = p if _is_dir(p) else p.parent
        found += [folder.resolve(), folder.resolve() / "src"]
    unique = []
    for r in found:
        r = Path(os.path.abspath(r))
        if r not in unique and _is_dir(r):
            unique.append(r)
    return unique


def _is_dir(path: Path) -> bool:
    """Path.is_dir that treats an unreadable path as not a folder (discovery reports it)."""
    try:
        return path.is_dir()
    except OSError:
        return False


_DRIVER = ProjectContext(driver=True)  # the context that makes a torch-free file be read in full (engine.analyze_bytes)


@dataclass
class FirstPass:
    """What the join starts from: every file's own lint, by index in `files`."""

    files: list[Path]
    keys: list[str | None]  # content keys (cache.ProjectStore.key); None: not joined (unread, a notebook)
    results: dict[int, list[Diagnostic]]  # each file's own findings
    summaries: dict[int, dict | None]  # FileFacts as JSON; None: never parsed (no torch in it)


def _drivers(first: FirstPass, absolute: list[str], index: Index, store: ProjectStore) -> None:
    """Files that never mention torch but run project code that does (CycleGAN's train.py: only
    `from models import create_model`): read in full, so their loops can be linted in context."""
    from archlint.code.engine import analyze_bytes

    for i, path in enumerate(absolute):
        if first.summaries.get(i) is not None or first.keys[i] is None:
            continue
        light = index.summary(path)
        if not light or not _any_module(index, index.project_modules(path, 1), lambda s: not s.light):
            continue
        key = store.key(first.keys[i].encode(), "driver")
        summary = store.summary(key)
        if summary is None and key not in store.facts:
            try:
                data = first.files[i].read_bytes()
            except OSError:
                continue
            summary = analyze_bytes(data, str(first.files[i]), _DRIVER, summarize=True).summary
            store.put_summary(key, summary)
        if summary:
            first.summaries[i] = summary
            index.summaries[path] = FileFacts.from_json(summary)


def _work(item: tuple[str, bytes, ProjectContext]) -> list[Diagnostic]:
    from archlint.code.engine import analyze_bytes

    path, data, context = item
    return analyze_bytes(data, path, context).diagnostics


@dataclass
class Refined:
    """The project join's answer: every file's findings (by index in the files), the non-empty
    contexts (by absolute path; --fix re-lints each file with its own), how many files were linted
    again in context, how many modules were read for their facts only, and the files whose findings
    are those in context (by index)."""

    results: dict[int, list[Diagnostic]]
    contexts: dict[str, ProjectContext] = field(default_factory=dict)
    relinted: int = 0
    extracted_extra: int = 0
    in_context: set[int] = field(default_factory=set)


def refine(
    first: FirstPass, settings: Settings, store: ProjectStore, jobs: int, paths: list[Path] | None = None
) -> Refined:
    """Replace the findings of files whose project context is not empty by findings with it
    (`first.summaries` gains the facts of the torch-free files that drive project code)."""
    files, keys, results = first.files, first.keys, dict(first.results)
    absolute = [os.path.abspath(f) for f in files]
    root = os.path.abspath(settings.root)

    def display(path: str) -> str:
        rel = os.path.relpath(path, root)
        return path if rel.startswith("..") else rel

    try:
        index = Index(
            {a: FileFacts.from_json(first.summaries.get(i)) for i, a in enumerate(absolute)},
            roots(settings, paths or files),
            store,
        )
        _drivers(first, absolute, index, store)
        linted = [a for i, a in enumerate(absolute) if first.summaries.get(i) and keys[i] is not None]
        ctxs = contexts(linted, index, display)
    except (RecursionError, Exception) as exc:  # a bug in the join must not cost the files' own findings
        raise JoinFailed(f"{type(exc).__name__}: {exc}") from exc
    position = {a: i for i, a in enumerate(absolute)}
    todo = []
    in_context = set()
    for path, context in ctxs.items():
        i = position[path]
        key = store.key(keys[i].encode(), json.dumps(context.to_json(), sort_keys=True))
        hit = store.lint.get(key)
        if hit is not None:
            try:
                results[i] = [from_record(r, str(files[i])) for r in hit]
                store.used.add(key)
                in_context.add(i)
                continue
            except (ValueError, KeyError, TypeError) as exc:
                print(
                    f"archlint: warning: malformed cache entry for {files[i]} ({exc!r}); linting it again",
                    file=sys.stderr,
                )
        try:
            data = files[i].read_bytes()
        except OSError:
            continue  # keep the file's own findings; it was readable a moment ago
        todo.append((i, key, (str(files[i]), data, context)))
    if todo:
        fresh = lint_many([item for _, _, item in todo], jobs, _work, lambda dead: [dead])
        for (i, key, _), diagnostics in zip(todo, fresh):
            results[i] = diagnostics
            store.put_findings(key, diagnostics)
            in_context.add(i)
    return Refined(results, ctxs, len(todo), len(index.extracted), in_context)
