"""One file's facts that other files can use (project_facts.FileFacts: the schema), extracted from
its CST; cached by content hash beside the file's findings, so the project join in project.py reads
only these, never the source."""

from __future__ import annotations

import ast
import builtins

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.chunks import CHUNK_CHARS
from archlint.code.cudnn import choices as cudnn_choices
from archlint.code.cudnn import chooses_algorithms, conv_defs, has_convolutions, varying_sizes
from archlint.code.facts import Binding, CallSite, Facts, Scope, children
from archlint.code.guard import call_record
from archlint.code.names import dotted
from archlint.code.project_facts import (
    LIBRARIES,
    ArgClass,
    BatchArg,
    FileFacts,
    FunctionFacts,
    ImportFact,
    InnerCall,
    LoaderArg,
    LoaderFact,
    LoopStep,
    OnParam,
    PinRef,
    Step,
)
from archlint.code.syspath import added_paths_of
from archlint.code.tensors import holds_tensor, tensor_names


def _line(facts: Facts, call: cst.Call) -> int:
    """The line a call starts on, from the standard parser's tree when its calls pair one to one with
    the file's: libcst's positions cost a code generation pass over the whole file (~15% of linting
    it), which a file with no finding never needs otherwise."""
    lines = facts.__dict__.get("_call_lines")
    if lines is None:
        lines = facts.__dict__["_call_lines"] = _call_lines(facts)
    found = lines.get(id(call))
    return found if found is not None else facts.position(call).start.line


def _call_lines(facts: Facts) -> dict[int, int]:
    """id(libcst Call) → its line, pairing the file's calls (in source order) with the standard
    parser's; {} (positions are resolved instead) when the two do not pair call for call, or for a
    file larger than two parser chunks, whose standard tree (~130 MB per MB of source) would raise the
    memory peak that chunked parsing bounds (test_code_large_files); up to there it costs less than
    one chunk's parse, and nothing when the precheck's parse recorded the calls (facts.ast_calls)."""
    if len(facts.source) > 2 * CHUNK_CHARS:
        return {}
    records = facts.ast_calls
    if records is None:
        try:
            tree = ast.parse(facts.source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return {}
        records = [call_record(n) for n in ast.walk(tree) if isinstance(n, ast.Call)]
    calls = sorted(records, key=lambda r: r[:4])
    if len(calls) != len(facts.calls):
        return {}
    out = {}
    for site, (line, _, _, _, name, attr) in zip(facts.calls, calls):
        mine = site.node.func
        if (
            isinstance(mine, cst.Name) != (name is not None)
            or (isinstance(mine, cst.Name) and mine.value != name)
            or (isinstance(mine, cst.Attribute) != (attr is not None))
            or (isinstance(mine, cst.Attribute) and mine.attr.value != attr)
        ):
            return {}  # not the same call: the trees do not pair
        out[id(site.node)] = line
    return out


_PRECISION = {"autocast", "GradScaler", "bfloat16", "float16", "half"}
_SYNC_METHODS = {"item", "cpu", "numpy", "tolist"}


def _imports(facts: Facts) -> list[ImportFact]:
    out = []
    for node in facts.import_nodes:
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = dotted(alias.name)
                if full is None:
                    continue
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    out.append(ImportFact(alias.asname.name.value, full, None, 0))
                else:
                    top = full.split(".")[0]
                    out.append(ImportFact(top, top, None, 0))
                    if "." in full:  # `import a.b` makes a.b reachable as an attribute of a
                        out.append(ImportFact(full, full, None, 0))
            continue
        level = len(node.relative)
        module = dotted(node.module) if node.module is not None else ""
        if module is None:
            continue
        if isinstance(node.names, cst.ImportStar):
            out.append(ImportFact("*", module, "*", level))
            continue
        for alias in node.names:
            if not isinstance(alias.name, cst.Name):
                continue
            local = alias.name.value
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            out.append(ImportFact(local, module, alias.name.value, level))
    return out


def _pin_state(facts: Facts, site: CallSite) -> str:
    value = df.argument(site, "pin_memory", df.DATALOADER_POSITIONS["pin_memory"])
    if value is df.MISSING:
        return "missing"
    if value is df.UNKNOWN:
        return "unknown"
    lit = df.literal(value)
    return "true" if lit is True else "false" if lit is False else "unknown"


def _workers(site: CallSite):
    value = df.argument(site, "num_workers", df.DATALOADER_POSITIONS["num_workers"])
    if value is df.MISSING:
        return "missing"
    lit = df.literal(value) if value is not df.UNKNOWN else df.UNKNOWN
    return lit if isinstance(lit, int) else "unknown"


def _candidate(name: str | None, facts: Facts, scope: Scope) -> bool:
    """A callee that may be a project function: its head is imported, or a def/class of this file, or self."""
    if not name:
        return False
    head = name.split(".")[0]
    if head == "self":
        return name.count(".") == 1
    full = facts.imports.names.get(head)
    if full is not None:
        return full.split(".")[0] not in LIBRARIES and not scope.binds(head)
    if "_def_names" not in facts.__dict__:  # once per file: this runs for every call site
        facts.__dict__["_def_names"] = {s.node.name.value for s in facts.scopes if s.kind != "module"}
    if head not in facts.__dict__["_def_names"]:
        if head in _relative_names(facts):
            return True
        # `from models import *`: an unbound, non-builtin name may come from the star
        return _has_star(facts) and head not in facts.bound and not hasattr(builtins, head)
    found = scope.lookup(head)
    return found is not None and found.values[-1:] == [None] and head not in found.scope.params


def _has_star(facts: Facts) -> bool:
    return any(isinstance(n, cst.ImportFrom) and isinstance(n.names, cst.ImportStar) for n in facts.import_nodes)


def _relative_names(facts: Facts) -> set[str]:
    """Names bound by relative or star imports (the ImportTable leaves those out)."""
    if "_relative" not in facts.__dict__:
        names = set()
        for node in facts.import_nodes:
            if isinstance(node, cst.ImportFrom) and node.relative and not isinstance(node.names, cst.ImportStar):
                for alias in node.names:
                    names.add(alias.asname.name.value if alias.asname is not None else alias.name.value)
        facts.__dict__["_relative"] = names
    return facts.__dict__["_relative"]


def _local_def(name: str, scope: Scope, defs: dict[str, Scope]) -> str | None:
    """The qualname of the function a plain name or `self.method` refers to, in this file."""
    if name.startswith("self."):
        cls = scope
        while cls is not None and cls.kind != "class":
            cls = cls.parent
        return f"{cls.qualname}.{name[5:]}" if cls is not None else None
    if "." in name:
        return None
    while scope is not None:  # innermost enclosing def first: closures
        prefix = scope.qualname
        qual = f"{prefix}.{name}" if prefix else name
        if qual in defs:
            return qual
        scope = scope.parent
    return None


def _tensor_args(call: cst.Call, names: set[str]) -> list:
    """Which arguments carry tensors: positions, keywords, or "**" for a dict of them."""
    out = []
    for i, arg in enumerate(a for a in call.args if not a.star):
        if holds_tensor(arg.value, names):  # `loss`, `out.detach()`, `[d(out) for d in critics]`
            out.append(arg.keyword.value if arg.keyword is not None else i)
    if any(
        a.star == "**"
        and (df.root_name(a.value) in names or isinstance(a.value, cst.Dict) and holds_tensor(a.value, names))
        for a in call.args
    ):  # `**{"loss": loss}`
        out.append("**")
    return out


def _built_class(name: str, facts: Facts, scope: Scope) -> str | None:
    """The project class a local name is built from: `x = utils.MetricLogger(...)`, also when it is
    optional (`x = utils.TensorboardLogger(...) if args.log_dir else None`)."""
    classes = _built_classes(name, facts, scope)
    return classes[0] if len(classes) == 1 else None


def _values(name: str, found: Binding) -> list | None:
    """The values bound to `name`, with `agent, memory = Agent(device), Memory(n)` read element by
    element; None when one is not a plain value (a loop target, `a, b = f()`)."""
    scope, values = found
    plain = [v for v in values if v is not None]
    unpacked = scope.unpacked.get(name, [])
    if len(plain) + len(unpacked) != len(values):
        return None
    for value, i in unpacked:
        if (
            not isinstance(value, (cst.Tuple, cst.List))
            or i >= len(value.elements)
            or any(isinstance(el, cst.StarredElement) for el in value.elements)
        ):
            return None
        plain.append(value.elements[i].value)
    return plain


def _built_classes(name: str, facts: Facts, scope: Scope) -> list[str]:
    """The project classes a local name is built from, sorted: one, or those an if/elif chain chooses
    among (`if args.loss == "focal": criterion = FocalLoss() elif ...: criterion = WeightedBCE(...)`)."""
    found = scope.lookup(name)
    if found is None or name in found.scope.params:
        return []
    values = _values(name, found)
    if values is None:
        return []
    calls = []
    for v in values:
        v = _unchain(v)
        if (
            isinstance(v, cst.Call)
            and (dotted(v.func) or "").rsplit(".", 1)[-1] in _MODULE_WRAPPERS
            and v.args
            and isinstance(v.args[0].value, cst.Name)
            and v.args[0].value.value == name
        ):
            continue  # `model = DDP(model, ...)`: calling it runs the wrapped module's forward
        if (
            isinstance(v, cst.Call)
            and isinstance(v.func, cst.Attribute)
            and v.func.attr.value in _RETURNS_SELF
            and isinstance(v.func.value, cst.Name)
            and v.func.value.value == name
        ):
            continue  # `model = model.cuda()` under `if args.gpu:`: the same module, moved
        if isinstance(v, cst.IfExp):
            branches = [b for b in (v.body, v.orelse) if not (isinstance(b, cst.Name) and b.value == "None")]
            if len(branches) != 1:
                return []
            v = branches[0]
        if not isinstance(v, cst.Call):
            return []
        calls.append(v)
    classes = sorted({dotted(v.func) or "" for v in calls})
    if (
        not classes
        or len(classes) > 8
        or not all(
            cls and cls.rsplit(".", 1)[-1][:1].isupper() and _candidate(cls, facts, found.scope) for cls in classes
        )
    ):
        return []
    return classes


_MODULE_WRAPPERS = frozenset({"DistributedDataParallel", "DataParallel", "compile", "FullyShardedDataParallel"})
# Module methods that return the module itself: `model = Net().cuda()` is still a Net.
_RETURNS_SELF = frozenset(
    {"cuda", "to", "train", "eval", "float", "half", "double", "bfloat16", "cpu", "requires_grad_", "share_memory"}
)


def _unchain(value):
    while (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in _RETURNS_SELF
        and isinstance(value.func.value, cst.Call)
    ):
        value = value.func.value
    return value


def _typed(name: str | None, facts: Facts, scope: Scope) -> str | None:
    """`metric_logger.update` where `metric_logger = utils.MetricLogger(...)` → `utils.MetricLogger.update`;
    `model(x)` or `criterion(out, y)` where `model = Net().cuda()` → `Net.forward` (the module's call)."""
    if name and name.count(".") == 2 and name.startswith("self."):
        return _attribute_method(name, facts, scope)
    if not name or name.count(".") > 1:
        return None
    head, method = name.split(".") if "." in name else (name, "forward")
    cls = _built_class(head, facts, scope)
    return f"{cls}.{method}" if cls else None


def _attribute_method(name: str, facts: Facts, scope: Scope) -> str | None:
    """`self.crf.neg_log_likelihood_loss` where `self.crf = CRF(...)` in the file (a submodule's
    method called from a model's loss method) → `CRF.neg_log_likelihood_loss`."""
    attr, method = name.rsplit(".", 1)
    built = {
        dotted(_unchain(v).func)
        for t, v in facts.attr_assigns
        if dotted(t) == attr and isinstance(_unchain(v), cst.Call)
    }
    if len(built) != 1 or len([1 for t, _ in facts.attr_assigns if dotted(t) == attr]) != 1:
        return None
    cls = built.pop()
    if not cls or not cls.rsplit(".", 1)[-1][:1].isupper() or not _candidate(cls, facts, facts.module_scope):
        return None
    return f"{cls}.{method}"


def _on_param(name: str | None, scope: Scope) -> OnParam | None:
    """`log_writer.update` where `log_writer` is a parameter of the enclosing function →
    [that function's qualname, "log_writer"]: the project join finds its class at the call sites."""
    if not name or name.count(".") > 1:
        return None
    head = name.split(".")[0]  # `log_writer.update(...)`, or `model(x)`: its forward
    found = scope.lookup(head)
    if found is None or found.scope.kind != "function" or head not in found.scope.params or head in ("self", "cls"):
        return None
    return OnParam(found.scope.qualname, head)


def _callees(site: CallSite, facts: Facts) -> list[str]:
    """_callee, or when the receiver is one of several project classes an if/elif chain chose
    (`criterion(out, y)` with criterion a FocalLoss or a WeightedBCE), each class's method."""
    callee = _callee(site, facts)
    if callee:
        return [callee]
    name = dotted(site.node.func)
    if not name or name.count(".") > 1 or "." not in name and name not in facts.bound:
        return []
    head, method = name.split(".") if "." in name else (name, "forward")
    return [f"{cls}.{method}" for cls in _built_classes(head, facts, site.scope)]


def _callee(site: CallSite, facts: Facts) -> str | None:
    """The name to resolve in the project for a call, or None when it cannot be a project function.
    Memoized per call site: several passes of the summary ask about every call."""
    memo = facts.__dict__.setdefault("_callees", {})
    key = id(site)
    if key not in memo:
        name = dotted(site.node.func)
        if _candidate(name, facts, site.scope):
            memo[key] = name
        elif name and "." not in name and (name not in facts.bound or hasattr(builtins, name)):
            memo[key] = None  # `print(x)`, or a name never assigned here: not a module built from a class
        else:
            memo[key] = _typed(name, facts, site.scope)
    return memo[key]


def _mentions_cuda(facts: Facts, node: cst.CSTNode) -> bool:
    text = facts.code(node)
    return "cuda" in text or "torch.accelerator" in text


def _loader_info(facts: Facts, sites: list[CallSite]) -> LoaderFact:
    """The loader a function builds (the first DataLoader call's line and function)."""
    pins = {_pin_state(facts, site) for site in sites}
    pin = "true" if pins == {"true"} else "unknown" if "unknown" in pins else "false"
    workers = {_workers(site) for site in sites}
    return LoaderFact(
        pin, workers.pop() if len(workers) == 1 else "unknown", _line(facts, sites[0].node), sites[0].scope.qualname
    )


def _loader_classes(facts: Facts, loaders: list[CallSite]) -> dict[str, LoaderFact]:
    """Classes that wrap a DataLoader: `self.dataloader = DataLoader(...)` in a method, and an
    `__iter__` that yields from `self.dataloader` (CycleGAN's CustomDatasetDataLoader)."""
    by_attr = {}
    by_node: dict[int, CallSite] = {}
    for s in loaders:
        by_node.setdefault(id(s.node), s)
    for target, value in facts.attr_assigns:
        site = by_node.get(id(value))
        name = dotted(target) or ""
        if site is not None and name.startswith("self.") and name.count(".") == 1:
            by_attr[(site.scope.parent.qualname if site.scope.parent else "", name)] = site
    out = {}
    for loop in facts.loops:
        scope = loop.scope
        if (
            loop.iter is None
            or not scope.has_yield
            or scope.kind != "function"
            or scope.node.name.value != "__iter__"
            or scope.parent is None
        ):
            continue
        inner, _ = df.unwrap(loop.iter, facts, scope)
        site = by_attr.get((scope.parent.qualname, dotted(inner) or ""))
        if site is not None:
            out[scope.parent.qualname] = _loader_info(facts, [site])
    return out


# Calls that may wait for the GPU besides the host reads: data-dependent sizes, and `.to("cpu")`.
_SIZED_CALLS = frozenset({"nonzero", "masked_select", "argwhere", "where", "to"})


def _def_facts(
    facts: Facts, scope: Scope, own: list[CallSite], wrappers: dict[str, LoaderFact], defs: dict[str, Scope]
) -> FunctionFacts:
    """What other files may learn about one function; `own` are the DataLoader calls in its body."""
    node = scope.node
    p = node.params
    params = [param.name.value for param in (*p.posonly_params, *p.params)]
    out: FunctionFacts = {"params": params}
    if isinstance(p.star_kwarg, cst.Param):
        out["kwargs"] = p.star_kwarg.name.value
    if own and scope.returns:
        out["loader"] = _loader_info(facts, own)
    elif wrappers and scope.returns:  # builds and returns a loader-wrapping object of this file
        for site in scope.calls:
            if dotted(site.node.func) in wrappers:
                out["loader"] = wrappers[dotted(site.node.func)]
                break
    if scope.has_yield:
        for loop in _loops_by_scope(facts).get(id(scope), ()):
            if loop.iter is not None:
                inner, _ = df.unwrap(loop.iter, facts, scope)
                if isinstance(inner, cst.Name) and inner.value in params:
                    out["yields"] = params.index(inner.value)
                    break
    for site in scope.calls:
        if site.scope is not scope:
            continue
        func = site.node.func
        if isinstance(func, cst.Name) and func.value == "next" and site.node.args:
            if df.loader_source(site.node.args[0].value, scope, facts) is not None:
                out["batch"] = 1
        if isinstance(func, cst.Attribute) and func.attr.value in _SYNC_METHODS and not site.node.args:
            out["sync"] = 1
        elif isinstance(func, cst.Attribute) and func.attr.value in _SIZED_CALLS:  # `x.masked_select(m)`, `.to("cpu")`
            out["sync"] = 1
        elif dotted(func) in ("print", "float", "int", "bool", "torch.cuda.synchronize") or (
            isinstance(func, cst.Attribute) and func.attr.value == "format"
        ):
            out["sync"] = 1
        elif any(isinstance(a.value, (cst.FormattedString, cst.BinaryOperation)) for a in site.node.args):
            out["sync"] = 1
        if (
            site.node.func is not None
            and (facts.qname(func, scope) or "").startswith(("torch.device", "torch.accelerator."))
            and scope.returns
            and _mentions_cuda(facts, node)
        ):
            out["cuda"] = 1
    inner = _inner_calls(facts, scope, params, defs)
    if inner:
        out["calls"] = inner
    if scope.indexes and any(ix.scope is scope for ix in scope.indexes):
        out["sync"] = 1  # may index with a boolean mask (`feats[mask]`); the check decides
    if df.unconditional_ifs(node.body) or df.unconditional_asserts(node.body):
        out["sync"] = 1  # may test a tensor's value (`if not torch.isfinite(losses).all():`); the check decides
    if scope.has_backward:
        out["backward"] = 1
        if not any(loop.has_backward for loop in _loops_by_scope(facts).get(id(scope), ())):
            out["step"] = 1  # one backward per call, not a loop of them: `agent.learn(batch)`
    if scope.returns and df.returns_plain(scope):
        out["plain"] = 1  # returns no tensor: `valid, error = check_loss(loss, value)` holds none
    for target in cudnn_choices(facts):
        if _encloses(node, target, facts):
            out["cudnn"] = 1
    return out


def _loops_by_scope(facts: Facts) -> dict[int, list]:
    if "_loops_by_scope" not in facts.__dict__:  # once per file, not once per function
        by_scope: dict[int, list] = {}
        for loop in facts.loops:
            by_scope.setdefault(id(loop.scope), []).append(loop)
        facts.__dict__["_loops_by_scope"] = by_scope
    return facts.__dict__["_loops_by_scope"]


def _encloses(outer: cst.CSTNode, inner: cst.CSTNode, facts: Facts) -> bool:
    a, b = facts.position(outer)
    c, _ = facts.position(inner)
    return a.line <= c.line <= b.line


def _steps(facts: Facts, defs: dict[str, Scope], loops=None, rate: bool = False) -> list[Step]:
    """Calls made on every step of the training loops; with `rate`, those made every k-th step or
    after a point (`if T % 4 == 0: agent.learn()`), which the join keeps for a learner's own step."""
    out = []
    for bl in df.training_loops(facts) if loops is None else loops:
        names = None
        for site in bl.loop.calls:
            where = df.in_loop(site, bl.loop)
            if where is None or where.conditional != rate or rate and not df.at_step_rate(site, bl.loop):
                continue
            names = tensor_names(bl) if names is None else names
            chosen = _callees(site, facts)  # one, or each class an if/elif chain chooses among
            callees = chosen or [None]
            # a closure handed to the optimizer (`optimizer.step(closure)`) runs inside the step
            callees += [
                a.value.value
                for a in site.node.args
                if isinstance(a.value, cst.Name) and _local_def(a.value.value, site.scope, defs)
            ]
            line = _line(facts, site.node)
            if not callees[0]:  # a method of an object passed in: its class is known at the call sites
                param = _on_param(dotted(site.node.func), site.scope)
                if param:
                    out.append(Step(dotted(site.node.func), line, _tensor_args(site.node, names), None, param))
            for callee in callees:
                if not callee:
                    continue
                args = _tensor_args(site.node, names) if callee in chosen else []
                local = _local_def(callee, site.scope, defs)
                out.append(Step(callee, line, args, local))
                for override in _overrides(local, facts, defs):  # `self.run_step()` of a base class
                    out.append(Step(callee, line, args, override))
    return out


def _maybe_steps(facts: Facts, defs: dict[str, Scope]) -> list[LoopStep]:
    """[[loop number, *step entry]]: the calls of loops that may train through a project object
    (`loss = agent.learn(batch)`), which only the project join can tell: it takes a loop's calls
    as steps when one of them runs a single backward pass (a def with "step")."""
    known = {id(bl.loop) for bl in df.training_loops(facts)} | {id(bl.loop) for bl in df.batch_loops(facts)}
    out = []
    for n, loop in enumerate(facts.loops):
        if id(loop) in known or not any(
            _callee(site, facts) for site in loop.calls if "." in (dotted(site.node.func) or "")
        ):
            continue
        out += [LoopStep(n, step) for step in _steps(facts, defs, [df.BatchLoop(loop, None, [], facts)])]
    return out


def _rate_steps(facts: Facts, defs: dict[str, Scope]) -> list[LoopStep]:
    """[[loop number, *step entry]]: calls under a step-rate test (`if T % 4 == 0: agent.learn()`) of
    training loops and of loops that may train through a project object (see _maybe_steps)."""
    training = {id(bl.loop): bl for bl in df.training_loops(facts)}
    batch = {id(bl.loop) for bl in df.batch_loops(facts)}
    out = []
    for n, loop in enumerate(facts.loops):
        if id(loop) in batch and id(loop) not in training:
            continue
        if not any(df.at_step_rate(site, loop) for site in loop.calls if site.conditional):
            continue
        bl = training.get(id(loop)) or df.BatchLoop(loop, None, [], facts)
        out += [LoopStep(n, step) for step in _steps(facts, defs, [bl], rate=True)]
    return out


def _overrides(qualname: str | None, facts: Facts, defs: dict[str, Scope]) -> list[str]:
    """`TrainerBase.run_step` → the same method of this file's subclasses (`SimpleTrainer.run_step`):
    a base class's loop calling `self.run_step()` runs the subclass's step."""
    if not qualname or qualname.count(".") != 1:
        return []
    base, method = qualname.split(".")
    out = []
    for scope in facts.scopes:
        if scope.kind == "class" and any((dotted(b.value) or "").rsplit(".", 1)[-1] == base for b in scope.node.bases):
            if f"{scope.qualname}.{method}" in defs:
                out.append(f"{scope.qualname}.{method}")
    return out


def _draws(scope: Scope) -> set[str]:
    """Names a function assigns from a batch draw: `data = next(self._data_loader_iter)`, `get_batch()`."""
    out = set()
    for name, values in scope.assigns.items():
        for v in values:
            if isinstance(v, cst.Call):
                last = (dotted(v.func) or "").rsplit(".", 1)[-1]
                if last == "next" or "batch" in last.lower():
                    out.add(name)
    return out


def _identifiers(node: cst.CSTNode) -> frozenset[str]:
    """Every name written anywhere in an expression: df.refs can only find one of these."""
    found, stack = set(), [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name):
            found.add(n.value)
        stack.extend(children(n))
    return frozenset(found)


def _refs(node: cst.CSTNode, names: set[str], identifiers: dict[int, frozenset[str]]) -> bool:
    """df.refs, skipped when none of `names` is written in the expression (`identifiers`: by node id,
    kept while the tree lives: one walk per expression, however many times it is asked)."""
    key = id(node)
    written = identifiers.get(key)
    if written is None:
        written = identifiers[key] = _identifiers(node)
    return not written.isdisjoint(names) and df.refs(node, names)


def _derived(scope: Scope, seeds: set[str], identifiers: dict[int, frozenset[str]]) -> set[str]:
    names = set(seeds)
    for _ in range(3):  # flow-insensitive, as sync._function_tensors
        before = len(names)
        for name, values in scope.assigns.items():
            if name not in names and any(v is not None and _refs(v, names, identifiers) for v in values):
                names.add(name)
        for name, entries in scope.unpacked.items():
            if name not in names and any(_refs(v, names, identifiers) for v, _ in entries):
                names.add(name)
        if len(names) == before:
            break  # a fixed point: another round would add nothing
    return names


def _inner_calls(facts: Facts, scope: Scope, params: list[str], defs: dict[str, Scope]) -> list[InnerCall]:
    """[[callee, line, [[argument, "*" | [params]]], local qualname]]: a step function's unconditional
    calls of project functions and what tensors they receive ("*": one the function draws or runs
    the backward from; else the parameters the argument derives from). When the function runs once
    per step, so do these (detectron2's run_step → self._write_metrics(loss_dict))."""
    # Only a function that is a step itself (runs the backward, or draws its batch) is followed: the
    # tensors it hands on are its own. (Doing this for every function cost 2x the summary time.)
    draws = _draws(scope)
    name = scope.node.name.value
    passes_keywords = isinstance(scope.node.params.star_kwarg, cst.Param)  # `render(rays, **kwargs)` → render_rays
    if (
        not scope.has_backward
        and not draws
        and name not in ("forward", "__call__")
        and "loss" not in name.lower()
        and not passes_keywords
    ):
        return []  # a module's forward runs once per step when the step calls the module, as does a
        # model's loss method (`model.calculate_loss(words, lengths, labels, mask)` → `self._features`)
    sites = [site for site in scope.calls if site.scope is scope and not site.conditional]
    candidates = [(site, callee) for site in sites for callee in _callees(site, facts)]
    if not candidates:
        return []
    identifiers = facts.__dict__.setdefault("_identifiers", {})  # once per file: nodes live as long as facts
    local = _derived(scope, draws | df.backward_roots_of(scope.calls, set(scope.assigns)), identifiers)
    by_param = {p: _derived(scope, {p}, identifiers) for p in params[:8] if p not in ("self", "cls")}
    out = []
    for site, callee in candidates:
        specs = []
        for i, arg in enumerate(a for a in site.node.args if not a.star):
            key = arg.keyword.value if arg.keyword is not None else i
            if _refs(arg.value, local, identifiers):
                specs.append([key, "*"])
            else:
                via = [p for p, names in by_param.items() if _refs(arg.value, names, identifiers)]
                if via:
                    specs.append([key, via])
        if specs:
            line = _line(facts, site.node)
            out.append(InnerCall(callee, line, specs, _local_def(callee, site.scope, defs)))
    return out


def _arg_classes(facts: Facts) -> list[ArgClass]:
    """[[callee, argument (index or keyword), class]]: a project object passed to a project
    function (`train_one_epoch(..., log_writer=log_writer)`, `log_writer = utils.TensorboardLogger(...)`)."""
    out = []
    for site in facts.calls:
        callee = dotted(site.node.func)
        if not _candidate(callee, facts, site.scope):
            continue
        for i, arg in enumerate(a for a in site.node.args if not a.star):
            if isinstance(arg.value, cst.Name):
                cls = _built_class(arg.value.value, facts, site.scope)
                if cls:
                    out.append(ArgClass(callee, arg.keyword.value if arg.keyword is not None else i, cls))
    return out


def _loader_args(facts: Facts) -> list[LoaderArg]:
    """[[callee, argument, pin]]: loaders passed to a project function, found by where the value comes
    from, whatever it is named: a DataLoader of this file, a parameter of the enclosing function
    (["param", function, parameter]: the pin its callers pass, known to the join) or what a project
    factory returned (["from", factory]: `train_dl, val_dl = make_data(cfg)`; the join keeps it only
    if the factory builds loaders)."""
    out = []
    pins = {id(site.node): _pin_state(facts, site) for site in df.loader_calls(facts)}
    for site in facts.calls:
        callee = dotted(site.node.func)
        if not _candidate(callee, facts, site.scope):
            continue
        for i, arg in enumerate(a for a in site.node.args if not a.star):
            if isinstance(arg.value, (cst.Name, cst.Call)):
                pin = _passed_pin(arg.value, site.scope, facts, pins)
                if pin is not None:
                    out.append(LoaderArg(callee, arg.keyword.value if arg.keyword is not None else i, pin))
    return out


def _passed_pin(value: cst.Name | cst.Call, scope: Scope, facts: Facts, pins: dict[int, str]):
    source = df.loader_source(value, scope, facts)
    if isinstance(source, CallSite) and id(source.node) in pins:
        return pins[id(source.node)]
    if isinstance(source, df.ProjectLoader):
        return source.pin
    if isinstance(value, cst.Call):  # `fit(net, make_loader(cfg))`
        factory = dotted(value.func)
        return PinRef("from", factory) if _candidate(factory, facts, scope) else None
    found = scope.lookup(value.value)
    if found is not None and found.scope.kind == "function" and value.value in found.scope.params:
        return PinRef("param", found.scope.qualname, value.value)  # a wrapper passing on the loader it was given
    factory = _factory_of(value.value, scope, facts)
    return PinRef("from", factory) if factory is not None else None


def _factory_of(name: str, scope: Scope, facts: Facts) -> str | None:
    """The project function a loader variable comes from: `train_loader, val_loader = build_loaders(cfg)`
    or `loader = make_loader(cfg)` → "build_loaders" / "make_loader"."""
    found = scope.lookup(name)
    if found is None:
        return None
    home, values = found
    calls = [v for v, _ in home.unpacked.get(name, [])] + [v for v in values if v is not None]
    names = {dotted(c.func) for c in calls if isinstance(c, cst.Call)}
    if len(names) != 1 or len(calls) != sum(isinstance(c, cst.Call) for c in calls):
        return None
    factory = names.pop()
    return factory if _candidate(factory, facts, home) else None


def _loop_pin(bl: df.BatchLoop, facts: Facts):
    """The pin of a loop's loader, or ["param", function, parameter] when the loader is a parameter
    (its pin comes from the callers, known to the project join)."""
    src = bl.source
    if isinstance(src, CallSite):
        return _pin_state(facts, src)
    if isinstance(src, df.ProjectLoader):
        return src.pin
    inner, _ = df.unwrap(bl.loop.iter, facts, bl.loop.scope) if bl.loop.iter is not None else (None, False)
    if isinstance(inner, cst.Name):
        found = bl.loop.scope.lookup(inner.value)
        if found is not None and found.scope.kind == "function" and inner.value in found.scope.params:
            return PinRef("param", found.scope.qualname, inner.value)
    return "unknown"


def _batch_args(facts: Facts, defs: dict[str, Scope]) -> list[BatchArg]:
    """A batch loop hands its batch to a project function (`x, y = model.parse_batch(batch)`): that
    function's copies of it are copies of the loader's batches."""
    out = []
    for bl in df.batch_loops(facts):
        views = df.batch_views(bl)
        pin = None
        for site in bl.loop.calls:
            callee = _callee(site, facts)
            param = (
                None if callee else _on_param(dotted(site.node.func), site.scope)
            )  # `model.parse_batch` of a parameter
            if not callee and not param:
                continue
            for i, arg in enumerate(a for a in site.node.args if not a.star):
                if isinstance(arg.value, cst.Name) and arg.value.value in views:
                    pin = pin or _loop_pin(bl, facts)
                    out.append(
                        BatchArg(
                            callee or dotted(site.node.func),
                            arg.keyword.value if arg.keyword is not None else i,
                            pin,
                            _local_def(callee, site.scope, defs) if callee else None,
                            param or None,
                        )
                    )
    return out


def summarize(facts: Facts) -> FileFacts:
    defs = {scope.qualname: scope for scope in facts.functions}
    loaders = df.loader_calls(facts)
    wrappers = _loader_classes(facts, loaders) if loaders else {}
    uses, aliases = set(), {}
    for site in facts.calls:
        callees = _callees(site, facts)
        uses.update(callees)
        if len(callees) == 1 and (name := dotted(site.node.func)) != callees[0]:
            aliases[name] = callees[0]
    own: dict[int, list[CallSite]] = {}  # DataLoader calls by the function they are in
    for site in loaders:
        own.setdefault(id(site.scope), []).append(site)
    cuda_names = []
    if facts.uses_cuda:
        for name, values in facts.module_scope.assigns.items():
            if any(isinstance(v, (cst.Call, cst.IfExp)) and _mentions_cuda(facts, v) for v in values):
                cuda_names.append(name)
    return FileFacts(
        imports=_imports(facts),
        cuda=facts.uses_cuda,
        conv=has_convolutions(facts),
        conv_defs=conv_defs(facts),
        varying=varying_sizes(facts),
        cudnn=chooses_algorithms(facts),
        amp=bool(facts.idents & _PRECISION),
        entry=bool(df.batch_loops(facts) or df.step_loops(facts)),
        trains=bool(df.training_loops(facts)),
        main=facts.main_guard is not None,
        self_calls={
            name: qual
            for site in facts.calls
            if (name := dotted(site.node.func) or "").startswith("self.")
            and (qual := _local_def(name, site.scope, defs))
        },
        cuda_names=cuda_names,
        defs={qual: _def_facts(facts, scope, own.get(id(scope), []), wrappers, defs) for qual, scope in defs.items()},
        classes=[s.qualname for s in facts.scopes if s.kind == "class"],
        prefetchers=sorted(df.prefetchers(facts)),
        loader_classes=sorted(df.loader_classes(facts)),
        uses=sorted(uses),
        aliases=aliases,
        steps=_steps(facts, defs),
        rate_steps=_rate_steps(facts, defs),
        maybe_steps=_maybe_steps(facts, defs),
        loader_args=_loader_args(facts),
        batch_args=_batch_args(facts, defs),
        arg_classes=_arg_classes(facts),
        sys_path=added_paths_of(facts.source),
    )
