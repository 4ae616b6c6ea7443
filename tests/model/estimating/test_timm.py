"""The estimate on real timm models built on meta at large batch in float16 (no weights, no GPU)."""

from __future__ import annotations

import pytest

timm = pytest.importorskip("timm")

from archlint.config import ModelSpec, Settings  # noqa: E402
from archlint.model.analyze import analyze  # noqa: E402


def _estimate(tmp_path, name: str, batch: int = 256, spec: str = "rtx4090"):
    path = tmp_path / "zoo.py"
    path.write_text(f"import timm\n\ndef net():\n    return timm.create_model({name!r})\n")
    settings = Settings(device_spec=spec)
    settings.select = ["AL0"]
    result, _ = analyze(ModelSpec(target=f"{path}:net", input_shapes=[[batch, 3, 224, 224]], dtype="float16"), settings)
    return result


def test_efficientnet_depthwise_on_cuda_cores_and_memory_bound(tmp_path):
    r = _estimate(tmp_path, "efficientnet_b0")
    assert r.build == "meta"
    depthwise = [la for la in r.layers if la.kind == "conv" and la.attrs.get("groups", 1) > 1]
    assert depthwise and all(la.estimate_terms["unit"] == "cuda-fp16" and la.bound == "memory" for la in depthwise)
    dense = [la for la in r.layers if la.kind == "conv" and la.attrs.get("groups", 1) == 1]
    assert all(la.estimate_terms["unit"] == "tensor-fp16" for la in dense)
    rate = 256 / r.estimate.latency_ms * 1e3
    assert 1_000 < rate < 50_000  # a 0.4 GMAC model on a 165 TFLOP/s, 1 TB/s GPU


def test_vit_linears_compute_bound_on_tensor_cores(tmp_path):
    # The MLP GEMMs 384 ⇄ 1536: 2·384·1536 / (2·(384 + 1536)) ≈ 307 FLOP/byte, past the 164 ridge
    r = _estimate(tmp_path, "vit_small_patch16_224", batch=256)
    linears = [la for la in r.layers if la.kind == "linear" and ".mlp.fc" in (la.module or "")]
    assert linears and all(la.estimate_terms["unit"] == "tensor-fp16" and la.bound == "compute" for la in linears)
    attention = [la for la in r.layers if la.kind == "attention"]
    assert attention and all(la.estimate_terms["unit"] == "tensor-fp16" for la in attention)


@pytest.mark.slow
def test_more_bandwidth_and_compute_is_faster(tmp_path):
    """rtx5090 has more of both than rtx4090, l4 far less bandwidth: the estimates order so."""
    times = {
        spec: _estimate(tmp_path, "resnet50", batch=256, spec=spec).estimate.latency_ms
        for spec in ("rtx5090", "rtx4090", "l4")
    }
    assert times["rtx5090"] < times["rtx4090"] < times["l4"]
