"""Plain results that the model analyzer hands to reporters; no torch in here.

Field names follow the JSON contract in docs/design.md: reporters serialize these as they are.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from archlint.diagnostics import Diagnostic
from archlint.train_result import StepMemory, TrainStep, present_fields

# The op kinds (archlint/model/opgraph.py: KINDS) by family, for "where the time goes": compute
# does the arithmetic, element-wise ops one pass over an activation, memory-only ops move data
# without arithmetic; any other kind is "other".
KIND_FAMILIES = {
    "compute": ("conv", "linear", "matmul", "attention", "recurrent"),
    "element-wise": ("elementwise", "activation", "norm", "dropout"),
    "memory-only": ("concat", "split", "copy", "reshape", "creation", "upsample"),
}


def kind_family(kind: str) -> str:
    """An op kind's family (KIND_FAMILIES), "other" for the rest."""
    return next((family for family, kinds in KIND_FAMILIES.items() if kind in kinds), "other")


@dataclass
class Layer:
    """One op of the OpGraph with its costs. FLOPs are multiply-adds."""

    name: str  # OpGraph node name, stable across runs; also the trace range name
    kind: str  # normalized: conv, linear, matmul, attention, norm, elementwise, ...
    op: str  # what ran: "torch.nn.Conv2d", "aten.add.Tensor", "F.relu", ...
    module: str | None  # dotted module path ("layer1.0.conv1"); None at the top level
    flops: int = 0
    mac_bytes: int = 0
    params: int = 0
    out_bytes: int = 0  # size of the output activation
    in_shapes: list[list[int]] = field(default_factory=list)
    out_shapes: list[list[int]] = field(default_factory=list)
    dtype: str | None = None
    known: bool = True  # False: no cost formula for this op; its flops/mac are not counted
    attrs: dict[str, Any] = field(default_factory=dict)  # kernel, stride, groups, ...
    latency_ms: float | None = None  # measured median
    latency_spread_ms: list[float] | None = None  # [q1, q3] of the repeats
    roofline: dict[str, Any] | None = None  # intensity, bound, attainable_ms, efficiency
    inputs: list[str] = field(default_factory=list)  # producer op names (OpGraph in-edges)
    estimated_ms: float | None = None  # --device-spec: static estimate on that device (not measured)
    bound: str | None = None  # --device-spec: compute | memory | overhead, per the estimate
    estimate_terms: dict[str, Any] | None = None  # the estimate's parts: compute/memory/overhead ms, unit, ...
    display: str = ""  # the name every output shows: "block1.conv1", "block1:relu" (name stays the id)
    # --train only (absent from the JSON otherwise): the op's backward, archlint.model.train.backward
    flops_backward: int | None = None
    mac_bytes_backward: int | None = None
    backward_terms: dict[str, Any] | None = None  # grad_input/grad_weight/...: {flops, mac_bytes}

    @property
    def label(self) -> str:
        return self.display or self.name

    def to_dict(self) -> dict[str, Any]:
        return _without_none(asdict(self), ("flops_backward", "mac_bytes_backward", "backward_terms"))


def _without_none(d: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """`d` less the optional keys that are None: a field added for one mode stays out of the
    JSON of every other run (the same bytes as before it existed)."""
    for key in keys:
        if d.get(key) is None:
            d.pop(key, None)
    return d


@dataclass
class Totals:
    flops: int = 0
    mac_bytes: int = 0
    params: int = 0  # torch's count: sum(p.numel() for p in model.parameters()), a shared one once
    activation_bytes: int = 0
    latency_ms: float | None = None  # end-to-end, measured
    latency_ms_sum_of_ops: float | None = None  # sum of per-op medians
    unknown_ops: int = 0
    unused_params: int = 0  # of `params`, those the traced forward never reads (no op owns them)
    train: TrainStep | None = None  # --train: the step's forward/backward/loss/optimizer (model/train/step.py)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["train"] = self.train.to_dict() if self.train is not None else None
        return _without_none(d, ("train",))


@dataclass
class WhatIf:
    """One standard speed-up (--what-if) timed end to end against the unchanged model, or why it
    does not apply. Times are medians of interleaved passes in ms; `speedup` and `spread` are the
    median and interquartile range of the per-pass speed-ups (baseline pass / the transformed
    pass right after it);
    diffs compare the outputs on the same input: max |a − b|, and that over max |a|."""

    name: str  # "bf16", "fold-bn", ..., or "combined: fold-bn + channels-last"
    applicable: bool
    reason: str  # why not; or, when applicable, what was done
    baseline_ms: float | None = None
    transformed_ms: float | None = None
    spread: list[float] | None = None  # [q1, q3] of the per-pass speed-ups
    speedup: float | None = None  # median of the per-pass speed-ups (≈ baseline_ms / transformed_ms)
    max_abs_diff: float | None = None
    max_rel_diff: float | None = None
    compile_s: float | None = None  # torch.compile only: the first call, compilation included
    passes: int | None = None  # timed passes of each (after warm-up)

    @property
    def verdict(self) -> str:
        """Faster / slower / within noise, from the per-pass speed-ups' interquartile range ("" without one)."""
        if not self.spread:
            return ""
        lo, hi = self.spread
        return "faster" if lo > 1.0 else "slower" if hi < 1.0 else "within noise"


@dataclass
class Estimate:
    """models[].estimate (--device-spec): the static estimate of the forward on the spec'd device
    (archlint.model.estimating.estimate.estimate_graph), not a measurement. Written by `to_dict`
    in the declared order, a None field left out (the contract's key order)."""

    device_spec: str
    latency_ms: float
    method: str
    assumptions: list[str]
    roofs: dict[str, Any]  # unit, peak_flops_per_s, bandwidth_bytes_per_s
    range_ms: list[float] | None = None  # [fast, slow]: a GPU spec's measured shares at their highest, lowest
    range_terms: list[dict[str, Any]] | None = None  # each share's part of the range
    host_wait_ms: float | None = None  # the GPU waiting for the host's launches
    precision: str | None = None  # an estimate of the forward under autocast (speedups/precision.py)
    autocast: dict[str, Any] | None = None  # a float32 model on a GPU spec: the forward under torch.autocast
    train: dict[str, Any] | None = None  # --train: the step's estimate (archlint.model.train.steptime)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Estimate:
        """The record of estimate_graph's dict (the loader and the what-ifs read that dict as it is)."""
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        return present_fields(self)


@dataclass
class ModelResult:
    target: str
    strategy: str  # fx | export | dispatch
    device: str
    dtype: str
    input_shapes: list[list[int]]
    totals: Totals
    layers: list[Layer]
    mode: str = "eval"  # which forward was traced
    build: str = "meta"  # how the model was constructed: meta | real | given
    notes: list[str] = field(default_factory=list)  # fallbacks taken, estimates, caveats
    details: list[str] = field(default_factory=list)  # why a fallback was taken: text shows them with --verbose
    roofline: dict[str, Any] | None = None  # device peaks used for the roofline
    timing: str | None = None  # how latency was measured (per-op replay, module hooks, ...)
    estimate: Estimate | None = None  # --device-spec: the forward (and --train step) estimated on the spec
    what_if: list[WhatIf] | None = None  # --what-if: the standard speed-ups, measured
    flops_convention: str = "multiply-adds (1 FMA = 1 FLOP), as fvcore and torchvision's _ops"
    inputs: list[dict[str, Any]] = field(default_factory=list)  # [{"name", "shape", "dtype"}] per input
    phase: str | None = None  # "decode" for the --decode step of a causal LM; None: the forward as given
    module_types: dict[str, str] = field(default_factory=dict)  # path → class name, for --tree (not in JSON)
    memory: StepMemory | None = None  # --train: memory over the step (archlint.model.train.memory)
    distributed: dict[str, Any] | None = None  # --world-size/--strategy: the step per rank (archlint.model.distributed)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("module_types")
        d["memory"] = self.memory.to_dict() if self.memory is not None else None
        d["estimate"] = self.estimate.to_dict() if self.estimate is not None else None
        d["totals"] = self.totals.to_dict()
        d["layers"] = [layer.to_dict() for layer in self.layers]
        if self.what_if is None:  # absent unless --what-if ran (the JSON contract adds it then)
            del d["what_if"]
        return _without_none(d, ("memory", "distributed"))


@dataclass
class GateResult:
    """One budget or baseline check of the CI gate."""

    target: str
    check: str  # "max-flops", "baseline:flops", "baseline:new-finding", ...
    passed: bool
    message: str
    actual: float | None = None
    limit: float | None = None


@dataclass
class RunResult:
    models: list[ModelResult] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files_checked: int = 0
    gate: list[GateResult] = field(default_factory=list)
    loaders: list[Any] = field(default_factory=list)  # archlint.loader.result.LoaderResult, from `archlint loader`
    traces: list[Any] = field(default_factory=list)  # archlint.trace.analyze.TraceAnalysis, from `archlint trace`
    ranks: list[Any] = field(
        default_factory=list
    )  # archlint.trace.ranks.CrossRank: several ranks of one job, read together
    fixed: int | None = None  # with --fix: findings fixed (written to disk); with --diff: findings the diff fixes
    fixed_edits: int | None = None  # the edits those fixes made (one fix can make several)
    errors: list[str] = field(default_factory=list)  # models that could not be analyzed (the others were)

    def to_dict(self) -> dict[str, Any]:
        return (
            {
                "version": 1,
                "models": [m.to_dict() for m in self.models],
                "diagnostics": [d.to_dict() for d in sorted(self.diagnostics, key=Diagnostic.sort_key)],
                "files_checked": self.files_checked,
                "gate": [asdict(g) for g in self.gate],
            }
            | ({"loaders": [lr.to_dict() for lr in self.loaders]} if self.loaders else {})
            | ({"traces": [t.to_dict() for t in self.traces]} if self.traces else {})
            | ({"ranks": [r.to_dict() for r in self.ranks]} if self.ranks else {})
            | ({"errors": list(self.errors)} if self.errors else {})
        )
