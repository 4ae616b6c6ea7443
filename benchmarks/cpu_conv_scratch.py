"""oneDNN's in-kernel scratch in CPU convolutions, measured with the profiler.

For each convolution shape and thread count: the op (aten.convolution forward, or
aten.convolution_backward with one output_mask) runs once to warm oneDNN's primitive cache, then
once under torch.profiler (profile_memory=True); the largest running sum of the allocations it
makes, less the bytes of its outputs, is its scratch: what the kernel allocates and frees inside
the op through PyTorch's CPU allocator and no tensor of the step holds. The backend PyTorch picks
is read from torch._C._select_conv_backend (Mkldnn or not), and the same scratch measured with
torch.backends.mkldnn off is printed beside it.

Run: nice -n 10 python benchmarks/cpu_conv_scratch.py [--threads 1,2] [--json out.json]
Prints one row per shape and op: bytes of input, weight, grad-output; scratch measured; the rule's
prediction (archlint.model.train.cpu_scratch) and the ratio measured / predicted.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from train_memory import profiled_peak  # noqa: E402  (benchmarks/, beside this script)

aten = torch.ops.aten

# (batch, in channels, spatial, out channels, kernel, stride, groups)
SHAPES = [
    (2, 512, 2, 512, 3, 1, 1),
    (2, 256, 4, 256, 3, 1, 1),
    (2, 128, 8, 128, 3, 1, 1),
    (2, 64, 16, 64, 3, 1, 1),
    (2, 256, 4, 512, 3, 2, 1),
    (2, 128, 8, 256, 3, 2, 1),
    (2, 64, 16, 128, 3, 2, 1),
    (2, 256, 4, 512, 1, 2, 1),
    (2, 64, 16, 128, 1, 2, 1),
    (2, 3, 64, 64, 7, 2, 1),
    (2, 1024, 2, 256, 1, 1, 1),
    (2, 256, 2, 1024, 1, 1, 1),
    (2, 64, 16, 256, 1, 1, 1),
    (1, 512, 7, 512, 3, 1, 1),
    (8, 64, 56, 64, 3, 1, 1),
    (8, 128, 28, 128, 3, 1, 1),
    (4, 256, 14, 256, 3, 1, 1),
    (1, 1024, 7, 1024, 1, 1, 1),
    (2, 96, 16, 96, 3, 1, 96),
    (2, 480, 4, 480, 5, 1, 480),
    (2, 144, 8, 144, 3, 2, 144),
    (2, 32, 32, 32, 3, 1, 32),
    (2, 256, 4, 256, 3, 1, 32),
    (2, 128, 8, 128, 3, 1, 8),
    (2, 64, 16, 64, 3, 2, 4),
    (2, 16, 32, 16, 5, 1, 1),
    (2, 32, 16, 64, 7, 1, 1),
    (2, 768, 2, 768, 7, 1, 768),
    (1, 16, 8, 16, 1, 1, 1),
    (2, 24, 16, 144, 1, 1, 1),
    (2, 512, 4, 512, 3, 1, 1),
    (4, 512, 2, 512, 3, 1, 1),
    (8, 512, 2, 512, 3, 1, 1),
    (2, 512, 2, 2048, 1, 1, 1),
    (2, 2048, 2, 512, 1, 1, 1),
    (2, 512, 3, 512, 3, 1, 1),
    (2, 64, 4, 64, 5, 1, 1),
    (2, 64, 4, 64, 7, 1, 1),
    (2, 64, 8, 64, 7, 1, 1),
    (2, 96, 2, 96, 3, 1, 96),
    (2, 96, 4, 96, 5, 1, 96),
    (2, 12, 8, 12, 3, 1, 3),
    (2, 128, 4, 128, 3, 1, 32),
    (2, 256, 2, 256, 3, 1, 32),
    (2, 512, 2, 512, 3, 2, 1),
    (2, 512, 1, 512, 3, 1, 1),
    (2, 48, 8, 48, 3, 1, 2),
    (1, 256, 2, 256, 3, 1, 1),
    (16, 64, 8, 128, 1, 1, 1),
]
OPS = ("forward", "grad_input", "grad_weight", "both")
MASKS = {"grad_input": [True, False, False], "grad_weight": [False, True, False], "both": [True, True, False]}


def _outputs_bytes(out) -> int:
    tensors = out if isinstance(out, (tuple, list)) else (out,)
    return sum(t.untyped_storage().nbytes() for t in tensors if isinstance(t, torch.Tensor))


def scratch(shape, op: str, channels_last: bool = False) -> tuple[int, int, int, int, int]:
    """(scratch bytes, input, weight, grad-output bytes, outputs bytes) of one op on one shape."""
    n, c, hw, o, k, s, g = shape
    x = torch.randn(n, c, hw, hw)
    w = torch.randn(o, c // g, k, k)
    if channels_last:
        x, w = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
    args = ([s, s], [k // 2, k // 2], [1, 1], False, [0, 0], g)
    y = aten.convolution(x, w, None, *args)
    gy = torch.randn_like(y)
    if op == "forward":

        def run():
            return aten.convolution(x, w, None, *args)
    else:

        def run():
            return aten.convolution_backward(gy, x, w, [o], *args, MASKS[op])

    out = run()  # warm: oneDNN's primitive cache
    outputs = _outputs_bytes(out)
    del out
    peak = profiled_peak(run)
    nbytes = (x.untyped_storage().nbytes(), w.untyped_storage().nbytes(), gy.untyped_storage().nbytes())
    return peak - outputs, *nbytes, outputs


def backend(shape) -> str:
    """The backend aten picks for this shape (Mkldnn, Slow2d, ...) at the current thread count."""
    n, c, hw, o, k, s, g = shape
    x, w = torch.empty(n, c, hw, hw), torch.empty(o, c // g, k, k)
    which = torch._C._select_conv_backend(x, w, None, [s, s], [k // 2, k // 2], [1, 1], False, [0, 0], g)
    return str(which).split(".")[-1]


def main() -> int:
    from archlint.model.train.cpu_scratch import AVX512, conv_scratch_bytes, cpu_isa, uses_onednn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--channels-last", action="store_true", help="NHWC tensors (the rule gives 0: not modelled)")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--isa", choices=("AVX2", AVX512), help="the rule's ISA (default: this CPU's, cpu_isa())")
    ns = parser.parse_args()
    isa = ns.isa or cpu_isa()
    print(f"rule ISA: {isa} (torch.backends.cpu.get_cpu_capability(): {torch.backends.cpu.get_cpu_capability()})")
    rows, gate_misses = [], 0
    print(
        f"{'thr':>3} {'N':>2} {'C':>5} {'HW':>3} {'O':>5} {'k':>2} {'s':>2} {'g':>4} {'backend':>9} {'op':>11} "
        f"{'x KB':>8} {'w KB':>8} {'gy KB':>8} {'scratch KB':>10} {'off KB':>8} {'rule KB':>8} {'meas/rule':>9}"
    )
    for threads in [int(t) for t in ns.threads.split(",")]:
        torch.set_num_threads(threads)
        for shape in SHAPES:
            n, c, hw, o, k, s, g = shape
            which = backend(shape)
            gate_misses += uses_onednn((n, c, hw, hw), (o, c // g, k, k), (s, s), (1, 1), g, threads) != (
                which == "Mkldnn"
            )
            for op in OPS:
                got, xb, wb, gyb, outb = scratch(shape, op, ns.channels_last)
                with torch.backends.mkldnn.flags(enabled=False):
                    off = scratch(shape, op, ns.channels_last)[0]
                mask = None if op == "forward" else MASKS[op]
                rule = (
                    conv_scratch_bytes(
                        (n, c, hw, hw), (o, c // g, k, k), (s, s), (k // 2, k // 2), (1, 1), g, 4, mask, threads, isa
                    )
                    if which == "Mkldnn" and not ns.channels_last
                    else 0
                )
                ratio = got / rule if rule else float("nan")
                rows.append(
                    {
                        "threads": threads,
                        "shape": shape,
                        "backend": which,
                        "op": op,
                        "input": xb,
                        "weight": wb,
                        "grad_output": gyb,
                        "outputs": outb,
                        "scratch": got,
                        "scratch_mkldnn_off": off,
                        "rule": rule,
                    }
                )
                print(
                    f"{threads:3} {n:2} {c:5} {hw:3} {o:5} {k:2} {s:2} {g:4} {which:>9} {op:>11} {xb / 1e3:8.1f} "
                    f"{wb / 1e3:8.1f} {gyb / 1e3:8.1f} {got / 1e3:10.1f} {off / 1e3:8.1f} {rule / 1e3:8.1f} "
                    f"{ratio:9.2f}",
                    flush=True,
                )
    ruled = [r for r in rows if r["rule"]]
    within = [r for r in ruled if abs(r["scratch"] / r["rule"] - 1) <= 0.20]
    low = min(ruled, key=lambda r: r["scratch"] / r["rule"], default=None)
    high = max(ruled, key=lambda r: r["scratch"] / r["rule"], default=None)
    print(
        f"oneDNN rows: {len(ruled)}; measured within 20% of the rule: {len(within)}; shapes where uses_onednn "
        f"disagrees with torch._C._select_conv_backend: {gate_misses}"
    )
    for name, r in (("lowest", low), ("highest", high)):
        if r is not None:
            print(f"{name} measured/rule: {r['scratch'] / r['rule']:.2f} ({r['shape']}, {r['op']}, {r['threads']} thr)")
    if ns.json:
        Path(ns.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
