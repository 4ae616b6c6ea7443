"""`--train --world-size N --strategy S`: the per-rank step, the fewest GPUs and the plan, for the report."""

from __future__ import annotations

from archlint.model.distributed.plan import fit_plan, plan_json
from archlint.model.distributed.result import to_json
from archlint.model.distributed.step import budget_figure, distributed_step
from archlint.model.distributed.strategy import parallel
from archlint.model.train.fit import device_memory
from archlint.result import Estimate


def distributed_report(
    model, args, kwargs, settings, *, optimizer: str, loss: str, device_spec, estimate: Estimate | None, layers=None
) -> tuple[dict, dict]:
    """(`memory`, `distributed`) of models[] for the distributed step: `memory` is the one process's
    step as recorded (unsharded) with `min_world_size` and `fit_plan` when there is a budget;
    `distributed` the per rank (archlint.model.distributed.result.to_json)."""
    par = parallel(
        settings.parallel,
        settings.world_size,
        settings.nodes,
        mixed_precision=settings.mixed_precision,
        cpu_offload=settings.cpu_offload,
        shard_unit=settings.shard_unit,
    )
    budget, source = settings.memory_budget, "--memory-budget"
    if budget is None and (found := device_memory(device_spec)) is not None:
        budget, source = found
    d, rec, units = distributed_step(
        model,
        args,
        kwargs,
        par,
        optimizer=optimizer,
        loss=loss,
        device_spec=device_spec,
        budget_bytes=budget,
        trainable=settings.trainable,
    )
    train = estimate.train if estimate is not None else None
    if train and par.mixed_precision and train.get("autocast"):  # the compute as bf16 autocast runs it
        train = {
            **train,
            **{k: v for k, v in train["autocast"].items() if k.endswith("_ms")},
            "single_gpu_fp32_step_ms": train["step_ms"],
        }
    if device_spec is not None and train:
        from archlint.model.distributed.comm import estimate_step

        d.estimate = estimate_step(rec, units, par, device_spec, train)
    memory = dict(rec.single)
    said = memory.pop("loss")  # the JSON's key order: the loss after the optimizer, as --train's
    memory.update(
        {
            "step_reported": (
                "one process's steady step as recorded, unsharded (the same step laid out per rank: "
                "models[].distributed)"
            ),
            "optimizer": optimizer,
            "loss": said,
            "basis": rec.basis,
        }
    )
    if budget is not None:
        plan = fit_plan(
            model,
            args,
            kwargs,
            rec,
            par,
            units,
            budget,
            optimizer=optimizer,
            loss=loss,
            device_spec=device_spec,
            trainable=settings.trainable,
            step_ms=train,
        )
        sizes, entries = plan_json(plan)
        # `fits` is said of the per-rank step only (models[].distributed.per_rank.fits): this peak is one
        # unsharded process's
        memory.update(
            {
                "budget_bytes": int(budget),
                "budget_source": source,
                "per_rank_fits": d.per_rank.fits,
                "per_rank_budget_figure_bytes": budget_figure(d.per_rank),
                "min_world_size": sizes,
                "min_world_size_basis": plan.min_world_size_basis,
                "fit_plan": entries,
                "fit_plan_basis": (
                    f"each entry laid out and swept with its changes applied ({plan.evaluated} "
                    f"layouts of {plan.recordings} recorded steps), never added up"
                ),
            }
        )
    return memory, to_json(d)
