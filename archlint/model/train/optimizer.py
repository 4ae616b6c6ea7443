"""The optimizer step: FLOPs, bytes and kernel launches per trainable parameter, per optimizer.

Each optimizer is the sequence of element-wise kernels torch.optim runs per parameter tensor
(torch/optim/sgd.py, adam.py: `_single_tensor_*`), with defaults (lr, momentum 0.9 for
sgd-momentum, AdamW's weight_decay 0.01, Adam's 0), in steady state (not the first step, which
creates the state):

    sgd           p.add_(g, alpha=-lr)                                     1 kernel
    sgd-momentum  buf.mul_(μ).add_(g); p.add_(buf, alpha=-lr)              3 kernels
    adam          m.lerp_(g, 1-β1); v.mul_(β2).addcmul_(g, g, 1-β2);
                  d = (v.sqrt() / √bc2).add_(ε); p.addcdiv_(m, d, -lr/bc1)  7 kernels
    adamw         adam, after p.mul_(1 - lr·wd)                            8 kernels

FLOPs are multiply-adds (lerp 2, addcmul 2, addcdiv 2, sqrt/div/add/mul 1 each). Bytes: each
kernel reads its operands and writes its result once (ShuffleNetV2's rule). The variants:

    (plain)   torch's default on CPU: a loop over parameters, each kernel launched per tensor
    foreach   the same kernels on lists of tensors (torch._foreach_*): the same FLOPs and bytes,
              launched once per chunk of tensors instead of once per tensor
    fused     one kernel per chunk doing the whole update: params, grads and each state tensor
              read once and written once (Adam: read p, g, m, v; write p, m, v), the
              temporaries never reach memory

zero_grad(set_to_none=True), torch's default, frees the gradients: no kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from archlint.train_names import parse_optimizer

VARIANTS = ("", "foreach", "fused")
DEFAULT = "adamw"

# (flops per element, tensors read, tensors written) of each kernel, in order.
_KERNELS: dict[str, list[tuple[int, int, int]]] = {
    "sgd": [(1, 2, 1)],
    "sgd-momentum": [(1, 1, 1), (1, 2, 1), (1, 2, 1)],
    "adam": [(2, 2, 1), (1, 1, 1), (2, 2, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1), (2, 3, 1)],
}
_KERNELS["adamw"] = [(1, 1, 1)] + _KERNELS["adam"]
# Tensors per parameter a fused kernel reads and writes: p, g (+ buf | + m, v); writes p (+ state).
_FUSED = {"sgd": (2, 1), "sgd-momentum": (3, 2), "adam": (4, 3), "adamw": (4, 3)}
# State tensors kept per parameter (the optimizer's memory, as large as the parameter each).
STATE_TENSORS = {"sgd": 0, "sgd-momentum": 1, "adam": 2, "adamw": 2}
# Tensors per foreach/fused launch: CUDA's multi_tensor_apply holds at most this many tensors of
# each list per launch, by number of lists (torch/csrc/.../MultiTensorApply.cuh).
_TENSORS_PER_LAUNCH = {1: 110, 2: 64, 3: 48, 4: 36, 5: 30}


@dataclass(frozen=True)
class Optimizer:
    name: str  # sgd | sgd-momentum | adam | adamw
    variant: str  # "" | foreach | fused

    @property
    def label(self) -> str:
        return f"{self.name}-{self.variant}" if self.variant else self.name


def parse(text: str, where: str = "--optimizer") -> Optimizer:
    """'adamw', 'adamw-foreach', 'adam-fused', 'sgd-momentum-fused', ..."""
    return Optimizer(*parse_optimizer(text, where))


def step_cost(optimizer: Optimizer, elements: int, tensors: int, itemsize: int, cuda: bool = False) -> dict:
    """FLOPs, bytes and launches of one optimizer.step() over `elements` trainable parameter
    elements in `tensors` tensors of `itemsize` bytes (the JSON's totals.train.optimizer). With
    no variant named, torch picks foreach for CUDA tensors and the per-tensor loop otherwise."""
    kernels = _KERNELS[optimizer.name]
    flops = sum(f for f, _, _ in kernels) * elements
    variant = optimizer.variant or ("foreach" if cuda else "")
    if variant == "fused":
        reads, writes = _FUSED[optimizer.name]
        mac = (reads + writes) * elements * itemsize
        lists = reads  # one launch holds params, grads and the state lists together
        launches = math.ceil(tensors / _TENSORS_PER_LAUNCH[min(lists, 5)]) if tensors else 0
        how = "one fused kernel per chunk of tensors: each tensor read and written once"
    else:
        mac = sum(r + w for _, r, w in kernels) * elements * itemsize
        if variant == "foreach":
            launches = sum(math.ceil(tensors / _TENSORS_PER_LAUNCH[min(r, 5)]) for _, r, _ in kernels) if tensors else 0
            how = f"{len(kernels)} foreach kernels, each over chunks of the parameter list"
            if not optimizer.variant:
                how += " (torch's default for CUDA tensors)"
        else:
            launches = len(kernels) * tensors
            how = f"{len(kernels)} kernels per parameter tensor, launched one tensor at a time"
    return {
        "name": optimizer.label,
        "flops": flops,
        "mac_bytes": mac,
        "launches": launches,
        "implementation": variant or "single-tensor",
        "kernels_per_element": len(kernels) if variant != "fused" else 1,
        "state_bytes": STATE_TENSORS[optimizer.name] * elements * itemsize,
        "params": elements,
        "tensors": tensors,
        "how": how,
    }
