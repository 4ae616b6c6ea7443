"""The first training step's repeated blocks, written from an instance run before them.

A transformer's encoder blocks, a ResNet stage's bottlenecks: consecutive calls of modules of one
class with the same parameters' layouts, each feeding the next. On the meta device they allocate
and free the same storages, in the same order, with the same ops, forward and backward; the memory
model's dispatch mode pays its per-op cost for each all the same. So in the first step (the
memory model's `_measure`, before the optimizer step) a chain of at least MIN_CHAIN such calls
runs its first two instances and its last two exactly, and the ones between as a stand-in: an
autograd Function whose forward writes the second instance's events into the tracker (its
births and deaths, its ops with their names and module paths, its timeline figures, a
kernel's scratch) and returns a meta output of its layout, and whose backward writes the
backward events of the last but one (the template: autograd runs its backward before theirs,
and like theirs its output feeds a block of the chain, where the last one's may feed anything):
the parameters' gradients made at their recorded points, as real tensors on `p.grad`, the
gradient it returns, the deaths of what the forward kept, of the incoming gradient, of the
block's input and output where the exact run frees them.

It holds only where the run proves it (`Reuse.failed` says why not otherwise, and the whole first
step is then run again without stand-ins, from the model's modules' attributes as the first run
found them: `Reuse.restore`):
- before: the instances' classes, parameter and buffer layouts, submodules and plain attributes
  equal; no hooks of the user's on them or their parameters, and none registered for every
  module; under autocast: no reuse; on a GPU spec, a first instance that makes a library's
  workspace (cuBLAS's, at a thread's first GEMM) is left out of the chain;
- forward: each instance called with one tensor (the previous one's output, with nothing run in
  between) and the same other arguments, not in place on it, returning a fresh tensor, setting no
  attribute or buffer of the block's modules (the first two instances', compared: a cache or a flag
  set at a first call, which a stand-in would not set); the first
  and second instances' events equal up to renumbering, the template's too; a stand-in's input of the
  second's layout, its buffers' known values (archlint.model.train.values) those the second
  started from (their values after it are the second's);
- backward: the template's events free only what its forward made, its input, output and
  incoming gradient; after the step the second instance's backward (run exactly, after the
  stand-ins') equals the template's.
The stand-in keeps its input until the recorded free, and its output where the second instance's
autograd graph kept its own (a ReLU's saved result); where the exact run frees them, it drops its
references, and their own frees record it (something outside the chain that holds one, a feature
kept on a module, keeps it alive there as in the exact run: the step then runs again exactly); the
incoming gradient's free it writes takes the tensor's own out of the tracker (`_forget`).
"""

from __future__ import annotations

import bisect
import contextlib
import os
import weakref
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import torch
import torch.nn as nn
from torch._ops import _len_torch_dispatch_stack_pre_dispatch
from torch.utils._python_dispatch import _disable_current_modes

from archlint.model.train import steady

# Off with ARCHLINT_BLOCK_REUSE=0 (tests and benchmarks compare the two ways; the figures are the same)
ENABLED = os.environ.get("ARCHLINT_BLOCK_REUSE", "1") != "0"
# two exact instances to prove the forward, two at the end: the backward's template and the last
# (whose output goes elsewhere: the template's is fed to a block like the stand-ins'); and at least
# two stand-ins: one saves less than reading the spans costs (ResNet-50's layer3, measured)
MIN_CHAIN = 6
BASIS = (
    "the first step's forward and backward of these blocks written from the instances named (same class, "
    "parameter layouts, input layout and op sequence, proved by running the first two and the last two "
    "exactly and comparing their events, and the second's backward with the backward_from one's); the figures "
    "are those of the exact run"
)
_CONTAINERS = (nn.Sequential, nn.ModuleList)
_PLAIN_TYPES = frozenset((int, float, bool, str, type(None), torch.dtype, torch.device))
_BORN = attrgetter("born")
_copy = getattr(torch, "_lazy_clone", torch.clone)
_TOP_HOOKS = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)


def _untracked():
    """Outside the step's dispatch modes (its tracker's: a tensor made here is no op of the step, a real
    value's copy none either): the Python dispatch keys excluded, which no mode on the stack is then
    called through, as torch's _disable_current_modes pops them all off it and back, at a hundredth
    of its cost (20-40 us a time, about 40 times in vit_b_16's first step). Where a pre-dispatch mode
    is on (export's), that way all the same."""
    if _len_torch_dispatch_stack_pre_dispatch():
        return _disable_current_modes()
    return torch._C._DisableTorchDispatch()


class _Off(Exception):
    """A premise of the reuse does not hold (its message says which)."""


class _Held(_Off):
    """A library workspace made in the span (a GPU target's cuBLAS workspace, at its first GEMM)."""


def _said(why: Exception) -> str:
    return str(why) if isinstance(why, _Off) else f"an unforeseen {type(why).__name__} ({why})"


@dataclass
class _Op:
    """One op of a span: its name, module (("rel", suffix) under the instance, ("abs", path)), the
    events inside it in order and after it, before the next (("b", bytes, module), ("t", bytes,
    skippable), ("d", ref)), and its timeline figure less the live bytes when it was taken."""

    name: str
    module: tuple
    items: list
    extra: int


@dataclass
class _Span:
    """An instance's forward or backward events (`pre`: those before its first op)."""

    phase: str
    pre: list
    ops: list[_Op]
    births: int  # how many
    survivors: list[int]  # births alive at the span's end, in birth order
    roles: dict[int, Any] = field(default_factory=dict)  # birth -> "out" | "gin" | ("grad", name)
    key: tuple = ()
    io: tuple = ()  # a forward's: its input's layout

    def same(self, other: _Span) -> bool:
        return self.key == other.key


def _layout(t: torch.Tensor) -> tuple:
    return (tuple(t.shape), t.stride(), t.storage_offset(), t.untyped_storage().nbytes(), t.dtype, t.requires_grad)


def _held(t: torch.Tensor) -> tuple:
    """A parameter's or buffer's layout as the step reads it (its storage's size aside: a parameter
    has its own, and where it is a view the step's events are compared all the same)."""
    return (t.shape, t.stride(), t.storage_offset(), t.dtype, t.requires_grad, type(t))


def _same(a: Any, b: Any, depth: int = 0) -> bool:
    """Plain attribute values equal (a tensor attribute: its layout)."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b) or depth > 4:
        return False
    if kind in _PLAIN_TYPES:
        return a == b
    if isinstance(a, (dict, set, frozenset)) and not a and not b:
        return True  # (the hooks' dicts: most of a module's attributes)
    if isinstance(a, torch.Tensor):
        return _layout(a) == _layout(b) and a.device == b.device
    if isinstance(a, (tuple, list)):
        if len(a) != len(b):
            return False
        kinds = tuple(map(type, a))  # plain items only (a kernel size, a padding): at once, as _same would
        if depth < 4 and _PLAIN_TYPES.issuperset(kinds) and kinds == tuple(map(type, b)) and a == b:
            return True
        return all(_same(x, y, depth + 1) for x, y in zip(a, b))
    if isinstance(a, (set, frozenset)):
        return a == b and all(type(x) in _PLAIN_TYPES for x in a)
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k], depth + 1) for k in a)
    return False  # an object of its own (a function, a partial): the same object only


_HOOKS = (
    "_forward_hooks",
    "_forward_pre_hooks",
    "_backward_hooks",
    "_backward_pre_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_pre_hooks_with_kwargs",
    "_forward_hooks_always_called",
)


def global_module_hooks() -> bool:
    """Hooks registered for every module (torch.nn.modules.module.register_module_forward_hook and
    kin), before the memory model adds its own: they would run in the exact instances' submodules
    and not in a stand-in's, so no chain is stood in for (and the memory model's module paths keep
    to global hooks of their own: memory._module_paths)."""
    from torch.nn.modules import module as torch_module

    names = (
        "_global_forward_hooks",
        "_global_forward_pre_hooks",
        "_global_backward_hooks",
        "_global_backward_pre_hooks",
        "_global_forward_hooks_always_called",
    )
    return any(getattr(torch_module, name, None) for name in names)


def _signature_ok(m: nn.Module) -> bool:
    """No hooks on the module or its parameters, no instance-level forward."""
    attrs = m.__dict__
    if "forward" in attrs:
        return False
    for name in _HOOKS:  # (a loop, not any() over a generator of getattr: half the time, on every candidate's modules)
        hooks = attrs.get(name)
        if hooks is None:  # not set by nn.Module.__init__ (an older torch's): wherever it is
            hooks = getattr(m, name, None)
        if hooks:
            return False
    for p in m._parameters.values():
        if p is not None and (p._backward_hooks or getattr(p, "_post_accumulate_grad_hooks", None)):
            return False
    return True


# a class with one of these of its own walks its modules its own way: torch's methods are called for it
_WALKS = ("named_modules", "named_parameters", "named_buffers")


def _named(walk: list[tuple[str, nn.Module]], members: str) -> list[tuple[str, torch.Tensor]]:
    """`list(block.named_parameters())` (members "_parameters") or `named_buffers()` ("_buffers") from
    the block's walk: each tensor once, at the first name, None left out (torch's `_named_members`)."""
    out = []
    memo: set[int] = set()
    for path, m in walk:
        for k, v in getattr(m, members).items():
            if v is None or id(v) in memo:  # (torch's memo holds the tensors: a Python __hash__ per test)
                continue
            memo.add(id(v))
            out.append((f"{path}.{k}" if path else k, v))
    return out


class _Block:
    """A candidate instance of a chain, read once however many others it is compared with, and only
    as far as the comparisons need (blocks of one class that differ mostly differ in their first
    modules: mobilenet_v3_large's, efficientnet_b0's stages): its modules in `named_modules()`'s order
    (`walk`), each module's structure (`entry`), their own attributes (`attrs`)."""

    __slots__ = ("module", "walk", "todo", "memo", "torch_walk", "entries", "_attrs", "_plain")

    def __init__(self, module: nn.Module, torch_walk: bool):
        self.module = module
        self.torch_walk = torch_walk  # a class with a walk of its own in the model: torch's methods, called
        self.walk: list[tuple[str, nn.Module]] = list(module.named_modules()) if torch_walk else []
        self.todo: list = [] if torch_walk else [("", module)]
        self.memo: set = set()
        self.entries: list[tuple] = []
        self._attrs: tuple[tuple, list] | None = None
        self._plain: bool | None = None

    def at(self, i: int) -> tuple[str, nn.Module] | None:
        """`list(module.named_modules())[i]` (None past the end), walked as far as i: preorder, each
        module once where first reached (torch's membership test), children in order."""
        walk, todo, memo = self.walk, self.todo, self.memo
        while len(walk) <= i:
            if not todo:
                return None
            path, m = todo.pop()
            if m in memo:
                continue
            memo.add(m)
            walk.append((path, m))
            todo += [(f"{path}.{k}" if path else k, c) for k, c in reversed(m._modules.items()) if c is not None]
        return walk[i]

    def modules(self) -> list[tuple[str, nn.Module]]:
        """`list(module.named_modules())`."""
        while self.at(len(self.walk)) is not None:
            pass
        return self.walk

    def entry(self, i: int) -> tuple | None:
        """Module i's path, class, parameters' and buffers' names and layouts (None: a None entry);
        None past the end."""
        entries = self.entries
        while len(entries) <= i:
            item = self.at(len(entries))
            if item is None:
                return None
            path, m = item
            params = tuple((k, None if t is None else _held(t)) for k, t in m._parameters.items())
            buffers = tuple((k, None if t is None else _held(t)) for k, t in m._buffers.items())
            entries.append((path, type(m), params, buffers))
        return entries[i]

    def plain(self) -> bool:
        """No hooks on its modules or their parameters, no instance-level forward (`_signature_ok`)."""
        if self._plain is None:
            self._plain = all(_signature_ok(m) for _, m in self.modules())
        return self._plain

    def attrs(self) -> tuple[tuple, list]:
        """Its modules' attributes: their names in order, module by module, and the values of those not
        nn.Module's own, in the same order."""
        if self._attrs is None:
            names, values = [], []
            for _, m in self.modules():
                attrs = vars(m)
                names.append(tuple(attrs))
                values += [v for k, v in attrs.items() if k not in _MODULE_OWN]
            self._attrs = (tuple(names), values)
        return self._attrs

    def named(self, members: str) -> list[tuple[str, torch.Tensor]]:
        """`list(module.named_parameters())` (members "_parameters") or `named_buffers()` ("_buffers")."""
        if self.torch_walk:
            return list(getattr(self.module, "named" + members)())
        return _named(self.modules(), members)


def _same_instance(a: _Block, b: _Block) -> bool:
    """Two instances the same block: submodules, classes, parameter and buffer layouts (module by
    module, the first that differs ends it), then hooks and plain attributes."""
    i = 0
    while True:
        mine, theirs = a.entry(i), b.entry(i)
        if mine is None or theirs is None:
            if mine is not theirs:  # one has more modules
                return False
            break
        if mine != theirs:
            return False
        i += 1
    if not (a.plain() and b.plain()):
        return False
    (names, values), (names2, values2) = a.attrs(), b.attrs()
    # the same names in the same order: the values of those not nn.Module's own pair up
    return names == names2 and all(v is w or _same(v, w) for v, w in zip(values, values2))


# nn.Module's own attributes: its parameters, buffers, children and hooks (checked apart), not the block's
_MODULE_OWN = frozenset(vars(nn.Module())) - {"training", "_non_persistent_buffers_set"}


def _chains(model: nn.Module, paths: dict[int, str]) -> list[tuple[str, list[tuple[str, _Block]]]]:
    """Runs of at least MIN_CHAIN consecutive children of a Sequential or ModuleList that are the
    same block (with the container's path), each module and parameter in one place only, none
    inside another run's blocks (their spans would nest)."""
    containers = []
    kinds: set[type] = set()
    todo: list[nn.Module | None] = [model]
    seen = set()
    while todo:  # each module once, outer first (model.modules()'s generators cost more than the search)
        container = todo.pop()
        if container is None or id(container) in seen:  # (None: a child slot left empty)
            continue
        seen.add(id(container))
        kinds.add(type(container))
        below = container._modules
        todo += reversed(below.values())  # (a list of them without None: a third of the walk)
        if len(below) >= MIN_CHAIN and isinstance(container, _CONTAINERS):
            containers.append(container)
    # a class with its own named_modules (or named_parameters, named_buffers): torch's, called (_Block)
    torch_walk = any(getattr(kind, name) is not getattr(nn.Module, name) for kind in kinds for name in _WALKS)
    found = []
    for container in containers:
        children = [(name, child) for name, child in container._modules.items() if child is not None]
        i = 0
        while i < len(children):  # runs of one class first (cheap), then of the same block
            j = i + 1
            while j < len(children) and type(children[j][1]) is type(children[i][1]):
                j += 1
            if j - i >= MIN_CHAIN:
                candidates = [(name, _Block(child, torch_walk)) for name, child in children[i:j]]
                found += [(container, run) for run in _same_runs(candidates)]
            i = j
    out = []
    inside: set[int] = set()  # modules inside the runs taken (model.modules() is outer first)
    seen_params: set[int] = set()
    for container, run in found:
        if id(container) in inside:
            continue
        ok = True
        for _, block in run:
            base = paths.get(id(block.module))
            for path, sub in block.modules():
                full = paths.get(id(sub))
                if base is None or full != (f"{base}.{path}" if path else base):
                    ok = False  # a submodule reached by another path first (shared): its ops' paths differ
                inside.add(id(sub))
            for _, p in block.named("_parameters"):
                ok = ok and id(p) not in seen_params
                seen_params.add(id(p))
        if ok:
            out.append((paths.get(id(container), ""), run))
    return out


def _same_runs(items: list[tuple[str, _Block]]) -> list[list[tuple[str, _Block]]]:
    """The runs of at least MIN_CHAIN consecutive items that are the same block as the run's first
    (each run as long as it goes, the next one starting where it ends). `_same_instance` is an
    equivalence (between plain blocks; no other is the same as any), so these are the longest
    stretches whose neighbours are the same block, and each such stretch of MIN_CHAIN holds a pair
    of neighbours at every MIN_CHAIN - 1 places: only there is a stretch looked for, from the pair
    out. Where most neighbours differ, fewer comparisons: mobilenet_v3_large's 15 inverted
    residuals, none a run, 4 where each with the next took 10 (0.13 ms less, measured on this
    project's 2-core test machine)."""
    step = MIN_CHAIN - 1
    runs = []
    start = 0  # no run reaches back before this
    at = step - 1  # the pair looked at: (at, at + 1), at each `step - 1` modulo `step`
    while at + 1 < len(items):
        if _same_instance(items[at][1], items[at + 1][1]):
            first, last = at, at + 1
            while first > start and _same_instance(items[first - 1][1], items[first][1]):
                first -= 1
            while last + 1 < len(items) and _same_instance(items[last][1], items[last + 1][1]):
                last += 1
            if last + 1 - first >= MIN_CHAIN:
                runs.append(items[first : last + 1])
            start = last + 1
        else:
            start = at + 1
        at = start + (step - 1 - start) % step
    return runs


class _Logged(list):
    """The tracker's timeline while a span is recorded: each append also notes the tracker's events."""

    def __init__(self, tracker):
        super().__init__()
        self.tracker = tracker
        self.at: list[int] = []

    def append(self, item) -> None:
        self.at.append(self.tracker.events)
        super().append(item)


@dataclass
class _Open:
    """A span being recorded: where it began and the timeline it had."""

    events: int
    ops: int
    live: int
    timeline: list
    logged: _Logged


def _begin(tracker) -> _Open:
    logged = _Logged(tracker)
    opened = _Open(tracker.events, tracker.ops, tracker.live_bytes, tracker.timeline, logged)
    tracker.timeline = logged
    return opened


def _close(tracker, opened: _Open) -> None:
    opened.timeline += opened.logged
    tracker.timeline = opened.timeline


def _module_ref(path: str, prefix: str) -> tuple:
    if path == prefix:
        return ("rel", "")
    if path.startswith(prefix + "."):
        return ("rel", path[len(prefix) :])
    return ("abs", path)


def _read_span(tracker, opened: _Open, prefix: str, phase: str, outside: dict[str, Any]) -> tuple[_Span, list]:
    """The events of the span `opened` began (to now) in a form another instance can be written
    from, and the records born in it; `outside`: records from before the span it may free, by the
    name a stand-in knows them by."""
    e0, e1, o0, o1 = opened.events, tracker.events, opened.ops, tracker.ops
    at, timeline = opened.logged.at, opened.logged
    if len(at) != o1 - o0 or len(timeline) != o1 - o0:
        raise _Off("ops whose timeline the span did not see")
    records = tracker.records
    births = records[bisect.bisect_left(records, e0, key=_BORN) :]
    transients = tracker.transients[bisect.bisect_left(tracker.transients, e0, key=_BORN) :]
    events: dict[int, tuple] = {}
    refs: dict[str, tuple] = {}  # (a block's ops come from a few modules each: each path's reference made once)
    for i, r in enumerate(births):
        if r.kind == "workspaces":
            raise _Held("a library workspace made in the block")
        if r.phase != phase or r.kind or r.skippable or not o0 <= r.op < o1 or r.born >= e1:
            raise _Off("a birth of another phase or kind, or outside the span's ops")
        ref = refs.get(r.module)
        if ref is None:
            ref = refs[r.module] = _module_ref(r.module, prefix)
        events[r.born] = ("b", r.nbytes, ref, r.op - o0)
        if r.died < e1:
            events[r.died] = ("d", ("span", i), r.nbytes)
    for t in transients:
        events[t.born] = ("t", t.nbytes, t.skippable, t.op - o0)
    for name, rec in outside.items():
        if e0 <= rec.died < e1:
            events[rec.died] = ("d", (name,), rec.nbytes)
    if len(births) + 2 * len(transients) + sum(1 for e in events.values() if e[0] == "d") != e1 - e0:
        raise _Off("a storage from outside the block freed in it")
    names, modules = tracker.op_names, tracker.op_module
    ops = []
    for j in range(o0, o1):
        path = modules[j]
        ref = refs.get(path)
        if ref is None:
            ref = refs[path] = _module_ref(path, prefix)
        ops.append(_Op(names[j], ref, [], 0))
    pre: list = []
    live, j = opened.live, 0

    def figure() -> None:  # op j's timeline figure, taken now: less the live bytes, what a scratch adds
        nonlocal j
        op, value = timeline[j]
        if op != o0 + j or value < live:
            raise _Off("a timeline out of step with the ops")
        ops[j].extra = value - live
        ops[j].items.append(("f",))
        j += 1

    for event in sorted(events):
        while j < len(ops) and at[j] <= event:
            figure()
        item = events[event]
        if item[0] == "d":
            (ops[j].items if j < len(ops) else ops[-1].items if ops else pre).append(item[:2])
            live -= item[2]
            continue
        if item[3] != j:
            raise _Off("a birth outside its op")
        ops[j].items.append(item[:3])
        if item[0] == "b":
            live += item[1]
    while j < len(ops):
        figure()
    survivors = [i for i, r in enumerate(births) if r.died >= e1]
    key = (phase, tuple(pre), tuple((o.name, o.module, tuple(o.items), o.extra) for o in ops), tuple(survivors))
    return _Span(phase, pre, ops, len(births), survivors, {}, key), births


def _forget(tracker, tensor: torch.Tensor):
    """The tensor's record, taken out of the tracker with its own free (a weak reference's callback):
    the caller frees it (sets its death)."""
    storage = tensor.untyped_storage()
    key = id(storage)
    rec = tracker.by_id.get(key)
    if rec is None:
        raise _Off("a tensor to free that the tracker does not hold")
    for ref in weakref.getweakrefs(storage):
        tracker.pending.pop(id(ref), None)
    del tracker.by_id[key]
    return rec


@dataclass
class Reused:
    """A chain whose middle instances were written from others (said in the output)."""

    module: str
    block: str
    chain: str
    reused: str
    forward_from: str
    backward_from: str

    def to_dict(self) -> dict:
        return {
            "module": self.module,
            "class": self.block,
            "chain": self.chain,
            "reused": self.reused,
            "forward_from": self.forward_from,
            "backward_from": self.backward_from,
        }


@dataclass(frozen=True)
class Outcome:
    """What the output says of a first step's chains (`Reuse.close`): the ones written from others,
    or why the step ran again exactly."""

    reused: list[Reused]
    failed: str


class _StandIn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, chain, k):
        ctx.chain, ctx.k = chain, k
        return chain.stand_forward(k, x)

    @staticmethod
    def backward(ctx, grad):
        chain, k = ctx.chain, ctx.k
        del ctx.chain
        return chain.stand_backward(k, grad), None, None


class _Chain:
    """One chain through the first step: which instance comes next, the spans read, the stand-ins' state."""

    def __init__(self, reuse: Reuse, container: str, run: list[tuple[str, _Block]], paths: dict[int, str]):
        self.reuse = reuse
        self.container = container
        self.names = [n for n, _ in run]
        self.modules = [b.module for _, b in run]
        self.paths = [paths[id(m)] for m in self.modules]
        self.params = [b.named("_parameters") for _, b in run]
        self.buffers = [b.named("_buffers") for _, b in run]
        self.n = len(run)
        self.base = 0  # instances before the chain as it stands (the first left out: _drop_first)
        self.last = self.n - 2  # the template of the stand-ins' backward
        self.next = 0
        self.on = True
        self.stood = 0  # stand-ins run
        self.after: tuple[int, int] | None = None  # tracker (events, ops) when the last instance returned
        self.prev_out: Any = None  # weak reference to the last instance's output
        self.rest: tuple | None = None
        self.fwd: dict[int, _Span] = {}
        self.fwd_recs: dict[int, list] = {}  # exact instance -> the records its forward made
        self.in_rec: dict[int, Any] = {}
        self.out_rec: dict[int, Any] = {}
        self.in_layout: tuple | None = None
        self.out_layout: Any = None  # a meta tensor of the second instance's output's layout
        self.holds_output = False
        self.buffer_values: list[tuple[Any, Any]] = []  # per buffer: (value before, value after) of instance 2
        self.bwd: dict[int, _Span] = {}
        self.opened: dict[int, _Open] = {}
        self.gout: dict[int, Any] = {}
        self.state: dict[int, dict] = {}  # stand-in -> its tensors and records
        self.grad_layouts: dict[str, torch.Tensor] = {}
        self.gin_layout: torch.Tensor | None = None
        self.programs: dict[tuple, _Program] = {}  # (span, the outside records' sizes) -> its program
        self.outside: dict[int, list[str]] = {}  # span -> the names of the records from before it that it frees

    def _program(self, span: _Span, sizes: dict[str, int]) -> _Program:
        """The span compiled for writing (once a chain, per sizes of what it frees from before it)."""
        key = (id(span), tuple(sorted(sizes.items())))
        program = self.programs.get(key)
        if program is None:
            program = self.programs[key] = _compile(span, sizes)
        return program

    # -- the forward ----------------------------------------------------------------------------
    def call(self, k: int, forward, args: tuple, kwargs: dict):
        reuse = self.reuse
        tracker = reuse.tracker
        k -= self.base
        if not self.on or reuse.failed or k < 0:
            return forward(*args, **kwargs)
        if k == self.n - 1:  # run exactly, as the template's consumer (the post-hoc check covers it)
            self.on = False
            return forward(*args, **kwargs)
        try:
            self._check_call(k, args, kwargs, tracker)
        except Exception as why:  # a premise unmet (_Off), or a case not foreseen: exact, said
            return self._off(why, forward, args, kwargs)
        x = args[0]
        if k in (0, 1, self.last):
            return self._exact(k, forward, args, kwargs, x, tracker)
        try:
            self._check_stand_in(k, x, args)
        except Exception as why:  # a premise unmet (_Off), or a case not foreseen: exact, said
            return self._off(why, forward, args, kwargs)
        self.stood += 1
        y = _StandIn.apply(x, self, k)
        self._done(k, y, tracker)
        return y if y is not None else forward(*args, **kwargs)

    def _off(self, why: Exception | str, forward, args, kwargs):
        """The chain's calls exact from here; the step runs again exactly where a stand-in ran, or
        where the reason is no premise but an error of ours (said in the notes either way)."""
        if self.stood or not isinstance(why, (_Off, str)):
            self.reuse.fail(
                f"{self.paths[0]}: {_said(why) if isinstance(why, Exception) else why}"
                + (" after a stand-in ran" if self.stood else "")
            )
        self.on = False
        return forward(*args, **kwargs)

    def _check_call(self, k: int, args: tuple, kwargs: dict, tracker) -> None:
        if k != self.next:
            raise _Off("an instance called out of order")
        if not args or not isinstance(args[0], torch.Tensor):
            raise _Off("a call without a tensor first")
        # the other arguments: plain values, or tensors that need no gradient, the same objects at each
        # call (a mask, position embeddings: held weakly here); not an object a layer may change (a cache)
        rest = _call_key((args[1:], list(kwargs.items())))
        if self.rest is None:
            self.rest = rest
        elif self.rest != rest:
            raise _Off("calls with different arguments")
        x = args[0]
        if not (torch.is_grad_enabled() and x.requires_grad and x.is_meta):
            raise _Off("an input that needs no gradient, or grad mode off")
        if _TOP_HOOKS is not None and _TOP_HOOKS(False) is not None:
            raise _Off("saved-tensor hooks (activation checkpointing or offloading)")
        if self.reuse.values is not None and x in self.reuse.values.values:
            raise _Off("an input with a known value")
        if k and (self.prev_out is None or self.prev_out() is not x or self.after != (tracker.events, tracker.ops)):
            raise _Off("an instance's input not the previous one's output, or ops between them")

    def _check_stand_in(self, k: int, x, args) -> None:
        if self.fwd.get(1) is None:
            raise _Off("no template")
        if _layout(x) != self.in_layout:
            raise _Off("an input of another layout")
        values = self.reuse.values
        if values is not None:
            with _untracked():  # real tensors: not the step's
                for (_, b), (before, _after) in zip(self.buffers[k], self.buffer_values):
                    known = b in values.values
                    if known != (before is not None) or known and not torch.equal(values.values[b], before):
                        raise _Off("a buffer's value differs from the template's")
        for _, p in self.params[k]:
            if p.grad is not None:
                raise _Off("a parameter with a gradient already")

    def _done(self, k: int, y, tracker) -> None:
        self.next = k + 1
        self.prev_out = weakref.ref(y) if isinstance(y, torch.Tensor) else None
        self.after = (tracker.events, tracker.ops)

    def _exact(self, k: int, forward, args, kwargs, x, tracker):
        values = self.reuse.values
        before = None
        if k == 1 and values is not None:
            before = _values_of(values, self.buffers[k])
        in_rec = tracker.record(x)
        version = x._version
        if isinstance(tracker.timeline, _Logged):
            return self._off("a span inside another's", forward, args, kwargs)
        attrs = _attributes(self.modules[k]) if k < 2 else None
        opened = _begin(tracker)
        try:
            y = forward(*args, **kwargs)
        finally:
            _close(tracker, opened)
        try:
            if attrs is not None and not _unchanged(attrs):
                # a cache or a flag set at the first call: a stand-in sets none, and the next step's
                # forward of its instance would differ from the exact run's
                raise _Off("a forward that sets an attribute of its block")
            if not isinstance(y, torch.Tensor) or y.grad_fn is None or not y.is_meta:
                raise _Off("an output that is not one tensor with a gradient")
            if x._version != version:
                raise _Off("an in-place op on the input")
            if in_rec is None or y.untyped_storage() is x.untyped_storage():
                raise _Off("an output that is a view of the input")
            out_rec = tracker.record(y)
            span, births = _read_span(tracker, opened, self.paths[k], "forward", {"in": in_rec})
            out = next((i for i, r in enumerate(births) if r is out_rec), None)
            if out is None or out not in span.survivors:
                raise _Off("an output not made in the block")
            span.roles[out] = "out"
            if any(item[0] == "d" and item[1] == ("in",) for o in span.ops for item in o.items):
                raise _Off("the input freed in the block's forward")
            span.key += (out, _layout(y))
            span.io = _layout(x)  # instance 1's input may be laid out otherwise (ViT's: batch first), same ops
            self.fwd[k] = span
            self.fwd_recs[k] = births
            self.in_rec[k], self.out_rec[k] = in_rec, out_rec
            if k == 1:
                if not self.fwd[0].same(span):
                    raise _Off("the first two instances' forwards differ")
                self.in_layout = _layout(x)
                with _untracked():
                    self.out_layout = steady.fresh_like(y)
                    fresh = torch.empty(1, device="meta")
                if values is not None:
                    self.buffer_values = list(zip(before or [], _values_of(values, self.buffers[k])))
                # the block's autograd graph keeps its output (a ReLU's saved result): a stand-in keeps its own
                self.holds_output = _use_count(y) > _use_count(fresh)
            if k == self.last and self.stood and not (self.fwd[1].same(span) and self.fwd[1].io == span.io):
                raise _Off("the template's forward differs from the second's")
            if k == 0 and isinstance(self.reuse.tracker.timeline, _Logged):
                raise _Off("a span inside another's")
            self._hook_backward(k, y)
        except Exception as why:  # a premise unmet (_Off), or a case not foreseen: exact, said
            if k == 0 and isinstance(why, _Held) and self.n > MIN_CHAIN:
                self._drop_first()  # its first GEMM's workspace: the chain begins at the next
                return y
            if self.stood or not isinstance(why, _Off):  # an error of ours: said, and the step run again
                self.reuse.fail(f"{self.paths[k]}: {_said(why)}")
            self.on = False
            return y
        self._done(k, y, tracker)
        return y

    def _drop_first(self) -> None:
        """The chain less its first instance (which made a library's workspace, as the others do not)."""
        self.base += 1
        for name in ("names", "modules", "paths", "params", "buffers"):
            setattr(self, name, getattr(self, name)[1:])
        self.n -= 1
        self.last = self.n - 2
        self.fwd.clear()
        self.fwd_recs.clear()
        self.in_rec.clear()
        self.out_rec.clear()
        self.rest = None

    def _hook_backward(self, k: int, y) -> None:
        """Where each exact instance's backward begins (its output's node about to run): instance 2's
        and the template's are read; instance 1's beginning ends instance 2's."""
        chain = self

        def pre(grad_outputs, k=k):
            chain._backward_begins(k, grad_outputs)

        y.grad_fn.register_prehook(pre)

    def _backward_begins(self, k: int, grad_outputs) -> None:
        try:
            self._begins(k, grad_outputs)
        except Exception as why:  # a case not foreseen: the step runs again exactly, said
            self.reuse.fail(f"{self.paths[k]}: {_said(why)}")

    def _begins(self, k: int, grad_outputs) -> None:
        tracker = self.reuse.tracker
        g = grad_outputs[0] if grad_outputs else None
        if k == 0 and 1 in self.opened:  # instance 2's backward ends where instance 1's begins
            self._read_backward(1, g)
        if k in (1, self.last) and self.stood and not self.reuse.failed:
            rec = tracker.record(g) if isinstance(g, torch.Tensor) else None
            if rec is None or isinstance(tracker.timeline, _Logged):
                self.reuse.fail(f"{self.paths[k]}: a backward without a tracked gradient, or inside another's")
                return
            self.gout[k] = rec
            self.opened[k] = _begin(tracker)

    def _read_backward(self, k: int, gin) -> None:
        """Instance k's backward, just ended (the next node is the previous instance's): read."""
        tracker = self.reuse.tracker
        opened = self.opened.pop(k)
        _close(tracker, opened)
        try:
            fwd, out_rec = self.fwd_recs[k], self.out_rec[k]
            kept = [j for j in self.fwd[k].survivors if fwd[j] is not out_rec]
            outside = {"in": self.in_rec[k], "out": out_rec, "gout": self.gout[k]}
            outside.update((f"fwd{j}", fwd[j]) for j in kept)
            span, births = _read_span(tracker, opened, self.paths[k], "backward", outside)
            where = {id(r): i for i, r in enumerate(births)}
            last = k == self.last
            for name, p in self.params[k]:
                grad = p.grad
                if grad is None:  # frozen, or not used: none for the stand-ins either (the spans' roles compared)
                    continue
                rec = tracker.record(grad)
                if rec is None or where.get(id(rec)) not in span.survivors:
                    raise _Off("a parameter's gradient not made in its block's backward")
                span.roles[where[id(rec)]] = ("grad", name)
                if last:
                    with _untracked():
                        self.grad_layouts[name] = steady.fresh_like(grad)
            grec = tracker.record(gin) if isinstance(gin, torch.Tensor) else None
            if grec is None:
                raise _Off("an input gradient the tracker does not hold")
            if grec is self.gout[k]:
                span.roles[-1] = "gin=gout"
            elif where.get(id(grec)) in span.survivors:
                span.roles[where[id(grec)]] = "gin"
                if last:
                    with _untracked():
                        self.gin_layout = steady.fresh_like(gin)
            else:
                raise _Off("an input gradient not made in the block's backward")
            if set(span.roles) - {-1} != set(span.survivors):
                raise _Off("a storage made in the backward that outlives it")
            killed = {item[1][0] for o in span.ops for item in o.items if item[0] == "d"}
            killed |= {item[1][0] for item in span.pre}
            if {f"fwd{j}" for j in kept} - killed:
                raise _Off("a storage the forward kept that its backward does not free")
            if "out" in killed and not self.holds_output:
                raise _Off("an output freed in its own backward that its graph does not keep")
            span.key += (tuple(sorted(span.roles.items(), key=lambda kv: kv[0])),)
            self.bwd[k] = span
            if k == 1 and not self.bwd[self.last].same(span):
                raise _Off("the second instance's backward differs from the template's")
        except Exception as why:  # a premise unmet (_Off), or a case not foreseen: exact, said
            self.reuse.fail(f"{self.paths[k]}: {_said(why)}")

    # -- the stand-ins ---------------------------------------------------------------------------
    def stand_forward(self, k: int, x):
        tracker = self.reuse.tracker
        span = self.fwd[1]
        prefix = self.paths[k]
        with _untracked():
            y = steady.fresh_like(self.out_layout)
        recs: list = []
        out_at = next(i for i, role in span.roles.items() if role == "out")
        try:
            recs = _write(tracker, self._program(span, {}), prefix, {}, {out_at: y})
        except Exception as why:  # a premise unmet (_Off), or a case not foreseen: exact, said
            self.reuse.fail(f"{prefix}: {_said(why)}")
        self.state[k] = {"x": x, "y": y if self.holds_output else None, "recs": recs}
        values = self.reuse.values
        if values is not None:
            with _untracked():
                for (_, b), (_before, after) in zip(self.buffers[k], self.buffer_values):
                    if after is not None:
                        values.values[b] = after.clone()
                    else:
                        values.values.discard(b)
        return y

    def stand_backward(self, k: int, grad):
        tracker = self.reuse.tracker
        last = self.last
        if last in self.opened:
            self._read_backward(last, grad)
        state = self.state.pop(k, None)
        span = self.bwd.get(last)
        if span is None or state is None or self.reuse.failed:
            self.reuse.fail(self.reuse.failed or f"{self.paths[k]}: no backward to write the stand-in from")
            with _untracked():
                return torch.zeros_like(state["x"]) if state is not None else None
        params = dict(self.params[k])
        made: dict[int, torch.Tensor] = {}
        fwd = state["recs"]
        # the input and output held here alone (their free: `_drop`)
        named = {"in": state.pop("x"), "out": state.pop("y"), "gout": grad}
        try:
            # the gradients it makes, in birth order (real meta tensors: they outlive it)
            with _untracked():
                for i, role in sorted(span.roles.items(), key=lambda kv: kv[0]):
                    if role == "gin":
                        if self.gin_layout is None:
                            raise _Off("no input gradient's layout")
                        made[i] = steady.fresh_like(self.gin_layout)
                    elif isinstance(role, tuple):
                        made[i] = t = steady.fresh_like(self.grad_layouts[role[1]])
                        _give_grad(params[role[1]], t)
            outside = {}
            names = self.outside.get(id(span))  # (the same for each stand-in: read once)
            if names is None:
                names = self.outside[id(span)] = _outside(span)
            if len(set(names)) != len(names):
                raise _Off("a stand-in freeing a record from before it twice")
            for name in names:  # the records from before the stand-in that it frees
                if name.startswith("fwd"):
                    outside[name] = fwd[int(name[3:])]
                elif named.get(name) is None:
                    raise _Off(f"a stand-in without its {name} to free")
                elif name == "gout":  # (autograd holds it through the call: its free written, its own taken out)
                    outside[name] = _forget(tracker, named.pop(name))
                else:  # the input or output: its own free, when `_write` drops it (`_drop`)
                    outside[name] = tracker.record(named[name])
                    if outside[name] is None:
                        raise _Off(f"a stand-in's {name} held outside the chain, or not tracked")
            sizes = {name: rec.nbytes for name, rec in outside.items()}
            _write(tracker, self._program(span, sizes), self.paths[k], outside, made, named)
        except Exception as why:  # a premise unmet (_Off), or a case not foreseen: exact, said
            self.reuse.fail(f"{self.paths[k]}: {_said(why)}")
        if span.roles.get(-1) == "gin=gout":
            return grad
        gin = next((t for i, t in made.items() if span.roles.get(i) == "gin"), None)
        return gin


class _Identity:
    """A tensor argument as a call's key holds it: weakly, equal to another only for the same live tensor."""

    __slots__ = ("ref",)

    def __init__(self, tensor: torch.Tensor):
        self.ref = weakref.ref(tensor)

    def __eq__(self, other: object) -> bool:
        mine = self.ref()
        return isinstance(other, _Identity) and mine is not None and mine is other.ref()

    __hash__ = None  # type: ignore[assignment]


def _call_key(value: Any, depth: int = 0) -> Any:
    """A call's other arguments as compared between calls: plain values by value, tensors by
    identity (a weak reference: a mask must die when the step lets it); anything else refused."""
    if isinstance(value, torch.Tensor):
        if value.requires_grad or not value.is_meta:
            raise _Off("a call with another tensor that needs a gradient or is not on meta")
        return ("tensor", _Identity(value))
    if type(value) in _PLAIN_TYPES:
        return (type(value).__name__, value)
    if isinstance(value, (tuple, list)) and depth < 4:
        return (type(value).__name__, tuple(_call_key(v, depth + 1) for v in value))
    raise _Off(f"a call with an argument of type {type(value).__name__}")


def _give_grad(param: torch.Tensor, grad: torch.Tensor) -> None:
    """The parameter's gradient, as AccumulateGrad gives the first one (the tensor itself)."""
    param.grad = grad


def _attributes(block: nn.Module) -> list[tuple[nn.Module, dict, dict, dict]]:
    """Each module's attributes and buffers under `block` (shallow copies: the objects themselves held,
    so that an identity compared later is not a new object's at a freed one's address), and the
    contents of its container attributes (a list, a dict, a set: a cache grown in place)."""
    out = []
    todo = [block]
    while todo:  # (model.modules()'s generators cost a third more: a fifth of a millisecond on resnet50)
        m = todo.pop()
        held = m.__dict__.copy()
        contents = {}
        # the block's own attributes only (a few of a module's thirty: a set difference, not a loop over
        # all; each key's copy and later check stand alone, in whatever order)
        for key in held.keys() - _MODULE_OWN:
            value = held[key]
            if type(value) in _GROWN:  # (a list, dict or set exactly: its own copy() is copy.copy's)
                contents[key] = value.copy()
        out.append((m, held, m._buffers.copy(), contents))
        todo += [child for child in m._modules.values() if child is not None]
    return out


_GROWN = (list, dict, set)


def _put_back(attrs: list) -> None:
    """The modules' attributes and buffers as `_attributes` took them (their containers' contents too)."""
    for m, held, buffers, contents in attrs:
        now = vars(m)
        now.clear()
        now.update(held)
        m._buffers.clear()
        m._buffers.update(buffers)
        for key, was in contents.items():
            value = held[key]
            value.clear()
            if isinstance(value, list):
                value += was
            else:
                value.update(was)


def _unchanged(attrs: list) -> bool:
    """No attribute or buffer of `_attributes`' rebound, added or dropped, no container attribute grown
    or shrunk since."""
    for m, held, buffers, contents in attrs:
        now = vars(m)
        if len(now) != len(held) or len(m._buffers) != len(buffers):
            return False
        if any(now.get(key, now) is not value for key, value in held.items()):
            return False
        if any(len(held[key]) != len(was) for key, was in contents.items()):
            return False
        if any(m._buffers.get(key) is not b for key, b in buffers.items()):
            return False
    return True


def _values_of(values, buffers: list) -> list:
    """The buffers' known values now (copies; None: unknown)."""
    with _untracked():  # real tensors: not the step's
        return [values.values[b].clone() if b in values.values else None for _, b in buffers]


def _use_count(t: torch.Tensor) -> int:
    return torch._C._storage_Use_Count(t.untyped_storage()._cdata)


@dataclass
class _Program:
    """A span as a stand-in writes it, its figures relative to where it begins (event, op, live
    bytes): the ops' names and modules; the timeline's figures (op, live bytes, event); the births
    (bytes, event, op, module) and deaths (event, the birth's index or an outside record's name) in
    order; the transients (bytes, skippable, event, op); its highest point (live bytes, event, op:
    the first to reach it; None: no birth); its events and the live bytes it adds; the input's and
    output's frees (event, name: where the stand-in drops its reference, their own frees record them)."""

    names: list[str]
    modules: list[tuple]
    figures: list[tuple[int, int, int]]
    births: list[tuple[int, int, int, tuple]]
    deaths: list[tuple[int, Any]]
    transients: list[tuple[int, bool, int, int]]
    top: tuple[int, int, int] | None
    events: int
    live: int
    drops: list[tuple[int, str]] = field(default_factory=list)


def _outside(span: _Span) -> list[str]:
    """The names of the records from before the span that it frees, in order."""
    items = [*span.pre, *(item for o in span.ops for item in o.items)]
    return [item[1][0] for item in items if item[0] == "d" and item[1][0] != "span"]


def _compile(span: _Span, sizes: dict[str, int]) -> _Program:
    """The span's events in the order the tracker counts them (`sizes`: the bytes of the outside
    records it frees), as `_write` adds them: one pass here, a few list operations a stand-in."""
    figures: list = []
    births: list = []
    deaths: list = []
    transients: list = []
    drops: list = []
    top = None
    live = event = 0
    for j, o in enumerate((None, *span.ops), -1):
        items, extra = (span.pre, 0) if o is None else (o.items, o.extra)
        for item in items:
            kind = item[0]
            if kind == "f":
                figures.append((j, live + extra, event))
                continue
            if kind == "d":
                ref = item[1]
                if ref[0] == "span":
                    deaths.append((event, ref[1]))
                    live -= births[ref[1]][0]
                else:  # the input or output: not written, its own free when the stand-in drops it
                    (drops if ref[0] in ("in", "out") else deaths).append((event, ref[0]))
                    live -= sizes[ref[0]]
                event += 1
                continue
            nbytes = item[1]
            high = live + nbytes
            if top is None or high > top[0]:
                top = (high, event, j)
            if kind == "b":
                births.append((nbytes, event, j, item[2]))
                live += nbytes
                event += 1
            else:
                transients.append((nbytes, item[2], event, j))
                event += 2
    names = [o.name for o in span.ops]
    modules = [o.module for o in span.ops]
    return _Program(names, modules, figures, births, deaths, transients, top, event, live, drops)


def _write(
    tracker,
    program: _Program,
    prefix: str,
    outside: dict[str, Any],
    made: dict[int, torch.Tensor],
    held: dict[str, Any] | None = None,
) -> list:
    """Write a span's program into `tracker` as an instance at `prefix`, as the tracker would have
    counted each event (`outside`: the records from before it that it frees, by name; `made`: the
    births with a tensor of their own, by index; `held`: the input and output, held here alone,
    dropped where the exact run frees them); the records of its births."""
    e0, o0, live0, phase = tracker.events, tracker.ops, tracker.live_bytes, tracker.phase
    # the ops' names, phases and modules at once (nothing reads them while a span is written)
    modules = [prefix + where[1] if where[0] == "rel" else where[1] for where in program.modules]
    tracker.op_names += program.names
    tracker.op_phase += [phase] * len(modules)
    tracker.op_module += modules
    timeline = tracker.timeline
    if isinstance(timeline, _Logged):  # inside a span being read: its events at each figure too
        timeline.at += [e0 + e for _, _, e in program.figures]
    list.extend(timeline, [(o0 + j, live0 + v) for j, v, _ in program.figures])
    # the records as the tracker makes them (its record class: memory's own, taken from a record)
    record = type(tracker.records[0])
    recs = [
        record(nbytes, e0 + e, o0 + j, phase, prefix + where[1] if where[0] == "rel" else where[1])
        for nbytes, e, j, where in program.births
    ]
    for i, t in made.items():  # a tensor's storage, freed with it (as the tracker's `see` counts one)
        rec = recs[i]
        if tracker.size(t.untyped_storage()) != rec.nbytes or tracker.record(t) is not None:
            raise _Off("a stand-in's tensor of another size than the template's")
        tracker.adopt(t, rec)
    tracker.records += recs
    for e, ref in program.deaths:
        (recs[ref] if isinstance(ref, int) else outside[ref]).died = e0 + e
    if program.transients:
        round_to = tracker.round_to
        for nbytes, skippable, e, j in program.transients:
            rec = record(
                -(-nbytes // round_to) * round_to,
                e0 + e,
                o0 + j,
                phase,
                kind="workspaces",
                died=e0 + e + 1,
                skippable=skippable,
            )
            tracker.transients.append(rec)
    tracker.ops = o0 + len(modules)
    tracker.live_bytes = live0 + program.live + sum(outside[name].nbytes for _, name in program.drops)
    for e, name in program.drops:
        _drop(tracker, held or {}, name, outside[name], e0 + e)
    tracker.events = e0 + program.events
    if program.top is not None and live0 + program.top[0] > tracker.peak:
        tracker.peak, tracker.peak_event, tracker.peak_op = (
            live0 + program.top[0],
            e0 + program.top[1],
            o0 + program.top[2],
        )
    return recs


def _drop(tracker, held: dict[str, Any], name: str, rec, event: int) -> None:
    """The stand-in's input or output (`name`) freed at `event` by dropping its last reference (ours):
    its own free records it. Where something outside the chain holds it (a feature kept on a module,
    no op between the blocks) the exact run does not free it here either: the step runs again."""
    t = held.pop(name, None)
    if t is None:
        raise _Off(f"a stand-in without its {name} to free")
    key = id(t.untyped_storage())
    tracker.events = event
    del t
    if tracker.by_id.get(key) is rec or rec.died != event or tracker.events != event + 1:
        raise _Off(f"a stand-in's {name} held outside the chain, or not tracked")


class Reuse:
    """The chains of one first step (`active` around its `_measure`); `failed`: why the step must run
    again exactly (empty: it need not); `reused`: what the output says."""

    def __init__(self, model: nn.Module, paths: dict[int, str], values, enabled: bool):
        self.model = model
        self.values = values
        self.tracker: Any = None
        self.failed = ""
        self.chains: list[_Chain] = []
        if not (enabled and ENABLED) or global_module_hooks():
            return
        for container, run in _chains(model, paths):
            self.chains.append(_Chain(self, container, run, paths))

    def fail(self, why: str) -> None:
        self.failed = self.failed or why

    @contextlib.contextmanager
    def active(self, tracker, params: list, buffers: list, optimizer):
        """The instances' forwards patched for the step under `tracker` (the first step's measure);
        what `restore` needs to run that step again is kept first: the buffers' known values."""
        if not self.chains:
            yield
            return
        self.tracker = tracker
        self._params, self._optimizer = params, optimizer
        values = self.values
        with _untracked():  # copy-on-write: a buffer's value written in the step is copied then
            self._buffers = [(b, _copy(values.values[b])) for b in buffers if b in values.values]
        self._unknown = [b for b in buffers if b not in values.values]
        # the model's modules' attributes (a cache, a flag a forward sets at its first call: the step
        # run again must start from the model the first run began with)
        self._attrs = _attributes(self.model)
        patched = []
        for chain in self.chains:
            for k, m in enumerate(chain.modules):

                def call(*args, _chain=chain, _k=k, _forward=m.forward, **kwargs):
                    return _chain.call(_k, _forward, args, kwargs)

                m.forward = call
                patched.append(m)
        try:
            yield
        finally:
            for m in patched:
                del m.forward
            for chain in self.chains:
                if chain.stood and 1 not in chain.bwd:
                    self.fail(f"{chain.paths[1]}: its backward was not read")
                chain.state.clear()
                for opened in chain.opened.values():
                    _close(tracker, opened)
                chain.opened.clear()

    def restore(self) -> None:
        """The model and optimizer as they were before the step (the step runs again, exactly):
        no gradients, no optimizer state, the buffers' known values, the modules' attributes (a forward's
        effects outside the model, a global's, are not undone: the same as a second call of it)."""
        for p in self._params:
            p.grad = None
        self._optimizer.state.clear()
        for b, value in self._buffers:
            self.values.values[b] = value
        for b in self._unknown:
            self.values.values.discard(b)
        _put_back(self._attrs)
        self.chains = []

    def close(self) -> Outcome:
        """What the output says; the model, the tracker and the chains let go of. Each chain holds its
        Reuse, which holds the tracker that holds it: kept, they (the meta model and the step's storages
        among them) were freed by the cyclic collector's next pass, not by their reference counts when the
        step is read (2.6 ms of vit_b_16's --train)."""
        outcome = Outcome(self.reused(), self.failed)
        self.__dict__.clear()  # nothing reads a closed Reuse: whatever it held, it holds no more
        return outcome

    def reused(self) -> list[Reused]:
        if self.failed:
            return []
        out = []
        for c in self.chains:
            if c.stood:
                out.append(
                    Reused(
                        c.container or "<model>",
                        type(c.modules[0]).__name__,
                        f"{c.names[0]}-{c.names[-1]}",
                        c.names[2] if c.stood == 1 else f"{c.names[2]}-{c.names[1 + c.stood]}",
                        c.paths[1],
                        c.paths[c.last],
                    )
                )
        return out
