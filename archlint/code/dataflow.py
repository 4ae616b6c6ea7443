"""What a call is given, and where a loop's batches come from — resolved within one file.

Every answer has three states: a known literal, known-absent, or UNKNOWN. Checks only report the
first two: a value archlint cannot see (a variable, `**kwargs` from elsewhere, a config object) is
never a finding.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import libcst as cst

from archlint.code.facts import Binding, CallSite, Facts, Loop, Scope, children, is_backward_call, target_names
from archlint.code.names import dotted

DATALOADER = "torch.utils.data.DataLoader"
# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory, ...)
DATALOADER_POSITIONS = {"num_workers": 5, "pin_memory": 7}


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()
MISSING = None  # the argument is not passed: the default applies


def literal(node: cst.BaseExpression | None):
    """True/False/None/int/str for a literal node, else UNKNOWN."""
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[node.value]
    if isinstance(node, cst.Integer):
        return node.evaluated_value
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value
    return UNKNOWN


def _dict_items(node: cst.BaseExpression | None, scope: Scope, depth: int = 0):
    """{key: value node} for a dict literal or dict(k=v) call, following a name in scope; else None."""
    if node is None or depth > 4:
        return None
    if isinstance(node, cst.Dict):
        items = {}
        for el in node.elements:
            if not isinstance(el, cst.DictElement) or not isinstance(el.key, cst.SimpleString):
                return None  # **spread or a computed key: unknown contents
            items[el.key.evaluated_value] = el.value
        return items
    if isinstance(node, cst.Call) and dotted(node.func) == "dict":
        items = {}
        for arg in node.args:
            if arg.keyword is None:
                return None
            items[arg.keyword.value] = arg.value
        return items
    if isinstance(node, cst.Name):
        return known_dict(node.value, scope, depth + 1)
    if isinstance(node, cst.IfExp):  # `{"num_workers": 1, "pin_memory": True} if use_cuda else {}`
        body, orelse = _dict_items(node.body, scope, depth + 1), _dict_items(node.orelse, scope, depth + 1)
        if body is not None and orelse == {}:
            return body  # the other branch passes nothing: on the GPU (where findings matter) this one applies
        if orelse is not None and body == {}:
            return orelse
    return None


def known_dict(name: str, scope: Scope, depth: int = 0) -> dict | None:
    """The keys a dict variable can hold, when every way the file fills it is a literal.

    Flow-insensitive on purpose: a key set by any `.update({...})`, `d["k"] = v` or `d |= {...}` in
    the scope counts as present, so a conditionally added `pin_memory` silences the finding.
    """
    found = scope.lookup(name)
    if found is None:
        return None
    home, values = found
    items: dict = {}
    for value in values:
        got = _dict_items(value, home, depth)
        if got is None:
            return None
        items.update(got)
    for value in home.aug_updates.get(name, []):
        got = _dict_items(value, home, depth)
        if got is None:
            return None
        items.update(got)
    for key, value in home.item_sets.get(name, []):
        k = literal(key)
        if not isinstance(k, str):
            return None
        items[k] = value
    for site in home.calls:
        func = site.node.func
        merged_into_other = isinstance(func, cst.Attribute) and func.attr.value == "update"
        if not merged_into_other and any(
            a.star != "**" and isinstance(a.value, cst.Name) and a.value.value == name for a in site.node.args
        ):
            return None  # handed to a function that may add keys: unknown
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == name:
            if func.attr.value in ("update", "setdefault"):
                if func.attr.value == "setdefault" and len(site.node.args) == 2:
                    k = literal(site.node.args[0].value)
                    if not isinstance(k, str):
                        return None
                    items.setdefault(k, site.node.args[1].value)
                    continue
                for arg in site.node.args:
                    if arg.keyword is not None:
                        items[arg.keyword.value] = arg.value
                        continue
                    got = _dict_items(arg.value, home, depth)
                    if got is None:
                        return None
                    items.update(got)
            elif func.attr.value in ("pop", "clear", "popitem"):
                return None
    return items


def argument(site: CallSite, name: str, position: int | None = None):
    """The value node passed for parameter `name`: a node, MISSING, or UNKNOWN."""
    call = site.node
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if any(a.star == "*" for a in call.args):
        return UNKNOWN
    if position is not None and len(positional) > position:
        return positional[position].value
    result = MISSING
    for arg in call.args:
        if arg.star == "**":
            items = _dict_items(arg.value, site.scope)
            if items is None:
                return UNKNOWN
            if name in items:
                result = items[name]
    return result


# batch loops -----------------------------------------------------------------

_WRAPPERS = {"enumerate", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "iter", "zip"}
# Methods that take the loader first and yield its batches: a metric logger's
# `log_every(loader, print_freq, header)` (DeiT, MAE, DINO, DETR, torchvision's references).
_WRAPPER_METHODS = {"log_every", "tqdm"}
_LOADER_NAME = re.compile(r"loader(?!s)", re.IGNORECASE)  # "train_loader", not "loaders" (a list of them)


class ProjectLoader:
    """A loader built in another function (a project factory) or passed in by callers there."""

    def __init__(self, pin: str, where: str = "") -> None:
        self.pin = pin  # "true" | "false" | "missing" | "unknown"
        self.where = where

    @property
    def pinned(self) -> bool:
        return self.pin == "true"


def _positional(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and not a.star]


def unwrap(node: cst.BaseExpression, facts: Facts, scope: Scope) -> tuple[cst.BaseExpression, bool]:
    """`enumerate(tqdm(loader))`, `logger.log_every(loader, 10)`, `prefetch(loader)` → (loader, index_dropped)."""
    dropped = False
    for _ in range(8):
        if not isinstance(node, cst.Call) or not node.args:
            break
        name = facts.qname(node.func, scope) or dotted(node.func)
        if name in _WRAPPERS or (isinstance(node.func, cst.Attribute) and node.func.attr.value in _WRAPPER_METHODS):
            index = 0
        elif dotted(node.func) in prefetchers(facts):  # `data_prefetcher(train_loader)`
            index = 0
        else:
            index = facts.project.name(dotted(node.func)).get("yields")
            if index is None:
                break
        args = _positional(node)
        if index >= len(args):
            break
        dropped = dropped or name == "enumerate"
        node = args[index].value
    return node, dropped


def prefetchers(facts: Facts) -> set[str]:
    """Classes of this file that copy batches to the GPU on a side CUDA stream (apex's
    `data_prefetcher`, timm's `PrefetchLoader`): they create a `torch.cuda.Stream()` (or any
    `<module>.Stream()`, e.g. timm's `device_mod.Stream()`) and hand its
    work over with `wait_stream` or `record_stream`. Built with the loader as first argument."""
    found = facts.__dict__.get("_prefetchers")
    if found is None:
        streams, handovers = set(), set()
        for site in facts.calls:
            cls = site.scope
            while cls is not None and cls.kind != "class":
                cls = cls.parent
            if cls is None:
                continue
            func = site.node.func
            # `torch.cuda.Stream()`, or through a device module as current timm writes it
            # (`device_mod = getattr(torch, device.type); device_mod.Stream()`)
            if isinstance(func, cst.Attribute) and func.attr.value == "Stream":
                streams.add(cls.qualname)
            elif isinstance(func, cst.Attribute) and func.attr.value in ("wait_stream", "record_stream"):
                handovers.add(cls.qualname)
        found = facts.__dict__["_prefetchers"] = streams & handovers
    return found


def on_side_stream(site: CallSite, facts: Facts) -> bool:
    """The call runs inside `with torch.cuda.stream(s):`, or in a prefetcher class (timm enters its
    stream through `partial(torch.cuda.stream, stream=stream)`): its copy overlaps the default
    stream's work."""
    if any(
        isinstance(item, cst.Call) and facts.qname(item.func, site.scope) == "torch.cuda.stream" for item in site.withs
    ):
        return True
    cls = site.scope
    while cls is not None and cls.kind != "class":
        cls = cls.parent
    return cls is not None and cls.qualname in prefetchers(facts)


def loader_classes(facts: Facts) -> set[str]:
    """Classes of this file that subclass DataLoader and pass its arguments through (DeepSpeech's
    `class AudioDataLoader(DataLoader)` that only sets a collate_fn): a call to one builds a
    DataLoader. A subclass that handles pin_memory or num_workers itself is left out."""
    found = facts.__dict__.get("_loader_classes")
    if found is None:
        found = set()
        for scope in facts.scopes:
            if scope.kind != "class" or not any(
                facts.qname(b.value, scope.parent) == DATALOADER for b in scope.node.bases
            ):
                continue
            text = facts.code(scope.node)
            if "pin_memory" not in text and "num_workers" not in text:
                found.add(scope.qualname)
        facts.__dict__["_loader_classes"] = found
    return found


# Libraries' DataLoader subclasses that pass pin_memory/num_workers through to torch's. Their first
# three positional arguments are torch's (dataset, batch_size, shuffle), the rest differ: a call with
# more positional arguments is not judged.
LIBRARY_LOADERS = frozenset(
    {
        "torch_geometric.loader.DataLoader",
        "torch_geometric.data.DataLoader",
        "torch_geometric.loader.dataloader.DataLoader",
        "dgl.dataloading.GraphDataLoader",
    }
)


def is_loader_call(call: cst.Call, facts: Facts, scope: Scope | None) -> bool:
    """`DataLoader(...)` under any alias, a library's subclass (PyTorch Geometric's), or a DataLoader
    subclass of this file or of the project."""
    qname = facts.qname(call.func, scope)
    if qname == DATALOADER:
        return True
    if qname in LIBRARY_LOADERS:
        return len([a for a in call.args if a.keyword is None and not a.star]) <= 3
    name = dotted(call.func)
    return bool(name) and (name in loader_classes(facts) or bool(facts.project.name(name).get("dataloader")))


def loader_calls(facts: Facts) -> list[CallSite]:
    found = facts.__dict__.get("_loader_calls")
    if found is None:
        found = facts.__dict__["_loader_calls"] = [c for c in facts.calls if is_loader_call(c.node, facts, c.scope)]
    return found


def _call_site(facts: Facts, node: cst.Call):
    """The CallSite of a call node, from an index built once (a scan of every call per loop made
    linting quadratic in the file's size: 9 s of a 2 MB file's 30)."""
    index = facts.__dict__.get("_call_sites")
    if index is None:
        index = facts.__dict__["_call_sites"] = {}
        for c in facts.calls:
            index.setdefault(id(c.node), c)
    return index.get(id(node))


def _factory(call: cst.Call, facts: Facts) -> ProjectLoader | None:
    info = facts.project.name(dotted(call.func)).get("loader")
    return ProjectLoader(info.pin, info.site) if info else None


def loader_source(expr: cst.BaseExpression, scope: Scope, facts: Facts, depth: int = 0):
    """Where the iterable comes from: a DataLoader CallSite, a ProjectLoader, "loader" (named like
    one), or None. Follows the names it is assigned to (`pbar = tqdm(enumerate(loader))`), loaders
    unpacked from a project factory (`train_loader, val_loader = build_loaders(cfg)`) and loaders
    that callers pass in as a parameter."""
    expr, _ = unwrap(expr, facts, scope)
    if isinstance(expr, cst.Call):
        if is_loader_call(expr, facts, scope):
            return _call_site(facts, expr)
        return _factory(expr, facts)
    if isinstance(expr, cst.Name) and depth < 4:
        found = scope.lookup(expr.value)
        if found is not None:
            home, values = found
            sources = []
            for value in values:
                if value is None:
                    continue
                inner, _ = unwrap(value, facts, home)
                if isinstance(inner, cst.Name) and inner.value == expr.value:
                    continue  # `pbar = tqdm(pbar)`: the same loader, re-wrapped
                sources.append(loader_source(value, home, facts, depth + 1))
            for value, index in home.unpacked.get(expr.value, []):
                inner, _ = unwrap(value, facts, home)
                if not isinstance(inner, cst.Call):
                    sources.append(None)
                    continue
                returned = _returned(inner, index, facts)  # a factory of this file: the loader it returns there
                sources.append(
                    loader_source(returned.values[0], returned.scope, facts, depth + 1)
                    if returned
                    else _factory(inner, facts)
                )
            if expr.value in home.params:
                pin = facts.project.pinned.get(home.qualname, {}).get(expr.value)  # other files' callers
                if pin is not None:
                    sources.append(ProjectLoader(pin))
                for site in local_callers(home, facts):  # this file's: what they pass, followed here
                    arg = passed_for(site, home, expr.value)
                    sources.append(loader_source(arg, site.scope, facts, depth + 1) if arg is not None else None)
            known = [s for s in sources if s is not None]
            if known and len(known) == len(sources):
                first = known[0]
                if all(s is first for s in known) or all(isinstance(s, str) for s in known):
                    return first
                if all(isinstance(s, ProjectLoader) for s in known):
                    return ProjectLoader("true" if all(s.pinned for s in known) else "unknown")
                return "loader"
    name = dotted(expr)
    if name and name.startswith("self.") and name.count(".") == 1:
        # `self.train_loader = DataLoader(...)` in __init__: the loader the method iterates
        built = [v for t, v in facts.attr_assigns if dotted(t) == name]
        sites = [
            _call_site(facts, v) if isinstance(v, cst.Call) and is_loader_call(v, facts, None) else None for v in built
        ]
        if sites and all(site is not None and site is sites[0] for site in sites):
            return sites[0]
    if name and _LOADER_NAME.search(name.rsplit(".", 1)[-1]):
        return "loader"
    return None


def local_callers(function: Scope, facts: Facts) -> list[CallSite]:
    """This file's calls of a function: `fit(...)` where the name is that def, `self.fit(...)` in
    its class."""
    index = facts.__dict__.get("_callers")
    if index is None:  # built once per file: by the name called
        index = facts.__dict__["_callers"] = {}
        for site in facts.calls:
            func = site.node.func
            if isinstance(func, cst.Name) or (
                isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"
            ):
                index.setdefault(func.value if isinstance(func, cst.Name) else func.attr.value, []).append(site)
    if function.kind != "function" or function.parent is None:
        return []
    name, out = function.node.name.value, []
    for site in index.get(name, ()):
        if isinstance(site.node.func, cst.Name):
            found = site.scope.lookup(name)
            if found is not None and found.scope is function.parent:
                out.append(site)
        elif function.parent.kind == "class":
            cls = site.scope
            while cls is not None and cls.kind != "class":
                cls = cls.parent
            if cls is function.parent:
                out.append(site)
    return out


def passed_for(site: CallSite, function: Scope, param: str) -> cst.BaseExpression | None:
    """The argument a call passes for a parameter, None when it passes none (the default) or its
    binding is unclear (`*args`)."""
    args = site.node.args
    if any(a.star for a in args):
        return None
    for arg in args:
        if arg.keyword is not None and arg.keyword.value == param:
            return arg.value
    p = function.node.params
    positional = [q.name.value for q in (*p.posonly_params, *p.params)]
    if isinstance(site.node.func, cst.Attribute) and positional[:1] == ["self"]:
        positional = positional[1:]
    index = positional.index(param) if param in positional else len(args)
    plain = [a for a in args if a.keyword is None]
    return plain[index].value if index < len(plain) else None


def _returned(call: cst.Call, index: int, facts: Facts) -> Binding | None:
    """What a function of this file called by `call` returns at position `index` of its returned
    tuple (`return train_loader, valset, collate_fn`), when it has one return: the function's
    scope and that one value."""
    name = dotted(call.func)
    if not name or "." in name:
        return None
    scopes = [
        s for s in facts.functions if s.node.name.value == name and s.parent is not None and s.parent.kind == "module"
    ]
    if len(scopes) != 1:
        return None
    scope = scopes[0]
    returns = [
        small.value
        for stmt in scope.node.body.body
        if isinstance(stmt, cst.SimpleStatementLine)
        for small in stmt.body
        if isinstance(small, cst.Return) and small.value is not None
    ]
    if len(returns) != 1 or not isinstance(returns[0], cst.Tuple) or index >= len(returns[0].elements):
        return None
    return Binding(scope, [returns[0].elements[index].value])


# Methods a library trainer calls once per training step, and the parameter that holds the batch:
# a `transformers.Trainer` (or TRL trainer) subclass overriding them writes part of the step.
_TRAINER_HOOKS = {"compute_loss": "inputs", "training_step": "inputs"}


def trainer_hooks(facts: Facts) -> dict[str, list[str]]:
    """Method qualname → [batch parameter] for the per-step hooks of this file's subclasses of a
    Hugging Face trainer (`class DistillationTrainer(Trainer): def compute_loss(self, model, inputs)`)."""
    found = facts.__dict__.get("_trainer_hooks")
    if found is None:
        found = {}
        for scope in facts.functions:
            cls = scope.parent
            if cls is None or cls.kind != "class" or scope.node.name.value not in _TRAINER_HOOKS:
                continue
            bases = [facts.qname(b.value, cls.parent) or "" for b in cls.node.bases]
            if any(q.split(".")[0] in ("transformers", "trl") and q.endswith("Trainer") for q in bases):
                batch = _TRAINER_HOOKS[scope.node.name.value]
                found[scope.qualname] = [batch] if batch in scope.params else []
        facts.__dict__["_trainer_hooks"] = found
    return found


def _called_info(site: CallSite, facts: Facts) -> dict:
    return facts.project.name(dotted(site.node.func))


# Methods that run a whole optimisation step on an object built elsewhere (`model.optimize_parameters()`
# in CycleGAN/pix2pix and BasicSR, `train_step` in MMEngine-style code).
TRAIN_METHODS = frozenset(
    {"optimize_parameters", "train_step", "training_step", "train_on_batch", "train_iter", "update_parameters"}
)


def trains(loop: Loop, facts: Facts) -> bool:
    """The loop runs a backward pass: itself, through a loss scaler, in a project function it calls,
    or through a method named for a training step."""
    return loop.has_backward or any(
        _called_info(site, facts).get("backward")
        or _local_backward(site, facts)
        or (isinstance(site.node.func, cst.Attribute) and site.node.func.attr.value in TRAIN_METHODS)
        for site in loop.calls
    )


def _local_backward(site: CallSite, facts: Facts) -> bool:
    """`self.train_step(batch)` or `train_step(batch)` where this file's function runs the backward."""
    name = dotted(site.node.func)
    if not name or name.count(".") > 1 or ("." in name and not name.startswith("self.")):
        return False
    short = name.rsplit(".", 1)[-1]
    return any(scope.has_backward and scope.node.name.value == short for scope in facts.functions)


class BatchLoop:
    """A loop that takes one batch from a loader per iteration (or, for step loops, a training
    loop whose batches come from elsewhere: `get_batch(data, i)`)."""

    def __init__(self, loop: Loop, source, batch_names: list[str], facts: Facts | None = None) -> None:
        self.loop = loop
        self.source = source  # CallSite of the DataLoader, ProjectLoader, "loader", or None (step loop)
        self.batch_names = batch_names
        self.facts = facts
        self.is_training = trains(loop, facts) if facts is not None else loop.has_backward


def _next_calls(loop: Loop) -> list[tuple[cst.BaseExpression, list[str]]]:
    """`input, target = prefetcher.next()` (apex's data_prefetcher, drawn in a `while` loop)."""
    return [
        (value.func.value, target_names(target))
        for target, value in loop.assigns
        if isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value == "next"
        and not value.args
    ]


def _batch_draws(loop: Loop, facts: Facts) -> list[str] | None:
    """`x, y = get_batch()` where the project says get_batch draws from a loader: the batch names."""
    for target, value in loop.assigns:
        if isinstance(value, cst.Call) and facts.project.name(dotted(value.func)).get("batch"):
            return target_names(target)
    return None


def batch_loops(facts: Facts) -> list[BatchLoop]:
    if "_batch_loops" in facts.__dict__:
        return facts.__dict__["_batch_loops"]
    found = []
    for loop in facts.loops:
        if loop.iter is not None:
            source = loader_source(loop.iter, loop.scope, facts)
            if source is not None:
                _, dropped = unwrap(loop.iter, facts, loop.scope)
                target = loop.node.target
                if dropped and isinstance(target, cst.Tuple) and len(target.elements) == 2:
                    names = target_names(target.elements[1].value)
                else:
                    names = list(loop.targets)
                found.append(BatchLoop(loop, source, names, facts))
                continue
        for it, names in loop.next_of + _next_calls(loop):  # x, y = next(it) with it = iter(loader)
            source = loader_source(it, loop.scope, facts)
            if source is not None:
                found.append(BatchLoop(loop, source, names, facts))
                break
        else:
            names = _batch_draws(loop, facts)
            if names:
                found.append(BatchLoop(loop, "loader", names, facts))
    facts.__dict__["_batch_loops"] = found
    return found


def _inside(loop: Loop, others: set[int]) -> bool:
    parent = loop.parent
    while parent is not None:
        if id(parent) in others:
            return True
        parent = parent.parent
    return False


def backward_roots(loop: Loop) -> set[str]:
    """The tensors a loop's backward passes start from: `loss.backward()`, `scaler.scale(loss).backward()`,
    `accelerator.backward(loss)`, `loss_scaler(loss, optimizer)`."""
    bound = set(loop.targets)
    for target, _ in loop.assigns:
        bound.update(target_names(target))
    return backward_roots_of(loop.calls, bound)


def _operands(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The leaves of an arithmetic expression: `(value_loss * c + action_loss)` → value_loss, c, action_loss."""
    if isinstance(node, cst.BinaryOperation):
        return _operands(node.left) + _operands(node.right)
    if isinstance(node, cst.UnaryOperation):
        return _operands(node.expression)
    return [node]


def backward_roots_of(calls: list[CallSite], bound: set[str] | None = None) -> set[str]:
    """`bound`: the names the loop (or function) itself assigns. A backward of an arithmetic expression
    (PPO's `(value_loss * c + action_loss - entropy * c).backward()`) starts from those of its
    operands, not from a coefficient set before the loop."""
    roots = set()
    for site in calls:
        if not is_backward_call(site.node):
            continue
        func = site.node.func
        receiver = func.value if isinstance(func, cst.Attribute) and func.attr.value == "backward" else None
        if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) and receiver.args:
            receiver = receiver.args[0].value  # scaler.scale(loss)
        if receiver is None or isinstance(receiver, cst.Name) and receiver.value in ("accelerator", "self"):
            receiver = site.node.args[0].value if site.node.args else None
        base = receiver
        while isinstance(base, cst.Call) and isinstance(base.func, cst.Attribute) and not base.args:
            base = base.func.value  # `(weights * loss).mean().backward()`: the expression under the reductions
        if isinstance(base, (cst.BinaryOperation, cst.UnaryOperation)):
            receiver = base
        if isinstance(receiver, (cst.BinaryOperation, cst.UnaryOperation)) and bound is not None:
            roots.update(
                r for leaf in _operands(receiver) if (r := root_name(leaf)) in bound and r not in ("self", "cls")
            )
            continue
        root = root_name(receiver) if receiver is not None else None
        if root and root not in ("self", "cls"):  # `self.loss.backward()`: not every attribute of self
            roots.add(root)
    return roots


def step_loops(facts: Facts) -> list[BatchLoop]:
    """Training loops that take no batch from a loader this file can see (`for i in range(0, n, bptt):
    data, targets = get_batch(source, i)`; nanoGPT's `while True:`): the innermost loops that run a
    backward pass, outside every batch loop. Their tensors are what the backward starts from and
    what the loop draws with a `*batch*()` call or next()."""
    if "_step_loops" in facts.__dict__:
        return facts.__dict__["_step_loops"]
    batch = {id(bl.loop) for bl in batch_loops(facts)}
    training = [loop for loop in facts.loops if trains(loop, facts)]
    has_training_child = {id(loop.parent) for loop in training if loop.parent is not None}
    found = []
    for loop in training:
        if id(loop) in batch or id(loop) in has_training_child or _inside(loop, batch):
            continue
        seeds = backward_roots(loop)
        for target, value in loop.assigns:
            if (
                isinstance(value, cst.Call)
                and (dotted(value.func) or "").rsplit(".", 1)[-1] in ("next",)
                or (isinstance(value, cst.Call) and "batch" in (dotted(value.func) or "").rsplit(".", 1)[-1].lower())
            ):
                seeds.update(target_names(target))
        if seeds or any(
            _calls_step_function(site, facts) or _called_info(site, facts).get("step") for site in loop.calls
        ):
            found.append(BatchLoop(loop, None, sorted(seeds), facts))
    facts.__dict__["_step_loops"] = found
    return found


def _calls_step_function(site: CallSite, facts: Facts) -> bool:
    """`self.run_step()` where this file's run_step runs one backward pass, not a loop of them: the
    loop around the call is the training loop (detectron2's TrainerBase.train). A call to a function
    that loops over batches itself (`train_one_epoch()` in an epoch loop) is not."""
    name = dotted(site.node.func)
    if not name or name.count(".") > 1 or ("." in name and not name.startswith("self.")):
        return False
    short = name.rsplit(".", 1)[-1]
    inner = {id(loop.scope) for loop in facts.loops if loop.has_backward}
    return any(
        scope.has_backward and scope.node.name.value == short and id(scope) not in inner for scope in facts.functions
    )


def training_loops(facts: Facts) -> list[BatchLoop]:
    return [bl for bl in batch_loops(facts) if bl.is_training] + step_loops(facts)


def root_name(node: cst.BaseExpression) -> str | None:
    """`batch["x"].float()` → "batch": the variable an expression is a view or method of."""
    while True:
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, cst.Attribute):
            node = node.value
        elif isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        else:
            return None


_COMPREHENSIONS = (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)


def batch_views(bl: BatchLoop) -> set[str]:
    """The batch's names plus names unpacked or indexed from them (`x, y = batch`, `x = batch[0]`),
    and the variables of comprehensions over them (`{k: v.to(device) for k, v in batch.items()}`)."""
    names = set(bl.batch_names)
    for target, value in bl.loop.assigns:
        if value is None:
            continue
        if isinstance(value, _COMPREHENSIONS):
            comp = value.for_in
            while comp is not None:
                if root_name(comp.iter) in names:
                    names.update(target_names(comp.target))
                comp = comp.inner_for_in
            continue
        if (
            isinstance(target, (cst.Tuple, cst.List))
            and isinstance(value, (cst.Tuple, cst.List))
            and len(target.elements) == len(value.elements)
        ):  # x, y = batch["image"], batch["mask"]
            for t, v in zip(target.elements, value.elements):
                if isinstance(v.value, (cst.Name, cst.Subscript)) and root_name(v.value) in names:
                    names.update(target_names(t.value))
        elif isinstance(value, (cst.Name, cst.Subscript)) and root_name(value) in names:
            names.update(target_names(target))
    if bl.facts is not None:
        for inner in bl.facts.loops:
            if inner.parent is bl.loop:
                names.update(iterated_views(inner, names))
    return names


def iterated_views(loop: Loop, names: set[str]) -> list[str]:
    """`for key, ipt in inputs.items():` over a batch: the values are the batch's tensors (monodepth2's
    `inputs[key] = ipt.to(self.device)`); `for t in batch:` likewise. Keys are not."""
    it = loop.iter
    if it is None or root_name(it) not in names:
        return []
    if (
        isinstance(it, cst.Call)
        and isinstance(it.func, cst.Attribute)
        and it.func.attr.value in ("items", "keys", "values")
    ):
        target = loop.node.target
        if it.func.attr.value == "keys" or not isinstance(it.func.value, cst.Name):
            return []
        if it.func.attr.value == "items":
            return (
                target_names(target.elements[1].value)
                if isinstance(target, cst.Tuple) and len(target.elements) == 2
                else []
            )
        return target_names(target)
    return target_names(loop.node.target) if isinstance(it, cst.Name) else []


# `.values()`/`.items()` of a dict of tensors still hold tensors (`sum(loss_dict.values())`).
_SCALAR_METHODS = {"item", "tolist", "size", "dim", "numel", "__len__", "keys"}


def refs(node: cst.CSTNode, names: set[str]) -> bool:
    """Does an expression use one of `names` as a tensor (not through len()/.size()/.item())?"""
    kind = type(node)  # type() is: libcst's node classes are final, and isinstance goes through ABCMeta
    if kind is cst.Name:
        return node.value in names
    if kind in _COMPREHENSIONS:  # what it builds: `{k: v.item() for k, v in d.items()}` holds floats
        inner = names | comprehension_tensors(node, names)
        return refs(node.value if kind is cst.DictComp else node.elt, inner)
    if kind is cst.Call:
        func = node.func
        if type(func) is cst.Attribute and func.attr.value in _SCALAR_METHODS:
            return False
        if type(func) is cst.Name and func.value in ("len", "isinstance", "type", "str", "repr"):
            return False
    if kind is cst.Attribute:
        if node.attr.value in ("shape", "dtype", "device", "ndim"):
            return False
        return refs(node.value, names)
    return any(refs(child, names) for child in children(node))


def ref_names(node: cst.CSTNode) -> frozenset[str] | None:
    """The names `refs` looks for in an expression: `refs(node, names)` is
    `not ref_names(node).isdisjoint(names)`, for any `names`; None when a comprehension is inside
    (what it holds depends on `names` otherwise). For a fixed-point loop that asks about the same
    expressions with a growing set of names (tensors.flow): one walk instead of one per round."""
    out: set[str] = set()
    stack = [node]
    while stack:
        node = stack.pop()
        kind = type(node)  # the same tests as refs, in the same order
        if kind is cst.Name:
            out.add(node.value)
            continue
        if kind in _COMPREHENSIONS:
            return None
        if kind is cst.Call:
            func = node.func
            if type(func) is cst.Attribute and func.attr.value in _SCALAR_METHODS:
                continue
            if type(func) is cst.Name and func.value in ("len", "isinstance", "type", "str", "repr"):
                continue
        if kind is cst.Attribute:
            if node.attr.value not in ("shape", "dtype", "device", "ndim"):
                stack.append(node.value)
            continue
        stack += children(node)
    return frozenset(out)


def _literal_only(node: cst.BaseExpression) -> bool:
    return isinstance(
        node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.Integer, cst.Float)
    ) or (isinstance(node, cst.Name) and node.value in ("True", "False", "None"))


def _returns(block, returns: list) -> None:
    """The values of the `return`s in a block of statements, into `returns` (statements only:
    expressions cannot hold a return). A function of its own, not a closure calling itself, whose
    reference cycle kept each file's nodes for the garbage collector."""
    if block is None:
        return
    if isinstance(block, (cst.Else, cst.Finally)):
        block = block.body
    elif isinstance(block, cst.If):
        _returns(block.body, returns)
        _returns(block.orelse, returns)
        return
    for stmt in getattr(block, "body", ()):
        if isinstance(stmt, cst.SimpleStatementLine):
            returns.extend(small.value for small in stmt.body if isinstance(small, cst.Return))
        elif isinstance(stmt, (cst.If, cst.For, cst.While, cst.With, cst.Try)):
            _returns(stmt.body, returns)
            _returns(getattr(stmt, "orelse", None), returns)
            for handler in getattr(stmt, "handlers", ()):
                _returns(handler.body, returns)
            _returns(getattr(stmt, "finalbody", None), returns)


def returns_plain(scope: Scope) -> bool:
    """Every `return` of the function gives literals, or names it only ever assigns literals
    (DeepSpeech's `check_loss(loss, loss_value)` → `return loss_valid, error`): no tensor comes out."""
    returns: list = []
    _returns(scope.node.body, returns)
    if not returns or scope.has_yield:
        return False
    for value in returns:
        items = [el.value for el in value.elements] if isinstance(value, cst.Tuple) else [value]
        for item in items:
            if item is None or _literal_only(item):
                continue
            if not isinstance(item, cst.Name) or item.value in scope.params:
                return False
            values = scope.assigns.get(item.value)
            if not values or not all(v is not None and _literal_only(v) for v in values):
                return False
    return True


def plain_call(value: cst.BaseExpression, facts: Facts) -> bool:
    """A call of a project function that returns no tensor (see returns_plain), in this file or another."""
    if not isinstance(value, cst.Call):
        return False
    name = dotted(value.func)
    if not name:
        return False
    if facts.project.name(name).get("plain"):
        return True
    if "." in name:
        return False
    return any(
        scope.node.name.value == name
        and scope.parent is not None
        and scope.parent.kind == "module"
        and returns_plain(scope)
        for scope in facts.functions
    )


def _comprehensions(node: cst.CSTNode):
    if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        return
    if isinstance(node, _COMPREHENSIONS):
        yield node
    for child in node.children:
        yield from _comprehensions(child)


def comprehension_tensors(node: cst.CSTNode, names: set[str]) -> set[str]:
    """Variables of comprehensions over tensors: `{k: v.item() for k, v in loss_dict.items()}` → v
    (the keys of `.items()` are not tensors, nor is anything of `.keys()`)."""
    return comprehensions_tensors(_comprehensions(node), names)


def comprehensions_tensors(comprehensions, names: set[str]) -> set[str]:
    """comprehension_tensors over comprehensions already found (a loop's or a scope's, in source order)."""
    found: set[str] = set()
    for comp in comprehensions:
        part = comp.for_in
        while part is not None:
            it = part.iter
            if refs(it, names | found):
                method = it.func.attr.value if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) else None
                targets = target_names(part.target)
                if method == "items" and isinstance(part.target, cst.Tuple) and len(targets) == 2:
                    found.add(targets[1])
                elif method != "keys":
                    found.update(targets)
            part = part.inner_for_in
    return found


def unconditional_ifs(body: cst.CSTNode) -> list[cst.If]:
    """The `if` statements a function runs every time it is called (not nested in an if or a `while`;
    in a `for` over the function's values, once per value)."""
    out = []
    for stmt in getattr(body, "body", ()):
        if isinstance(stmt, cst.If):
            out.append(stmt)
        elif isinstance(stmt, (cst.With, cst.Try, cst.For)):
            # a `for`: `for k, v in losses.items(): if not torch.isfinite(v).all():`, once per value
            out += unconditional_ifs(stmt.body)
    return out


def unconditional_asserts(body: cst.CSTNode) -> list[cst.Assert]:
    """`assert` statements a block runs every time (not under an if, a nested loop or a def)."""
    out = []
    for stmt in getattr(body, "body", ()):
        if isinstance(stmt, cst.SimpleStatementLine):
            out += [small for small in stmt.body if isinstance(small, cst.Assert)]
        elif isinstance(stmt, (cst.With, cst.Try)):
            out += unconditional_asserts(stmt.body)
    return out


def device_like(node: cst.BaseExpression, facts: Facts, scope: Scope | None = None) -> bool:
    """Is this argument of .to()/.cuda() a device (not a dtype or another tensor)?"""
    value = literal(node)
    if isinstance(value, str):
        return value.split(":")[0] in ("cuda", "mps", "xpu", "xla", "npu", "hpu")
    if isinstance(value, int) and not isinstance(value, bool):
        return True
    if isinstance(node, cst.Call) and (facts.qname(node.func, scope) or "").startswith(
        ("torch.device", "torch.accelerator.")
    ):
        return True
    name = dotted(node)
    if name:
        last = name.rsplit(".", 1)[-1].lower()
        return any(word in last for word in ("device", "gpu", "rank")) and not facts.qname(node, scope)
    return False


class InLoop(NamedTuple):
    """Where a call (or an indexing) sits in a loop of its function (in_loop)."""

    inside: bool  # always True: in_loop says None for a call outside the loop
    conditional: bool  # not on every iteration


def in_loop(site: CallSite, loop: Loop) -> InLoop | None:
    """Where a call sits relative to a loop of the same function, or None outside it.
    Conditional means not every iteration: under an `if` inside the loop whose test changes from
    one iteration to the next (`if step % 100 == 0:`, `if loss < best:`), an `except` or a
    conditional expression. A test of settings the loop never changes (`if not args.distributed:`,
    `if rank == 0:`) selects runs, not iterations: its branch runs on every step of a run that
    takes it."""
    for depth, (enclosing, conditional) in enumerate(site.loops):
        if enclosing is loop:
            if conditional and site.under:
                conditional = any(_changes_per_iteration(node, loop) for node, k in site.under if k > depth)
            return InLoop(True, conditional)
    return None


def at_step_rate(site, loop: Loop) -> bool:
    """A call of the loop under `if` tests of the step counter only (see rate_test), at least one."""
    for depth, (enclosing, _) in enumerate(site.loops):
        if enclosing is loop:
            nodes = [node for node, k in site.under if k > depth]
            return any(isinstance(n, cst.If) and rate_test(n.test, loop) for n in nodes) and all(
                isinstance(n, cst.If) and (rate_test(n.test, loop) or not _changes_per_iteration(n, loop))
                for n in nodes
            )
    return False


def _changes_per_iteration(node: cst.CSTNode, loop: Loop) -> bool:
    if not isinstance(node, cst.If):
        return True  # an except handler or a conditional expression: assume it varies
    if output_flag(node.test):
        return True  # `if verbose > 0:`, `if args.plot:`: extra output asked for, not the training step
    if _phase_test(node.test, loop):
        return False
    return any(isinstance(n, cst.Name) and n.value in loop.varying for n in _names(node.test)) or _calls_random(
        node.test
    )


# Settings that switch on extra output (printing, plots, a debugger's checks): work under them is what a
# user asked to see on a debugging run, not part of the training step (the rule page's "under an if").
_OUTPUT_FLAG = re.compile(
    r"(^|_)(verbose|verbosity|plot|plots|plotting|visdom|debug|debugging|display|show|vis|"
    r"visuali[sz]e|visuali[sz]ation|print|wandb|tensorboard|tb)(_|$)"
)


def output_flag(test: cst.BaseExpression) -> bool:
    """`if verbose > 0:`, `if args.plot:`, `if self.visdom_epoch:`, `if not debug:`: a test that reads
    only output settings (flags, their comparison with literals, `and`/`or`/`not` of them)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return output_flag(test.expression)
    if isinstance(test, cst.BooleanOperation):
        return output_flag(test.left) and output_flag(test.right)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        other = test.comparisons[0].comparator
        if isinstance(other, (cst.Integer, cst.SimpleString)) or (
            isinstance(other, cst.Name) and other.value in ("None", "True", "False")
        ):
            return output_flag(test.left)
        return False
    name = dotted(test)
    return bool(name) and bool(_OUTPUT_FLAG.search(name.rsplit(".", 1)[-1].lower()))


_RANGES = frozenset({"range", "trange", "tnrange", "tqdm.trange", "tqdm.auto.trange", "tqdm.notebook.trange"})


def _counts(it: cst.BaseExpression | None) -> bool:
    """`range(n)`, `trange(n)`, `tqdm(range(n))`: an iterable of the step counter."""
    if not isinstance(it, cst.Call):
        return False
    name = dotted(it.func) or ""
    if name in _RANGES:
        return True
    return name.rsplit(".", 1)[-1] == "tqdm" and bool(it.args) and _counts(it.args[0].value)


def _counters(loop: Loop) -> set[str]:
    """The step counters of a loop and the loops around it (`for T in trange(steps):`)."""
    counters = set()
    outer: Loop | None = loop
    while outer is not None:
        if _counts(outer.iter) and isinstance(outer.node.target, cst.Name):
            counters.add(outer.node.target.value)
        outer = outer.parent
    return counters


def rate_test(test: cst.BaseExpression, loop: Loop) -> bool:
    """`if T % args.update_every == 0:`, `if T >= learn_start and T % 4 == 0:`: a test of the step
    counter that picks every k-th step, or every step after a point. A learner's update under it runs
    on every one of its own training steps (Rainbow's `if T % replay_frequency == 0: dqn.learn(mem)`)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return rate_test(test.left, loop) and rate_test(test.right, loop)
    if _phase_test(test, loop):
        return True
    if not (
        isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.Equal)
    ):
        return False
    left = test.left
    if isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.Modulo):
        counter = left.left
        while isinstance(counter, cst.BinaryOperation):  # `(T + 1) % k`
            counter = counter.left
        return isinstance(counter, cst.Name) and (counter.value in _counters(loop) or counter.value in loop.varying)
    return False


def flag_guarded(function: cst.FunctionDef) -> bool:
    """`if not DEBUG_NAN: return` at the top level of a function: what follows runs only on a debugging
    run (a NaN guard, a plot), not on every training step."""
    for stmt in getattr(function.body, "body", ()):
        if isinstance(stmt, cst.If) and output_flag(stmt.test) and stmt.orelse is None:
            body = getattr(stmt.body, "body", ())
            if (
                len(body) == 1
                and isinstance(body[0], cst.SimpleStatementLine)
                and all(isinstance(small, cst.Return) for small in body[0].body)
            ):
                return True
    return False


def _phase_test(test: cst.BaseExpression, loop: Loop) -> bool:
    """`if global_step > args.learning_starts:` where global_step counts the loop's iterations: the
    branch runs on every iteration after (or before) a point, not on a subset of them."""
    if not (
        isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(
            test.comparisons[0].operator, (cst.GreaterThan, cst.GreaterThanEqual, cst.LessThan, cst.LessThanEqual)
        )
    ):
        return False
    counters = _counters(loop)
    left, right = test.left, test.comparisons[0].comparator
    for counter, bound in ((left, right), (right, left)):
        if (
            isinstance(counter, cst.Name)
            and counter.value in counters
            and not any(isinstance(n, cst.Name) and n.value in loop.varying for n in _names(bound))
        ):
            return True
    return False


def _names(node: cst.CSTNode):
    yield node
    for child in children(node):
        yield from _names(child)


subtree = _names  # every node of an expression, itself first


def _calls_random(test: cst.BaseExpression) -> bool:
    """`if random.random() < p:`: sampled iterations, not a setting."""
    return any(
        isinstance(n, cst.Attribute)
        and isinstance(n.value, cst.Name)
        and n.value.value in ("random", "np", "numpy", "torch")
        and n.attr.value in ("random", "rand", "randint", "uniform")
        for n in _names(test)
    )
