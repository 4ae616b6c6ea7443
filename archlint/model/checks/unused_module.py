"""AL201 unused-module: a submodule or parameter created in __init__ that the traced forward
never reached. It still costs construction time, memory, checkpoint size, optimizer state, and
forces DistributedDataParallel's find_unused_parameters=True.

Only one forward mode is traced (graph attribute "mode"), so a module can be unused in that mode
and used in the other: an auxiliary head (GoogLeNet's aux1) runs only in training. Modules whose
path matches `train_only` are reported as such (info), not as dead code.

Only one path through forward is recorded too: when forward reads a tensor's value in Python
(`if x.sum() > 0:`, `.item()`), what it did not reach may run in the branch not taken, so nothing
is reported and a note says why. Modules created inside forward are not in the table (capture
lists the modules that existed before it ran).
"""

from __future__ import annotations

import fnmatch

from archlint.diagnostics import Severity
from archlint.model.checks import _locate as locate
from archlint.model.checks import _pricing as pricing
from archlint.model.checks import _query as query
from archlint.units import human_bytes

CODE = "AL201"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRICE = ("static", "measured", "estimated")  # the bases its findings' prices may have, as its page says
FIX = "none"  # no autofix: its page's fix: none
PRIORITY = 50  # where findings overlap, the lowest claims the ops first
OPTIONS = {
    # module or parameter path globs expected to run only in training (auxiliary heads, wav2vec2's
    # masked_spec_embed: the SpecAugment mask vector)
    "train_only": ["*aux*", "*masked_spec_embed"],
    "parameterless": False,  # also report unreached modules that hold no parameters
}


# What an unused parameter costs under DistributedDataParallel (measured with gloo, torch 2.14: the
# second step raises), and what the flag that avoids the error costs (AL410).
_DDP = (
    'under DistributedDataParallel the second step fails ("Expected to have finished reduction in the '
    'prior iteration before starting a new one") unless find_unused_parameters=True, which walks the '
    "autograd graph on every step (AL410)"
)

_ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int8": 1}


def _inside(path: str, parent: str) -> bool:
    return parent == "" or path.startswith(parent + ".")


def check(graph, options, ctx):
    modules = graph.graph.get("modules", {})
    reached = set(graph.graph.get("reached_modules", ()))
    mode = graph.graph.get("mode", "eval")
    other = "train" if mode == "eval" else "eval"
    itemsize = _ITEMSIZE.get(str(graph.graph.get("dtype", "float32")).replace("torch.", ""), 4)
    # A module counts as reached when it or anything inside it ran (containers may not record
    # themselves), when it sits inside a module that ran as one op (MultiheadAttention reads
    # out_proj's weight without calling it), or when it owns parameters and every one of them was
    # read by some op (torchvision's Swin passes attn.qkv.weight to a wrapped function).
    leaves = {d.get("module") or "" for _, d in query.ops(graph)} - {""}
    holds_reached = {q for r in reached for q in query.enclosing_modules(r)}
    holds_unused_param = {q for name in graph.graph.get("unused_params", ()) for q in query.enclosing_modules(name)}
    owned: dict[str, int] = {}
    for q, info in modules.items():
        for prefix in query.enclosing_modules(q):
            owned[prefix] = owned.get(prefix, 0) + int(info.get("params", 0))

    def is_live(p: str) -> bool:
        if p in holds_reached or any(q in leaves for q in query.enclosing_modules(p)):
            return True
        return owned.get(p, 0) > 0 and p not in holds_unused_param

    live = {p for p in modules if is_live(p)}
    unused = sorted((p for p in modules if p not in live), key=lambda p: (p.count("."), p))
    top: list[str] = []
    for path in unused:
        if not any(_inside(path, t) for t in top):
            top.append(path)
    reads = _value_reads(graph)
    if reads:
        skipped = [p for p in top if owned.get(p, 0) or options["parameterless"]]
        if skipped or graph.graph.get("unused_params"):
            names = ", ".join(skipped[:3]) + (f" and {len(skipped) - 3} more" if len(skipped) > 3 else "")
            ctx.notes.append(
                f"{CODE} not checked: the forward reads tensor values in Python ({reads}), so what it did not "
                f"reach{' (' + names + ')' if names else ''} may run in a branch this capture did not take"
            )
        return
    for path in top:
        params = owned.get(path, 0)
        if params == 0 and not options["parameterless"]:
            continue
        train_only = any(fnmatch.fnmatchcase(path.lower(), pat.lower()) for pat in options["train_only"])
        price = pricing.price(
            graph,
            ctx,
            alternative=f"{path} deleted (no runtime cost; {params * itemsize} bytes of parameters)",
            claims=(),
        )
        size = f"{params:,} parameters ({human_bytes(params * itemsize)})"
        if train_only:
            message = (
                f"{modules[path].get('type')} {path} is not reached in the {mode}-mode forward: an "
                f"auxiliary head used only in {other} mode, as its name suggests; {size} are carried "
                f"in {mode} mode — drop it for deployment (e.g. aux_logits=False)"
            )
        else:
            message = (
                f"{modules[path].get('type')} {path} is never reached in the {mode}-mode forward: {size} "
                f"built, stored and checkpointed for nothing; {_DDP}"
            )
        yield locate.finding(
            graph,
            CODE,
            message,
            node=None,
            module=path,
            price=price,
            severity=Severity.INFO if train_only else Severity.WARNING,
            evidence={
                "mode": mode,
                "module_type": modules[path].get("type"),
                "params": params,
                "param_bytes": params * itemsize,
                "train_only": train_only,
            },
        )
    # Parameters no op read, inside modules that did run (the rest are covered above): one finding
    # per module, naming its parameters (weight and bias are one place to fix, listed once).
    by_owner: dict[str, list[str]] = {}
    for pname in sorted(graph.graph.get("unused_params", ())):
        owner = pname.rpartition(".")[0]
        if owner not in live or any(_inside(owner, t) or owner == t for t in top):
            continue
        by_owner.setdefault(owner, []).append(pname)
    for owner, pnames in by_owner.items():
        train_only = all(
            any(fnmatch.fnmatchcase(p.lower(), pat.lower()) for pat in options["train_only"]) for p in pnames
        )
        what = (
            f"parameter {pnames[0]} is"
            if len(pnames) == 1
            else f"parameters {', '.join(p.rpartition('.')[2] for p in pnames)} of {owner or 'the model'} are"
        )
        message = f"{what} never read in the {mode}-mode forward" + (
            f" of {owner or 'the model'}" if len(pnames) == 1 else ""
        )
        if not train_only:
            message += f"; {_DDP}"
        if train_only:
            message += f": used only in {other} mode, as {'its name suggests' if len(pnames) == 1 else 'their names suggest'} (keep {'it' if len(pnames) == 1 else 'them'} to train; drop {'it' if len(pnames) == 1 else 'them'} for deployment)"
        yield locate.finding(
            graph,
            CODE,
            message,
            node=None,
            module=owner,
            price=pricing.price(graph, ctx, alternative=f"{', '.join(pnames)} deleted (no runtime cost)", claims=()),
            severity=Severity.INFO if train_only else Severity.WARNING,
            evidence={"mode": mode, "parameter": pnames[0], "parameters": pnames, "train_only": train_only},
        )


def _value_reads(graph) -> str:
    """The forward's value reads (`if t:`, `.item()`) that may decide a branch: "is_nonzero at line 9"."""
    reads = []
    for _, data in graph.nodes(data=True):
        if data["kind"] == "sync":
            source = query.attr(data, "source")
            reads.append(f"{data['op']}" + (f" at line {source[1]}" if source else ""))
    listed = list(dict.fromkeys(reads))
    return ", ".join(listed[:3]) + (" …" if len(listed) > 3 else "")
