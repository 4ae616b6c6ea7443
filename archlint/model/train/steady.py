"""The steady step taken from the first step instead of run again.

The memory model runs two steps: the first creates the optimizer state, the second is the steady
state it reports. With `zero_grad(set_to_none=True)` the second step's forward and backward
allocate and free exactly what the first step's did, in the same order: the same ops on the same
shapes, with no gradient there before them. Only what is live beside them differs: the optimizer
state, there from the start. So the second step runs zero_grad for real, and its forward and
backward are the first step's storages replayed: the same births and deaths, renumbered after
the second step's zero_grad, with the live bytes raised by what it holds beside them. The step's
gradients are then fresh tensors of the first step's gradients' layout, bound to the replayed
records, for the optimizer step to read (only their records where nothing reads them: plan).

The optimizer step is taken the same way where it can be (`plan_update`): PyTorch's optimizers
make their state in `_init_group`, and the rest of the step runs the same ops on the same shapes
at every step (Adam, AdamW, SGD without momentum; per-tensor or foreach), so the second step's
optimizer step is the first's less its `_init_group`. Where the first step made state outside
`_init_group` (SGD's momentum buffer, cloned in its first update) or freed something from before
it, the second step's optimizer.step() runs for real.

On a GPU spec the first step also makes cuBLAS's workspaces, at the first GEMM of each thread,
and keeps them; the second step holds them from its start and makes none. Their births are left
out of the replay (the events after them renumbered as the full run numbers them) and the live
bytes the first step's timeline shows are lowered by what it had made of them so far
(`Replay.holds`); an op that made a workspace and a kernel's transient buffer together is not
replayed (the timeline keeps one figure an op, so the two could not be told apart).

That holds while the first step leaves the model as it found it. `plan` checks it and answers
None (run the second step as well) where it does not: a data-dependent op (`.item()`, `nonzero`)
answered from values while the step changed a value it began with (a buffer, an input: the second
step may branch otherwise), a parameter or buffer replaced or added, a
storage from before the step freed during it, two gradients that share a storage, anything born
in the forward or backward that the optimizer step frees. (A gradient that is a view of a larger
storage of its own is replayed as the same view of a fresh storage of that size.)

Where both are replayed, none of the model's or the optimizer's code runs in the second step: only
zero_grad frees the previous gradients and the release the previous output. The records are made
with their kinds (a replayed storage its phase's, a gradient "grads"), and the parameters,
buffers, inputs and optimizer state, held until the figures are read, are seen without a weak
reference each (memory._measure).
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import math
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import torch


@dataclass(frozen=True)
class _Mark:
    """Where a tracker stood when a phase began: its event and op counters and its live bytes."""

    events: int
    ops: int
    live: int


def mark(tracker) -> _Mark:
    return _Mark(tracker.events, tracker.ops, tracker.live_bytes)


@dataclass
class Replay:
    """The first step's forward and backward, ready to stand for the second's (see `plan`)."""

    first: Any  # the first step's tracker
    records: list  # its records born in the forward and backward, in birth order
    deaths: dict[int, int]  # event index of a death in the forward or backward -> index in `records`
    # (parameter, its fresh gradient, index in `records`); the gradient None where nothing reads it (plan)
    grads: list[tuple[torch.Tensor, torch.Tensor | None, int]]
    # GPU: the first step's kept library workspaces made in the span: birth event -> (op, bytes)
    holds: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)
    born: dict[int, int] | None = None  # event of a birth in the forward or backward -> index in `records`

    def __call__(self, tracker, release=None) -> int:
        """Replay into `tracker` (after the second step's zero_grad); returns the event index at
        the end of the forward, as the step's own run would. `release`: what frees the previous
        step's output (the loop's `out = model(x)` rebinding it), called where the first step's
        model returned (its "output" mark), as the step's own run would free it."""
        first = self.first
        start, backward, end = first.marks["forward"], first.marks["backward"], first.marks["step"]
        tracker.marks["forward"] = mark(tracker)
        at = (first.marks["output"].events, first.marks["output"].ops, release) if release is not None else None
        span = _replay_span(
            tracker, first, start, end, self.records, self.deaths, at, self.holds, backward.events, self.born
        )
        shift_ops, offset, replayed = span.shift_ops, span.offset, span.replayed
        held = sum(n for event, (_, n) in self.holds.items() if event < backward.events)  # made in the forward
        tracker.marks["backward"] = _Mark(
            backward.events + span.shift_at, backward.ops + shift_ops, backward.live - held + offset
        )
        tracker.phase = "backward"
        for param, grad, i in self.grads:  # the step's gradients: of their kind, as the step's own run sets it
            rec = replayed[i]
            rec.kind = "grads"
            if grad is not None:  # bound to its parameter, for what reads it after the replay
                param.grad = grad
                tracker.adopt(grad, rec)
        return backward.events + span.shift_at


@dataclass
class UpdateReplay:
    """The first step's optimizer step less the making of its state, ready to stand for the
    second's (see `plan_update`): two spans, before `_init_group` and after it."""

    first: Any
    spans: list  # (start mark, end mark, records born in the span, deaths: event -> index)

    def __call__(self, tracker) -> None:
        for start, end, records, deaths in self.spans:
            _replay_span(tracker, self.first, start, end, records, deaths)  # holds: none (plan_update)


@dataclass
class _Span:
    """What replaying a span did: the shift in events at `at` (the event asked for) and in ops,
    the offset in live bytes at the end, and the replayed records (in the given order)."""

    shift_at: int
    shift_ops: int
    offset: int
    replayed: list


def _replay_span(
    tracker,
    first,
    start: _Mark,
    end: _Mark,
    records: list,
    deaths: dict[int, int],
    release=None,
    holds: dict[int, tuple[int, int]] | None = None,
    at: int | None = None,
    born: dict[int, int] | None = None,
) -> _Span:
    """The first step's events from `start` to `end` (the births of `records`, in order, and the
    deaths in `deaths`) into `tracker` where it stands now, through its own bookkeeping of the
    peak, with the ops they came from; a record not freed by `end` lives on. `release`: (the first
    step's event, its op, a call) — the call frees storages of the tracker's own there (their
    events come in between; the live bytes after it are lower by what it freed). `holds`: the
    first step's births of kept library workspaces (event -> (op, bytes)), which the tracker holds
    already: left out, and the later events numbered as though they had not been. `born`: the
    event of each record's birth -> its index in `records`, where the caller has it."""
    holds = holds or {}
    shift_events, shift_ops = tracker.events - start.events, tracker.ops - start.ops
    offset = tracker.live_bytes - start.live
    if born is None:
        born = {r.born: i for i, r in enumerate(records)}
    # a kernel's scratch inside an op (the CPU's oneDNN): two events, its birth and death
    scratch = {t.born: t for t in first.transients if start.events <= t.born < end.events}
    # alive until the replay frees it, of its phase's kind (a gradient's set after)
    replayed = tracker.reborn(records, shift_ops)
    freed_from, freed = None, 0  # the first op after the release, and the bytes it freed
    # the tracker's counters in locals through the loop (an event each), written back around the release
    live, peak, peak_event, peak_op = tracker.live_bytes, tracker.peak, tracker.peak_event, tracker.peak_op
    append, transients = tracker.records.append, tracker.transients
    # the event the release comes before: the first of the span at or after the first step's
    let_go_at = None if release is None else max(release[0], start.events)
    # the span cut where the release comes and at `at`, so that the loop over its events (thousands)
    # asks neither of each event
    cuts = sorted({start.events, end.events, *(c for c in (let_go_at, at) if c is not None and c < end.events)})
    shift_at = None  # the shift in events when the loop reaches `at`
    for first_event, stop in zip(cuts, cuts[1:]):
        if first_event == let_go_at:
            shift_events, freed = _let_go(tracker, first_event, shift_events, live, release[2])
            freed_from, live, offset = release[1], live - freed, offset - freed
        if first_event == at:
            shift_at = shift_events
        for event in range(first_event, stop):
            i = born.get(event)
            if i is not None:  # a birth (most events: the check the loop makes first)
                rec = replayed[i]
                rec.born = event + shift_events
                append(rec)
                live += rec.nbytes
                if live > peak:
                    peak, peak_event, peak_op = live, rec.born, rec.op
                continue
            if scratch:
                t = scratch.get(event)
                if t is not None:  # a scratch's birth (its death, the next event, frees nothing counted)
                    t = t.shifted(shift_events, shift_ops)
                    transients.append(t)
                    top = live + t.nbytes
                    if top > peak:
                        peak, peak_event, peak_op = top, t.born, t.op
                    continue
                if event - 1 in scratch:
                    continue
            if holds and event in holds:  # held from this step's start: no event of its own here
                shift_events -= 1
            else:
                rec = replayed[deaths[event]]
                rec.died = event + shift_events
                live -= rec.nbytes
    if release is not None and freed_from is None:
        shift_events, freed = _let_go(tracker, end.events, shift_events, live, release[2])
        freed_from, live, offset = release[1], live - freed, offset - freed
    tracker.live_bytes, tracker.peak, tracker.peak_event, tracker.peak_op = live, peak, peak_event, peak_op
    tracker.events = end.events + shift_events
    ops = slice(start.ops, end.ops)
    tracker.op_names += first.op_names[ops]
    tracker.op_phase += first.op_phase[ops]
    tracker.op_module += first.op_module[ops]
    base = offset + freed  # the offset before the release
    if holds:
        made = sorted(holds.values())  # the first step's live bytes count its workspaces from the op that made each
        held, k, timeline = 0, 0, []
        for op, live in first.timeline[ops]:
            while k < len(made) and made[k][0] <= op:
                held, k = held + made[k][1], k + 1
            timeline.append(
                (op + shift_ops, live - held + (offset if freed_from is not None and op >= freed_from else base))
            )
        tracker.timeline += timeline
    else:  # the timeline has an entry an op, in order: before the release the offset is `base`, after it `offset`
        split = end.ops if freed_from is None else min(max(freed_from, start.ops), end.ops)
        tracker.timeline += [(op + shift_ops, live + base) for op, live in first.timeline[start.ops : split]]
        tracker.timeline += [(op + shift_ops, live + offset) for op, live in first.timeline[split : end.ops]]
    tracker.ops += end.ops - start.ops
    return _Span(shift_events if shift_at is None else shift_at, shift_ops, offset, replayed)


def _let_go(tracker, event: int, shift_events: int, live: int, call) -> tuple[int, int]:
    """The release at the first step's `event` (`_replay_span`): the tracker's counters written back,
    the call made (its frees are the tracker's own events); the shift in events after it and the
    bytes it freed."""
    tracker.events = event + shift_events
    tracker.live_bytes = live
    call()
    return tracker.events - event, live - tracker.live_bytes


def plan(
    first,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    tensors=None,
    values=None,
    bind_grads: bool = True,
) -> Replay | None:
    """The first step's forward and backward as a Replay for the second step, or None where the
    first step changed what the second would run on (the second then runs in full). `tensors`: the
    model's parameters and buffers, where the caller has them (walked once for the second step).
    `values`: the step's known values (archlint.model.train.values), where it had them.
    `bind_grads`: the step's gradients made as tensors and bound to their parameters; False where
    nothing reads them after the replay (the optimizer's update replayed too, the caller reading
    only the figures): their records are the same, without a tensor, its record's binding and its
    free at the end (~0.2 ms of a mobilenet_v3_large step, measured on this project's 2-core test
    machine)."""
    marks = first.marks
    if not all(name in marks for name in ("forward", "backward", "step")):
        return None
    if values is not None and values.read and values.stale_answers():
        # the step answered a data-dependent op (.item(), nonzero) from a value it began with and
        # changed (a BatchNorm's num_batches_tracked, its running stats): the second step may take
        # another branch (`num_batches_tracked % 2`), so it runs in full
        return None
    start, end = marks["forward"].events, marks["step"].events
    # everything from before the forward (parameters, buffers, inputs: the same objects in the
    # second step) lives through it; nothing is born between the step's start and its forward
    every = first.records
    lo, hi = _born_from(every, start), _born_from(every, end)
    for r in every[:lo]:
        if r.phase != "start" or start <= r.died < end:
            return None
    records, holds = every[lo:hi], {}
    if first.workspaces:  # a library's, kept (GPU): the second step holds it already
        held = [r for r in records if r.kind == "workspaces"]
        holds = {r.born: (r.op, r.nbytes) for r in held}
        if held:
            records = [r for r in records if r.kind != "workspaces"]
    # one pass over the span's records (a thousand a step): where each is born and where it dies
    born, deaths = {}, {}
    for i, r in enumerate(records):
        born[r.born] = i
        died = r.died
        if died < end:
            deaths[died] = i
        elif died != math.inf:  # born in the backward, freed by the optimizer step
            return None
    if holds and {op for op, _ in holds.values()} & {t.op for t in first.transients}:
        return None  # one timeline figure for an op that made both: the two cannot be told apart
    by_id = first.by_id  # first.record(tensor), inlined: a few hundred tensors
    for tensor in tensors if tensors is not None else (*model.parameters(), *model.buffers()):
        rec = by_id.get(id(tensor.untyped_storage()))
        if rec is None or rec.phase != "start":
            return None
    grads, seen = [], set()
    for group in optimizer.param_groups:
        for param in group["params"]:
            grad = param.grad
            if grad is None:
                continue
            rec = by_id.get(id(grad.untyped_storage()))
            i = None if rec is None else born.get(rec.born)
            if i is None or records[i] is not rec or i in seen or not grad.is_meta:
                return None
            seen.add(i)
            grads.append((param, fresh_like(grad) if bind_grads else None, i))
    return Replay(first, records, deaths, grads, holds, born)


def fresh_like(grad: torch.Tensor) -> torch.Tensor:
    """A meta tensor of the gradient's layout on a storage of its own of the same size: a gradient
    can be a view of a larger storage (autograd keeps cat's gradient slice as a parameter's where it
    obeys the parameter's layout: ViT's class token at batch 1 holds all 197 tokens' gradient), and
    the replayed record is that storage's bytes. (Any meta tensor's likewise: optstep's probe.)"""
    nbytes = grad.untyped_storage().nbytes()
    if grad.storage_offset() == 0:  # most: the gradient is its storage, made as such (half the time)
        fresh = torch.empty_strided(grad.shape, grad.stride(), dtype=grad.dtype, device=grad.device)
        if fresh.untyped_storage().nbytes() == nbytes:
            return fresh
    storage = torch.UntypedStorage(nbytes, device=grad.device)
    return torch.empty(0, dtype=grad.dtype, device=grad.device).set_(
        storage, grad.storage_offset(), grad.shape, grad.stride()
    )


@contextlib.contextmanager
def init_marked(optimizer: torch.optim.Optimizer, tracker):
    """Mark in `tracker` where the optimizer step's `_init_group` begins ("init") and ends
    ("update"): PyTorch's optimizers make their state there the first time and only gather it
    after. With more than one parameter group, or an optimizer without `_init_group`, nothing is
    marked."""
    init = getattr(optimizer, "_init_group", None)
    if init is None or len(optimizer.param_groups) != 1:
        yield
        return

    def marked(*args, **kwargs):
        tracker.marks["init"] = mark(tracker)
        out = init(*args, **kwargs)
        tracker.marks["update"] = mark(tracker)
        return out

    optimizer._init_group = marked
    try:
        yield
    finally:
        del optimizer._init_group  # the class's method again


def plan_update(first) -> UpdateReplay | None:
    """The first step's optimizer step, less its `_init_group`, as an UpdateReplay for the second
    step's, or None where the second must run its own: where the first made state outside
    `_init_group` (SGD's momentum buffer is the first gradient, cloned in the update; later steps
    update it in place, with other ops) or freed something from before the step. What
    `_init_group` made the first time is there from the start of the second step, which gathers
    it without an op."""
    marks = first.marks
    if not all(name in marks for name in ("step", "init", "update", "end")):
        return None
    spans = []
    every = first.records
    for start, end in ((marks["step"], marks["init"]), (marks["update"], marks["end"])):
        records = every[_born_from(every, start.events) : _born_from(every, end.events)]
        if any(r.died >= end.events for r in records):  # made state, or kept something past its span
            return None
        spans.append((start, end, records, {r.died: i for i, r in enumerate(records)}))
    # nothing from before the step freed in it; what `_init_group` made lives on (the state)
    step, end = marks["step"].events, marks["end"].events
    init, update = marks["init"].events, marks["update"].events
    if any(step <= r.died < end for r in every[: _born_from(every, step)]):
        return None
    if any(r.died != math.inf for r in every[_born_from(every, init) : _born_from(every, update)]):
        return None
    return UpdateReplay(first, spans)


_BORN = attrgetter("born")


def _born_from(records: list, event: int) -> int:
    """The index of the first record born at or after `event`: a tracker's records are in birth
    order (each is appended as its storage is seen, with the event count it was born at), so the
    records of a span are a slice of them."""
    return bisect.bisect_left(records, event, key=_BORN)
