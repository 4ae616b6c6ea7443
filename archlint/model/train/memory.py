"""Memory over one training step, measured by running the step on the meta device.

The step (zero_grad, forward in train mode, loss, backward, optimizer.step) runs on a meta copy of
the model: every tensor has its shape, dtype and storage size but no data, so nothing is
allocated. A dispatch mode sees each aten op's outputs and registers every storage it has not seen;
a weak reference's callback on the storage records its free. The live bytes after each op, and
their peak, are then what autograd actually keeps: views share a storage, in-place ops make none, a
checkpointed region's saved tensors are freed and recomputed in backward, a frozen parameter gets
no gradient. Storages are classified after the step (parameter, buffer, input, gradient, optimizer
state, activation kept from the forward, temporary).

Two helpers keep the meta run fast and on meta: meta kernels are answered from a cache keyed by
their arguments' metadata (archlint.model.train.metacache: the step repeats each block's ops per
layer), and tensors computed from the inputs alone carry their real values beside them
(archlint.model.train.values: an `.item()` on an attention mask is answered as the real step
would answer it). Only a value that depends on the weights sends the step to real tensors.

Optimizer state is created lazily at the first step, so the first step is run untracked and the
second — the steady state every later step repeats — is the one reported; the first step's peak
is given beside it (`first_step_peak_bytes`).

On a GPU device spec each allocation is rounded as PyTorch's CUDA caching allocator rounds blocks
(to 512 bytes): `peak_bytes` is then what `torch.cuda.max_memory_allocated` would report. The
blocks live at the peak, packed into the allocator's segments, give the least it must reserve;
that plus the CUDA context (a labelled constant) is `device_peak_bytes`, what a budget is held to.
cuBLAS's workspaces, which PyTorch allocates through the same allocator and keeps, one per thread
that runs a GEMM (archlint.model.train.gpu_workspaces), are held from the op that makes them and
counted in `peak_bytes` (`cublas_workspace_bytes`, `workspace_basis`); so are cuDNN's workspaces,
allocated and freed inside a convolution between its outputs (`cudnn_workspace_bytes` at the peak), and
so is the cross-block buffer of a long CUDA sum or mean, e.g. a linear layer's bias gradient
(`reduction_workspace_bytes` at the peak; gpu_workspaces.reduction_workspace).
The caching allocator's replay (archlint.model.train.allocator) runs both steps as the process does,
the cuDNN workspaces included; with a budget it runs again limited to the budget less the context
(`allocator.under_budget`), as under set_per_process_memory_fraction, and `fits` is whether that ran.
On the CPU, oneDNN's convolutions likewise allocate and free scratch inside the op through
PyTorch's CPU allocator (archlint.model.train.cpu_scratch): counted at its op the same way
(`cpu_scratch_bytes` at the peak, `cpu_scratch_basis`).
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import math
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import torch
import torch.nn as nn
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from archlint.errors import UsageError
from archlint.model.capture.common import stepped_own_loss
from archlint.model.train import blocks as repeats
from archlint.model.train import meta_shims, metacache, optstep, steady
from archlint.model.train.allocator import Requests, replay_requests, requests
from archlint.model.train.autocast_meta import BASIS as AUTOCAST_BASIS
from archlint.model.train.autocast_meta import MetaAutocast
from archlint.model.train.cpu_attention import cpu_attention
from archlint.model.train.cpu_layout import cpu_conv_layout
from archlint.model.train.cpu_scratch import BASIS as CPU_SCRATCH_BASIS
from archlint.model.train.cpu_scratch import cpu_conv_scratch, cpu_isa
from archlint.model.train.cuda_attention import fused_attention
from archlint.model.train.eightbit import BASIS as EIGHT_BIT_BASIS
from archlint.model.train.eightbit import EightBitAdam
from archlint.model.train.gpu_workspaces import (
    CUDNN_SOURCE,
    REDUCE_SOURCE,
    cublas_sizes,
    cublas_workspaces,
    cudnn_workspaces,
    reduction_workspace,
    threads_per_sm,
)
from archlint.model.train.module_copy import deepcopy_module
from archlint.model.train.values import KnownValues
from archlint.train_names import LOSSES, parse_optimizer

aten = torch.ops.aten

# PyTorch's CUDA caching allocator rounds every block up to a multiple of 512 bytes
# (kMinBlockSize in c10/cuda/CUDACachingAllocator.cpp; "Memory management" in the CUDA semantics
# docs); max_memory_allocated counts these rounded blocks.
CUDA_BLOCK_BYTES = 512
# The CUDA context (driver state, kernels of the loaded libraries) takes device memory that no
# PyTorch counter sees. It depends on the GPU, driver and CUDA version (lazy module loading since
# CUDA 11.7 shrinks it): measured once on a lent H200 (benchmarks/gpu_checks.py, section env:
# total - free - reserved after CUDA's initialisation), inside the 300-800 MB that nvidia-smi shows
# for a process that has only initialised CUDA elsewhere (e.g. 781 MB, pytorch/pytorch#34323).
CUDA_CONTEXT_BYTES = 619 << 20
CUDA_CONTEXT_SOURCE = (
    "619 MiB measured on an H200 (torch 2.11, CUDA 13.0, driver 580) just after CUDA's "
    "initialisation; it varies 300-800 MB with GPU, driver and CUDA lazy loading "
    "(pytorch/pytorch#34323: 781 MB), and libraries loaded later (cuDNN, cuBLAS) add to it"
)

# Segment sizes of the caching allocator (CUDACachingAllocator.cpp): blocks up to 1 MiB share
# 2 MiB segments (kSmallBuffer), blocks up to 10 MiB share 20 MiB segments (kLargeBuffer), larger
# ones get a segment of their own rounded up to 2 MiB (kRoundLarge).
SMALL_BLOCK, SMALL_SEGMENT = 1 << 20, 2 << 20
MID_BLOCK, MID_SEGMENT = 10 << 20, 20 << 20
LARGE_ROUND = 2 << 20

TIMELINE_POINTS = 200

_BASE = {
    "sgd": (torch.optim.SGD, {"lr": 0.01}),
    "sgd-momentum": (torch.optim.SGD, {"lr": 0.01, "momentum": 0.9}),
    "adam": (torch.optim.Adam, {"lr": 1e-3}),
    "adamw": (torch.optim.AdamW, {"lr": 1e-3}),
}
CATEGORIES = ("params", "buffers", "inputs", "grads", "optimizer", "activations", "temporaries", "outputs")
# What a training loop keeps of the model's output, as users write it:
#     out = model(x); loss = f(out); loss.backward(); opt.step()
# `out` (and with it every tensor the loss reads) lives through backward and the optimizer step, and
# on into the next step until `out = model(x)` rebinds it: the previous step's output is alive during
# the next forward and freed when the model returns. Both are counted: this step's output as an
# activation (made in the forward), the previous step's as "outputs" until the forward returns.
OUTPUT_KEPT = (
    "as a training loop runs it (out = model(x); loss = f(out); loss.backward(); opt.step()): "
    "`out` and the tensors the loss reads stay alive through backward and the optimizer step, and the "
    "previous step's `out` through the next forward until `out` is rebound when the model returns "
    "(`outputs` at the peak: {prev})"
)


def make_optimizer(name: str, params, *, variant_override: str | None = None) -> torch.optim.Optimizer:
    """The torch optimizer `name` names (archlint.train_names: a base and a variant), over `params`."""
    base, variant = parse_optimizer(name)
    variant = variant if variant_override is None else variant_override
    cls, kwargs = _BASE[base]
    kwargs = dict(kwargs)
    if variant == "foreach":
        kwargs["foreach"] = True
    elif variant == "fused":
        kwargs["fused"] = True
    elif variant == "single":
        kwargs["foreach"] = False
    return cls(params, **kwargs)


def output_tensors(output: Any) -> list[torch.Tensor]:
    """The floating-point tensors of a model's output that carry a gradient, in order: those of a
    tensor, tuple, list, dict or Hugging Face ModelOutput, and those an object in it holds (a KV
    cache's keys and values); or the loss the model returns itself, alone (a ModelOutput's `loss`,
    a Hugging Face model given labels: capture.common.stepped_own_loss), as a loop backpropagates it. The
    loss reads these: the same outputs the FLOP graph's loss reads
    (archlint.model.train.grad.loss_sources: every output the capture flattens, a cache's tensors
    among them, or the own loss), so the step's FLOPs and its memory count one loss."""
    own = stepped_own_loss(output)
    if own is not None:
        return [own]
    return [t for t in output_storages(output) if t.is_floating_point() and t.requires_grad]


def output_storages(output: Any) -> list[torch.Tensor]:
    """Every tensor an output object holds (a tensor, a container, a ModelOutput, a KV cache's
    tensors): what the loop's `out` keeps alive. (A loop, not a recursive closure: a closure that
    calls itself is a reference cycle, and with the collector off the list it fills, holding the
    output, would outlive the step.)"""
    seen, found, todo = set(), [], [(output, 0)]
    while todo:
        value, depth = todo.pop()
        if depth > 6 or id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, Mapping):  # a ModelOutput too: its fields that are set
            todo += [(v, depth + 1) for v in reversed(list(value.values()))]
        elif isinstance(value, (list, tuple)):
            todo += [(v, depth + 1) for v in reversed(value)]
        elif hasattr(value, "__dict__") and not isinstance(value, (nn.Module, type)):
            # a Cache's layers, a dataclass's fields
            todo += [(v, depth + 1) for v in reversed(list(vars(value).values()))]
    return found  # in the output's order (the stack takes each container's items first to last)


def step_loss(output: Any, loss: str = "mean") -> torch.Tensor:
    """The loss of the modelled step: the mean (or sum) of each differentiable output tensor, added."""
    tensors = output_tensors(output)
    if not tensors:
        raise UsageError("the model's output has no floating-point tensor that requires grad: nothing to train")
    reduce = torch.mean if loss == "mean" else torch.sum
    total = reduce(tensors[0])
    for t in tensors[1:]:
        total = total + reduce(t)
    return total


class MetaStepFailed(Exception):
    """The step cannot run on the meta device, and step_memory was told not to run it on real tensors."""


@dataclass(slots=True)  # thousands a step: slots make each cheaper to make and to read
class _Storage:
    nbytes: int
    born: int  # event index
    op: int  # op index at birth (-1: there before the step)
    phase: str  # start | zero_grad | forward | backward | step
    module: str = ""
    died: float = math.inf
    kind: str = ""  # set at the end: one of CATEGORIES
    skippable: bool = False  # a transient workspace the kernel can do without where it does not fit (cuDNN's)

    def shifted(self, events: int, ops: int) -> _Storage:
        """A copy born and freed `events` later, made `ops` later (a replayed kernel scratch: steady.py;
        each field named, as `_Tracker.reborn` names them: dataclasses.replace cost ten times as much)."""
        return _Storage(
            self.nbytes,
            self.born + events,
            self.op + ops,
            self.phase,
            self.module,
            self.died + events,
            self.kind,
            self.skippable,
        )


@dataclass
class _Tracker:
    round_to: int = 1
    records: list[_Storage] = field(default_factory=list)
    by_id: dict[int, _Storage] = field(default_factory=dict)
    live_bytes: int = 0
    peak: int = 0
    peak_event: int = 0
    peak_op: int = -1
    events: int = 0
    ops: int = 0
    phase: str = "start"
    modules: list[str] = field(default_factory=list)
    op_names: list[str] = field(default_factory=list)
    op_phase: list[str] = field(default_factory=list)
    op_module: list[str] = field(default_factory=list)
    timeline: list[tuple[int, int]] = field(default_factory=list)
    # GPU only: the library workspaces' sizes by kind, and the workspaces held (name → record)
    workspace_sizes: dict[str, int] | None = None
    workspaces: dict[str, _Storage] = field(default_factory=dict)
    transients: list[_Storage] = field(default_factory=list)  # cuDNN's or oneDNN's, freed inside their op
    cpu_threads: int | None = None  # CPU only: the threads oneDNN's convolutions run on
    cpu_isa: str = field(default_factory=cpu_isa)  # CPU only: AVX2 or AVX512, oneDNN's kernels differ
    reduce_grid: tuple[int, int] | None = None  # GPU only: (SMs, resident threads per SM), for reductions' buffers
    marks: dict = field(default_factory=dict)  # phase -> where the tracker stood when it began (steady.mark)
    # GPU only, the second step's: the first step's records of the storages alive when it began (by
    # storage id), and (this step's "start" record, the first step's record of that storage)
    before: dict[int, _Storage] | None = None
    carried: list[tuple[_Storage, _Storage]] = field(default_factory=list)
    optimizer: Any = None  # the step's optimizer (record_step reads its state's owners)
    shims: set[str] = field(default_factory=set)  # what meta_shims adapted (said in the notes)
    own_loss: bool = False  # the output carried the model's own loss, the step's loss alone (output_tensors)
    pending: dict[int, tuple] = field(default_factory=dict)  # the weak references that record frees (_on_free)
    reuse: Any = None  # the first step's: its repeated blocks written from others (blocks.Outcome)

    def size(self, storage) -> int:
        """A storage's bytes as counted here (rounded as the target's allocator rounds a block; `see`
        inlines the same rule)."""
        n = storage.nbytes()
        return -(-n // self.round_to) * self.round_to if n else 0

    def see(self, tensor: torch.Tensor, phase: str | None = None) -> _Storage | None:
        """Register the tensor's storage if new; return its record. (_Watch inlines the common case:
        an op's one output.)"""
        storage = tensor.untyped_storage()
        key = id(storage)
        by_id = self.by_id
        rec = by_id.get(key)
        if rec is not None:
            return rec
        # the rounding and _on_free(), inlined: ~3,000 new storages a step on a mid-sized model
        n = storage.nbytes()
        round_to = self.round_to
        if n and round_to != 1:
            n = -(-n // round_to) * round_to
        born = self.events
        self.events = born + 1
        modules = self.modules
        if phase is None:
            rec = _Storage(n, born, self.ops - 1, self.phase, modules[-1] if modules else "")
        else:
            rec = _Storage(n, born, -1, phase, modules[-1] if modules else "")
            if phase == "start" and self.before is not None and key in self.before:
                self.carried.append((rec, self.before[key]))
        self.records.append(rec)
        by_id[key] = rec
        ref = weakref.ref(storage, self._dead)
        self.pending[id(ref)] = (ref, key, rec)
        live = self.live_bytes = self.live_bytes + n
        if live > self.peak:
            self.peak, self.peak_event, self.peak_op = live, born, rec.op
        return rec

    def see_start(self, tensors, kind: str, keep: bool = False, watch: bool = True) -> list[_Storage]:
        """`see(t, "start")` for each tensor, its record's kind set to `kind` (`keep`: only where it
        has none yet); their records. Each tensor is held by the caller through it, so no free comes
        in between. `watch` False: no weak reference to record a free, for tensors the caller holds
        until the figures are read."""
        storages = [t.untyped_storage() for t in tensors]
        keys = list(map(id, storages))
        if len(set(keys)) == len(keys) and self.by_id.keys().isdisjoint(keys):
            return self._see_new(storages, keys, kind, watch)
        return self._see_each(storages, keys, kind, keep, watch)

    def _see_new(self, storages: list, keys: list[int], kind: str, watch: bool) -> list[_Storage]:
        """see_start where every storage is new and none is given twice: the records made in bulk
        (a thousand at the second step's start: its parameters, buffers, optimizer state and
        gradients; a fifth less than a loop over them, measured on this project's 2-core test machine)."""
        sizes = [s.nbytes() for s in storages]
        round_to = self.round_to
        if round_to != 1:
            sizes = [-(-n // round_to) * round_to for n in sizes]
        events, module = self.events, self.modules[-1] if self.modules else ""
        inf = math.inf
        made = [_Storage(n, born, -1, "start", module, inf, kind) for born, n in enumerate(sizes, events)]
        self.by_id.update(zip(keys, made))
        self._made_at_start(storages, keys, made, sizes, watch)
        return made

    def _see_each(self, storages: list, keys: list[int], kind: str, keep: bool, watch: bool) -> list[_Storage]:
        """see_start one storage at a time, where one is given twice or seen already."""
        by_id = self.by_id
        round_to, module = self.round_to, self.modules[-1] if self.modules else ""
        events = self.events
        seen, sizes, made, made_keys, made_storages = [], [], [], [], []
        for storage, key in zip(storages, keys):
            rec = by_id.get(key)
            if rec is None:
                n = storage.nbytes()
                if n and round_to != 1:
                    n = -(-n // round_to) * round_to
                rec = _Storage(n, events + len(made), -1, "start", module)
                by_id[key] = rec
                sizes.append(n)
                made.append(rec)
                made_keys.append(key)
                made_storages.append(storage)
            if not keep or not rec.kind:
                rec.kind = kind
            seen.append(rec)
        self._made_at_start(made_storages, made_keys, made, sizes, watch)
        return seen

    def _made_at_start(
        self, storages: list, keys: list[int], made: list[_Storage], sizes: list[int], watch: bool
    ) -> None:
        """see_start's new records (of these storages, keys and sizes, made from event `self.events`
        on) kept, watched where `watch`, paired with the first step's where carried, and counted."""
        self.records += made
        if watch:
            for storage, key, rec in zip(storages, keys, made):
                self._on_free(storage, key, rec)
        if self.before is not None:
            before = self.before
            self.carried += [(rec, before[key]) for key, rec in zip(keys, made) if key in before]
        self._grown(self.events, sizes)

    def _grown(self, events: int, sizes: list[int]) -> None:
        """The births of `sizes` bytes from event `events` on, counted: the live bytes only rise
        there, so where they pass the peak, its event is the last birth that raised them (one of
        non-zero size: the peak is never below the live bytes)."""
        live = self.live_bytes + sum(sizes)
        if live > self.peak:
            last = next(i for i in range(len(sizes) - 1, -1, -1) if sizes[i])
            self.peak, self.peak_event, self.peak_op = live, events + last, -1
        self.events, self.live_bytes = events + len(sizes), live

    @staticmethod
    def reborn(records: list[_Storage], shift_ops: int) -> list[_Storage]:
        """A copy of each record (a replayed step's: steady.py), alive (died inf), its op shifted by
        `shift_ops` (one made before the step keeps -1), of the kind its phase gives a storage nothing
        else claims (_measure's last pass: a gradient's or the optimizer state's is set after, as that
        pass leaves them). In one loop, each field named (a thousand a step on mobilenet_v3_large: a
        method call a record cost a quarter more, measured on this project's 2-core test machine)."""
        inf = math.inf
        return [
            _Storage(
                r.nbytes,
                r.born,
                r.op + shift_ops if r.op >= 0 else r.op,
                r.phase,
                r.module,
                inf,
                "activations" if r.phase == "forward" else "temporaries",
                r.skippable,
            )
            for r in records
        ]

    def born(self, nbytes: int) -> _Storage:
        """A storage of `nbytes` (rounded already) made by the op just run, with no tensor here to
        stand for it (a templated optimizer step's temporary, archlint.model.train.optstep): counted
        as `see` counts one; `died` frees it."""
        rec = _Storage(nbytes, self.events, self.ops - 1, self.phase, self.modules[-1] if self.modules else "")
        self.events += 1
        self.records.append(rec)
        self.live_bytes += nbytes
        if self.live_bytes > self.peak:
            self.peak, self.peak_event, self.peak_op = self.live_bytes, rec.born, rec.op
        return rec

    def died(self, rec: _Storage) -> None:
        """Free a record `born` made, now (as a storage's weak reference frees its record)."""
        rec.died = self.events
        self.events += 1
        self.live_bytes -= rec.nbytes

    def like(self) -> _Tracker:
        """A fresh tracker that counts as this one does (rounding, the target's workspaces, threads, grid)."""
        return _Tracker(
            round_to=self.round_to,
            workspace_sizes=self.workspace_sizes,
            cpu_threads=self.cpu_threads,
            cpu_isa=self.cpu_isa,
            reduce_grid=self.reduce_grid,
        )

    def hold(self, name: str, nbytes: int, phase: str | None = None) -> None:
        """A library workspace (no tensor of the step's) allocated now and kept: `phase` 'start'
        for one held from an earlier step."""
        rec = _Storage(
            -(-nbytes // self.round_to) * self.round_to,
            self.events,
            self.ops - 1 if phase is None else -1,
            phase or self.phase,
            kind="workspaces",
        )
        self.events += 1
        self.records.append(rec)
        self.workspaces[name] = rec
        self.live_bytes += rec.nbytes
        if self.live_bytes > self.peak:
            self.peak, self.peak_event, self.peak_op = self.live_bytes, rec.born, rec.op

    def transient(self, nbytes: int, skippable: bool = True) -> int:
        """A workspace a kernel allocates and frees inside the op just run (after the outputs seen
        so far): in the peak, and replayed as an optional request (allocator.replay) if `skippable`,
        else as one the step cannot run without (a reduction's buffer); its bytes."""
        rec = _Storage(
            -(-nbytes // self.round_to) * self.round_to,
            self.events,
            self.ops - 1,
            self.phase,
            kind="workspaces",
            died=self.events + 1,
            skippable=skippable,
        )
        self.events += 2
        self.transients.append(rec)
        if self.live_bytes + rec.nbytes > self.peak:
            self.peak, self.peak_event, self.peak_op = self.live_bytes + rec.nbytes, rec.born, rec.op
        return rec.nbytes

    def adopt(self, tensor: torch.Tensor, rec: _Storage) -> None:
        """Make `rec` (already counted: a replayed step's, archlint.model.train.steady) the record of
        the tensor's storage, freed with it."""
        storage = tensor.untyped_storage()
        key = id(storage)
        self.by_id[key] = rec
        self._on_free(storage, key, rec)

    def __post_init__(self) -> None:
        self._dead = _on_death(weakref.ref(self))

    def _on_free(self, storage, key: int, rec: _Storage) -> None:
        """Record the storage's free when it dies: a weak reference with a callback, kept here until
        it fires (weakref.finalize did the same through its registry at twice the cost a storage, and
        the registry kept every tracker alive, with the optimizer and the meta model it holds)."""
        ref = weakref.ref(storage, self._dead)
        self.pending[id(ref)] = (ref, key, rec)

    def record(self, which) -> _Storage | None:
        return self.by_id.get(id(which.untyped_storage()))


def _on_death(tracker_ref: weakref.ref):
    """The callback of a tracker's weak references (_Tracker._on_free). It holds the tracker weakly:
    the tracker, the step's optimizer and its meta model are then freed by their reference counts once
    the step's figures are read, while the storages they hold die (with the tracker, its pending
    references go: no callback comes after)."""

    def dead(ref: weakref.ref) -> None:
        tracker = tracker_ref()
        if tracker is not None:  # _Tracker._free, inlined (a storage's death is as common as its birth)
            _, key, rec = tracker.pending.pop(id(ref))
            by_id = tracker.by_id
            if by_id.get(key) is rec:
                del by_id[key]
            rec.died = events = tracker.events
            tracker.events = events + 1
            tracker.live_bytes -= rec.nbytes

    return dead


class _Watch(TorchDispatchMode):
    """Registers the storages of every op's outputs."""

    def __init__(self, tracker: _Tracker, values: KnownValues | None = None):
        super().__init__()
        self.tracker = tracker
        self.values = values

    def _run(self, func, args, kwargs):
        if self.values is None:
            return metacache.run(func, args, kwargs)
        return self.values.run(func, args, kwargs, metacache.run)

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ in torch._dynamo.disable (two Python frames and
        # an eval-frame swap an op, a tenth of the step's time); the meta step is never compiled
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        values = self.values
        try:  # self._run, inlined (a Python call less for every op of the step)
            out = metacache.run(func, args, kwargs) if values is None else values.run(func, args, kwargs, metacache.run)
        except RuntimeError as exc:  # an op the meta device refuses where the real one runs (meta_shims)
            out, note = meta_shims.retry(
                func, args, kwargs, exc, self._run, self.values.know if self.values is not None else None
            )
            self.tracker.shims.add(note)
        t = self.tracker
        facts = _FACTS.get(id(func)) or _facts(func)
        conv = facts.conv
        if conv and t.cpu_threads is not None:  # a CPU target: its convolutions keep NHWC (cpu_layout)
            out = cpu_conv_layout(func, args, out)
        op = t.ops
        t.ops = op + 1
        phase, modules = t.phase, t.modules
        module = modules[-1] if modules else ""
        t.op_names.append(facts.name)
        t.op_phase.append(phase)
        t.op_module.append(module)
        if not conv and t.workspace_sizes is None and t.reduce_grid is None:
            # most ops: their outputs, and no library's workspace or scratch beside them
            by_id = t.by_id
            for item in (out,) if isinstance(out, torch.Tensor) else out if isinstance(out, (tuple, list)) else ():
                if isinstance(item, torch.Tensor):
                    # t.see(item), inlined (an op's outputs, each op's: a call and its loads less an output)
                    storage = item.untyped_storage()
                    key = id(storage)
                    if key not in by_id:
                        n = storage.nbytes()
                        if n and t.round_to != 1:
                            n = -(-n // t.round_to) * t.round_to
                        born = t.events
                        t.events = born + 1
                        rec = by_id[key] = _Storage(n, born, op, phase, module)
                        t.records.append(rec)
                        ref = weakref.ref(storage, t._dead)
                        t.pending[id(ref)] = (ref, key, rec)
                        live = t.live_bytes = t.live_bytes + n
                        if live > t.peak:
                            t.peak, t.peak_event, t.peak_op = live, born, op
                elif item is not None:
                    for value in metacache.tensors_of(item):
                        t.see(value)
            t.timeline.append((op, t.live_bytes))
            return out
        if t.workspace_sizes is None and t.reduce_grid is None:
            # a CPU target's convolution: its outputs, then oneDNN's scratch beside them (a GPU spec's
            # loop below less its checks for workspaces between the outputs: a generator an output)
            for value in metacache.tensors_of(out):
                t.see(value)
            scratch = cpu_conv_scratch(func, args, t.cpu_threads, t.cpu_isa) if t.cpu_threads is not None else 0
            t.timeline.append((op, t.live_bytes + t.transient(scratch) if scratch else t.live_bytes))
            return out
        # a GPU spec (its tracker has no CPU threads, so no oneDNN scratch: _two_steps): cuDNN's
        # workspaces come between the outputs the op's calls make (gpu_workspaces.cudnn_workspaces)
        cudnn = cudnn_workspaces(func, args) if t.workspace_sizes is not None else []
        reduction = reduction_workspace(func, args, *t.reduce_grid) if t.reduce_grid is not None else 0
        high = 0  # the op's highest point
        for made, item in enumerate(out if isinstance(out, (tuple, list)) else [out], 1):
            for value in metacache.tensors_of(item):
                t.see(value)
            for _, nbytes in (w for w in cudnn if w[0] == made):
                high = max(high, t.live_bytes + t.transient(nbytes))
            if reduction and made == 1:  # a CUDA sum's or mean's cross-block buffer, after its output
                high = max(high, t.live_bytes + t.transient(reduction, skippable=False))
        if t.workspace_sizes is not None:  # autograd runs a CUDA backward on its own thread
            for name in cublas_workspaces(func, args, "autograd" if t.phase == "backward" else "forward"):
                if name not in t.workspaces:
                    t.hold(name, t.workspace_sizes[name.split()[0]])
        t.timeline.append((op, max(high, t.live_bytes)))
        return out


@dataclass(frozen=True)
class _OpFacts:
    """What the step's bookkeeping asks of an op, once per op: its name, and whether it is a
    convolution (the CPU's layout and scratch: cpu_layout, cpu_scratch)."""

    name: str
    conv: bool


_FACTS: dict[int, _OpFacts] = {}


def _facts(func) -> _OpFacts:
    packet = getattr(func, "overloadpacket", None)
    facts = _FACTS[id(func)] = _OpFacts(  # by id: an op lives as long as the process (metacache)
        str(packet.__name__) if packet is not None else str(func),
        packet is aten.convolution or packet is aten.convolution_backward,
    )
    return facts


def to_meta(model: nn.Module) -> nn.Module:
    """A copy of `model` with every parameter, buffer and tensor attribute on meta (no data copied)."""
    return _meta_copy(model)[0]


# a module's attributes of these exact types are no tensor (its hook dicts, flags, sizes)
_NOT_TENSORS = frozenset((OrderedDict, dict, set, tuple, list, bool, int, float, str, type(None)))
_META = torch.device("meta")
_MAKE_SUBCLASS = torch.Tensor._make_subclass


def _meta_copy(model: nn.Module) -> tuple[nn.Module, list[tuple[torch.Tensor, torch.Tensor]] | None]:
    """to_meta's copy, and (meta, real) for each buffer as model.named_buffers() gives them (None where
    the copy did not keep a buffer where the model has it: a module that copies itself its own way),
    for _input_values: the copy's walk finds them, where a walk by names took a millisecond."""
    memo: dict[int, Any] = {}
    buffers: list[tuple[nn.Module, str, torch.Tensor]] = []
    # each module once, in model.modules()'s order (without its generators' frames); a tensor reached twice is made once
    todo, seen, named = [model], set(), set()
    while todo:
        module = todo.pop()
        if module is None or id(module) in seen:  # (None: a child slot left empty)
            continue
        seen.add(id(module))
        for p in module._parameters.values():
            if p is not None and id(p) not in memo:
                data = torch.empty_like(p, device=_META)
                memo[id(p)] = (
                    _MAKE_SUBCLASS(nn.Parameter, data, p.requires_grad)  # nn.Parameter's own path for a plain tensor
                    if type(data) is torch.Tensor
                    else nn.Parameter(data, requires_grad=p.requires_grad)
                )
        for key, b in module._buffers.items():
            if b is not None and id(b) not in named:  # (a tensor attribute of a module before may be one)
                named.add(id(b))
                buffers.append((module, key, b))
                if id(b) not in memo:
                    memo[id(b)] = torch.empty_like(b, device=_META)
        attributes = vars(module).values()
        if not _NOT_TENSORS.issuperset(map(type, attributes)):  # most modules: no attribute a tensor could be
            for value in attributes:
                if (
                    type(value) not in _NOT_TENSORS  # isinstance's metaclass check less
                    and isinstance(value, torch.Tensor)
                    and not isinstance(value, nn.Parameter)
                    and id(value) not in memo
                ):
                    memo[id(value)] = torch.empty_like(value, device=_META)
        todo += reversed(module._modules.values())
    meta = deepcopy_module(model, memo)  # copy.deepcopy's copy, made faster (module_copy)
    pairs = []
    for module, key, b in buffers:
        copied = memo.get(id(module))
        if not isinstance(copied, nn.Module) or copied._buffers.get(key) is not memo[id(b)]:
            return meta, None
        pairs.append((memo[id(b)], b))
    return meta, pairs


def _meta_inputs(value: Any) -> Any:
    def one(t):
        if not isinstance(t, torch.Tensor):
            return t
        m = torch.empty_like(t, device="meta")
        return m.requires_grad_(t.requires_grad) if t.is_leaf else m

    return tree_map(one, value)


@dataclass
class _Walk:
    """One walk of the module tree, for one step: each module's path, and the parameters and
    buffers in the order (and with the sharing) model.parameters() and model.buffers() give them.
    The step read them four times a step, each a walk of its own (a tenth of the step on
    mobilenet_v3_large's 255 modules); walked again for the second step, which the first may
    have changed (a buffer made in its forward)."""

    paths: dict[int, str]
    params: list[nn.Parameter]
    buffers: list[torch.Tensor]
    modules: list[nn.Module] = field(default_factory=list)  # each once, in model.modules()'s order


def _walk(model: nn.Module, train: bool = False) -> _Walk:
    """`train`: model.train() first, in the same walk where no module's class has a train() of its
    own (`training` then set on each module, as nn.Module.train sets it, once the walk has found
    none); otherwise model.train() and the walk after it, as the step always ran them (at once where
    the model's own class has one: a Hugging Face model's)."""
    if train and type(model).train is not nn.Module.train:
        model.train()
        return _walk(model)
    found = _named_modules(model)
    modules = [module for _, module in found]
    if train and any(kind.train is not nn.Module.train for kind in set(map(type, modules))):
        model.train()  # a module's own train() somewhere below: model.train(), and the walk after it
        return _walk(model)
    paths = {id(module): path or "<model>" for path, module in found}
    # each parameter (buffer) at its first place, as the walk by modules finds them: by id, in one
    # pass of C loops (a dict keeps a key's first place; the same id is the same tensor); no None
    chained = [*itertools.chain.from_iterable([module._parameters.values() for module in modules])]
    params: dict[int, Any] = dict(zip(map(id, chained), chained))
    params.pop(id(None), None)
    chained = [*itertools.chain.from_iterable([module._buffers.values() for module in modules])]
    buffers: dict[int, Any] = dict(zip(map(id, chained), chained))
    buffers.pop(id(None), None)
    if train:
        for module in modules:
            if (
                type(module).__setattr__ is _MODULE_SETATTR
                and "training" not in module._parameters
                and "training" not in module._buffers
                and "training" not in module._modules
            ):
                # what nn.Module.__setattr__ does with a flag that names no parameter, buffer or
                # submodule (object's setattr), without its checks: a microsecond a module
                _SETATTR(module, "training", True)
            else:
                module.training = True
    return _Walk(paths, list(params.values()), list(buffers.values()), modules)


def _named_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """model.named_modules() as a list, walked here with a stack: the generators nest as deep as the
    tree, and each module passed up through every level of them (a third of _walk on
    mobilenet_v3_large). The same modules, paths and order (each checked against the set of those
    seen when the walk reaches it, as named_modules checks it); named_modules itself where a module's
    class has its own."""
    found: list[tuple[str, nn.Module]] = []
    seen: set[nn.Module] = set()
    todo = [("", model)]
    while todo:
        prefix, module = todo.pop()
        if type(module).named_modules is not _NAMED_MODULES:
            return list(model.named_modules())
        if module in seen:
            continue
        seen.add(module)
        found.append((prefix, module))
        children = module._modules
        if children:
            dot = prefix + "." if prefix else ""
            todo += [(dot + name, child) for name, child in reversed(children.items()) if child is not None]
    return found


_NAMED_MODULES = nn.Module.named_modules
_MODULE_SETATTR = nn.Module.__setattr__
_SETATTR = object.__setattr__


def _module_paths(paths: dict[int, str], tracker: _Tracker, modules: list[nn.Module] | None = None) -> list:
    """What keeps `tracker.modules` the stack of module paths being called (`paths`: each module's, by
    id), to be removed (`.remove()`) after the step. Given the walk's `modules`: each one's `_call_impl`
    wrapped on the instance (nn.Module.__call__ looks it up there), pushing its path around the call:
    global hooks send every module call through _call_impl's hook loops (~4 us a call, a tenth of a
    forward), a wrapper adds a frame. The wrappers stand where the hooks ran (first in the call, last
    out of it) unless a hook would run between: a module's own forward hook (after the global ones, so
    after the pop), or a global hook of someone else's; then, as without `modules`, two global hooks
    (one registration each, not two per module: registering hundreds costs more than the step)."""
    stack = tracker.modules
    if modules is not None and not repeats.global_module_hooks():
        wrapped: list[nn.Module] = []
        for module in modules:
            own = module.__dict__
            if own.get("_forward_hooks") or own.get("_compiled_call_impl") is not None or "_call_impl" in own:
                _Unwrap(wrapped).remove()
                break
            own["_call_impl"] = _pushing(module._call_impl, paths[id(module)], stack)
            wrapped.append(module)
        else:
            return [_Unwrap(wrapped)]

    def pre(module, _args):
        path = paths.get(id(module))
        if path is not None:
            stack.append(path)

    def post(module, _args, _out):
        if id(module) in paths and stack:
            stack.pop()

    return [register_module_forward_pre_hook(pre), register_module_forward_hook(post, always_call=True)]


def _pushing(call, path: str, stack: list[str]):
    """A module's `_call_impl` with its path on `stack` during the call (_module_paths)."""

    def wrapped(*args, **kwargs):
        stack.append(path)
        try:
            return call(*args, **kwargs)
        finally:  # as the global hook registered with always_call pops on an exception
            if stack:
                stack.pop()

    return wrapped


class _Unwrap:
    """Removes _module_paths' wrappers (a hook handle's `remove`)."""

    def __init__(self, modules: list[nn.Module]):
        self.modules = modules

    def remove(self) -> None:
        for module in self.modules:
            module.__dict__.pop("_call_impl", None)
        self.modules = []


def _tensors(value: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]


def _state_tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [v for state in optimizer.state.values() for v in state.values() if isinstance(v, torch.Tensor)]


def _step(
    model,
    args,
    kwargs,
    optimizer,
    loss,
    tracker: _Tracker | None,
    fused_inplace: bool,
    replay=None,
    update=None,
    kept: list | None = None,
):
    """One step as a training loop runs it; `kept` is the loop's `out`: [the previous step's output]
    on entry (or empty), [this step's] on return (OUTPUT_KEPT)."""

    def phase(name):
        if tracker is not None:
            tracker.phase = name
            tracker.marks[name] = steady.mark(tracker)

    phase("zero_grad")
    optimizer.zero_grad(set_to_none=True)
    if replay is not None:  # the first step's forward and backward stand for this one's (steady.py)
        forward_end = replay(tracker, release=kept.clear if kept else None)
    else:
        phase("forward")
        output = model(*args, **kwargs)
        if tracker is not None:
            tracker.marks["output"] = steady.mark(tracker)
        if kept is not None:  # `out = model(x)`: the previous step's output is freed only now
            kept[:] = [output]
        if tracker is not None:
            tracker.own_loss = stepped_own_loss(output) is not None  # as output_tensors takes it
        value = step_loss(output, loss)
        del output  # kept in `kept`, as the loop's `out` keeps it
        phase("backward")
        forward_end = tracker.events if tracker is not None else 0
        value.backward()
        del value
    phase("step")
    if tracker is not None and replay is None:  # a replay has set its gradients' kind (steady.Replay)
        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        for g in grads:
            rec = tracker.record(g)
            if rec is not None:
                rec.kind = "grads"
    # The fused kernel updates parameters and state in place, with no temporaries; meta has no
    # fused kernel, so once the state exists (the steady step) the per-tensor step is not run.
    if not (fused_inplace and optimizer.state):
        if update is not None:  # the first step's update stands for this one's (steady.py)
            update(tracker)
        else:
            optimizer.step()
    if tracker is not None:
        tracker.marks["end"] = steady.mark(tracker)
    return forward_end


def step_memory(
    model: nn.Module,
    args: tuple = (),
    kwargs: dict | None = None,
    *,
    optimizer: str = "adam",
    loss: str = "mean",
    budget_bytes: int | None = None,
    device_spec=None,
    limit_scales: tuple[float, ...] = (),
    autocast: torch.dtype | None = None,
    eight_bit: bool = False,
    real_fallback: bool = True,
) -> dict:
    """The memory of one steady-state training step of `model` on `args`/`kwargs` (real or meta
    tensors; nothing real is allocated). Where the step cannot run on meta (a data-dependent op
    the meta device cannot answer), it runs on a real copy of the model; `real_fallback=False`
    raises MetaStepFailed instead (max_batch's search: a batch far above the input's would
    allocate its whole step on this machine). JSON-ready: see the module docstring for what is measured.
    On a GPU spec with a budget, `limit_scales` replays the allocator again under the limit times
    each scale (`allocator.under_budget.scaled`): whether the step fits if the model's storages are
    1/scale of the real ones (archlint.model.train.fit: its measured error).
    The ways to fit run the step changed: `autocast` (a dtype) with torch.autocast's cast policy
    (archlint.model.train.autocast_meta), `eight_bit` with bitsandbytes' 8-bit Adam's state in
    place of the optimizer's (archlint.model.train.eightbit); each says so in `notes`.
    `needed_bytes` is what the device needs and `fits` is `needed_bytes <= budget_bytes`: the
    allocator's segments and the CUDA context on a GPU spec (replayed under the budget when there is
    one: segments it would otherwise keep cached are released there), the live bytes' peak
    elsewhere."""
    if loss not in LOSSES:
        raise UsageError(f"unknown loss {loss!r} for the memory model; use one of {', '.join(LOSSES)}")
    kwargs = kwargs or {}
    gpu = device_spec is not None and getattr(device_spec, "kind", "") == "gpu"
    base, variant = parse_optimizer(optimizer)
    notes = []
    # On CUDA, PyTorch picks the foreach implementation by default; on the CPU, the per-tensor loop.
    run_variant = variant or ("foreach" if gpu else "single")
    if not variant:
        notes.append(
            f"optimizer {optimizer}: PyTorch's default on {'CUDA' if gpu else 'the CPU'} is the "
            f"{'foreach' if gpu else 'per-parameter (single-tensor)'} implementation, modelled as such"
        )
    fused = run_variant == "fused"
    if eight_bit:
        if base not in ("adam", "adamw"):
            raise UsageError(f"an 8-bit optimizer state is modelled for adam and adamw, not {optimizer!r}")
        fused = True
        notes = [n for n in notes if not n.startswith(f"optimizer {optimizer}: PyTorch's default")]
        notes.append(f"optimizer {optimizer} as bitsandbytes' 8-bit {base}: {EIGHT_BIT_BASIS}")
    elif fused:
        run_variant = "single"
        notes.append(
            f"optimizer {optimizer}: the fused kernel updates in place; modelled as its state "
            "with no step temporaries (meta has no fused kernel)"
        )

    sizes = grid = None
    if gpu:
        cublas, cublaslt, workspace_basis = cublas_sizes(device_spec)
        sizes = {"cublas": cublas, "cublasLt": cublaslt}
        threads, threads_basis = threads_per_sm(device_spec)
        grid = (device_spec.sms, threads) if getattr(device_spec, "sms", None) else None
        reduce_basis = (
            f"{REDUCE_SOURCE}; {device_spec.sms} SMs, {threads_basis}"
            if grid
            else "not counted: the device spec gives no SM count"
        )
    try:
        basis = "measured on the meta device: every storage the step allocates and frees, no data"
        (meta, buffers), meta_args, meta_kwargs = (
            _meta_copy(model),
            _meta_inputs(tuple(args)),
            _meta_inputs(dict(kwargs)),
        )
        values = _input_values(model, meta, (args, kwargs), (meta_args, meta_kwargs), buffers)
        first, tracker, forward_end = _two_steps(
            meta,
            meta_args,
            meta_kwargs,
            base,
            run_variant,
            loss,
            gpu,
            fused,
            values,
            sizes,
            grid,
            autocast,
            eight_bit,
            grads_read=False,  # the figures alone
        )
    except (RuntimeError, NotImplementedError) as exc:  # a data-dependent op (.item(), nonzero) has no meta result
        if not real_fallback:
            raise MetaStepFailed(_one_line(exc)) from None
        if any(t.device.type == "meta" for t in itertools.chain(model.parameters(), model.buffers())):
            raise UsageError(
                f"the training step cannot run on the meta device ({_one_line(exc)}) and the "
                "model has no real weights to run it with"
            ) from None
        device = next(itertools.chain(model.parameters(), model.buffers()), torch.empty(0)).device
        basis = (
            f"measured with real tensors on {device} (a copy of the model): "
            f"the step cannot run on the meta device ({_one_line(exc)})"
        )
        first, tracker, forward_end = _two_steps(
            copy.deepcopy(model),
            tuple(args),
            dict(kwargs),
            base,
            run_variant,
            loss,
            gpu,
            fused,
            None,
            sizes,
            grid,
            autocast,
            eight_bit,
        )
    result = _summary(tracker, forward_end)
    blocks, output_bytes = result.pop("_blocks_at_peak"), result.pop("_output_bytes")
    result["first_step_peak_bytes"] = first.peak
    result["step_reported"] = (
        "the second step: optimizer state is created at the first step and kept, "
        "so the second is the steady state every later step repeats"
    )
    result["optimizer"] = optimizer
    result["loss"] = loss_label(loss, first.own_loss)
    result["basis"] = basis
    result["output_bytes"] = output_bytes
    result["output_basis"] = OUTPUT_KEPT.format(prev=f"{result['at_peak']['outputs']} bytes")
    if gpu:
        held = tracker.workspaces
        result["cublas_workspace_bytes"] = sum(r.nbytes for r in held.values())
        at = [r for r in tracker.transients if r.born == tracker.peak_event]
        # cuDNN's are the skippable ones, reductions' buffers the others (_Watch)
        result["cudnn_workspace_bytes"] = sum(
            r.nbytes for r in at if r.skippable
        )  # at the peak (transient: 0 elsewhere)
        result["cudnn_workspace_largest_bytes"] = max((r.nbytes for r in tracker.transients if r.skippable), default=0)
        result["reduction_workspace_bytes"] = sum(r.nbytes for r in at if not r.skippable)  # at the peak
        result["reduction_workspace_largest_bytes"] = max(
            (r.nbytes for r in tracker.transients if not r.skippable), default=0
        )
        result["workspace_basis"] = (
            f"held through the step: {', '.join(held) or 'none (no GEMM)'}; one per thread that runs a GEMM "
            f"(autograd runs the backward on its own), allocated through the caching allocator, so counted "
            f"in peak_bytes; {workspace_basis}. cuDNN: {CUDNN_SOURCE}. Reductions: {reduce_basis}"
        )
        storages, workspaces = _both_steps(first, tracker)
        made = requests(storages, workspaces)  # once, for each replay under a limit too
        caching = replay_requests(made)
        result["allocator"] = {
            "rounding": f"each block rounded up to {CUDA_BLOCK_BYTES} bytes (PyTorch CUDA caching allocator)",
            "reserved_peak_bytes": caching.peak_reserved,
            "reserved_basis": (
                "the step's storages, cuBLAS's kept workspaces, cuDNN's workspaces inside their "
                "convolutions and reductions' buffers inside their ops (allocated and freed between the "
                "op's outputs) replayed through the caching "
                "allocator's rules (pools, segment sizes, best fit, splitting, merging; "
                "archlint.model.train.allocator): what torch.cuda.max_memory_reserved reports"
            ),
            "reserved_at_peak_bytes_lower_bound": reserved_lower_bound(blocks),
            "cuda_context_bytes": CUDA_CONTEXT_BYTES,
            "cuda_context_source": CUDA_CONTEXT_SOURCE,
        }
        # What the device must hold: the allocator's segments at their peak and the context.
        result["device_peak_bytes"] = caching.peak_reserved + CUDA_CONTEXT_BYTES
    elif tracker.transients:
        at = [r for r in tracker.transients if r.born == tracker.peak_event]
        result["cpu_scratch_bytes"] = sum(r.nbytes for r in at)  # at the peak (transient: 0 elsewhere)
        result["cpu_scratch_largest_bytes"] = max(r.nbytes for r in tracker.transients)
        result["cpu_scratch_basis"] = CPU_SCRATCH_BASIS.format(threads=tracker.cpu_threads, isa=tracker.cpu_isa)
    if autocast is not None:
        notes.append(
            f"the forward under autocast to {str(autocast).removeprefix('torch.')}: "
            + AUTOCAST_BASIS.format(dtype=str(autocast).removeprefix("torch."))
        )
    if first.shims | tracker.shims:  # ops the meta device refused, adapted (meta_shims): said in text too
        result["adapted_ops"] = sorted(first.shims | tracker.shims)
    if first.reuse is not None and first.reuse.reused:  # said in text too
        result["reused_blocks"] = [r.to_dict() for r in first.reuse.reused]
        result["reused_blocks_basis"] = repeats.BASIS
    elif first.reuse is not None and first.reuse.failed:
        notes.append(f"repeated blocks: run exactly, a stand-in's premise failed ({first.reuse.failed})")
    if notes:
        result["notes"] = notes
    result["needed_bytes"] = result.get("device_peak_bytes", result["peak_bytes"])
    if budget_bytes is not None:
        result["budget_bytes"] = int(budget_bytes)
        if gpu:  # the allocator limited to the budget less the context, as set_per_process_memory_fraction does
            limit = int(budget_bytes) - CUDA_CONTEXT_BYTES
            under = _limited(made, limit, caching)
            under["basis"] = (
                "the same replay with the allocator limited to the budget less the CUDA context: at the "
                "limit it releases its free cached segments and retries, and a cuDNN workspace that still "
                "does not fit is done without (the next plan; counted as none), so the step fits unless a "
                "tensor's request runs out"
            )
            under["scaled"] = [
                {"scale": scale, **_limited(made, int(limit * scale), caching)} for scale in limit_scales
            ]
            result["allocator"]["under_budget"] = under
            if not under["out_of_memory"]:  # what it holds under the limit: cached segments released there
                result["needed_bytes"] = under["reserved_peak_bytes"] + CUDA_CONTEXT_BYTES
        # One meaning of "fits": what the device needs is within the budget. Under the limit the replay
        # runs out only where the unlimited one reserves more than the limit (the limit changes nothing
        # until a segment would pass it), so on a GPU spec this is also "the limited replay ran".
        result["fits"] = result["needed_bytes"] <= budget_bytes
    # The figures are read: the frees still to come (the meta model's, the optimizer's state) would
    # each call back into a tracker no one reads again (a millisecond on mobilenet_v3_large).
    tracker.pending.clear()
    return result


def _limited(made: Requests, limit: int, unlimited=None) -> dict:
    """The allocator replayed under `limit` bytes: whether it ran out, what it reserved, how many
    optional workspaces it went without. `unlimited`: the replay without a limit, when there is
    one: where it never reserved more than `limit`, the limit changes nothing (the allocator
    looks at it only when a new segment would pass it) and that replay is the answer (each of
    max_batch's evaluations replayed three times what one replay says)."""
    run = (
        unlimited if unlimited is not None and unlimited.peak_reserved <= limit else replay_requests(made, limit=limit)
    )
    return {
        "limit_bytes": limit,
        "out_of_memory": run.out_of_memory,
        "reserved_peak_bytes": run.peak_reserved,
        "workspaces_skipped": run.skipped,
    }


def _both_steps(first: _Tracker, second: _Tracker) -> tuple[list[tuple[int, float, int]], list[tuple[int, float, int]]]:
    """The storages (reductions' buffers among them: a kernel cannot do without one) and cuDNN's
    workspaces of the two steps, as (born, died, bytes) on one event count, for the allocator's replay:
    a process runs the first step (its optimizer state made after the
    backward, among the blocks the step freed) and then the steady one, from the segments the first left
    cached. A storage alive from the first step into the second is one storage, freed when the second
    frees it; one alive at the first step's end that the second does not start from is freed there."""
    end = second.marks["first_step_events"]
    then = {id(prior): rec for rec, prior in second.carried}
    storages = []
    for r in first.records:
        died = then[id(r)].died + end if id(r) in then else min(r.died, end)
        storages.append((r.born, died, r.nbytes))
    carried = {id(rec) for rec, _ in second.carried}
    storages += [(r.born + end, r.died + end, r.nbytes) for r in second.records if id(r) not in carried]
    transients = [(r.born, r.died, r.nbytes, r.skippable) for r in first.transients]
    transients += [(r.born + end, r.died + end, r.nbytes, r.skippable) for r in second.transients]
    storages += [t[:3] for t in transients if not t[3]]  # a reduction's buffer: required
    return storages, [t[:3] for t in transients if t[3]]


def _one_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]


def _input_values(model: nn.Module, meta: nn.Module, real_inputs, meta_inputs, buffers=None) -> KnownValues:
    """The real values of the inputs and buffers beside their meta copies (archlint.model.train.values):
    what an `.item()` on a mask or a position needs. `buffers`: (meta, real) of each buffer, where
    the copy found them (_meta_copy); else paired by name."""
    values = KnownValues()
    if buffers is None:
        meta_buffers = dict(meta.named_buffers())
        buffers = [(meta_buffers[name], real) for name, real in model.named_buffers() if name in meta_buffers]
    values.know_all([*zip(_tensors(meta_inputs), _tensors(real_inputs))] + buffers)
    return values


def _two_steps(
    model,
    args,
    kwargs,
    base,
    variant,
    loss,
    gpu,
    fused,
    values: KnownValues | None = None,
    workspace_sizes: dict[str, int] | None = None,
    reduce_grid: tuple[int, int] | None = None,
    autocast: torch.dtype | None = None,
    eight_bit: bool = False,
    grads_read: bool = True,
):
    """Step once untracked-for-the-report (the optimizer state is created), then once tracked;
    the library workspaces the first step made are held through the second. `grads_read`: the
    caller reads the parameters' gradients after the step (record_step), not only its figures."""
    walk = _walk(model, train=True)  # model.train() in the same walk
    params = [p for p in walk.params if p.requires_grad]
    if not params:
        raise UsageError("the model has no parameter that requires grad: nothing to train")
    opt = EightBitAdam(params) if eight_bit else make_optimizer(base, params, variant_override=variant)
    threads = None if gpu else torch.get_num_threads()  # this process's threads stand for the target CPU's
    # attention keeps what the target's kernel keeps: CUDA's fused kernels on a GPU spec, the CPU's
    # flash kernel where a CPU picks it (cpu_attention); not the math form's weights meta falls back to
    with (
        fused_attention() if gpu else cpu_attention(),
        MetaAutocast(autocast) if autocast is not None else contextlib.nullcontext(),
    ):
        # a repeated block's middle instances written from others where the run proves it (blocks); where
        # a premise fails after they ran, the first step runs again without them
        reuse = repeats.Reuse(model, walk.paths, values, autocast is None and values is not None)
        for again in (False, True):
            first = _Tracker(
                round_to=CUDA_BLOCK_BYTES if gpu else 1,
                workspace_sizes=workspace_sizes,
                cpu_threads=threads,
                reduce_grid=reduce_grid,
            )
            kept: list = []  # the loop's `out`: the first step's output, kept into the second (OUTPUT_KEPT)
            # the first optimizer.step() written from per-parameter templates where a probe shows they hold (optstep)
            first_update = (
                optstep.FirstUpdate(opt, lambda t: _Watch(t, values), first.like) if values is not None else None
            )
            with steady.init_marked(opt, first), reuse.active(first, walk.params, walk.buffers, opt):
                _measure(
                    model, args, kwargs, opt, loss, first, fused, values, update=first_update, kept=kept, walk=walk
                )
            if again or not reuse.failed:
                break
            reuse.restore()
        first.reuse = reuse.close()
        tracker = _Tracker(
            round_to=CUDA_BLOCK_BYTES if gpu else 1,
            workspace_sizes=workspace_sizes,
            cpu_threads=threads,
            reduce_grid=reduce_grid,
        )
        for name, rec in first.workspaces.items():
            tracker.hold(name, rec.nbytes, "start")
        if workspace_sizes is not None:  # a GPU spec: the allocator replays both steps (_both_steps)
            tracker.before = dict(first.by_id)
            tracker.carried = [(tracker.workspaces[name], rec) for name, rec in first.workspaces.items()]
            tracker.marks["first_step_events"] = first.events
        # on meta, the second step's forward and backward are the first's, replayed (steady.py); on a
        # GPU spec too, the workspaces the first made held from the second's start
        walk = _walk(model)  # again: the first step may have changed the model (steady.plan checks it)
        update = steady.plan_update(first) if values is not None else None
        # the replayed step's gradients made as tensors where something reads them: the caller, or the
        # optimizer's own step where its update is not replayed
        tensors = (*walk.params, *walk.buffers)
        replay = (
            steady.plan(first, model, opt, tensors, values, grads_read or update is None)
            if values is not None
            else None
        )
        update = update if replay is not None else None
        tracker.optimizer = opt
        # the first step's records are read from here on only as they stand at its end (_both_steps
        # cuts each at it): the frees the second step makes of its storages (the gradients at
        # zero_grad, the previous output) need not call back into it
        first.pending.clear()
        forward_end = _measure(model, args, kwargs, opt, loss, tracker, fused, values, replay, update, kept, walk)
    return first, tracker, forward_end


def _measure(
    meta,
    args,
    kwargs,
    opt,
    loss,
    tracker: _Tracker,
    fused: bool,
    values: KnownValues | None = None,
    replay=None,
    update=None,
    kept: list | None = None,
    walk: _Walk | None = None,
) -> int:
    """Run one step under the tracker; returns the event index at the end of the forward. `kept`:
    the loop's `out` (_step); `walk`: the model's modules, parameters and buffers now (_walk)."""
    walk = walk or _walk(meta)
    # the optimizer's and the model's own code does not run where the first step's stands for both
    # (_step: the fused kernel's steady step is not run either): then nothing there at the start is
    # freed in the step but the gradients (zero_grad) and the previous output (the release), and the
    # parameters, buffers, inputs and state, held by the model, the optimizer and the caller until
    # the figures are read (step_memory, record_step), need no weak reference to record a free
    replayed = replay is not None and (update is not None or bool(fused and opt.state))
    watch = not replayed
    tracker.see_start(walk.params, "params", watch=watch)
    tracker.see_start(walk.buffers, "buffers", keep=True, watch=watch)
    tracker.see_start(_tensors((args, kwargs)), "inputs", keep=True, watch=watch)
    state = tracker.see_start(_state_tensors(opt), "optimizer", watch=watch)
    tracker.see_start([g for g in (p.grad for p in walk.params) if g is not None], "grads")
    _see_outputs(tracker, kept)
    # a replayed forward and backward call no module: no paths to keep
    handles = [] if replay is not None else _module_paths(walk.paths, tracker, walk.modules)
    try:
        with _Watch(tracker, values):
            forward_end = _step(meta, args, kwargs, opt, loss, tracker, fused, replay, update, kept)
    finally:
        for h in handles:
            h.remove()
    if replayed:  # the state is still the tensors seen above
        for rec in state:
            rec.kind = "optimizer"
    else:
        for t in _state_tensors(opt):
            rec = tracker.record(t)
            if rec is not None:
                rec.kind = "optimizer"
    if not replayed:  # a replayed record has its kind already (_Tracker.reborn), any other was seen above
        for rec in tracker.records:
            if not rec.kind:
                rec.kind = "activations" if rec.phase == "forward" else "temporaries"
    return forward_end


def _see_outputs(tracker: _Tracker, kept: list | None) -> None:
    """The previous step's output, alive until this step's forward returns (OUTPUT_KEPT); seen here,
    in a frame of its own, so that no local name holds one of its tensors through the step."""
    for t in output_storages(kept or []):
        rec = tracker.see(t, "start")
        rec.kind = rec.kind or "outputs"


_TOTALLED = frozenset(("params", "buffers", "inputs", "grads", "optimizer"))


def _summary(tracker: _Tracker, forward_end: int) -> dict:
    # one pass over the records: what is live at the peak (and its blocks), the activations kept at
    # the forward's end, the totals of what the step holds, the gradients it makes and the previous
    # step's output; the records in their order, so the dicts fill in the order they always did
    peak_event, kept_at = tracker.peak_event, forward_end - 1
    at_peak = dict.fromkeys(CATEGORIES, 0)
    totals = dict.fromkeys(CATEGORIES, 0)
    blocks: list[int] = []
    kept: list[_Storage] = []
    made_grads = outputs = 0
    for r in tracker.records:
        kind, nbytes = r.kind, r.nbytes
        if r.born <= peak_event < r.died:
            at_peak[kind] = at_peak.get(kind, 0) + nbytes  # "workspaces": a library's, GPU or CPU
            blocks.append(nbytes)
        if kind in _TOTALLED:
            totals[kind] += nbytes
            if kind == "grads" and r.phase != "start":
                made_grads += nbytes
        elif kind == "activations":
            if r.born <= kept_at < r.died:
                kept.append(r)
        elif kind == "outputs" and r.phase == "start":
            outputs += nbytes
    for t in tracker.transients:
        if t.born == peak_event:
            at_peak[t.kind] = at_peak.get(t.kind, 0) + t.nbytes
    per_module: dict[str, int] = {}
    for r in kept:
        per_module[r.module or "<model>"] = per_module.get(r.module or "<model>", 0) + r.nbytes
    # Gradients of the previous step freed at zero_grad are counted once, as this step's.
    grads = made_grads or totals["grads"]
    op, phases = tracker.peak_op, tracker.op_phase
    where = (
        "before the step"
        if op < 0
        else (
            f"{tracker.op_phase[op]}: aten.{tracker.op_names[op]} (op {op})"
            + (f" in {tracker.op_module[op]}" if tracker.op_module[op] and tracker.op_phase[op] == "forward" else "")
        )
    )
    return {
        "peak_bytes": tracker.peak,
        "params_bytes": totals["params"],
        "buffers_bytes": totals["buffers"],
        "inputs_bytes": totals["inputs"],
        "grads_bytes": grads,
        "optimizer_bytes": totals["optimizer"],
        "activations_bytes": sum(r.nbytes for r in kept),
        "temporaries_bytes": at_peak["temporaries"],
        "at_peak": at_peak,
        "forward_peak_bytes": max((b for i, b in tracker.timeline if phases[i] == "forward"), default=0),
        "at": where,
        "ops": tracker.ops,
        "timeline": _downsample(tracker.timeline, TIMELINE_POINTS),
        "per_module_activations": dict(sorted(per_module.items(), key=lambda kv: -kv[1])),
        "_blocks_at_peak": blocks,
        "_output_bytes": outputs,
    }


def reserved_lower_bound(blocks: list[int]) -> int:
    """The least memory the caching allocator reserves to hold these live blocks at once: packed
    into its segments with no fragmentation (a real run reserves as much or more)."""
    small = sum(b for b in blocks if b <= SMALL_BLOCK)
    mid = sum(b for b in blocks if SMALL_BLOCK < b <= MID_BLOCK)
    large = sum(-(-b // LARGE_ROUND) * LARGE_ROUND for b in blocks if b > MID_BLOCK)
    return -(-small // SMALL_SEGMENT) * SMALL_SEGMENT + -(-mid // MID_SEGMENT) * MID_SEGMENT + large


def _downsample(points: list[tuple[int, int]], n: int) -> list[list[int]]:
    """At most about n points, keeping each bucket's highest (so the peak survives)."""
    if len(points) <= n:
        return [list(p) for p in points]
    size = math.ceil(len(points) / n)
    return [list(max(points[i : i + size], key=_SECOND)) for i in range(0, len(points), size)]


_SECOND = itemgetter(1)


@dataclass
class Recorded:
    """One storage of the reported (steady) step, for a model of the step built on this one
    (archlint.model.distributed): its bytes, its birth and death on the tracker's event count
    (math.inf: alive at the step's end), what it is, and the parameter it belongs to (a
    parameter's own storage, its gradient or its optimizer state), by name."""

    nbytes: int
    born: float
    died: float
    kind: str  # one of CATEGORIES, or "workspaces" (a library's: GPU or CPU scratch)
    phase: str  # start | zero_grad | forward | backward | step
    module: str = ""
    param: str | None = None


def loss_label(loss: str, own: bool) -> str:
    """What the step backpropagates, as the result says it: the model's own loss, or `loss` of its output."""
    if own:
        return (
            "the loss the model returns itself (its output's `loss`, e.g. a Hugging Face model given labels), "
            "backpropagated alone as a loop does (out.loss.backward()): the loss the step's FLOPs count"
        )
    return (
        f"{loss} of each differentiable tensor of the output (a KV cache's among them), added: "
        "the loss the step's FLOPs count"
    )


@dataclass
class StepRecording:
    """The storages of the steady step as the memory model records them (`record_step`), with
    where each phase began (events) and the parameters' layout, for models that re-lay them out
    (sharding, buckets) and sweep the result again."""

    storages: list[Recorded]
    marks: dict[str, int]  # phase -> its first event: forward, backward, step, end
    params: dict[str, tuple[tuple[int, ...], int, bool]]  # name -> (shape, bytes per element, trainable)
    param_order: list[str]  # parameters in registration order
    grad_ready: list[str]  # trainable parameters in the order their gradients were made in backward
    single: dict  # step_memory's own summary of the same step (peak_bytes, at_peak, ...)
    basis: str
    gpu: bool
    round_to: int


def record_step(
    model: nn.Module,
    args: tuple = (),
    kwargs: dict | None = None,
    *,
    optimizer: str = "adam",
    loss: str = "mean",
    device_spec=None,
    dtype: torch.dtype | None = None,
    trainable=None,
) -> StepRecording:
    """The steady step's storages, recorded as step_memory records them (on meta, the same two
    steps), kept with the parameter each belongs to. `dtype`: the model's floating-point
    parameters, buffers and inputs cast to it first (bf16 compute under mixed precision);
    `trainable`: a predicate on a parameter's name, the others frozen (requires_grad False)."""
    if loss not in LOSSES:
        raise UsageError(f"unknown loss {loss!r} for the memory model; use one of {', '.join(LOSSES)}")
    kwargs = kwargs or {}
    gpu = device_spec is not None and getattr(device_spec, "kind", "") == "gpu"
    base, variant = parse_optimizer(optimizer)
    run_variant = variant or ("foreach" if gpu else "single")
    fused = run_variant == "fused"
    run_variant = "single" if fused else run_variant
    sizes = grid = None
    if gpu:
        cublas, cublaslt, _ = cublas_sizes(device_spec)
        sizes = {"cublas": cublas, "cublasLt": cublaslt}
        threads, _ = threads_per_sm(device_spec)
        grid = (device_spec.sms, threads) if getattr(device_spec, "sms", None) else None
    meta, meta_args, meta_kwargs = to_meta(model), _meta_inputs(tuple(args)), _meta_inputs(dict(kwargs))
    values = _input_values(model, meta, (args, kwargs), (meta_args, meta_kwargs))
    if dtype is not None:
        meta = meta.to(dtype)
        cast = lambda t: t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t  # noqa: E731
        meta_args, meta_kwargs = tree_map(cast, meta_args), tree_map(cast, meta_kwargs)
    if trainable is not None:
        for name, p in meta.named_parameters():
            p.requires_grad_(bool(trainable(name)))
    # the order autograd accumulates the gradients (DDP rebuilds its buckets in it), from the first step
    accumulated: list[str] = []
    hooks = [
        p.register_post_accumulate_grad_hook(lambda _, name=name: accumulated.append(name))
        for name, p in meta.named_parameters()
        if p.requires_grad
    ]
    try:
        first, tracker, forward_end = _two_steps(
            meta, meta_args, meta_kwargs, base, run_variant, loss, gpu, fused, values, sizes, grid
        )
    except (RuntimeError, NotImplementedError) as exc:
        raise UsageError(
            f"the training step cannot run on the meta device ({_one_line(exc)}): the per-rank "
            "model of a distributed step needs it"
        ) from None
    finally:
        for h in hooks:
            h.remove()
    names = {id(p): n for n, p in meta.named_parameters()}
    owner: dict[int, str] = {}  # id(record) -> parameter name
    grads = []
    for p in meta.parameters():
        rec = tracker.record(p)
        if rec is not None:
            owner[id(rec)] = names[id(p)]
        if p.grad is not None and (g := tracker.record(p.grad)) is not None:
            owner[id(g)] = names[id(p)]
            grads.append((g.born, names[id(p)]))
    for group in tracker.optimizer.param_groups:
        for p in group["params"]:
            for v in tracker.optimizer.state.get(p, {}).values():
                if isinstance(v, torch.Tensor) and (rec := tracker.record(v)) is not None:
                    owner[id(rec)] = names[id(p)]
    # the previous step's gradients, freed at zero_grad: seen at the step's start in the parameters' order (_measure)
    previous = [r for r in tracker.records if r.kind == "grads" and r.phase == "start"]
    with_grad = [names[id(p)] for p in meta.parameters() if p.grad is not None]
    for r, name in zip(previous, with_grad):
        owner[id(r)] = name
    storages = [
        Recorded(r.nbytes, r.born, r.died, r.kind, r.phase, r.module, owner.get(id(r))) for r in tracker.records
    ]
    storages += [Recorded(r.nbytes, r.born, r.died, "workspaces", r.phase, "", None) for r in tracker.transients]
    marks = {
        name: tracker.marks[name].events for name in ("forward", "backward", "step", "end") if name in tracker.marks
    }
    params = {n: (tuple(p.shape), p.element_size(), p.requires_grad) for n, p in meta.named_parameters()}
    single = _summary(tracker, forward_end)
    single.pop("_blocks_at_peak")
    single.pop("_output_bytes")
    single["loss"] = loss_label(loss, first.own_loss)  # the second step may be replayed from the first
    ready = list(dict.fromkeys(accumulated)) or [n for _, n in sorted(grads)]
    tracker.pending.clear()  # the figures are read: no free after this is recorded (step_memory)
    return StepRecording(
        storages,
        marks,
        params,
        list(params),
        ready,
        single,
        "measured on the meta device: every storage the step allocates and frees, no data",
        gpu,
        tracker.round_to,
    )
