"""The first training step's optimizer.step(), written from per-parameter templates.

On a CPU target PyTorch's optimizers run their single-tensor loop: the same ~10 ops for every
parameter (and, in `_init_group`, the same few that make its state), each through the memory
model's dispatch mode at its per-op cost. Most parameters repeat a layout (shape, strides, dtype):
a transformer's blocks, a ResNet stage's bottlenecks; and most layouts differ only in their sizes.
So torch's own step runs once on a probe (fresh meta parameters with gradients, a few layouts'
(below), in a copy of the optimizer with the same hyperparameters), under a tracker of its own and
a mode that sees which storages each op reads and writes and the shape of each it makes; the real
step's events are then written into the real tracker, parameter by parameter, from the probe's,
and the optimizer's state is made as torch makes it (fresh meta tensors of the probe's state's
layout, its CPU tensors' values copied).

It holds only where the probe shows it does (`FirstUpdate.reason` says why not otherwise, and the
step then runs for real, as before): every op reads or writes one parameter's tensors or none;
the ops of each parameter are contiguous and come in the parameters' order (a loop over them; two
loops: `_init_group`'s and the update's); every parameter's run has the same ops and the same
pattern of births and deaths (a storage freed in its own run, in the next one's, as AdamW's
`denom` is freed when the next parameter's is assigned, or after the loop: the last one's); the
ops outside the loops make nothing; the state is made in the loops, one storage a tensor, with
the same keys and the same CPU values for every parameter; the optimizer is left otherwise as it
was (no attribute set, its group unchanged), no hook runs; and no op holds a library workspace or
a kernel's scratch (the tracker's slow path). The probe runs at least three parameters (a layout
repeated where there are fewer), so that a run with a run before and after it is seen.

Which layouts it runs (`_probes`), and where each layout's sizes come from (`_scale`): for torch's
own optimizers (whose loops make the same ops for every parameter of a class, whatever its sizes),
the layouts of a class (`_class_of`: contiguous in a fresh tensor's strides, more than one element,
its storage and its gradient's its own; one dtype, type and requires_grad; one dimension count, but
under the optimizers whose loops read none, `_ANY_DIMS`: SGD, Adam, AdamW, ..., where a 1-d bias and
a 4-d kernel are of one class) are probed by a pair, the class's layouts of the fewest and the most
elements. The rest of the class take its template where the pair's runs prove a rule: every birth
is, in both, of the parameter's shape at one whole number of bytes an element, or a scalar (0-dim)
of one size; no op has a scratch the watch sizes by its inputs (a reduction's, a convolution's);
each state tensor is, in both, of the parameter's shape and strides on a storage of its own size, or
a scalar of one layout. A layout's births are then its elements times those bytes, or the scalar's
size, each rounded as the real tracker rounds a storage (the probe's tracker counts them unrounded).
A class the pair does not prove is probed layout by layout in a second probe (`FirstUpdate.unscaled`
says why), as is any other layout: its sizes are its own run's. A shape the pair shares is no proof
of a fixed one (torch.optim.Muon's Gram matrix, rows x rows, is the same for (8, 8) and (8, 128),
not for (16, 32)): only a scalar's is.
"""

from __future__ import annotations

import bisect
import collections
import functools
import math
from collections.abc import Callable, Collection
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.optim.optimizer import _global_optimizer_post_hooks, _global_optimizer_pre_hooks
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from archlint.model.train import steady
from archlint.model.train.gpu_workspaces import REDUCE_OPS

MARKS = ("init", "update")  # steady.init_marked's marks: where `_init_group` begins and ends
_IMMUTABLE = (int, float, bool, str, type(None))
_META = torch.device("meta")
# ops the memory model's watch gives a workspace or scratch sized by their inputs (a GPU sum's or
# mean's cross-block buffer, a convolution's cuDNN or oneDNN scratch): a probed parameter may run
# one with none where a larger one needs it, so a loop that has one is never scaled
_SIZED_SCRATCH = frozenset({*(op.__name__ for op in REDUCE_OPS), "convolution", "convolution_backward"})


class _Touched(TorchDispatchMode):
    """The probe's mode: the memory model's watch (`watch`, its __torch_dispatch__ called here, one
    dispatch an op), and beside it each op's tracker events before and after it and the records of
    the storages it reads and writes (the watch has registered its outputs by then)."""

    def __init__(self, watch, tracker):
        super().__init__()
        self.watch = watch
        self.tracker = tracker
        self.ops: list[tuple[int, int, list]] = []
        self.shapes: dict[int, tuple] = {}  # id(record) of a storage an op made -> the shape of its output on it

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # as the memory model's watch: never compiled, and the probe's ops stay cheap

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        tracker = self.tracker
        before = tracker.events
        out = self.watch.__torch_dispatch__(func, types, args, kwargs)
        touched = []
        record = tracker.record
        tensor = torch.Tensor
        for value in (*args, *(kwargs.values() if kwargs else ())):
            if isinstance(value, tensor):
                if (rec := record(value)) is not None:
                    touched.append(rec)
            elif isinstance(value, (tuple, list)):
                touched += [rec for t in value if isinstance(t, tensor) and (rec := record(t)) is not None]
        for value in (out,) if isinstance(out, tensor) or not isinstance(out, (tuple, list)) else out:
            if isinstance(value, tensor):
                if (rec := record(value)) is not None:
                    touched.append(rec)
                    if rec.born >= before:
                        self.shapes.setdefault(id(rec), tuple(value.shape))
            elif isinstance(value, (tuple, list)):
                touched += [rec for t in value if isinstance(t, tensor) and (rec := record(t)) is not None]
        self.ops.append((before, tracker.events, touched))
        return out


@dataclass
class _Run:
    """One parameter's run of a loop, as the probe made it: its ops, and per op the bytes of the
    storages it made and, after it, the deaths (("own", i): its i-th birth; ("prev", i): the
    previous run's)."""

    names: list[str]
    births: list[list[int]]  # per op: bytes of each storage it made
    deaths: list[list[tuple[str, int]]]  # per op: the deaths after it, before the next op

    def shape(self) -> tuple:
        return (tuple(self.names), tuple(len(b) for b in self.births))


@dataclass
class _Loop:
    """A loop over the parameters: the pattern of the first run, of a middle one and of the last
    (their deaths differ: the first frees nothing of a run before it, the last frees its own
    survivors after its last op), and each layout's bytes."""

    first: _Run
    middle: _Run
    last: _Run
    sizes: dict[Any, list[list[int]]]  # probed layout's number -> per op, its births' bytes (unrounded)
    shapes: dict[Any, list[list[tuple | None]]]  # probed layout's number -> per op, its births' shapes
    state_at: dict[tuple[int, int], str]  # (op in the run, birth in the op) -> the state key it is
    # every layout's number -> the bytes of its births that are not state, in order, rounded as the real
    # tracker rounds a storage (`_scale`; a state tensor's are its own, made by `_states`)
    temps: dict[Any, list[int]] = field(default_factory=dict)


@dataclass
class _Fixed:
    """Ops outside the loops (the record_function around the step): no births; deaths after each op
    are of a loop's last run ((loop index, birth index in the run))."""

    names: list[str]
    deaths: list[list[tuple[int, int]]]


@dataclass
class Template:
    """The probe's step, ready to be written for the real parameters (`write`)."""

    parts: list  # _Fixed and _Loop, in order
    marks: dict[str, tuple[int, int, int]]  # mark -> (part index, op index in it, deaths after the op before it)
    state: dict[int, dict[str, Any]]  # layout's number -> the probe's state of that layout
    keyed: bool  # whether the step gave every parameter a state entry (else none)


@dataclass
class FirstUpdate:
    """The first step's optimizer.step() for `_step` (as its `update`): written from the probe's
    template where it holds, else run for real. `watch(tracker)`: the memory model's dispatch mode
    over a tracker; `new_tracker()`: a fresh tracker counting as the real one does."""

    optimizer: torch.optim.Optimizer
    watch: Callable[[Any], Any]
    new_tracker: Callable[[], Any]
    templated: bool = False
    reason: str = ""  # why the step ran for real (empty: templated)
    probed: int = 0  # the layouts the probe ran (its last run's)
    unscaled: list[str] = field(default_factory=list)  # each class probed layout by layout after all, and why

    def __call__(self, tracker) -> None:
        with _disable_current_modes():  # the probe runs outside the real tracker's watch
            chosen, why = _eligible(self.optimizer)
            plan = None
            if chosen is not None:
                params, keys, layouts = chosen
                unproven: dict = {}  # class -> why its pair did not prove its template
                torchs = _torchs(self.optimizer)
                dims = _reads_dims(self.optimizer)
                if not torchs:
                    self.unscaled = ["every layout: the optimizer's step is not torch's own (it may branch on a size)"]
                while True:  # again, with the classes not proven probed layout by layout (once at most, mostly)
                    probed, pairs, class_of = _probes(layouts, unproven, torchs, dims)
                    self.probed = len(probed)
                    why = _worth(len(params), len(probed))
                    if why:
                        break
                    plan, why, more = _plan(
                        self.optimizer,
                        (params, keys, layouts),
                        probed,
                        pairs,
                        class_of,
                        self.watch,
                        self.new_tracker,
                        tracker,
                    )
                    if not more:
                        break
                    unproven.update(more)
                self.unscaled += [f"{_class_name(c)}: {w}" for c, w in unproven.items()]
        self.reason = why
        if plan is None:
            self.optimizer.step()
            return
        template, states = plan
        _write(template, tracker, keys, states)
        if template.keyed:  # in the parameters' order, as `_init_group` makes the entries
            self.optimizer.state.update(zip(params, states))
        self.templated = True


def _layout(t: torch.Tensor) -> tuple:
    return (t.shape, t.stride(), t.storage_offset(), t.untyped_storage().nbytes(), t.dtype, t.layout, t.device)


def _eligible(optimizer) -> tuple[tuple[list, list[int], list[tuple]] | None, str]:
    """The parameters the step updates (those with a gradient, in order), where a template can stand for
    it: (those parameters, each one's layout's number, the layouts, first seen first). The rest of the
    step keys its tables by a layout's number: a layout's tuple (torch.Size, dtypes) hashes in about
    half a microsecond, a dozen times a parameter."""
    if len(optimizer.param_groups) != 1:
        return None, "more than one parameter group"
    if (
        optimizer.state
        or not isinstance(optimizer.state, collections.defaultdict)
        or optimizer.state.default_factory is not dict
    ):
        return None, "the optimizer has state already"
    if (
        _global_optimizer_pre_hooks
        or _global_optimizer_post_hooks
        or optimizer._optimizer_step_pre_hooks
        or optimizer._optimizer_step_post_hooks
    ):
        return None, "optimizer step hooks"
    if optimizer.param_groups[0].get("foreach") or optimizer.param_groups[0].get("fused"):
        return None, "a foreach or fused implementation (a few ops over every parameter at once)"
    params = [p for p in optimizer.param_groups[0]["params"] if p.grad is not None]
    if len(params) < 3:
        return None, "fewer than three parameters with a gradient"
    storages, keys = set(), []
    numbers: dict[tuple, int] = {}
    strided = torch.strided
    for p in params:
        g = p.grad
        if not (p.is_meta and g.is_meta and p.layout is strided and g.layout is strided):
            return None, "a parameter or gradient not dense on meta"
        ps, gs = p.untyped_storage(), g.untyped_storage()
        storages.add(id(ps))
        storages.add(id(gs))
        # its layout: all that torch's step can read of it and its gradient, values aside
        layout = (
            (p.shape, p.stride(), p.storage_offset(), ps.nbytes(), p.dtype, type(p), p.requires_grad),
            (g.shape, g.stride(), g.storage_offset(), gs.nbytes(), g.dtype, type(g)),
        )
        keys.append(numbers.setdefault(layout, len(numbers)))
    if len(storages) != 2 * len(params):
        return None, "parameters or gradients that share a storage"
    return (params, keys, list(numbers)), ""


def _torchs(optimizer) -> bool:
    """Whether the optimizer is one of torch's own (torch.optim's classes): their per-parameter loops
    make the same ops for every parameter of a class, whatever its sizes (`_class_of`), and the
    probe's pair then shows how each birth's bytes follow them. A subclass of one may branch on a
    size between the pair's, where no probe sees it."""
    module = type(optimizer).__module__
    return module == "torch.optim" or module.startswith("torch.optim.")


# torch's own optimizers whose per-parameter loops (`_init_group`'s and the single-tensor update's)
# read no parameter's dimension count or shape: the same ops for a 1-d bias and a 4-d kernel, each
# output of the parameter's shape or a scalar (read in torch 2.x's source: their only reads of a
# size are of a hyperparameter's `numel()` and, in Adagrad, a sparse gradient's `size()`, and a
# sparse gradient is never templated). Not Adafactor (it factors a gradient of `dim() > 1`), nor
# Muon (2-d only), nor any other class: their layouts' classes keep the dimension count.
_ANY_DIMS = frozenset(
    {
        torch.optim.SGD,
        torch.optim.Adam,
        torch.optim.AdamW,
        torch.optim.Adagrad,
        torch.optim.Adadelta,
        torch.optim.Adamax,
        torch.optim.ASGD,
        torch.optim.NAdam,
        torch.optim.RAdam,
        torch.optim.RMSprop,
        torch.optim.Rprop,
    }
)


def _reads_dims(optimizer) -> bool:
    """Whether the optimizer's step may branch on a parameter's dimension count: all but the exact
    classes of `_ANY_DIMS` (a subclass may override a loop)."""
    return type(optimizer) not in _ANY_DIMS


def _contiguous(shape) -> tuple[int, ...]:
    """The strides torch gives a fresh tensor of `shape` (no dimension of size 0)."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def _numel(key) -> int:
    return math.prod(key[0][0])


def _class_of(key, dims: bool = True) -> tuple | None:
    """A layout's class, whose pair of probed layouts can prove its template for the rest (`_scale`),
    or None (probed itself): a parameter of more than one element in the strides torch gives a fresh
    tensor of its shape, owning its storage, with a gradient of its shape and strides owning its own.
    A layout dense in another order of its dimensions stays apart: where a dimension is of size 1
    its stride is free, and an op's output takes one by its own rules (empty_like keeps it,
    TensorIterator may not). Its class: its dimensions' count where the optimizer may branch on it
    (`dims`: see `_reads_dims`; else None), its and its gradient's dtypes and types, requires_grad."""
    (shape, stride, offset, nbytes, dtype, kind, grad_req), (gshape, gstride, goffset, gnbytes, gdtype, gkind) = key
    numel = math.prod(shape)
    if numel < 2 or offset or goffset or gshape != shape or gstride != stride or stride != _contiguous(shape):
        return None
    if nbytes != numel * dtype.itemsize or gnbytes != numel * gdtype.itemsize:
        return None
    return (len(shape) if dims else None, dtype, kind, grad_req, gdtype, gkind)


def _class_name(c: tuple) -> str:
    dtype = str(c[1]).removeprefix("torch.")
    return f"{dtype} parameters of any dimension count" if c[0] is None else f"{c[0]}-d {dtype} parameters"


def _probes(layouts: list, unproven: Collection, torchs: bool, dims: bool = True) -> tuple[list, dict, dict]:
    """The layouts the probe runs (their numbers in `layouts`, first seen first): (those layouts, class
    -> its pair (its layouts of the fewest and the most elements, first seen of each), layout -> its
    class where a pair stands for it). A class of three layouts or more and two sizes is probed by its
    pair; any other layout, a class in `unproven`, and every layout where the step is not torch's own
    (`torchs`), by itself. `dims`: whether a class keeps its layouts' dimension count (`_class_of`)."""
    members: dict = {}
    for key, layout in enumerate(layouts):
        c = _class_of(layout, dims)
        if c is not None and c not in unproven and torchs:
            members.setdefault(c, []).append(key)
    numel = [_numel(layout) for layout in layouts].__getitem__
    pairs, class_of = {}, {}
    for c, ks in members.items():
        small, large = min(ks, key=numel), max(ks, key=numel)
        if len(ks) < 3 or numel(small) == numel(large):
            continue  # nothing to spare, or no two sizes to prove a scale by
        pairs[c] = (small, large)
        for key in ks:
            class_of[key] = c
    probed = [k for k in range(len(layouts)) if k not in class_of or k in pairs[class_of[k]]]
    return probed, pairs, class_of


def _worth(params: int, probed: int) -> str:
    """Why the probe would not pay (empty: it does). It runs the probed layouts' parameters (each at
    about twice the cost of one in torch's step over all: its reading, its template), then writes
    every parameter at a fraction of its cost. Measured (process time, 4 and 10 probed layouts, 6
    to 40 parameters): AdamW breaks even at 2.5 to 3 parameters a probed layout, SGD with momentum
    at about 5, plain SGD (one op a parameter) at about 30 (mobilenet_v3_large's 29 gain a tenth;
    resnet18's 12 lose a third of a millisecond). The rule is AdamW's, the default."""
    if probed >= params:
        return "no fewer layouts to probe than parameters"
    if params < 3 * probed:
        return "too few parameters a probed layout (under 3)"
    return ""


def _probe_optimizer(optimizer, params: list) -> torch.optim.Optimizer:
    """A copy of `optimizer` over `params` (same class, hyperparameters and attributes), with no state."""
    probe = object.__new__(type(optimizer))
    cls = type(optimizer)
    # not an instance's override of a method (init_marked's of `_init_group`: the real tracker's)
    probe.__dict__.update((k, v) for k, v in optimizer.__dict__.items() if not (hasattr(cls, k) and callable(v)))
    group = dict(optimizer.param_groups[0])
    group["params"] = params
    probe.__dict__["param_groups"] = [group]
    probe.__dict__["state"] = collections.defaultdict(dict)
    return probe


def _plan(optimizer, chosen, probed, pairs, class_of, watch, new_tracker, real) -> tuple[Any, str, dict]:
    """Run the probe over the `probed` layouts and read its template; then every layout's sizes (a
    class's scaled from its pair) and the real state, made. `chosen`: `_eligible`'s. (None, why, {})
    where it does not hold; (None, why, {class: why}) where a class's pair does not prove its template."""
    params, keys, layouts = chosen
    first_of = {k: p for k, p in zip(reversed(keys), reversed(params))}  # one parameter of each layout
    order = list(probed)
    reps = [first_of[k] for k in order]
    while len(reps) < 3:  # a run with runs before and after it is seen
        reps.append(reps[len(reps) % len(order)])
        order.append(order[len(order) % len({*order})])
    probe_params = []
    for p in reps:
        q = torch.nn.Parameter(steady.fresh_like(p), requires_grad=p.requires_grad)
        q.grad = steady.fresh_like(p.grad)
        probe_params.append(q)
    probe = _probe_optimizer(optimizer, probe_params)
    attrs = dict(probe.__dict__)
    group = dict(probe.param_groups[0])
    tracker = new_tracker()
    tracker.round_to = 1  # its storages' own bytes: a class's scale before the real tracker rounds them
    for q in probe_params:
        tracker.see(q, "start")
    for q in probe_params:
        tracker.see(q.grad, "start")
    tracker.phase = "step"
    touched = _Touched(watch(tracker), tracker)
    start, live0 = tracker.events, tracker.live_bytes
    with steady.init_marked(probe, tracker), touched:
        probe.step()
    end = tracker.events
    died = {id(r): r.died for r in tracker.records}  # as they stood at the step's end
    if set(probe.__dict__) != set(attrs) or any(probe.__dict__[k] is not v for k, v in attrs.items() if k != "state"):
        return None, "the step set an attribute of the optimizer", {}
    now = probe.param_groups[0]
    if list(now) != list(group) or any(now[k] is not group[k] for k in group if k != "params"):
        return None, "the step changed the parameter group", {}
    template, why = _template(tracker, touched, probe, probe_params, order, start, end, died, live0)
    if template is None:
        return None, why, {}
    why = _probe_states(template, probe, probe_params, order)
    if why:
        return None, why, {}
    made, unproven = _scale(template, pairs, layouts, class_of, real.round_to)
    if unproven:
        return None, "a class's pair did not prove its template", unproven
    states, why = _states(template, keys, layouts, class_of, made)
    if states is None:
        return None, why, {}
    return (template, states), "", {}


def _template(tracker, touched, probe, probe_params, order, start, end, died, live0) -> tuple[Template | None, str]:
    ops, shapes = touched.ops, touched.shapes
    if tracker.shims or tracker.transients or tracker.workspaces:
        return None, "an op adapted, or a library workspace or kernel scratch"
    if any(r.phase == "start" and start <= died[id(r)] < end for r in tracker.records):
        return None, "a storage from before the step freed in it"
    if len(ops) != tracker.ops:
        return None, "ops the reading mode did not see"
    # owners: a parameter's storage, its gradient's and its state's belong to it; an op that
    # touches one parameter's belongs to it, and so do the storages it makes
    owner: dict[int, int] = {}
    for j, q in enumerate(probe_params):
        owner[id(tracker.record(q))] = j
        owner[id(tracker.record(q.grad))] = j
    state_of: dict[int, tuple[int, str]] = {}  # id(record) -> (parameter, key)
    for j, q in enumerate(probe_params):
        for name, v in probe.state.get(q, {}).items():
            if isinstance(v, torch.Tensor):
                rec = tracker.record(v)
                if rec is None or id(rec) in state_of or id(rec) in owner and owner[id(rec)] != j:
                    return None, "a state tensor shared or not made in the step"
                state_of[id(rec)] = (j, name)
                owner[id(rec)] = j
    labels = []
    for _before, _after, recs in ops:
        label = None
        for r in recs:
            mine = owner.get(id(r))
            if mine is not None:
                if label is not None and mine != label:
                    return None, "an op that touches two parameters' tensors"
                label = mine
        if label is not None:
            for r in recs:
                owner.setdefault(id(r), label)
        labels.append(label)
    births: dict[int, list] = {}  # op -> its births, in order
    for r in tracker.records:
        if start <= r.born < end:
            births.setdefault(r.op, []).append(r)
    for i, (before, after, _) in enumerate(ops):
        made = births.get(i)
        if made is None:
            if after != before:
                return None, "an op whose events are not its outputs' births"
        elif after - before != len(made) or any(not before <= r.born < after for r in made):
            return None, "an op whose events are not its outputs' births"
    deaths_after: dict[int, list] = {}  # op -> the records freed after it, in order (-1: before the first op)
    bounds = [after for _, after, _ in ops]
    for r in sorted((r for r in tracker.records if start <= died[id(r)] < end), key=lambda r: died[id(r)]):
        at = _gap(bounds, died[id(r)])
        if at + 1 < len(ops) and died[id(r)] >= ops[at + 1][0]:
            return None, "a death inside an op"
        deaths_after.setdefault(at, []).append(r)
    if -1 in deaths_after:
        return None, "a death before the step's first op"
    # the live bytes each op leaves must be its timeline figure (the watch's plain path)
    live, timeline = live0, tracker.timeline
    for i in range(len(ops)):
        made = births.get(i)
        if made is not None:
            live += sum(r.nbytes for r in made)
        if timeline[i][1] != live or timeline[i][0] != i:
            return None, "an op's timeline figure is not its live bytes"
        dead = deaths_after.get(i)
        if dead is not None:
            live -= sum(r.nbytes for r in dead)
    # segments: runs of one owner; a loop is owners 0..k-1 in order
    segments: list[tuple[int | None, int, int]] = []
    for i, label in enumerate(labels):
        if segments and segments[-1][0] == label:
            segments[-1] = (label, segments[-1][1], i + 1)
        else:
            segments.append((label, i, i + 1))
    k = len(probe_params)
    where: dict[int, tuple[int, int, int]] = {}  # id(birth record) -> (part, run (-1: fixed), birth index in run)
    parts: list = []
    part_of_op: list[tuple[int, int]] = []  # op -> (part, op index in its run or fixed part)
    starts: dict[int, int] = {}  # fixed part -> its first op
    s = 0
    while s < len(segments):
        label, a, b = segments[s]
        if label is None:
            if births.keys() & range(a, b):
                return None, "an op outside the loops that makes a storage"
            starts[len(parts)] = a
            parts.append(_Fixed([tracker.op_names[i] for i in range(a, b)], [[] for _ in range(a, b)]))
            part_of_op += [(len(parts) - 1, i - a) for i in range(a, b)]
            s += 1
            continue
        runs = segments[s : s + k]
        if [r[0] for r in runs] != list(range(k)):
            return None, "the parameters' ops are not one loop over them in order"
        loop_index = len(parts)
        parts.append(None)
        read = []
        for j, (_, a, b) in enumerate(runs):
            names = [tracker.op_names[i] for i in range(a, b)]
            made = [births.get(i, []) for i in range(a, b)]
            flat = [r for m in made for r in m]
            for n, r in enumerate(flat):
                where[id(r)] = (loop_index, j, n)
                if owner.get(id(r)) != j:
                    return None, "a storage made in a parameter's run that is not its own"
            read.append((names, made))
            part_of_op += [(loop_index, i - a) for i in range(a, b)]
        parts[loop_index] = (runs, read)
        s += k
    # deaths, by where they happen and whose birth they are
    loops: dict[int, _Loop] = {}
    for index, part in enumerate(parts):
        if isinstance(part, _Fixed):
            continue
        runs, read = part
        made_runs = []
        for j, ((_, a, b), (names, made)) in enumerate(zip(runs, read)):
            deaths = []
            for i in range(a, b):
                tags = []
                for r in deaths_after.get(i, []):
                    place = where.get(id(r))
                    if place is None or place[0] != index or place[1] not in (j, j - 1):
                        return None, "a death in a run of a storage not its own or the run's before"
                    tags.append(("own" if place[1] == j else "prev", place[2]))
                deaths.append(tags)
            made_runs.append(_Run(names, [[r.nbytes for r in m] for m in made], deaths))
        first, middle, last = made_runs[0], made_runs[1], made_runs[-1]
        if any(t[0] == "prev" for d in first.deaths for t in d):
            return None, "the first run frees a run before it"
        shape = first.shape()
        for j, run in enumerate(made_runs):
            if run.shape() != shape:
                return None, "the parameters' runs differ in their ops"
            if 0 < j < k - 1 and run.deaths != middle.deaths:
                return None, "the middle runs differ in their deaths"
        # the first run's deaths are a middle run's less the frees of a run before; the last run's
        # differ only after its last op (its survivors freed with it)
        own_middle = [[t for t in d if t[0] == "own"] for d in middle.deaths]
        if first.deaths != own_middle:
            return None, "the first run's deaths are not a middle run's"
        if last.deaths[:-1] != middle.deaths[:-1]:
            return None, "the last run's deaths differ before its last op"
        sizes: dict[Any, list[list[int]]] = {}
        born_shapes: dict[Any, list[list[tuple | None]]] = {}
        for key, run, (_names, made) in zip(order, made_runs, read):
            if sizes.setdefault(key, run.births) != run.births:
                return None, "one layout's runs made storages of different sizes"
            born_shapes.setdefault(key, [[shapes.get(id(r)) for r in m] for m in made])
        state_at: dict[tuple[int, int], str] = {}
        for j, (_names, made) in enumerate(read):
            found = {}
            for i, m in enumerate(made):
                for n, r in enumerate(m):
                    if id(r) in state_of:
                        found[(i, n)] = state_of[id(r)][1]
            if j == 0:
                state_at = found
            elif found != state_at:
                return None, "the parameters' runs made different state"
        loops[index] = _Loop(first, middle, last, sizes, born_shapes, state_at)
    if any(i not in where for i in state_of):
        return None, "a state tensor not made in a parameter's run"
    # every storage made in a run and alive at the step's end is state; a last run's survivors
    # freed in a fixed part are freed there for the real last parameter
    for r in tracker.records:
        if id(r) in where and died[id(r)] >= end and id(r) not in state_of:
            return None, "a storage made in a run outlives the step without being state"
    final: list = []
    for index, part in enumerate(parts):
        if isinstance(part, _Fixed):
            a = starts[index]
            for n in range(len(part.names)):
                for r in deaths_after.get(a + n, []):
                    place = where.get(id(r))
                    if place is None or place[1] != k - 1:
                        return None, "a fixed op's death of a storage not a loop's last run's"
                    part.deaths[n].append((place[0], place[2]))
            final.append(part)
        else:
            final.append(loops[index])
    marks: dict[str, tuple[int, int, int]] = {}
    for name in MARKS:
        mark = tracker.marks.get(name)
        if mark is None:
            continue
        if mark.ops == 0:
            return None, "a mark before the first op"
        part, n = part_of_op[mark.ops - 1]
        before_mark = sum(1 for r in deaths_after.get(mark.ops - 1, []) if died[id(r)] < mark.events)
        if isinstance(final[part], _Loop):
            runs = parts[part][0]
            if runs[-1][1] > mark.ops - 1 or n != len(final[part].first.names) - 1:
                return None, "a mark inside a loop"
        marks[name] = (part, n, before_mark)
    keyed = bool(probe.state)
    if keyed and list(probe.state) != probe_params:
        return None, "the state's keys are not the parameters in order"
    return Template(final, marks, {}, keyed), ""


def _gap(bounds: list[int], event: int) -> int:
    """The op after which an event (a death) happened: the last whose events ended at or before it (-1: none)."""
    return bisect.bisect_right(bounds, event) - 1  # (bounds ascend: each op's events end after the last's)


def _probe_states(template: Template, probe, probe_params, order) -> str:
    """Each probed layout's state, the probe's (`template.state`); why not (empty: it holds): a layout's
    runs with different keys, or a value (not a meta tensor) not the same for every parameter."""
    shared: dict[str, Any] = {}
    for key, q in zip(order, probe_params):
        state = probe.state.get(q, {})
        if template.state.setdefault(key, state) is not state and list(template.state[key]) != list(state):
            return "one layout's state differs in its keys"
        for name, v in state.items():
            if isinstance(v, torch.Tensor) and v.device.type == "meta":
                continue
            if not isinstance(v, (torch.Tensor, *_IMMUTABLE)):
                return "a state value that is neither a tensor nor a plain value"
            seen = shared.setdefault(name, v)
            same = (
                torch.equal(seen, v) and _layout(seen)[:3] == _layout(v)[:3] and seen.dtype == v.dtype
                if isinstance(v, torch.Tensor) and isinstance(seen, torch.Tensor)
                else type(seen) is type(v) and seen == v
            )
            if not same:
                return "a state value that differs between parameters"
    return ""


def _scale(template: Template, pairs: dict, layouts: list, class_of: dict, round_to: int) -> tuple[dict, dict]:
    """Every layout's births' bytes (but the state's), rounded as the real tracker rounds a storage
    (`_Tracker.size`), into each loop's `temps`; and each class's state entries: (class -> [(name, how, the probe's)],
    {class: why its pair does not prove its template}: then nothing is written).

    A probed layout's bytes are its own run's. A class's other layouts' follow its pair's runs, where
    they prove a rule (they are alike in all else: `_template`): every birth is, in both, of the
    parameter's shape at one number of bytes an element, or a scalar of one size; no op of a loop
    has a scratch sized by its inputs; and each state tensor is, in both, of the parameter's shape
    and strides on a storage of its own size, or a scalar of one layout, of one dtype."""
    loops = [(index, part) for index, part in enumerate(template.parts) if isinstance(part, _Loop)]
    rules: dict = {}  # class -> loop part -> per birth but the state's: (bytes, 0): fixed; (bytes an element, 1)
    made: dict = {}
    unproven: dict = {}
    for c, (a, b) in pairs.items():
        rule, why = _birth_rule(loops, a, b, layouts[a], layouts[b])
        entries, state_why = _state_rule(template.state[a], template.state[b], layouts[a], layouts[b])
        if rule is None or entries is None:
            unproven[c] = why or state_why
        else:
            rules[c], made[c] = rule, entries
    if unproven:
        return {}, unproven
    for index, loop in loops:
        state_at, temps = loop.state_at, loop.temps
        for key, layout in enumerate(layouts):
            own = loop.sizes.get(key)
            if own is not None:
                flat = [x for i, op in enumerate(own) for m, x in enumerate(op) if (i, m) not in state_at]
            else:
                n = _numel(layout)
                flat = [x * n if per else x for x, per in rules[class_of[key]][index]]
            # (as `_Tracker.see` rounds: not at all where it rounds to a byte, a CPU's)
            temps[key] = flat if round_to == 1 else [-(-x // round_to) * round_to if x else 0 for x in flat]
    return made, {}


def _birth_rule(loops: list, a: int, b: int, layout_a: tuple, layout_b: tuple) -> tuple[dict | None, str]:
    """The rule a class's pair (`a` of fewer elements than `b`, their layouts') proves for its births'
    bytes (see `_scale`)."""
    na, nb = _numel(layout_a), _numel(layout_b)
    shape_a, shape_b = tuple(layout_a[0][0]), tuple(layout_b[0][0])
    rule = {}
    for index, loop in loops:
        if _SIZED_SCRATCH.intersection(loop.first.names):
            return None, "an op whose scratch grows with its inputs (a reduction or a convolution)"
        flat = []
        for i, (xs, ys, us, vs) in enumerate(zip(loop.sizes[a], loop.sizes[b], loop.shapes[a], loop.shapes[b])):
            for m, (x, y, u, v) in enumerate(zip(xs, ys, us, vs)):
                if u == shape_a and v == shape_b and x % na == 0 and x // na * nb == y:
                    rule_of = (x // na, 1)
                elif u == v == () and x == y:  # a scalar: no size of the parameter's can change it
                    rule_of = (x, 0)
                else:
                    return (
                        None,
                        "a storage neither a scalar of one size nor of the parameter's shape at one size an element",
                    )
                if (i, m) not in loop.state_at:  # (the state's: `_state_rule`)
                    flat.append(rule_of)
        rule[index] = flat
    return rule, ""


def _state_rule(state_a: dict, state_b: dict, a, b) -> tuple[list | None, str]:
    """A class's state entries, as its pair's states prove them (see `_scale`): (name, how, the probe's),
    how: the dtype of a tensor of the parameter's layout, (shape, stride, dtype) of a scalar, or
    None for a value (the same for every parameter: `_probe_states`)."""
    if list(state_a) != list(state_b):
        return None, "the pair's states differ in their keys"
    entries: list = []
    for name, u in state_a.items():
        v = state_b[name]
        if not (isinstance(u, torch.Tensor) and u.is_meta):
            entries.append((name, None, u))
            continue
        if not (
            isinstance(v, torch.Tensor)
            and v.is_meta
            and u.dtype == v.dtype
            and not (u.requires_grad or v.requires_grad or u.storage_offset() or v.storage_offset())
            and all(t.untyped_storage().nbytes() == t.numel() * t.dtype.itemsize for t in (u, v))
        ):
            return None, "a state tensor not a fresh one of one dtype"
        if (u.shape, u.stride(), v.shape, v.stride()) == (a[0][0], a[0][1], b[0][0], b[0][1]):
            entries.append((name, u.dtype, u))
        elif u.dim() == 0 and v.dim() == 0:  # a scalar (a shape the pair shares may be one dimension's)
            entries.append((name, (u.shape, u.stride(), u.dtype), u))
        else:
            return None, "a state tensor neither of the parameter's layout nor a scalar"
    return entries, ""


def _states(template: Template, keys: list, layouts: list, class_of: dict, made: dict) -> tuple[list | None, str]:
    """Each real parameter's state, made as the probe's for its layout, or its class's rule: meta
    tensors fresh, others copied."""
    # layout -> per state entry: (name, its maker (`_maker`), the probe's, the layout it must have)
    makers: dict[Any, list] = {}
    for key, state in template.state.items():
        entries = []
        for name, v in state.items():
            simple = isinstance(v, torch.Tensor) and v.is_meta and v.storage_offset() == 0 and not v.requires_grad
            how = (v.shape, v.stride(), v.dtype) if simple else None
            entries.append((name, _maker(v, how), v, _layout(v) if isinstance(v, torch.Tensor) else None))
        makers[key] = entries
    for key, layout in enumerate(layouts):
        if key in makers:
            continue
        shape, stride = layout[0][0], layout[0][1]
        entries = []
        for name, how, v in made[class_of[key]]:
            expect: tuple | None
            if isinstance(how, torch.dtype):  # the parameter's layout, on a storage of its own size
                expect = (shape, stride, 0, math.prod(shape) * how.itemsize, how, torch.strided, v.device)
                how = (shape, stride, how)
            else:
                expect = _layout(v) if isinstance(v, torch.Tensor) else None
            entries.append((name, _maker(v, how), v, expect))
        makers[key] = entries
    makes = {key: [(name, make) for name, make, _, _ in entries] for key, entries in makers.items()}
    states = []
    checked = set()
    for key in keys:
        state = {name: make() for name, make in makes[key]}
        # once a probed layout, and once a class for the layouts its rule makes (made alike)
        if (which := key if key in template.state else class_of[key]) not in checked:
            checked.add(which)
            for name, _, v, expect in makers[key]:
                one = state[name]
                if isinstance(v, torch.Tensor) and (_layout(one) != expect or one.requires_grad != v.requires_grad):
                    return None, "a state tensor that cannot be made again with its layout"
        states.append(state)
    return states, ""


def _maker(v: Any, how: tuple | None) -> Callable[[], Any]:
    """What makes a parameter's state entry like the probe's `v`: a fresh meta tensor of `how`'s
    (shape, stride, dtype) (one call for most: `_states` checks its layout once a layout); else one
    of v's layout, a copy of a tensor not on meta, or `v` itself, a plain value."""
    if how is not None:  # (a torch.device: a string is parsed at every call)
        return functools.partial(torch.empty_strided, how[0], how[1], dtype=how[2], device=_META)
    if not isinstance(v, torch.Tensor):
        return lambda: v
    if v.is_meta:
        return lambda: steady.fresh_like(v).requires_grad_(v.requires_grad)
    if v.requires_grad:
        return lambda: v.clone().requires_grad_(True)
    return v.clone  # (a copy of a tensor that requires no grad requires none: Adam's `step`)


def _program(run: _Run, state_at: dict, marked: AbstractSet[int] = frozenset()) -> list:
    """A run's ops that make or free something, or that a mark follows (`marked`): (op, [state key
    or None (a temporary, its bytes the layout's next in `_Loop.temps`) for each birth], deaths)."""
    out = []
    for i, (made, dead) in enumerate(zip(run.births, run.deaths)):
        if made or dead or i in marked:
            out.append((i, [state_at.get((i, m)) for m in range(len(made))], dead))
    return out


def _steps(program: list, length: int, births: int, marks: dict) -> tuple[list, range | None]:
    """A run's program as `_write` walks it: ([(op, the ops before it since the last step's (None:
    none), its births, its deaths as places in the pool of the previous run's `births` records and
    then the run's own, the marks after it (None: none))], the ops after the last step's). `marks`:
    op -> its marks, as `_deaths` takes them."""
    steps, done = [], 0
    for i, made, dead in program:
        places = [births + b if tag == "own" else b for tag, b in dead]
        steps.append((i, range(done, i) if done < i else None, made, places, marks.get(i)))
        done = i + 1
    return steps, range(done, length) if done < length else None


def _write(template: Template, tracker, keys: list, states: list) -> None:
    """The real step's events into `tracker`, parameter by parameter, from the template."""
    n = len(keys)
    last_run: dict[int, list] = {}  # loop part -> the last parameter's records, in birth order
    marks: dict[tuple[int, int], list] = {}
    for name, (part, op, before) in template.marks.items():
        marks.setdefault((part, op), []).append((before, name))
    phase, module = tracker.phase, tracker.modules[-1] if tracker.modules else ""
    timeline, see, born, died = tracker.timeline, tracker.see, tracker.born, tracker.died
    for index, part in enumerate(template.parts):
        if isinstance(part, _Fixed):
            for i, name in enumerate(part.names):
                tracker.ops += 1
                tracker.op_names.append(name)
                tracker.op_phase.append(phase)
                tracker.op_module.append(module)
                timeline.append((tracker.ops - 1, tracker.live_bytes))
                _deaths(tracker, [last_run[loop][b] for loop, b in part.deaths[i]], marks.get((index, i)))
            continue
        # the last run's program keeps an op a mark follows, though it make and free nothing
        mine = {i: m for (p, i), m in marks.items() if p == index}
        length, births = len(part.first.names), sum(map(len, part.first.births))
        first, middle, last = (
            _steps(_program(part.first, part.state_at), length, births, {}),
            _steps(_program(part.middle, part.state_at), length, births, {}),
            _steps(_program(part.last, part.state_at, mine.keys()), length, births, mine),
        )
        tracker.op_names += part.first.names * n  # (nothing reads them before the step's end)
        tracker.op_phase += [phase] * (length * n)
        tracker.op_module += [module] * (length * n)
        temps = part.temps
        pool: list = [None] * births  # the previous run's records, then this run's (the first frees none before it)
        add = pool.append
        # first, middle runs, last: n >= 3 (_eligible refuses fewer parameters)
        for (steps, tail), key, state in zip([first, *[middle] * (n - 2), last], keys, states):
            base = tracker.ops
            sizes = iter(temps[key]).__next__
            for i, gap, made, dead, run_marks in steps:
                if gap is not None:  # ops that make and free nothing: the live bytes as they stand
                    live = tracker.live_bytes
                    timeline += [(base + q, live) for q in gap]
                tracker.ops = base + i + 1
                for name in made:
                    add(born(sizes()) if name is None else see(state[name]))
                timeline.append((base + i, tracker.live_bytes))
                if run_marks is None:
                    for place in dead:
                        died(pool[place])
                else:
                    _deaths(tracker, [pool[place] for place in dead], run_marks)
            if tail is not None:
                live = tracker.live_bytes
                timeline += [(base + q, live) for q in tail]
            tracker.ops = base + length
            del pool[:births]
        last_run[index] = pool


def _deaths(tracker, dead: list, marks: list | None) -> None:
    """Free `dead` in order, setting each mark after as many deaths as the probe's had before it."""
    for k, rec in enumerate(dead):
        for before, name in marks or ():
            if before == k:
                tracker.marks[name] = steady.mark(tracker)
        tracker.died(rec)
    for before, name in marks or ():
        if before >= len(dead):
            tracker.marks[name] = steady.mark(tracker)
