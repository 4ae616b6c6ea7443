"""The host's cost per eager op on a CUDA GPU (where `eager-op-us` in a GPU spec comes from).

Tiny tensors, so the kernels are negligible and the time is the host's: single torch/F calls, plain
and under torch.autocast; nn.Module calls; then torchvision's ResNet-50 on a 2×3×32×32 input, its
forward without and with grad and a whole step (the per-op cost of a real model: module calls,
dispatch, launches). Writes JSON (µs per call; the ResNet-50 rows in µs per call of the whole).

    python benchmarks/host_costs.py OUT.json        (on the GPU machine)
"""

import json
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torch.profiler import ProfilerActivity, profile

out = sys.argv[1]
d = "cuda"
res = {}


def per_call(fn, n=300, rep=5):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(rep):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(ts)


x4 = torch.randn(2, 8, 8, 8, device=d)
w4 = torch.randn(8, 8, 3, 3, device=d)
wdw = torch.randn(8, 1, 3, 3, device=d)
x2 = torch.randn(4, 16, device=d)
w2 = torch.randn(16, 16, device=d)
b2 = torch.randn(16, device=d)
rm, rv, g, b = torch.zeros(8, device=d), torch.ones(8, device=d), torch.ones(8, device=d), torch.zeros(8, device=d)
cases = {
    "relu": lambda: torch.relu(x4),
    "add": lambda: x4 + x4,
    "mul_scalar": lambda: x4 * 0.5,
    "conv2d": lambda: F.conv2d(x4, w4, padding=1),
    "conv2d_dw": lambda: F.conv2d(x4, wdw, padding=1, groups=8),
    "linear": lambda: F.linear(x2, w2, b2),
    "batch_norm_eval": lambda: F.batch_norm(x4, rm, rv, g, b, False),
    "batch_norm_train": lambda: F.batch_norm(x4, rm.clone(), rv.clone(), g, b, True),
    "layer_norm": lambda: F.layer_norm(x2, (16,), b2, b2),
    "softmax": lambda: x2.softmax(-1),
    "gelu": lambda: F.gelu(x2),
    "view": lambda: x4.view(2, -1),
    "permute": lambda: x4.permute(0, 2, 3, 1),
    "sdpa": lambda: F.scaled_dot_product_attention(x4, x4, x4),
}
for name, fn in cases.items():
    with torch.no_grad():
        res[name] = per_call(fn)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            res[name + "+autocast"] = per_call(fn)
print(json.dumps(res, indent=0), flush=True)
mods = {
    "Conv2d": nn.Conv2d(8, 8, 3, padding=1),
    "BatchNorm2d": nn.BatchNorm2d(8),
    "ReLU": nn.ReLU(),
    "Linear": nn.Linear(16, 16),
    "LayerNorm": nn.LayerNorm(16),
}
for name, m in mods.items():
    m = m.to(d).eval()
    inp = x2 if name in ("Linear", "LayerNorm") else x4
    with torch.no_grad():
        res["module:" + name] = per_call(lambda: m(inp))
# a small net's whole step: forward / backward host time per op (resnet-like, batch 2, 8 px)
net = torchvision.models.resnet50().to(d)
xi = torch.randn(2, 3, 32, 32, device=d)
opt = torch.optim.SGD(net.parameters(), lr=0.01)


def fwd():
    return net(xi)


def step():
    opt.zero_grad(set_to_none=True)
    net(xi).float().mean().backward()


for ac in (False, True):
    ctx = torch.autocast("cuda", dtype=torch.bfloat16, enabled=ac)
    with ctx:
        with torch.no_grad():
            res[f"resnet50_fwd_nograd{'+autocast' if ac else ''}_us"] = per_call(fwd, n=20)
        res[f"resnet50_fwd_grad{'+autocast' if ac else ''}_us"] = per_call(fwd, n=20)
        res[f"resnet50_fwd_bwd{'+autocast' if ac else ''}_us"] = per_call(step, n=20)
with profile(activities=[ProfilerActivity.CPU]) as p:
    step()
ops = [e for e in p.events() if e.name.startswith("aten::")]
res["resnet50_step_aten_ops_toplevel_estimate"] = len(ops)
json.dump(res, open(out, "w"), indent=0)
print(json.dumps({k: v for k, v in res.items() if "resnet" in k or "module" in k}, indent=0))
