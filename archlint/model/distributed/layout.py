"""The recorded step laid out per rank as a strategy lays it out, and swept for its peak.

Input: the steady step's storages as the memory model records them (memory.record_step), each with
its birth and death on one event count and the parameter it belongs to. Output: the same stream
for one rank, where

- parameters, gradients and optimizer state take the bytes the strategy leaves on a rank
  (ZeRO-1: optimizer state 1/N; ZeRO-2: and gradients; ZeRO-3/FSDP: and parameters; FSDP2 shards
  each parameter on dim 0, padded to a multiple of N; ZeRO flattens and splits evenly), and the
  optimizer step's temporaries with them (it updates the shard);
- under mixed precision the step is recorded in bf16/fp16 (compute weights, gradients,
  activations) and the optimizer keeps fp32 state and fp32 master weights (ZeRO: beside the
  16-bit weights; FSDP2: the sharded fp32 parameters are the master, the 16-bit ones are gathered);
- FSDP2/ZeRO-3 units are all-gathered before their forward and again before their backward (FSDP2
  does not free the root's after the forward), with FSDP2's order of making and freeing: the
  all-gather output, then the unsharded parameters copied out of it; in forward the previous
  output is freed at the next copy-out, in backward at once, and the next unit is prefetched
  (its all-gather output made) at each unit's pre-backward; after a unit's backward its
  unsharded gradients are copied into a reduce-scatter input (reduce dtype), freed, and the
  reduce-scatter output becomes the sharded gradient; one reduce-scatter input is kept in flight
  (FSDP2's reduce_scatter_max_input_buffers = 1);
- DDP's gradient buckets (one flat tensor each, made at construction and kept) are added, rebuilt
  in the order the gradients are made after the first step, with a first bucket of 1 MiB and
  bucket_cap_mb after (the Reducer's rebuild); with gradient_as_bucket_view the gradients are
  views of them. A model with buffers has them broadcast from rank 0 before each forward, one
  flat buffer per dtype (DDP's broadcast_buffers=True).

The collectives are listed as they are issued, with their payload (the unsharded buffer's bytes;
all-reduce counts twice in the volume, as the ZeRO paper counts it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from archlint.model.distributed.strategy import (
    BUFFER_BUCKET_BYTES,
    FIRST_BUCKET_BYTES,
    Parallel,
)
from archlint.model.train.memory import StepRecording

CATEGORIES = (
    "params",
    "gathered_params",
    "buffers",
    "inputs",
    "grads",
    "optimizer",
    "activations",
    "temporaries",
    "workspaces",
    "comm_buffers",
)
VOLUME_FACTOR = {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1, "broadcast": 1}


@dataclass
class Store:
    """One storage of the rank's step."""

    nbytes: int
    born: float
    died: float
    kind: str
    host: bool = False  # offloaded: on the host, not on the device


@dataclass
class Issued:
    """One collective of the step as issued: op, phase, payload bytes, the event it becomes ready at."""

    op: str
    phase: str
    nbytes: int
    ready: float
    group: int
    what: str
    overlaps: str = ""  # backward | forward | none: what it can hide behind
    needed: float | None = None  # the event whose compute waits for it (an all-gather's unit); None: the step's end


@dataclass
class Layout:
    stores: list[Store]
    issued: list[Issued]
    marks: dict[str, int]
    params_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    optimizer_counters_bytes: int  # the optimizer's per-parameter step counters (not in the ZeRO formulas)
    padding_bytes: int  # FSDP2's dim-0 padding in the parameter shards
    host_bytes: int  # offloaded
    buckets: list[int]
    notes: list[str] = field(default_factory=list)


@dataclass
class Swept:
    peak_bytes: int
    at: float
    at_peak: dict[str, int]


def _shape_elems(shape: tuple[int, ...]) -> int:
    return math.prod(shape) if shape else 1


def bucket_assignment(sizes: list[tuple[str, int, int]], cap_bytes: int, first_bytes: int) -> list[list[str]]:
    """DDP's buckets, as dist._compute_bucket_assignment_by_size makes them for the Reducer's
    rebuild: tensors in the order given (gradients made), one open bucket per dtype, closed once it
    holds its limit (the first bucket's, then bucket_cap_mb's), in the order they close."""
    limits = [first_bytes, cap_bytes] if first_bytes < cap_bytes else [cap_bytes]
    open_: dict[int, tuple[list[str], int, int]] = {}  # dtype size → (names, bytes, limit index)
    out: list[list[str]] = []
    for name, nbytes, itemsize in sizes:
        names, total, li = open_.get(itemsize, ([], 0, 0))
        names, total = names + [name], total + nbytes
        if total >= limits[min(li, len(limits) - 1)]:
            out.append(names)
            open_[itemsize] = ([], 0, li + 1)
        else:
            open_[itemsize] = (names, total, li)
    out += [names for names, _, _ in open_.values() if names]
    return out


def zero_partition(sizes: list[tuple[str, int]], world: int) -> dict[str, int]:
    """ZeroRedundancyOptimizer._partition_parameters: parameters sorted by size, largest first (a
    stable sort), each to the rank with the fewest elements so far (the lowest rank on a tie)."""
    totals = [0] * world
    owner: dict[str, int] = {}
    for name, numel in sorted(sizes, key=lambda x: x[1], reverse=True):
        r = totals.index(min(totals))
        owner[name] = r
        totals[r] += numel
    return owner


def lay_out(rec: StepRecording, par: Parallel, units: list[str], buffers: list[tuple[int, int]]) -> Layout:
    """The rank's storages and collectives (module docstring). `units`: FSDP/ZeRO-3 unit paths;
    `buffers`: the model's buffers as (bytes, element size), for DDP's broadcast."""
    n, group = par.world_size, par.shard_group

    def rnd(b: float) -> int:
        return -(-math.ceil(b) // rec.round_to) * rec.round_to if b > 0 else 0

    strategy, mp = par.strategy, par.mixed_precision is not None
    flat = strategy in ("zero1", "zero2", "zero3")
    fsdp = strategy in ("fsdp", "hsdp")
    gathers = fsdp or strategy == "zero3"
    offload = par.cpu_offload
    marks = rec.marks
    notes: list[str] = []

    info = rec.params  # name → (shape, itemsize, trainable)
    elems = {p: _shape_elems(s) for p, (s, _, _) in info.items()}
    itemsize = {p: size for p, (_, size, _) in info.items()}
    trainable = {p for p, (_, _, t) in info.items() if t}
    master = 4 if mp else None  # fp32 master weights and optimizer state under mixed precision

    def shard_elems(p: str, among: int) -> float:
        """Elements of `p` on one rank: FSDP2 pads dim 0 to a multiple of the group; ZeRO splits evenly."""
        if among == 1:
            return elems[p]
        if fsdp:
            shape = info[p][0] or (1,)
            rest = _shape_elems(shape[1:])
            return math.ceil(shape[0] / among) * rest
        return elems[p] / among

    def padded_elems(p: str) -> int:
        return int(shard_elems(p, group) * group) if fsdp and group > 1 else elems[p]

    opt_share = {p: shard_elems(p, group if (fsdp or flat) else 1) / elems[p] for p in info}
    torch_zero = strategy == "zero1-torch"
    ddp_like = strategy in ("ddp", "zero1-torch")  # the model wrapped in DDP: its buckets and broadcasts
    owners: dict[str, int] = {}
    if torch_zero:  # ZeroRedundancyOptimizer: whole parameters, this rank (0) keeps the state of its own
        owners = zero_partition([(p, elems[p]) for p in info if p in trainable], n)
        opt_share = {p: 1.0 if owners.get(p) == 0 else 0.0 for p in info}
        fsdp_or_flat = True
    else:
        fsdp_or_flat = fsdp or flat
    # the optimizer step's temporaries: over the rank's share of the trainable elements
    total_trainable = sum(elems[p] for p in trainable)
    step_share = (
        sum(opt_share[p] * elems[p] for p in trainable) / total_trainable if total_trainable and fsdp_or_flat else 1.0
    )
    # state and master weights: fp32 under mixed precision
    state_scale = {p: (master / itemsize[p] if mp else 1.0) for p in info}
    if par.optimizer_bits == 8:
        notes.append(
            "8-bit optimizer: each moment in 1 byte (bitsandbytes' blockwise quantization; its per-block "
            "scales left out), its step fused (no temporaries): estimated, not recorded"
        )

    # --- units: where each parameter is gathered (FSDP/ZeRO-3), by the module path it belongs to
    unit_names = set(units)

    def unit_of(p: str) -> str:
        parts = p.split(".")
        return next(
            (".".join(parts[:k]) for k in range(len(parts) - 1, 0, -1) if ".".join(parts[:k]) in unit_names), ""
        )

    param_unit = {p: unit_of(p) for p in info}

    stores: list[Store] = []
    issued: list[Issued] = []
    params_bytes = grads_bytes = optimizer_bytes = counters = padding = host = 0

    def add(nbytes: float, born: float, died: float, kind: str, on_host: bool = False) -> Store:
        s = Store(rnd(nbytes), born, died, kind, on_host)
        stores.append(s)
        return s

    # --- events of each unit in the recorded step
    fwd_start, bwd_start, step_start = marks["forward"], marks["backward"], marks["step"]
    span: dict[str, list[float]] = {}
    unit_set, owner_of = set(units), {}
    for s in rec.storages:
        if s.phase == "forward" and s.module:
            u = owner_of.get(s.module)
            if u is None:  # the innermost unit above the module, or "" for none
                parts = s.module.split(".")
                u = next((".".join(parts[:k]) for k in range(len(parts), 0, -1) if ".".join(parts[:k]) in unit_set), "")
                owner_of[s.module] = u
            if u:
                lo_hi = span.setdefault(u, [s.born, s.born])
                lo_hi[0], lo_hi[1] = min(lo_hi[0], s.born), max(lo_hi[1], s.born)
    order = sorted((u for u in units if u in span), key=lambda u: span[u][0])
    unit_params = {u: [p for p in info if param_unit[p] == u] for u in order}
    if gathers:
        # a unit with no op of its own in the forward is gathered with the root
        for p in info:
            if param_unit[p] and param_unit[p] not in span:
                param_unit[p] = ""
        unit_params[""] = [p for p in info if param_unit[p] == ""]
    grad_born = {s.param: s.born for s in rec.storages if s.kind == "grads" and s.phase == "backward" and s.param}
    # backward: a unit ends when its last gradient is made; it begins where the one after it ended
    bwd_end: dict[str, float] = {}
    prev = float(bwd_start)
    for u in reversed(order):
        made = [grad_born[p] for p in unit_params[u] if p in grad_born]
        bwd_end[u] = max(made) if made else prev
        prev = bwd_end[u]
    bwd_begin: dict[str, float] = {}
    for i, u in enumerate(reversed(order)):
        if i == 0:  # after the root's gradients made before it (a head, a final norm)
            first = min((grad_born[p] for p in unit_params[u] if p in grad_born), default=bwd_start)
            before = [grad_born[p] for p in info if param_unit[p] == "" and p in grad_born and grad_born[p] < first]
            bwd_begin[u] = max(before) + 0.5 if before else float(bwd_start)
        else:
            bwd_begin[u] = bwd_end[list(reversed(order))[i - 1]] + 0.6

    # --- the recorded storages, resized for the rank
    compute_dtype = max(itemsize.values(), default=4)

    def reduce_size(p: str) -> int:
        return master if (fsdp and mp) else itemsize[p]  # FSDP2's reduce_dtype fp32; ZeRO/DDP: the grads'

    sharded_grads = strategy in ("zero2", "zero3", "fsdp", "hsdp")
    buckets: list[list[str]] = []
    bucket_ready: dict[str, float] = {}
    if strategy in ("ddp", "zero1", "zero2", "zero1-torch"):
        ready = [p for p in rec.grad_ready if p in trainable]
        sizes = [(p, elems[p] * itemsize[p], itemsize[p]) for p in ready]
        buckets = bucket_assignment(sizes, int(par.bucket_cap_mb * (1 << 20)), FIRST_BUCKET_BYTES)
        for b in buckets:
            t = max(grad_born.get(p, bwd_start) for p in b) + 0.5
            for p in b:
                bucket_ready[p] = t

    def grad_death(p: str) -> float:
        if strategy == "zero2":
            return bucket_ready[p] + 0.3
        if gathers:
            u = param_unit[p]
            return bwd_end[u] + 0.4 if u else step_start - 0.4
        return math.inf

    # the optimizer visits the parameters in order (a per-tensor loop, or foreach ops whose outputs are made
    # one per tensor in order): a step temporary of a parameter's size is the next such parameter's
    order_p = [p for p in info if p in trainable]
    cursor = [0]

    def step_param(nbytes: int) -> str | None:
        for k in range(len(order_p)):
            i = (cursor[0] + k) % len(order_p)
            if elems[order_p[i]] * itemsize[order_p[i]] == nbytes:
                cursor[0] = i
                return order_p[i]
        return None

    for s in sorted(rec.storages, key=lambda s: s.born) if torch_zero else rec.storages:
        p = s.param
        if s.kind == "params" and p is not None:
            if gathers:
                size = shard_elems(p, group) * (master if (fsdp and mp) else itemsize[p])
                padding += int((shard_elems(p, group) * group - elems[p]) * (master if (fsdp and mp) else itemsize[p]))
            else:
                size = s.nbytes
            on_host = offload and fsdp
            st = add(size, s.born, s.died, "params", on_host)
            params_bytes += 0 if on_host else st.nbytes
            host += st.nbytes if on_host else 0
            if mp and not fsdp and p in trainable:  # ZeRO/DDP: fp32 master weights beside the 16-bit ones
                m = add(elems[p] * opt_share[p] * master, s.born - 0.001, math.inf, "optimizer", offload)
                optimizer_bytes += 0 if offload else m.nbytes
                host += m.nbytes if offload else 0
        elif s.kind == "optimizer" and p is not None:
            if torch_zero and owners.get(p) != 0:  # another rank's parameter: no state here at all
                continue
            shaped = s.nbytes >= elems[p] * itemsize[p] and elems[p] * itemsize[p] > 8
            if shaped:
                scale = opt_share[p] * state_scale[p] * (0.25 if par.optimizer_bits == 8 else 1.0)
                st = add(s.nbytes * scale, s.born, s.died, "optimizer", offload)
            else:  # a step counter: one per parameter tensor, on every rank
                st = add(s.nbytes, s.born, s.died, "optimizer", offload)
                counters += 0 if offload else st.nbytes
            optimizer_bytes += 0 if offload else st.nbytes
            host += st.nbytes if offload else 0
        elif s.kind == "grads" and p is not None:
            full = elems[p] * itemsize[p]
            if s.phase == "start":  # the previous step's, kept until zero_grad: what the strategy keeps
                if sharded_grads:
                    size = shard_elems(p, group) * (reduce_size(p) if fsdp else itemsize[p])
                    add(0 if offload else size, s.born, s.died, "grads")
                elif ddp_like and par.gradient_as_bucket_view:
                    continue
                else:
                    add(s.nbytes, s.born, s.died, "grads")
                continue
            if ddp_like and par.gradient_as_bucket_view:
                continue  # a view of its bucket
            died = grad_death(p)
            add(max(s.nbytes, full), s.born, died, "grads")
            if not sharded_grads:
                grads_bytes += rnd(s.nbytes)
        elif s.phase == "step":  # the optimizer step's temporaries: over the shard, in the state's dtype
            if offload or par.optimizer_bits == 8:
                continue
            share = step_share
            if torch_zero:  # whole parameters: a temporary is its parameter's, kept whole on its owner only
                whose = step_param(s.nbytes)
                if whose is not None and owners.get(whose) != 0:
                    continue
                share = 1.0
            add(s.nbytes * share * (master / compute_dtype if mp else 1.0), s.born, s.died, s.kind)
        else:
            add(s.nbytes, s.born, s.died, s.kind)

    # --- DDP: buckets kept from construction; their all-reduce as each fills
    if ddp_like:
        for b in buckets:
            nbytes = sum(elems[p] * itemsize[p] for p in b)
            add(nbytes, -1, math.inf, "comm_buffers")
            issued.append(
                Issued("all_reduce", "backward", nbytes, bucket_ready[b[0]], n, "gradient bucket", "backward")
            )
        if par.gradient_as_bucket_view:
            grads_bytes += sum(rnd(sum(elems[p] * itemsize[p] for p in b)) for b in buckets)
        # broadcast_buffers: rank 0's buffers before every forward, one flat buffer per dtype chunk
        chunks: list[list[int]] = []
        by_dtype: dict[int, int] = {}
        for nbytes, size in buffers:
            i = by_dtype.get(size)
            if i is None or sum(chunks[i]) + nbytes > BUFFER_BUCKET_BYTES:
                by_dtype[size] = len(chunks)
                chunks.append([])
                i = by_dtype[size]
            chunks[i].append(nbytes)
        for k, chunk in enumerate(chunks):
            t = fwd_start - 0.9 + k * 0.01
            add(sum(chunk), t, t + 0.005, "comm_buffers")
            issued.append(
                Issued(
                    "broadcast", "forward", sum(chunk), t, n, "module buffers (broadcast_buffers)", "none", fwd_start
                )
            )

    # --- ZeroRedundancyOptimizer: after its local step each rank broadcasts its parameters, one call
    # per parameter (parameters_as_bucket_view=False, the default), every rank's in turn, in place
    if torch_zero:
        t = marks.get("end", step_start) + 0.5
        for r in range(n):
            for p in (q for q in owners if owners[q] == r):
                issued.append(
                    Issued(
                        "broadcast",
                        "step",
                        elems[p] * itemsize[p],
                        t,
                        n,
                        "updated parameters (each from its owner)",
                        "none",
                    )
                )
        notes.append(
            "zero1-torch: torch.distributed.optim.ZeroRedundancyOptimizer over DDP: the optimizer state of "
            "whole parameters on their owner (greedy by size, largest first), rank 0's shown; the "
            "parameters broadcast from their owners after the step"
        )

    # --- ZeRO-1/2: each bucket reduce-scattered through a flat copy as it fills; ZeRO-2 keeps only its shard
    if strategy in ("zero1", "zero2"):
        for b in buckets:
            nbytes = sum(elems[p] * itemsize[p] for p in b)
            t = bucket_ready[b[0]]
            add(nbytes, t + 0.1, t + 0.2, "comm_buffers")
            issued.append(Issued("reduce_scatter", "backward", nbytes, t, n, "gradient bucket", "backward"))
            if strategy == "zero2":
                st = add(0 if offload else nbytes / n, t + 0.35, math.inf, "grads")
                grads_bytes += st.nbytes
        if strategy == "zero1":  # the full gradients kept to the step; the optimizer reads its partition
            pass
        total = sum(elems[p] * itemsize[p] for p in trainable)
        issued.append(
            Issued(
                "all_gather",
                "step",
                total,
                marks.get("end", step_start) + 0.5,
                n,
                "updated parameters (each rank's partition)",
                "none",
            )
        )

    # --- FSDP2 / ZeRO-3: units gathered and freed; reduce-scatter per unit
    def gloo_gather(nbytes: int, born: float, died: float) -> Store | None:
        """gloo's _allgather_base gathers into a flat buffer of its own (made and freed on its worker
        thread, inside the collective) and copies it to the output: alive while the collective runs."""
        return add(nbytes, born, died, "comm_buffers") if par.backend == "gloo" else None

    if gathers:

        def unit_bytes(u: str, size_of) -> int:
            return sum(padded_elems(p) * size_of(p) for p in unit_params[u])

        compute = itemsize.__getitem__
        seq = [""] + order if unit_params[""] else list(order)
        forward_at = {u: span[u][0] for u in order}
        forward_at[""] = fwd_start - 0.5
        forward_end = {u: span[u][1] for u in order}
        root_kept = fsdp  # FSDP2 does not reshard the root after forward
        gathered: dict[str, Store] = {}
        last_output: Store | None = None
        for u in seq:  # forward
            t = forward_at[u]
            full = unit_bytes(u, compute)
            if full == 0:
                continue
            out = add(full, t - 0.4, math.inf, "comm_buffers")
            gloo_gather(full, t - 0.39, t - 0.25)
            if last_output is not None:
                last_output.died = t - 0.3
            gathered[u] = add(full, t - 0.2, math.inf, "gathered_params")
            last_output = out
            issued.append(
                Issued("all_gather", "forward", full, t - 0.4, group, f"unit {u or '<root>'}", "forward", t - 0.2)
            )
            if u or not root_kept:  # resharded after its forward (the root at the forward's end)
                gathered[u].died = forward_end[u] + 0.5 if u else bwd_start - 0.45
        if last_output is not None:
            last_output.died = bwd_start - 0.5
        back = list(reversed(order))
        if unit_params[""] and not root_kept and unit_bytes("", compute):
            full = unit_bytes("", compute)
            add(full, bwd_start - 0.4, bwd_start - 0.3, "comm_buffers")
            gloo_gather(full, bwd_start - 0.39, bwd_start - 0.36)
            gathered[""] = add(full, bwd_start - 0.35, math.inf, "gathered_params")
            issued.append(
                Issued(
                    "all_gather", "backward", full, bwd_start - 0.4, group, "unit <root>", "backward", bwd_start - 0.35
                )
            )
        prefetched: dict[str, Store] = {}
        prev_rs: Store | None = None

        def reduce(u: str, t1: float, prev: Store | None) -> Store | None:  # unit u's reduce-scatter at t1
            return _reduce(
                u,
                t1,
                unit_params[u],
                trainable,
                padded_elems,
                shard_elems,
                reduce_size,
                group,
                par,
                add,
                issued,
                prev,
                offload,
            )

        def shard_bytes(u: str) -> int:  # unit u's gradient shard on this rank
            return _shard_bytes(unit_params[u], trainable, shard_elems, reduce_size, group, rnd, offload)

        for i, u in enumerate(back):
            full = unit_bytes(u, compute)
            t0 = bwd_begin[u]
            if full:
                if u in prefetched:  # copy-out of the prefetched all-gather, then its output freed
                    st = add(full, t0 + 0.05, math.inf, "gathered_params")
                    prefetched[u].died = t0 + 0.07
                else:
                    add(full, t0 + 0.01, t0 + 0.07, "comm_buffers")
                    gloo_gather(full, t0 + 0.015, t0 + 0.04)
                    st = add(full, t0 + 0.05, math.inf, "gathered_params")
                    issued.append(Issued("all_gather", "backward", full, t0, group, f"unit {u}", "backward", t0 + 0.05))
                gathered[u] = st
            if i + 1 < len(back) and unit_bytes(back[i + 1], compute):  # prefetch the next unit
                nxt = back[i + 1]
                prefetched[nxt] = add(unit_bytes(nxt, compute), t0 + 0.08, math.inf, "comm_buffers")
                # the prefetch runs on gloo's worker beside this unit's backward and is done long before it
                # (it moves a unit's parameters; the unit computes on them): its flat buffer freed by then
                gloo_gather(unit_bytes(nxt, compute), t0 + 0.085, t0 + 0.09)
                issued.append(
                    Issued(
                        "all_gather",
                        "backward",
                        unit_bytes(nxt, compute),
                        t0 + 0.08,
                        group,
                        f"unit {nxt} (prefetched)",
                        "backward",
                        bwd_begin[nxt] + 0.05,
                    )
                )
            t1 = bwd_end[u]
            if full:
                gathered[u].died = t1 + 0.1
            prev_rs = reduce(u, t1, prev_rs)
            if prev_rs is not None:
                grads_bytes += shard_bytes(u)
        if unit_params[""]:
            t1 = step_start - 0.8
            if "" in gathered:
                gathered[""].died = t1 + 0.1
            prev_rs = reduce("", t1, prev_rs)
            grads_bytes += shard_bytes("")
        if prev_rs is not None:
            prev_rs.died = min(prev_rs.died, step_start - 0.2)
        if par.cpu_offload and fsdp:
            notes.append(
                "CPU offload (FSDP2 CPUOffloadPolicy): sharded parameters, gradients and optimizer state on "
                "the host; each unit's shard copied to the device for its all-gather"
            )
    elif offload:
        notes.append(
            "CPU offload (ZeRO-Offload): optimizer state and fp32 master weights on the host, the step run "
            "there; the gradient partition copied to the host"
        )
    if strategy == "zero1":
        grads_bytes = sum(rnd(elems[p] * itemsize[p]) for p in trainable)
    return Layout(
        stores,
        issued,
        dict(marks),
        params_bytes,
        grads_bytes,
        optimizer_bytes,
        counters,
        padding,
        host,
        [sum(elems[p] * itemsize[p] for p in b) for b in buckets],
        notes,
    )


def _reduce(
    u,
    t1,
    params,
    trainable,
    padded_elems,
    shard_elems,
    reduce_size,
    group,
    par: Parallel,
    add,
    issued,
    prev_rs,
    offload,
):
    """A unit's post-backward: the reduce-scatter input made (the one before it freed), the
    unsharded gradients freed (their deaths are set by the caller's grad_death), the output kept as
    the sharded gradient; HSDP all-reduces that shard over the replicas."""
    grads = [p for p in params if p in trainable]
    if not grads:
        return prev_rs
    full = sum(padded_elems(p) * reduce_size(p) for p in grads)
    if prev_rs is not None:
        prev_rs.died = t1 + 0.2
    rs_in = add(full, t1 + 0.3, math.inf, "comm_buffers")
    shard = sum(shard_elems(p, group) * reduce_size(p) for p in grads)
    if offload:  # copied to the host at once
        add(shard, t1 + 0.5, t1 + 0.55, "comm_buffers")
    else:
        add(shard, t1 + 0.5, math.inf, "grads")
    if par.backend == "gloo":  # gloo's reduce_scatter_tensor all-reduces a clone of the input, copies its chunk
        # out, and its worker drops the clone when the all-reduce is done (before the next unit's backward)
        add(full, t1 + 0.52, t1 + 0.56, "comm_buffers")
    issued.append(Issued("reduce_scatter", "backward", full, t1 + 0.3, group, f"unit {u or '<root>'}", "backward"))
    if par.replicas > 1:
        issued.append(
            Issued(
                "all_reduce",
                "backward",
                int(shard),
                t1 + 0.5,
                par.replicas,
                f"unit {u or '<root>'} shard over replicas",
                "backward",
            )
        )
    return rs_in


def _shard_bytes(params, trainable, shard_elems, reduce_size, group, rnd, offload) -> int:
    if offload:
        return 0
    return rnd(sum(shard_elems(p, group) * reduce_size(p) for p in params if p in trainable))


def sweep(stores: list[Store]) -> Swept:
    """The rank's live device bytes over the step: the peak, when, and what is live then (a free
    before a birth at the same instant, as the allocator's replay orders them)."""
    events = []
    for i, s in enumerate(stores):
        if s.host or s.nbytes <= 0:
            continue
        events.append((s.born, 1, i))
        if s.died != math.inf:
            events.append((s.died, 0, i))
    events.sort()
    live = peak = 0
    at = -math.inf
    for when, born, i in events:
        live += stores[i].nbytes if born else -stores[i].nbytes
        if live > peak:
            peak, at = live, when
    at_peak = dict.fromkeys(CATEGORIES, 0)
    for s in stores:
        if not s.host and s.nbytes > 0 and s.born <= at < s.died:
            at_peak[s.kind] = at_peak.get(s.kind, 0) + s.nbytes
    return Swept(peak, at, at_peak)
