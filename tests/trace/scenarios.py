"""One positive and one negative synthetic trace per trace rule."""

from __future__ import annotations

from tests.trace.synth import GEMM, STEP, Trace, busy, steps


def input_bound(pos: bool):
    def build(t, s):
        t.host(
            "python_function" if pos else "user_annotation",
            "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
            s + 10,
            6_000 if pos else 50,
        )
        busy(t, s, 6_100 if pos else 100)

    return steps(build)


def pageable_copy(pos: bool):
    def build(t, s):
        kind = "Pageable" if pos else "Pinned"
        t.gpu(
            f"Memcpy HtoD ({kind} -> Device)",
            s + 100,
            900,
            s + 50,
            launch="cudaMemcpyAsync",
            launch_dur=1_000 if pos else 10,
            cat="gpu_memcpy",
        )
        busy(t, s, 1_000)

    return steps(build)


def step_sync(pos: bool):
    def build(t, s):
        t.gpu(GEMM, s + 100, 2_900, s + 50)
        if pos:
            t.host("cuda_runtime", "cudaStreamSynchronize", s + 200, 2_810)
            t.host("python_function", "train.py(12): train_step", s + 150, 2_900)
        t.gpu(GEMM, s + (6_000 if pos else 3_000), 3_900 if pos else 6_900, s + (5_950 if pos else 100))

    return steps(build)


def fp32_gemm(pos: bool, device=None):
    def build(t, s):
        busy(t, s, name="ampere_sgemm_128x64_tn" if pos else GEMM)

    return steps(build, device=device) if device else steps(build)


def launch_bound(pos: bool):
    def build(t, s):
        at = s + 100
        for k in range(300):
            if pos:  # each kernel launched only after the previous one finished
                t.gpu("void at::native::vectorized_elementwise_kernel<4>(int)", at + 8, 5, at)
                at += 20
            else:  # all launched up front: the GPU never waits
                t.gpu("void at::native::vectorized_elementwise_kernel<4>(int)", s + 200 + k * 32, 32, s + 100 + k * 0.3)
        if pos:
            t.gpu(GEMM, at + 10, s + 9_900 - at - 10, at)  # the rest of the step stays busy
        else:
            t.gpu(GEMM, s + 200 + 300 * 32, 9_900 - 200 - 300 * 32, s + 190)

    return steps(build)


def data_parallel(pos: bool, model_parallel: bool = False):
    def build(t, s):
        if pos:
            t.host("python_function", "nn.Module: DataParallel_0", s + 10, 9_000)
        busy(t, s)
        t.gpu(GEMM, s + 100, 9_800, s + 60, device=1 if pos or model_parallel else 0, stream=8 if pos else 9)

    return steps(build)


def communication_exposed(pos: bool):
    def build(t, s):
        busy(t, s, 100, 6_000)
        if pos:  # all-reduce after backward, alone on the GPU
            t.gpu("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", s + 6_000, 3_900, s + 5_990, stream=20)
        else:  # the same all-reduce under the computation
            t.gpu("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", s + 1_000, 3_900, s + 990, stream=20)
            busy(t, s, 6_000, 9_900)

    return steps(build)


def memory_capacity(pos: bool):
    def build(t, s):
        busy(t, s)
        reserved = (39 if pos else 10) * 2**30
        t.memory(s + 500, reserved - 2**30, reserved)
        t.host("cuda_runtime", "cudaMalloc", s + 20, 500)

    return steps(build)


def gpu_idle(pos: bool):
    def build(t, s):
        busy(t, s, 100, 2_000 if pos else 9_900)

    return steps(build)


def layout_conversion(pos: bool):
    def build(t, s):
        busy(t, s, 100, 7_000)
        t.gpu(
            "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true>(cudnn::ops::nchw2nhwc_params_t<float>)",
            s + 7_000,
            2_900 if pos else 200,
            s + 6_950,
        )
        if not pos:
            busy(t, s, 7_200, 9_900)

    return steps(build)


def unrepresentative(pos: bool):
    """Positive: the profiler wrapped the run from its start (no schedule), so ProfilerStep#0 is the
    run's first step and its first kernel's launch loads the module for 5 ms (lazy loading).
    Negative: the same steps recorded after a warm-up (numbered from 2), launched as usual."""
    t = Trace()
    first = 0 if pos else 2
    for i in range(4):
        s = 1_000_000.0 + i * STEP
        t.step(first + i, s, STEP)
        if pos and i == 0:
            t.gpu(GEMM, s + 5_200, 4_700, s + 100, launch_dur=5_000)
        else:
            busy(t, s)
    return t


def optimizer_step(pos: bool):
    """Positive: AdamW's for-loop step, 300 element-wise kernels (3 per parameter tensor) inside
    torch.optim's range, 1.5 ms of a 10 ms step. Negative: the fused step, one kernel of 0.3 ms."""

    def build(t, s):
        busy(t, s, 100, 8_000)
        t.host("user_annotation", "Optimizer.step#AdamW.step", s + 8_000, 1_900)
        if pos:
            for k in range(300):
                t.gpu("void at::native::vectorized_elementwise_kernel<4>(int)", s + 8_050 + k * 5, 5, s + 8_010 + k * 6)
        else:
            t.gpu("void at::native::fused_adam_kernel<float>(...)", s + 8_050, 300, s + 8_010)

    return steps(build, n=4)


SCENARIOS = {
    "AL501": input_bound,
    "AL502": pageable_copy,
    "AL503": step_sync,
    "AL504": fp32_gemm,
    "AL505": launch_bound,
    "AL506": data_parallel,
    "AL507": communication_exposed,
    "AL508": memory_capacity,
    "AL509": gpu_idle,
    "AL510": unrepresentative,
    "AL511": layout_conversion,
    "AL520": optimizer_step,
}
