"""AL104 elementwise-heavy (ShuffleNetV2 G4): element-wise ops (ReLU, add, bias-add, BatchNorm
that cannot be folded, …) and pure data movement (permute + .contiguous(), channel shuffle,
concat) holding a large share of the model's memory traffic — and, with --latency, of its
measured latency.

These ops do little arithmetic per byte: each is one pass over a whole activation. The paper
removed ReLU and the shortcut from a ResNet bottleneck and gained about 20% (Table 4). The
alternative is each op fused into the op that produces its input (torch.compile, a fused
kernel, writing a concat's parts in place): the op's own read and write of its main input go,
while extra operands (a residual's other side) are still read. That is the saving, static in
bytes or, with --latency, each op's measured time in proportion (an estimate from measurements).

BatchNorms that AL205 folds into a conv or linear are AL205's, not counted here; findings of
more specific rules (AL202's redundant activations, AL203's shortcut adds) are taken out of this
price by the claims pass. The rule fires when the model's share is above `threshold`: one
finding (one fix, torch.compile, fuses them all), located at the place that holds most of the
saving — a block class with its repeats, a module's own ops, or, for ops in the model's own
forward, the layer whose output they post-process (Gemma-2's final logit softcap after lm_head,
an MLP's functional activations after each Linear: where a fused epilogue or torch.compile
removes them) — naming the ops that carry the bytes and listing the next places. Ops on the
model's inputs in its own forward have no layer to act on: info, never a warning at the root.

Ops computed from parameters and buffers alone (the graph's dataflow: _parameter_only; timm's
weight standardisation, a learned scale's exp) are no pass over an activation and fusion does not
remove them: they are left out of the price (the finding says how much), and where they weigh
`WEIGHTS_FLOOR` of the model's MAC an info names their alternative — in inference, computed once.
"""

from __future__ import annotations

from collections import Counter

import networkx as nx

from archlint.diagnostics import Severity
from archlint.model.checks import _locate as locate
from archlint.model.checks import _pricing as pricing
from archlint.model.checks import _query as query
from archlint.model.checks._blocks import module_blocks
from archlint.model.checks._parameter_only import parameter_only
from archlint.model.checks._reference_path import reference_modules, switch_modules
from archlint.model.checks._repeats import path_pattern
from archlint.model.checks._verdict import stated
from archlint.model.opgraph import ELEMENTWISE_KINDS

CODE = "AL104"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRICE = ("static", "measured", "estimated")  # the bases its findings' prices may have, as its page says
FIX = "none"  # no autofix: its page's fix: none
YIELDS_TO = ("AL205",)  # the BatchNorms AL205 folds are its findings, not element-wise work here
PRIORITY = 170  # where findings overlap, the lowest claims the ops first
OPTIONS = {
    "threshold": 0.5,  # report when these ops' saving is above this share of the model's MAC (or latency)
}
MOVEMENT_KINDS = frozenset({"copy", "concat"})
WEIGHTS_FLOOR = 0.01  # parameter-only ops at this share of the model's MAC get their own info


def _label(data: dict) -> str:
    return query.op_name(data) if data["kind"] not in MOVEMENT_KINDS else f"{data['kind']} ({query.op_name(data)})"


def folded_norms(graph) -> set[str]:
    """The BatchNorms AL205 would fold (eval mode): not element-wise work once deployed."""
    if graph.graph.get("mode", "eval") != "eval":
        return set()
    return {n for _, n in query.producer_then_norm(graph)}


def _saved_bytes(graph, name: str) -> int:
    """What fusing the op into its producer saves: its MAC less the extra operands it still reads."""
    data = graph.nodes[name]
    mac = int(data.get("mac_bytes", 0))
    if data["kind"] in MOVEMENT_KINDS:
        return mac
    itemsize = int(data.get("itemsize", 4))
    extra = sum(_numel(s) for s in (data.get("in_shapes") or [])[1:]) * itemsize
    return max(0, mac - extra)


def _numel(shape) -> int:
    n = 1
    for v in shape or ():
        n *= int(v)
    return n


def check(graph, options, ctx):
    skip = folded_norms(graph) if "AL205" in ctx.yielded_to else set()  # YIELDS_TO: AL205 runs
    light = [
        n
        for n, d in query.ops(graph)
        if (d["kind"] in ELEMENTWISE_KINDS or d["kind"] in MOVEMENT_KINDS) and d.get("known", True) and n not in skip
    ]
    saved = {n: _saved_bytes(graph, n) for n in light}
    light = [n for n in light if saved[n] > 0]
    # ops a custom GPU kernel's Python reference path ran (captured on a CPU): not on the GPU path
    refs = reference_modules(graph)
    reference = [n for n in light if (graph.nodes[n].get("module") or "") in refs]
    light = [n for n in light if n not in set(reference)]
    if reference:
        yield _reference_info(graph, refs, reference, saved)
    total = query.module_mac(graph)
    # ops computed from parameters alone: weight-sized, no activation pass, not removed by fusion
    fixed = parameter_only(graph)
    weights = [n for n in light if n in fixed]
    light = [n for n in light if n not in fixed]
    if weights and total and sum(saved[n] for n in weights) / total >= WEIGHTS_FLOOR:
        yield _weights_info(graph, weights, saved, total)
    if not light:
        return
    share = sum(saved[n] for n in light) / total if total else 0.0
    parts_ms = _measured_parts(graph, light, saved)
    whole_ms = pricing.model_latency(graph, ctx) if parts_ms is not None else None
    lat_share = sum(parts_ms.values()) / whole_ms if parts_ms and whole_ms else None
    if share <= options["threshold"] and (lat_share or 0.0) <= options["threshold"]:
        return
    # The model is element-wise heavy (G4). One fix fuses them all (torch.compile): one finding,
    # located at the place that holds most of the saving (a block class with its repeats, or an op
    # chain outside blocks) and listing the next ones, each with the ops it holds.
    places = _ranked(graph, _places(graph, light), saved)
    found = _finding(graph, ctx, places, light, saved, parts_ms, share, lat_share)
    if weights:  # said, so the price's figures add up: what was left out and why
        left = sum(saved[n] for n in weights)
        found.evidence["parameter_only"] = {"ops": weights, "mac_bytes": left, "mac_share": round(left / total, 4)}
        if left / total >= WEIGHTS_FLOOR:  # a gate's sigmoid on a per-head parameter: evidence only
            found.message += (
                f"; {len(weights)} ops computed from parameters alone ({left / total:.0%} of the model's MAC) "
                "are left out: they are weight-sized, not passes over an activation"
            )
    yield found


def _weights_info(graph, ops: list[str], saved, total: int) -> object:
    """Info: the element-wise ops computed from parameters alone, and their alternative."""
    by_module = Counter()
    for n in ops:
        by_module[graph.nodes[n].get("module") or ""] += saved[n]
    modules = [m for m, _ in by_module.most_common()]
    left = sum(saved[n] for n in ops)
    costliest = max(ops, key=lambda n: saved[n])
    shape = "×".join(str(v) for v in (graph.nodes[costliest].get("out_shapes") or [()])[0])
    where = modules[0] or "the model's own forward"
    more = f" and {len(modules) - 1} more modules" if len(modules) > 1 else ""
    when = (
        "in inference their result is the same on every call: compute it once (cache the standardised weights, "
        "or torch.compile with freezing, which constant-folds them)"
        if graph.graph.get("mode", "eval") == "eval"
        else "in training they run every step, over the weights (weight-sized, not activation-sized); in inference "
        "they can be computed once"
    )
    return locate.finding(
        graph,
        CODE,
        (
            f"{len(ops)} element-wise ops in {where}{more} ({chain_label(graph, ops, saved)}) compute from "
            f"parameters and buffers alone, {left / total:.0%} of the model's MAC (costliest on a {shape} tensor): "
            f"they read no activation and fusion does not remove them, so they are not priced here; {when}"
        ),
        node=costliest,
        module=modules[0],
        severity=Severity.INFO,
        evidence={
            "modules": modules,
            "ops": ops,
            "mac_bytes": left,
            "mac_share": round(left / total, 4),
            "verdict": "computed from parameters alone: not an activation pass fusion removes",
        },
    )


def _switch(graph, module: str):
    """(path, switch) of the innermost module holding `module` whose class switches to a fused
    CUDA implementation at construction (_reference_path.cuda_switch), or None."""
    switches = switch_modules(graph)
    holders = [p for p in switches if module == p or module.startswith(p + ".") or p == ""]
    if not holders:
        return None
    path = max(holders, key=len)
    return path, switches[path]


def _reference_info(graph, refs, ops: list[str], saved) -> object:
    """Info: what was captured through a reference path, and why it is not priced."""
    modules = list(dict.fromkeys(graph.nodes[n].get("module") or "" for n in ops))
    paths = list(dict.fromkeys(refs[m] for m in modules))
    named = "; ".join(f"{p.function} ({p.file.rsplit('/', 1)[-1]}:{p.line}: `if {p.test}`)" for p in paths[:3])
    total = query.module_mac(graph)
    share = sum(saved[n] for n in ops) / total if total else 0.0
    d = locate.finding(
        graph,
        CODE,
        (
            f"{len(ops)} element-wise and data-movement ops ({share:.0%} of the model's MAC) in {modules[0]}"
            + (f" and {len(modules) - 1} more modules" if len(modules) > 1 else "")
            + f" were captured through the Python reference path of a custom GPU kernel — {named} — which runs "
            "off the GPU; on a GPU the fused kernel runs instead, so they are not priced here (profile the GPU run, "
            "`archlint trace`, for what the kernel costs)"
        ),
        node=ops[0],
        module=modules[0],
        severity=Severity.INFO,
        evidence={
            "reference_path": [{"function": p.function, "file": p.file, "line": p.line, "test": p.test} for p in paths],
            "modules": modules,
            "ops": ops,
            "mac_share": round(share, 4),
            "verdict": "captured through a reference path the GPU never runs",
        },
    )
    return d


def _places(graph, light: list[str]) -> list[tuple[str, list[str]]]:
    """The light ops split where a user can act: by the innermost repeated block holding them
    (ResNet's layer1.0), else by connected op chain (Gemma's final logit softcap)."""
    order = {n: i for i, n in enumerate(light)}
    owner: dict[str, str] = {}
    for block in sorted(module_blocks(graph), key=lambda b: -b.name.count(".")):
        for n in block.nodes:
            if n in order:
                owner.setdefault(n, block.name)
    places: dict[str, list[str]] = {}
    for n in light:
        if n in owner:
            places.setdefault(owner[n], []).append(n)
    loose = [n for n in light if n not in owner]
    chains = nx.Graph()  # joined through views (a permute between two element-wise ops is free)
    chains.add_nodes_from(loose)
    chains.add_nodes_from(n for n, d in query.ops(graph) if d["kind"] in ("reshape", "split") and n not in owner)
    chains.add_edges_from((u, v) for u in chains for v in graph.successors(u) if v in chains)
    for chain in sorted(nx.connected_components(chains), key=lambda c: min(order.get(n, len(order)) for n in c)):
        ops = sorted((n for n in chain if n in order), key=order.__getitem__)
        if not ops:
            continue
        common = locate.common_module(graph, ops)
        if common:
            places.setdefault(common, []).extend(ops)
            continue
        # In the model's own forward (the root): each op goes to the layer whose output it
        # post-processes (its first input, through other such ops and views) — Gemma-2's softcap
        # after lm_head, an MLP's functional activations after each Linear: the place a fused
        # epilogue (or torch.compile) removes them. Ops on the model's inputs stay at the root.
        for n in ops:
            producer = _producer(graph, n, order)
            places.setdefault(f"{AFTER}{producer}" if producer else f"@{ops[0]}", []).append(n)
    return [(where, ops) for where, ops in places.items()]


AFTER = ">"  # a place "after a layer": the ops in the model's own forward that post-process its output


def _producer(graph, name: str, light: dict) -> str | None:
    """The module of the op whose output `name` post-processes: its first input's producer, past
    light ops and views; None when that is the model's input or an op of the root."""
    seen = set()
    while name not in seen:
        seen.add(name)
        preds = sorted(graph.in_edges(name, data=True), key=lambda e: e[2].get("index", 0))
        if not preds:
            return None
        name = preds[0][0]
        d = graph.nodes[name]
        if name in light or d["kind"] in ("reshape", "split"):
            continue
        return d.get("module") or None
    return None


def _ranked(graph, places, saved) -> list[tuple[str, list[str], list[str]]]:
    """(where, ops, modules) per place, a block's repeats as one place, costliest first."""
    merged: dict[tuple, tuple[str, list[str], list[str]]] = {}
    for where, ops in places:
        if where.startswith(AFTER):
            key = (AFTER + path_pattern(where[1:]), query.module_type(graph, where[1:]))
        else:
            key = (path_pattern(where), query.module_type(graph, where)) if not where.startswith("@") else (where, None)
        first, held, modules = merged.get(key, (where, [], []))
        merged[key] = (first, held + ops, modules + [where])
    return sorted(merged.values(), key=lambda p: -sum(saved[n] for n in p[1]))


def _measured_parts(graph, light, saved) -> dict[str, float] | None:
    """Each op's measured time × the share of its bytes fusion saves; None without latency."""
    out = {}
    for n in light:
        d = graph.nodes[n]
        if d.get("latency_ms") is None:
            return None
        mac = int(d.get("mac_bytes", 0))
        out[n] = d["latency_ms"] * (saved[n] / mac if mac else 1.0)
    return out


def _finding(graph, ctx, places, light, saved, parts_ms, share, lat_share):
    # each op's name and label once: the statement is rendered twice (here and by run_checks'
    # restate), each time naming the ops of every place that holds bytes
    names = {n: query.op_name(graph.nodes[n]) for n in light}
    labels = {n: _label(graph.nodes[n]) if graph.nodes[n]["kind"] in MOVEMENT_KINDS else names[n] for n in light}
    by_op = Counter()
    for n in light:
        by_op[labels[n]] += saved[n]
    mac = sum(saved[n] for n in light)
    total = mac / share if share else 0  # the model's MAC
    price = pricing.price(
        graph,
        ctx,
        alternative="the model's element-wise and data-movement ops fused into the ops producing their "
        "inputs (torch.compile, or fused kernels where listed)",
        mac_bytes_saved=mac,
        saving_ms=sum(parts_ms.values()) if parts_ms else None,
        estimated=True,
        claims=light,
    )
    price.parts = {n: (saved[n], parts_ms[n] if parts_ms else None) for n in light}
    whole_ms = sum(parts_ms.values()) / lat_share if parts_ms and lat_share else None
    untimed = (
        "; the saving is estimated from the ops' measured times, fusion itself was not timed "
        "(`--what-if compile` measures what it buys)"
        if price.basis == "estimated" and ctx.pricer is not None
        else ""
    )
    where, ops, modules = places[0]
    module = _module(where)

    def render(d) -> str:
        """The statement from the price as it stands: the ops it still counts (another rule may own
        some: _verdict.settle), their share of the model, by op and by place."""
        parts = d.price.parts if d.price is not None and d.price.parts is not None else price.parts
        kept = {n: b for n, (b, _) in parts.items()}
        if not kept:  # other findings own every op
            return (
                "element-wise and data-movement ops that fusion would remove: every one is counted by another "
                "finding, nothing is left for this one"
            )
        held = sum(kept.values()) or 1
        counted = Counter()
        for n, b in kept.items():
            counted[labels[n]] += b
        # the ops that carry the bytes: a per-channel parameter op (a scale's exp, a weight's cast) at 0% is not named
        top = (
            ", ".join(f"{op} {b / held:.0%}" for op, b in counted.most_common(4) if b >= 0.01 * held)
            or counted.most_common(1)[0][0]
        )
        mine = [(w, [n for n in o if n in kept], ms) for w, o, ms in places]
        mine = sorted([p for p in mine if p[1]], key=lambda p: -sum(kept[n] for n in p[1]))
        listed = [
            _place(graph, p, kept, held, names)
            for p in mine
            if p is mine[0] or sum(kept[n] for n in p[1]) >= 0.01 * held
        ]  # the places that hold bytes
        more = f"; then {'; '.join(listed[1:4])}" + (f" and {len(listed) - 4} more places" if len(listed) > 4 else "")
        costliest = max(mine[0][1], key=lambda n: kept[n])
        shape = "×".join(str(v) for v in (graph.nodes[costliest].get("out_shapes") or [()])[0])
        ms = sum(v or 0.0 for _, v in parts.values()) if parts_ms else None
        measured = f" and {ms / whole_ms:.0%} of its measured latency" if ms is not None and whole_ms else ""
        return (
            f"element-wise and data-movement ops that fusion would remove hold {held / total if total else 0:.0%} of the "
            f"model's MAC{measured} ({top}), most in {listed[0]} (costliest on a {shape} tensor)"
            f"{more if len(listed) > 1 else ''}: each is a full pass over an activation with little arithmetic{untimed}"
        )

    # an AFTER place: the source is the class whose forward runs the ops (the model's own), the
    # module the layer whose output they post-process
    holder = locate.common_module(graph, ops) if where.startswith(AFTER) else module
    found = locate.finding(
        graph,
        CODE,
        "",
        node=ops[0],
        module=holder,
        price=price,
        evidence={
            "mac_bytes_saved": mac,
            "mac_share": round(share, 4),
            "latency_share": round(lat_share, 4) if lat_share is not None else None,
            "ops": ops,
            "mac_bytes_by_op": dict(by_op.most_common()),
            "places": [
                {
                    "module": _module(w),
                    "after": w.startswith(AFTER),
                    "repeats": [_module(m) for m in ms],
                    "ops": o,
                    "mac_bytes_saved": sum(saved[n] for n in o),
                }
                for w, o, ms in places
            ],
        },
    )
    stated(found, render)
    found.module = module
    switch = _switch(graph, module)
    if switch is not None:  # the model's own switch to a fused CUDA kernel for these ops
        path, sw = switch
        found.evidence["switch"] = {"test": sw.test, "file": sw.file, "line": sw.line, "module": path}
        found.message += (
            f"; {sw.function.split('.')[0]} ({path or 'the model'}) builds a fused CUDA kernel for them "
            f"when `{sw.test}` ({sw.file.rsplit('/', 1)[-1]}:{sw.line}): on a GPU that switch removes "
            "these passes"
        )
    if where.startswith("@"):  # ops on the model's inputs in its own forward: no layer to fuse them into
        found.severity = Severity.INFO
        found.evidence["verdict"] = (
            "a model-wide total at the model's root: the ops work on its inputs, no layer holds them"
        )
    return found


def _place(graph, place, saved, total: int, names: dict[str, str] | None = None) -> str:
    """ "layers.0 and 11 more like it (add → layernorm → …, 31%)"."""
    where, ops, modules = place
    if where.startswith("@"):
        name = "the model's own forward, on its inputs or parameters"
    elif where.startswith(AFTER):
        name = f"the model's own forward after {where[1:]}"
    else:
        name = where
    if len(modules) > 1:
        name += f" and {len(modules) - 1} more like it"
    return f"{name} ({chain_label(graph, ops, saved, names)}, {sum(saved[n] for n in ops) / total:.0%})"


def chain_label(graph, ops: list[str], saved: dict[str, int], names: dict[str, str] | None = None) -> str:
    """The ops that carry the place's bytes, in their order: each op name holding at least 5% of
    the place's saving (at most 5; the costliest when none does) — not the per-channel parameter
    ops (a scale's exp, a cast of a weight) that come first and weigh nothing. `names`: each op's
    query.op_name, where the caller has them."""
    named = [names[n] for n in ops] if names is not None else [query.op_name(graph.nodes[n]) for n in ops]
    held = Counter()
    for n, op in zip(ops, named):
        held[op] += saved[n]
    total = sum(held.values()) or 1
    heavy = {op for op, b in held.most_common(5) if b >= 0.05 * total} or {held.most_common(1)[0][0]}
    return " → ".join(op for op in dict.fromkeys(named) if op in heavy)


def _module(where: str) -> str:
    """A place's module path: the layer itself, or the layer an AFTER place follows; "" at the root."""
    if where.startswith("@"):
        return ""
    return where[1:] if where.startswith(AFTER) else where
