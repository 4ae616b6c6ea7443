"""The --train results a model's analysis hands to reporters, typed; no torch in here.

Each record is built where its figures are made (archlint/model/train, archlint/model/distributed)
and written by its own `to_dict`, the JSON contract of docs/design.md: the fields in the order
declared (the order the keys have always had), a field that is None left out (a key a mode does
not add), so the JSON of every run is the bytes it was when these were dicts.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


def present_fields(record: Any, keep: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The record's fields in declaration order, less those that are None (those in `keep` are
    written even then: a null the contract says)."""
    return {f.name: value for f in fields(record) if (value := getattr(record, f.name)) is not None or f.name in keep}


@dataclass
class StepMemory:
    """models[].memory: the memory of one steady-state training step (archlint.model.train.memory,
    .fit; with --world-size/--strategy, one unsharded process's step as recorded: per rank in
    models[].distributed). Bytes throughout. Fields after `output_basis` are added by a mode:
    a GPU spec, a CPU convolution's scratch, a budget, a distributed step."""

    # the step as measured (memory._summary)
    peak_bytes: int
    params_bytes: int
    buffers_bytes: int
    inputs_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    activations_bytes: int  # kept from the forward for backward
    temporaries_bytes: int  # at the peak
    at_peak: dict[str, int]  # what is live at the peak, by kind
    forward_peak_bytes: int
    at: str  # "<phase>: aten.<op> (op N)": where the peak is
    ops: int  # ops of the step (the timeline's x axis)
    timeline: list[list[int]]  # [[op, live bytes]], down-sampled keeping each stretch's highest
    per_module_activations: dict[str, int]  # module path → bytes kept for backward
    first_step_peak_bytes: int | None = None  # the first step (the optimizer's state made there); not distributed
    step_reported: str = ""
    optimizer: str = ""
    loss: str = ""
    basis: str = ""
    output_bytes: int | None = None
    output_basis: str | None = None
    # a GPU spec: library workspaces and the caching allocator
    cublas_workspace_bytes: int | None = None
    cudnn_workspace_bytes: int | None = None
    cudnn_workspace_largest_bytes: int | None = None
    reduction_workspace_bytes: int | None = None
    reduction_workspace_largest_bytes: int | None = None
    workspace_basis: str | None = None
    allocator: dict[str, Any] | None = None  # rounding, reserved_peak_bytes, cuda_context_bytes, under_budget, ...
    device_peak_bytes: int | None = None  # the allocator's reserved peak + the CUDA context
    # a CPU target, a convolution on oneDNN: its scratch inside the op
    cpu_scratch_bytes: int | None = None
    cpu_scratch_largest_bytes: int | None = None
    cpu_scratch_basis: str | None = None
    adapted_ops: list[str] | None = None  # ops the meta device refused, adapted (meta_shims)
    reused_blocks: list[dict[str, str]] | None = None  # repeated blocks of the first step written from others (blocks)
    reused_blocks_basis: str | None = None
    notes: list[str] | None = None
    needed_bytes: int | None = None  # what the device needs: device_peak_bytes (under the budget), else the peak
    # a budget (--memory-budget, or a GPU spec's memory)
    budget_bytes: int | None = None
    fits: bool | None = None  # needed_bytes <= budget_bytes; absent from a distributed step's (per rank there)
    budget_source: str | None = None
    max_batch: int | None = None  # None: none fits, or not searched (max_batch_basis says which)
    max_batch_range: list[int | None] | None = None  # GPU spec: [max_batch, could fit up to]
    max_batch_basis: dict[str, Any] | None = None  # the search: written with max_batch, always
    # a distributed step with a budget (archlint.model.distributed.run)
    per_rank_fits: bool | None = None
    per_rank_budget_figure_bytes: int | None = None
    min_world_size: dict[str, int | None] | None = None  # strategy → fewest ranks whose step fits
    min_world_size_basis: str | None = None
    fit_plan: list[dict[str, Any]] | None = None
    fit_plan_basis: str | None = None
    device: str | None = None  # the device the memory is for: the spec, or this machine's

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StepMemory:
        """The record of the memory model's working dict (its fit search and the distributed plan
        read and extend it as a dict); a key the record does not declare is a TypeError."""
        return cls(**d)

    @property
    def needed(self) -> int:
        """What the device needs: needed_bytes, else the device peak (GPU spec), else the live peak."""
        if self.needed_bytes is not None:
            return self.needed_bytes
        return self.device_peak_bytes if self.device_peak_bytes is not None else self.peak_bytes

    def to_dict(self) -> dict[str, Any]:
        # max_batch is null when the search found none or did not run: written whenever it was searched
        return present_fields(self, frozenset({"max_batch"}) if self.max_batch_basis is not None else frozenset())


OWN_LOSS = "own"  # totals.train.loss.name where the model returns its own loss (grad.loss_sources)


def loss_phrase(name: str) -> str:
    """The step's loss in words, as the reports and notes say it."""
    if name == OWN_LOSS:
        return "the model's own (its output's `loss`, e.g. a Hugging Face model given labels; backpropagated alone, as out.loss.backward() does)"
    return f"{name} of the outputs"


PARTS = ("forward", "backward", "loss", "optimizer")  # the step's parts, in the order they run


@dataclass
class TrainStep:
    """totals.train (--train): one training step's costs (archlint.model.train.step.cost_step).
    FLOPs are multiply-adds; bytes are each op's reads and writes (MAC)."""

    loss: dict[str, Any]  # name, outputs, forward/backward flops and mac_bytes (step.loss_cost)
    optimizer: dict[
        str, Any
    ]  # name, implementation, flops, mac_bytes, launches, state_bytes, how, ... (optimizer.step_cost)
    forward_flops: int
    backward_flops: int
    loss_flops: int
    optimizer_flops: int
    step_flops: int
    forward_mac_bytes: int
    backward_mac_bytes: int
    loss_mac_bytes: int
    optimizer_mac_bytes: int
    step_mac_bytes: int
    trainable_params: int  # torch's count, as totals.params
    frozen_params: int
    updated_params: int  # of the trainable, those the forward reads: they get a gradient
    backward_unknown_ops: int
    measured: dict[str, Any] | None = None  # --latency: the real step timed here (model.train.timing)

    def split(self) -> dict[str, tuple[int, int]]:
        """(FLOPs, MAC bytes) of each part and of the whole step ("step"), in PARTS order."""
        return {
            "forward": (self.forward_flops, self.forward_mac_bytes),
            "backward": (self.backward_flops, self.backward_mac_bytes),
            "loss": (self.loss_flops, self.loss_mac_bytes),
            "optimizer": (self.optimizer_flops, self.optimizer_mac_bytes),
            "step": (self.step_flops, self.step_mac_bytes),
        }

    def to_dict(self) -> dict[str, Any]:
        return present_fields(self)
