"""Kernel names → group, tensor cores, HTA kind; and the pieces of the per-step analysis."""

from __future__ import annotations

import pytest

from archlint.config import Settings
from archlint.trace import intervals, kernels
from archlint.trace.command import lint_trace
from tests.trace.synth import GEMM, busy, steps

TENSOR_CORE = [
    "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>(Params)",
    "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn",
    "volta_h884gemm_64x64_ldg8_nn",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
    "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN",  # AMD MFMA
]
SIMT = [
    "ampere_sgemm_128x64_tn",
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3",
    "cutlass_80_simt_sgemm_128x128_8x4_nn_align1",
    "void cudnn::winograd_nonfused::winogradForwardFilter4x4<float, float>(Params)",
    "Cijk_Ailk_Bljk_SB_MT64x64x8_SN",
]


@pytest.mark.parametrize("name", TENSOR_CORE)
def test_tensor_core_gemms(name):
    assert kernels.group(name) == "gemm" and kernels.tensor_core(name)


@pytest.mark.parametrize("name", SIMT)
def test_fp32_simt_gemms(name):
    assert kernels.group(name) == "gemm" and not kernels.tensor_core(name)


@pytest.mark.parametrize(
    "name, group",
    [
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", "communication"),
        ("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "communication"),
        ("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64>>(Flash_fwd_params)", "attention"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)", "elementwise"),
        ("void at::native::reduce_kernel<512, 1>(at::native::ReduceOp<float>)", "reduction"),
        ("Memcpy HtoD (Pageable -> Device)", "copy"),
        (
            "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true>(cudnn::ops::nchw2nhwc_params_t<float>)",
            "copy",
        ),
        # cuDNN's batch norm is a normalisation, not a convolution (a real H200 trace of ResNet-50)
        ("void cudnn::bn_fw_inf_1C11_kernel_NCHW<float, float, true, 1>(float, float, cudnnTensorStruct)", "reduction"),
        ("void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(float, float)", "reduction"),
        (
            "void cudnn::detail::pooling_fw_4d_kernel<float, float, cudnn::detail::maxpooling_func<float>>(int)",
            "reduction",
        ),
        (
            "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_warpgroupsize1x1x1",
            "gemm",
        ),
        (
            "void cudnn::cnn::conv2d_grouped_direct_kernel<false, true, false>(cudnn::cnn::GroupedDirectFpropParams)",
            "gemm",
        ),
        # an argument type that contains "gemm" does not make a GEMM
        ("void split_embedding_codegen_forward_kernel<float>(at::GenericPackedTensorAccessor<float, 1>)", "other"),
    ],
)
def test_groups(name, group):
    assert kernels.group(name) == group


@pytest.mark.parametrize(
    "name, kind",
    [
        ("ncclKernel_AllReduce_RING_LL_Sum_float", "communication"),
        ("Memset (Device)", "memory"),
        ("Stream Sync", "other"),
        ("ampere_sgemm_128x64_tn", "compute"),
    ],
)
def test_hta_kinds(name, kind):
    assert kernels.hta_kind(name) == kind


def test_interval_union_and_gaps():
    merged = intervals.union([(5, 7), (0, 2), (1, 3), (7, 8)])
    assert merged == [(0, 3), (5, 8)]
    assert intervals.gaps(merged, -1, 10) == [(-1, 0), (3, 5), (8, 10)]
    assert intervals.clip(merged, 2, 6) == [(2, 3), (5, 6)]
    assert intervals.overlap(merged, [(2, 6)]) == 2


def test_copy_to_pageable_memory_is_a_sync(tmp_path):
    """`.item()` / `.cpu()`: cudaMemcpyAsync into pageable memory returns only when the copy is done."""

    def build(t, s):
        t.gpu(GEMM, s + 100, 2_900, s + 50)
        t.gpu(
            "Memcpy DtoH (Device -> Pageable)",
            s + 3_000,
            2,
            s + 200,
            launch="cudaMemcpyAsync",
            launch_dur=2_805,
            cat="gpu_memcpy",
        )
        t.gpu(GEMM, s + 6_000, 3_900, s + 5_950)

    path = steps(build).write(tmp_path / "t.json")
    analysis, diagnostics = lint_trace(path, Settings())
    assert analysis.per_step[0].syncs == 1 and "AL503" in {d.code for d in diagnostics}


def test_depthwise_convolutions_are_not_fp32_gemm_findings(tmp_path):
    path = steps(lambda t, s: busy(t, s, name="void at::native::conv_depthwise2d_forward_kernel<float>(int)")).write(
        tmp_path / "t.json"
    )
    analysis, diagnostics = lint_trace(path, Settings())
    assert analysis.fp32_gemm_us == 0 and "AL504" not in {d.code for d in diagnostics}


def test_short_names():
    assert kernels.short_name("Memcpy HtoD (Pageable -> Device)") == "Memcpy HtoD (Pageable -> Device)"
    assert (
        kernels.short_name("void at::native::reduce_kernel<512, 1>(at::native::ReduceOp<float>)")
        == "at::native::reduce_kernel"
    )
    assert kernels.short_name("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>(Params)") == (
        "cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>"
    )


@pytest.mark.parametrize(
    "name",
    [
        # cuDNN's implicit-GEMM convolution whose template arguments name a `Permute` tile and a
        # cudnn:: traits class: once classified as a layout copy, so its time was not convolution time
        "void xmma_cudnn::implicit_gemm::fprop::kernel<xmma_cudnn::implicit_gemm::fprop::Kernel_traits<"
        "xmma_cudnn::Ampere_hmma_fp32_traits, xmma_cudnn::Cta_tile<xmma_cudnn::Ampere, 64, 64, 64, 2, 2, 1, 1>, "
        "xmma_cudnn::implicit_gemm::fprop::Gmem_tile_a_t<xmma_cudnn::Ampere_hmma_fp32_traits, Permute>, 1, false> >"
        "(xmma_cudnn::implicit_gemm::fprop::Params)",
        "fft2d_r2c_32x32",  # cuDNN's FFT convolution (the AlexNet trace): once "other"
        "fft2d_c2r_32x32",
    ],
)
def test_convolutions_whatever_their_template_arguments(name):
    assert kernels.group(name) == "gemm"


def test_layout_kernels_stay_copies():
    assert kernels.group("void cudnn::ops::nchwToNhwcKernel<float>(int)") == "copy"
    assert kernels.group("fbgemm_gpu::permute_2D_data_kernel") == "copy"
