"""Each collective's time on the spec's interconnect and how much of it the compute hides.

Cost: the ring algorithm's α-β model, as NCCL's documentation and its performance notes
(the nccl-tests performance notes on algorithm and bus bandwidth) state it: an all-reduce of B bytes over n ranks moves
2(n-1)/n·B per rank in 2(n-1) steps, an all-gather or reduce-scatter (n-1)/n·B in n-1 steps, a
broadcast B (pipelined); time = bytes / bus bandwidth + steps · latency. The bandwidth is the
spec's intra-node link (NVLink, or PCIe) when the group is inside one node, else its per-GPU
inter-node link (InfiniBand/RoCE NIC): a ring over nodes runs at its slowest link.

Overlap: the step's compute is laid on a time line from the device estimate (forward_ms,
backward_ms, optimizer_ms), each phase's time spread over its recorded events (the backward's over
those up to its last gradient: what follows is frees, no compute); the collectives run
one after another on one link, each from the event that issues it (a DDP bucket when its last
gradient is made, an FSDP all-gather at the prefetch, a reduce-scatter after its unit's backward).
A unit's compute waits for its all-gather (the wait shifts the rest of the step); what is still
running when the backward ends is waited for before the optimizer step (which takes the reduced
gradients: nothing of the backward's collectives hides behind it). Exposed communication = the
step's time over its compute; step_ms = compute + exposed; scaling efficiency = one GPU's step over
the rank's (the same per-rank batch: N times the samples).
"""

from __future__ import annotations

from archlint.model.distributed.layout import lay_out
from archlint.model.distributed.offload import offload_time
from archlint.model.distributed.strategy import Parallel
from archlint.model.distributed.units import Units
from archlint.model.train.memory import StepRecording


def collective_ms(op: str, nbytes: int, n: int, bandwidth: float, latency_s: float) -> float:
    """The ring algorithm's time for one collective (module docstring), in ms."""
    if n <= 1:
        return 0.0
    if op == "all_reduce":
        moved, steps = 2 * (n - 1) / n * nbytes, 2 * (n - 1)
    elif op == "broadcast":
        moved, steps = nbytes, n - 1
    else:
        moved, steps = (n - 1) / n * nbytes, n - 1
    return (moved / bandwidth + steps * latency_s) * 1e3


def link(spec, par: Parallel, group: int) -> tuple[float, float, str] | None:
    """(bytes/s, latency s, which link) for a group of `group` ranks, or None if the spec gives none."""
    net = getattr(spec, "interconnect", None) or {}
    per_node = par.world_size // max(par.nodes, 1)
    inside = par.nodes <= 1 or group <= per_node and par.strategy == "hsdp"
    if par.strategy == "hsdp" and group == par.replicas and par.replicas > 1:
        inside = False  # the replicas' all-reduce crosses the nodes
    key = "intra-node" if inside else "inter-node"
    if f"{key}-gbs" not in net:
        return None
    return net[f"{key}-gbs"] * 1e9, net.get(f"{key}-latency-us", 0.0) * 1e-6, key


def _wait_for_gradients(backward_end: float, shift: float, queue: float) -> float:
    """The shift after the backward waits for its collectives: the optimizer step takes the reduced
    gradients, so DDP's reducer, FSDP2's post-backward callback and ZeRO all wait for every gradient
    collective before backward() returns; none of them hides behind the optimizer step."""
    return shift + max(0.0, queue - (backward_end + shift))


def estimate_step(rec: StepRecording, units: Units, par: Parallel, spec, train: dict) -> dict:
    """estimate: {comm_ms, exposed_comm_ms, compute_ms, step_ms, scaling_efficiency, ...} of the rank's step."""
    lay = lay_out(rec, par, units.paths, [])
    fwd, bwd = train["forward_ms"] + train.get("loss_ms", 0.0), train["backward_ms"]
    # zero1-torch: whole parameters per rank, greedily balanced: about 1/N of the step (estimated)
    share = 1.0 if par.strategy == "ddp" else 1.0 / max(par.shard_group, 1)
    opt = 0.0 if par.cpu_offload else train["optimizer_ms"] * share
    off = offload_time(rec, par, lay, spec) if par.cpu_offload else None
    if off is not None:  # the device waits for the host's step and the copies (offload.py)
        opt = off.ms
    compute = fwd + bwd + opt
    marks = rec.marks
    f0, b0, s0, e0 = marks["forward"], marks["backward"], marks["step"], marks.get("end", marks["step"])
    # the backward's compute ends with its last gradient (the first layer's): the recording's events after
    # it are frees (saved activations, the loss), no compute, so nothing after it hides a collective (a
    # DDP step's last bucket is exposed whole, as the DDP paper says; these events once took 1/4 of an
    # MLP's backward and hid most of its one bucket)
    made = [st.born for st in rec.storages if st.kind == "grads" and st.phase == "backward" and b0 < st.born <= s0]
    b1 = min(s0, max(made) + 1) if made else s0

    def at(event: float | None) -> float:
        """The event's time on the compute line: each phase's time spread over its events."""
        if event is None:
            return fwd + bwd
        if event <= f0:
            return 0.0
        if event <= b0:
            return fwd * (event - f0) / max(b0 - f0, 1)
        if event <= s0:
            return fwd + bwd * min(1.0, (event - b0) / max(b1 - b0, 1))
        return fwd + bwd + opt * min(1.0, (event - s0) / max(e0 - s0, 1))

    per = []
    queue = shift = 0.0
    comm = 0.0
    missing = False
    waited = False
    # the step's collectives by the time they are ready, those after the optimizer step last
    for c in sorted(lay.issued, key=lambda c: (c.phase == "step", c.ready)):
        if c.phase == "step" and not waited:
            shift, waited = _wait_for_gradients(fwd + bwd, shift, queue), True
        found = link(spec, par, c.group)
        if found is None:
            missing = True
            break
        bandwidth, latency, which = found
        ms = collective_ms(c.op, c.nbytes, c.group, bandwidth, latency)
        comm += ms
        ready = at(c.ready) + shift
        if c.phase == "step":  # after the optimizer step: nothing left to hide behind
            ready = compute + shift
        start = max(ready, queue)
        queue = start + ms
        if c.needed is not None:
            need = at(c.needed) + shift
            if queue > need:
                shift += queue - need
        per.append({"op": c.op, "phase": c.phase, "bytes": c.nbytes, "ms": ms, "link": which})
    if missing:
        return {
            "device_spec": spec.name,
            "comm_ms": None,
            "exposed_comm_ms": None,
            "step_ms": None,
            "scaling_efficiency": None,
            "basis": f"device spec {spec.name} gives no [interconnect] figures for this layout: no time estimated",
        }
    if not waited:
        shift = _wait_for_gradients(fwd + bwd, shift, queue)
    end = max(compute + shift, queue)
    exposed = end - compute
    single = train["step_ms"]
    return {
        "device_spec": spec.name,
        "comm_ms": comm,
        "exposed_comm_ms": exposed,
        "compute_ms": compute,
        "step_ms": compute + exposed,
        "single_gpu_step_ms": single,
        "scaling_efficiency": single / (compute + exposed) if compute + exposed > 0 else None,
        "overlapped_comm_ms": comm - exposed if comm >= exposed else 0.0,
        "links": sorted({p["link"] for p in per}),
        "interconnect_source": spec.sources.get("interconnect", ""),
        "basis": (
            "estimated: ring α-β cost per collective on the spec's interconnect, overlapped with the "
            "estimated compute of the step as the strategy issues and waits for them (module "
            "archlint.model.distributed.comm); scaling efficiency = one GPU's step time over a rank's at the "
            "same per-rank batch"
            + (
                f"; CPU offload: {off.basis}"
                if off is not None
                else "; the optimizer step on the host (CPU offload) not timed: the spec gives no host link"
                if par.cpu_offload
                else ""
            )
        ),
        **(
            {"offload_ms": off.ms, "offload_copies_ms": off.copies_ms, "offload_host_step_ms": off.host_step_ms}
            if off is not None
            else {}
        ),
    }
