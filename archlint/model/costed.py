"""A loaded model as a costed OpGraph and the ModelResult of its totals: captured by the first
strategy that works, every op given its cost. What an analysis, a `--decode` step and the
loader's model step all start from (analyze.py adds timing and the rules)."""

from __future__ import annotations

import contextlib
from collections import Counter

import networkx as nx
import torch
from torch import nn

from archlint import collector
from archlint.config import Settings
from archlint.errors import UsageError
from archlint.model import opgraph
from archlint.model.capture import STRATEGIES, CaptureFailed, capture
from archlint.model.cost import cost_graph
from archlint.model.loading.loaded import Loaded
from archlint.model.runtime.sandbox import preserved, quiet_export, quiet_torch_logs
from archlint.result import ModelResult
from archlint.units import human_count


@contextlib.contextmanager
def traced_mode(model: nn.Module, mode: str):
    """Put the model in eval/train for the capture; give every module its own flag back after."""
    modules = list(model.modules())
    flags = [(m, m.training) for m in modules]
    want = mode == "train"
    if all(type(m).train is nn.Module.train for m in modules):
        # what nn.Module.train does (each module's flag), set only where it differs: the model is
        # most often in that mode already, and nn.Module.__setattr__ is slow (1.7 ms a DenseNet)
        for m in modules:
            if m.training is not want:
                m.training = want
    else:  # a module's own train() (one that keeps its norms frozen) decides
        model.train(want)
    try:
        yield
    finally:
        for m, training in flags:
            if m.training is not training:  # nn.Module.__setattr__ is slow: only the flags the block changed
                m.training = training


def capture_graph(loaded: Loaded, target: str, settings: Settings) -> nx.DiGraph:
    """The first strategy that works (or the one forced by settings.strategy); notes say why."""
    order = [settings.strategy] if settings.strategy else list(STRATEGIES)
    failures: list[CaptureFailed] = []
    notes: list[str] = []
    on_meta: CaptureFailed | None = None  # dispatch's failure where it ran on meta weights
    for strategy in order:
        if strategy not in STRATEGIES:
            raise UsageError(f"unknown capture strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
        model = loaded.model
        if strategy == "dispatch" and loaded.on_meta:
            model = loaded.real_model()
            notes.append(
                "built again with real weights: the dispatch recording runs one real forward pass; the "
                "weights are random, drawn from a fixed seed (the same on every run), so a part that runs "
                "on what they produce (a detector's heads on its detections) is counted for what these "
                "random weights produced, not a trained model's"
            )
        # fx runs on meta copies (any inputs do); export runs the real model on real inputs unless
        # it was built on meta; dispatch always runs one real forward: real inputs only then.
        inputs = (
            loaded.inputs if strategy == "fx" or (strategy == "export" and loaded.on_meta) else loaded.real_inputs()
        )
        kept = None
        try:
            quiet = quiet_export(settings.debug) if strategy == "export" else contextlib.nullcontext()
            # fx never does arithmetic on the parameters (proxies, then meta copies): their values
            # are not copied for it (sandbox.preserved); buffers are, as for the other strategies
            # preserved outside traced_mode: a module's own train() may change its state (timm's LeViT
            # empties its attention-bias cache), which is put back with the rest
            with (
                preserved(model, parameter_values=strategy != "fx") as kept,
                traced_mode(model, settings.mode),
                collector.paused(),
                quiet_torch_logs(settings.debug),
                quiet,
            ):
                # fx hands the forward proxies and propagates on meta copies: the inputs' values are never
                # read or written there, so they need no copy (a 1×3×224×224 image's took ~4 ms)
                given = inputs if strategy == "fx" else fresh(inputs)
                graph, _ = capture(model, given, strategy, fresh(loaded.kwargs))
        except CaptureFailed as failure:
            failures.append(failure)
            if strategy == "dispatch" and loaded.on_meta:
                on_meta = failure
            continue
        finally:
            if kept is not None and kept.unrestored:
                notes.append(_unrestored_note(strategy, kept.unrestored))
        if failures:  # the report says which capture was used; why the others failed is for --verbose
            tried = " and ".join(f.strategy for f in failures)
            notes.append(f"captured with {strategy}: {tried} could not capture this model (--verbose says why)")
        graph.graph["notes"] = notes + graph.graph.get("notes", [])
        graph.graph["details"] = [f"{f.strategy} capture failed: {' '.join(str(f).split())[:500]}" for f in failures]
        return graph
    last = failures[-1]
    lazy = [
        path or type(m).__name__
        for path, m in loaded.model.named_modules()
        if isinstance(m, nn.modules.lazy.LazyModuleMixin) and m.has_uninitialized_params()
    ]
    if lazy:
        raise UsageError(
            f"{target} has lazy modules not initialised yet ({', '.join(lazy[:3])}{' …' if len(lazy) > 3 else ''}), "
            "and no capture could initialise them: run one forward on a real batch before analyzing it, "
            "or name the class or a factory so archlint builds it"
        ) from last
    if on_meta is last:
        # a model given on the meta device with no factory to build it with real weights: dispatch's
        # real forward ran on meta weights, and its failure is often meta's (a CPU input meeting a
        # meta buffer), not the model's; the other captures' failures say what the model refused
        # (BatchNorm in train mode on a batch of 1), so each is named
        tried = "".join(f"{f.strategy} capture: {f}; " for f in failures[:-1])
        raise UsageError(
            f"the forward of {target} failed ({tried}dispatch capture, on meta weights: the model was given on "
            f"the meta device with no factory to build it with real ones: {last}); check --input-shape/--dtype "
            "or the model's forward (rerun with --debug for the traceback)"
        ) from last
    raise UsageError(
        f"the forward of {target} failed ({last.strategy} capture): {last}; check --input-shape/--dtype "
        "or the model's forward (rerun with --debug for the traceback)"
    ) from last


def _unrestored_note(strategy: str, paths: list[str]) -> str:
    named = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    return (
        f"the {strategy} capture changed parameter(s) {named} in place, which archlint had not copied: "
        "their values are left as the forward made them"
    )


def fresh(value):
    """A copy of the inputs for one run: a forward that changes an input in place (`mask.mul_(2)`)
    changes neither the user's tensor nor what the next capture or measurement is given."""
    if isinstance(value, torch.Tensor):
        if value.device.type == "meta":
            return value
        copy = value.detach().clone()
        return copy.requires_grad_() if value.requires_grad else copy
    if isinstance(value, (tuple, list)) and type(value) in (tuple, list):
        return type(value)(fresh(v) for v in value)
    if type(value) is dict:
        return {k: fresh(v) for k, v in value.items()}
    return value


def cost(graph: nx.DiGraph, notes: list[str]) -> None:
    """Costs on every op; a note lists the ops without a formula (left out of the totals)."""
    unknown = cost_graph(graph)
    if unknown:
        ops = Counter(graph.nodes[n]["op"] for n in unknown)
        listed = ", ".join(f"{op} ×{c}" if c > 1 else op for op, c in ops.most_common(8))
        notes.append(f"{len(unknown)} ops have no cost formula and are left out of the totals: {listed}")


def unused_note(graph: nx.DiGraph) -> str | None:
    """What of the model's params (torch's count) the traced forward never reads, and the largest
    modules that hold them; None when it reads them all."""
    unused, total = int(graph.graph.get("unused_param_count", 0)), int(graph.graph.get("param_count", 0))
    if not unused:
        return None
    modules = graph.graph.get("unused_modules") or []
    named = ", ".join(f"{path} ({human_count(n)})" for path, n in modules[:3])
    more = f" and {len(modules) - 3} more" if len(modules) > 3 else ""
    where = f": {named}{more}" if named else " (parameters of modules that ran)"
    return (
        f"params: {human_count(total)} as torch counts them (model.parameters()), of which {human_count(unused)} "
        f"({unused / total:.1%}) the traced {graph.graph.get('mode', 'eval')}-mode forward never reads{where}; "
        "no op's params include them (totals.unused_params)"
    )


def memory_format(model) -> str:
    """ "channels_last" when the model's 4-D conv weights are (model.to(memory_format=torch.channels_last):
    cuDNN then runs its convs in NHWC without transposes), else "contiguous"."""
    import torch

    weights = [m.weight for m in model.modules() if isinstance(m, torch.nn.Conv2d) and m.weight.dim() == 4]
    # a weight both layouts describe (one input channel a group, 1×1 kernels) says nothing either way
    told = [
        w.is_contiguous(memory_format=torch.channels_last)
        for w in weights
        if w.is_contiguous() != w.is_contiguous(memory_format=torch.channels_last)
    ]
    return "channels_last" if told and sum(told) * 2 > len(told) else "contiguous"


def capture_and_cost(loaded: Loaded, target: str, device: str, settings: Settings) -> tuple[nx.DiGraph, ModelResult]:
    """The captured graph, every op costed, and its ModelResult (totals, inputs, notes; no layers yet)."""
    with collector.paused():  # the module tables' snapshot and the capture: objects by the thousand, no cycles
        graph = capture_graph(loaded, target, settings)
    described = [
        {"name": n, "shape": list(d["out_shapes"][0]), "dtype": d["dtype"]}
        for n, d in graph.nodes(data=True)
        if d["kind"] == "input"
    ]
    inputs = [i["shape"] for i in described]
    notes = loaded.notes + graph.graph["notes"]
    dtype = str(loaded.dtype).removeprefix("torch.")
    graph.graph.update(
        target=target,
        mode=settings.mode,
        build=loaded.build,
        dtype=dtype,
        input_shapes=inputs,
        notes=notes,
        memory_format=memory_format(loaded.model),
    )
    with collector.paused():
        cost(graph, notes)
    result = ModelResult(
        target=target,
        strategy=graph.graph["strategy"],
        device=device,
        dtype=dtype,
        input_shapes=inputs,
        totals=opgraph.totals(graph),
        layers=[],
        mode=settings.mode,
        build=loaded.build,
        notes=notes,
        inputs=described,
        details=graph.graph["details"],
    )
    result.module_types = {path: info["type"] for path, info in graph.graph.get("modules", {}).items()}
    note = unused_note(graph)
    if note:
        notes.append(note)
    return graph, result  # layers are filled by the caller, once the graph is complete
