"""AL611 unfused-optimizer: the --train step's optimizer.step() runs its update as several
element-wise kernels per parameter tensor (the for-loop implementation, PyTorch's default off
CUDA) or as several foreach kernels over the parameter list (PyTorch's default when every
parameter is on CUDA), where `fused=True` runs one kernel per chunk of tensors that reads and
writes each tensor once.

Priced from archlint's optimizer cost model (archlint.model.train.optimizer.step_cost: FLOPs,
bytes and launches per implementation, on the step's own trainable parameters): the fused
variant against the one the step runs. With --device-spec the basis is estimated: each variant
timed by the step estimate's own function (train.steptime.optimizer_ms: the kernels' bytes over
the spec's bandwidth, each launch paying its per-op overhead), a share of the estimated step.
Without, static: the optimizer bytes the fused kernel saves, a share of the step's MAC (a
foreach loop saves launches, not bytes: no static saving). Silent without --train (ctx.train)
and when the step's optimizer is fused already; info when --optimizer was not given (the step's
optimizer is then archlint's default, not the user's).
"""

from __future__ import annotations

from archlint.diagnostics import Diagnostic, Price, Severity
from archlint.model.train.optimizer import Optimizer, parse, step_cost
from archlint.model.train.steptime import optimizer_ms
from archlint.units import human_bytes

CODE = "AL611"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRICE = ("static", "estimated")  # the bases its findings' prices may have, as its page says
FIX = "none"  # no autofix: its page's fix: none
PRIORITY = 200  # where findings overlap, the lowest claims the ops first (it claims no op)
OPTIONS: dict = {}

_CLASSES = {"sgd": "SGD", "sgd-momentum": "SGD", "adam": "Adam", "adamw": "AdamW"}
_IMPLEMENTATIONS = {"single-tensor": "", "foreach": "foreach"}  # step_cost's word → its variant
_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float64": 8}  # as the step estimate sizes parameters


def check(graph, options, ctx):
    train = ctx.train
    if not train:
        return
    current = train.optimizer
    variant = _IMPLEMENTATIONS.get(current["implementation"])
    if variant is None or not current["tensors"]:  # fused already, or nothing to update
        return
    base = parse(current["name"]).name
    itemsize = _ITEMSIZE.get(graph.graph.get("dtype", "float32"), 4)
    fused = step_cost(Optimizer(base, "fused"), current["params"], current["tensors"], itemsize)
    foreach = step_cost(Optimizer(base, "foreach"), current["params"], current["tensors"], itemsize)
    alternative = f"torch.optim.{_CLASSES[base]}(params, ..., fused=True)"
    evidence = {
        "optimizer": current["name"],
        "implementation": current["implementation"],
        "parameter_tensors": current["tensors"],
        "launches": current["launches"],
        "fused_launches": fused["launches"],
        "optimizer_mac_bytes": current["mac_bytes"],
        "fused_mac_bytes": fused["mac_bytes"],
        "step_part": "optimizer",  # where to act: the optimizer's construction in the training script
    }
    if variant == "":
        evidence["foreach_launches"] = foreach["launches"]
    price = _price(graph, ctx, train, current, fused, itemsize, alternative, evidence)
    if variant == "foreach":
        how = "the foreach implementation (" + (
            "as named" if parse(current["name"]).variant else "PyTorch's default on CUDA"
        )
    else:  # --optimizer cannot name the for-loop: it is the default where not every parameter is on CUDA
        how = "the for-loop implementation (PyTorch's default unless every parameter is on CUDA"
    message = (
        f"optimizer {current['name']} runs {how}): {_kernels(current['kernels_per_element'])} over every parameter "
        f"element, {current['launches']:,} launches for {current['tensors']:,} parameter tensors, "
        f"{human_bytes(current['mac_bytes'])} moved; fused=True runs one kernel per chunk of tensors "
        f"({fused['launches']:,} launch{'' if fused['launches'] == 1 else 'es'}) that reads and writes each tensor once "
        f"({human_bytes(fused['mac_bytes'])})"
    )
    severity = SEVERITY
    if ctx.settings.optimizer is None:  # archlint's default, not the user's choice: advice
        severity = Severity.INFO
        evidence["optimizer_assumed"] = True
        message += (
            f" (the step's optimizer is archlint's default: name yours with --optimizer, e.g. {current['name']}-fused)"
        )
    yield Diagnostic(CODE, message, severity, evidence=evidence, price=price)


def _kernels(n: int) -> str:
    return f"{n} kernel{'' if n == 1 else 's'}"


def _price(graph, ctx, train, current, fused, itemsize, alternative, evidence) -> Price:
    """Estimated on the device spec (the step estimate's own optimizer timing), else static bytes."""
    estimate = ctx.estimate.train if ctx.estimate is not None else None
    spec = ctx.device_spec
    mac_saved = current["mac_bytes"] - fused["mac_bytes"]
    if estimate and spec is not None:
        dtype = graph.graph.get("dtype", "float32")
        now, then = estimate["optimizer_ms"], optimizer_ms(fused, spec, dtype, itemsize)
        evidence |= {
            "optimizer_ms": now,
            "fused_optimizer_ms": then,
            "saving_basis": f"estimated on {spec.name}: archlint's optimizer cost model, bytes over the "
            "spec's bandwidth and each launch paying its per-op overhead",
        }
        price = Price.timed(
            alternative,
            saving_ms=now - then,
            model_ms=estimate["step_ms"],
            basis="estimated",
            mac_bytes_saved=mac_saved,
            device=spec.name,
        )
        price.whole = "the training step's estimated time"
        return price
    evidence["saving_basis"] = (
        "static: the optimizer bytes the fused kernel does not move, a share of the step's "
        "MAC (launches saved are priced with --device-spec)"
    )
    price = Price.static(alternative, mac_bytes_saved=mac_saved, model_mac_bytes=train.step_mac_bytes)
    price.whole = "the training step's MAC"
    return price
