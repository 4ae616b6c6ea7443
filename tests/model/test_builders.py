"""Every torchvision model builder, and a fixed sample of timm models, analyzed without error.

Nothing downloads (weights=None, weights_backbone=None). Classification builders are covered by
test_torchvision_flops.py (every one of them has a weights entry with `_ops`; checked below).
Inputs are small where the model allows it, to keep CI time down.

Plain fx cannot trace the detection and optical-flow models (data-dependent control flow): the
test asserts that fx fails on each and that a fallback captures it. The full chain (fx → export →
dispatch) runs on a representative; the others are captured by dispatch directly, because the
export attempt alone costs 15-50 s per model on a CI core.
"""

from __future__ import annotations

import logging
import warnings

import pytest
import torch
import torchvision
from torchvision.models import get_model, get_model_weights, list_models

from archlint.config import Settings
from archlint.errors import UsageError
from archlint.model.analyze import analyze_model

pytestmark = pytest.mark.slow


def _quiet():
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)


def _settings(strategy=None) -> Settings:
    s = Settings()
    s.strategy = strategy
    return s


def _analyze(model, inputs, strategy=None):
    with warnings.catch_warnings():
        _quiet()
        try:
            return analyze_model(model, inputs, _settings(strategy))
        finally:
            logging.disable(logging.NOTSET)


def test_every_classification_builder_is_covered_by_the_ops_test():
    covered = {
        name
        for name in list_models(module=torchvision.models)
        if any("_ops" in w.meta for w in get_model_weights(name))
    }
    assert set(list_models(module=torchvision.models)) <= covered


def _meta(name, **kwargs):
    with torch.device("meta"):
        return get_model(name, weights=None, **kwargs).eval()


def _check(result):
    assert result.totals.flops > 0 and result.totals.params > 0
    assert result.layers and all(layer.kind for layer in result.layers)


@pytest.mark.parametrize("name", list_models(module=torchvision.models.segmentation))
def test_segmentation(name):
    graph, result = _analyze(_meta(name, weights_backbone=None), (torch.randn(1, 3, 96, 96),))
    _check(result)
    assert result.strategy == "fx"


VIDEO_INPUT = {"mvit_v1_b": (1, 3, 16, 224, 224), "mvit_v2_s": (1, 3, 16, 224, 224), "s3d": (1, 3, 16, 224, 224)}


# fx cannot trace the Swin3D models (shape-dependent padding); export can, at 15-40 s each on a CI
# core: the full chain runs on swin3d_t, the larger two are recorded by dispatch directly.
VIDEO_DISPATCH = {"swin3d_s", "swin3d_b"}


@pytest.mark.parametrize("name", list_models(module=torchvision.models.video))
def test_video(name):
    shape = VIDEO_INPUT.get(name, (1, 3, 4, 64, 64))
    if name in VIDEO_DISPATCH:
        model = get_model(name, weights=None).eval()
        with pytest.raises(UsageError, match="fx capture"):
            _analyze(model, (torch.randn(*shape),), "fx")
        _, result = _analyze(model, (torch.randn(*shape),), "dispatch")
    else:
        _, result = _analyze(_meta(name), (torch.randn(*shape),))
    _check(result)


@pytest.mark.parametrize("name", list_models(module=torchvision.models.quantization))
def test_quantization(name):
    size = 299 if "inception" in name else 64
    _, result = _analyze(_meta(name, quantize=False), (torch.randn(1, 3, size, size),))
    _check(result)


DETECTION = list_models(module=torchvision.models.detection)
SMALL = {"min_size": 128, "max_size": 160}
FULL_CHAIN = {"fasterrcnn_mobilenet_v3_large_320_fpn"}


def _detector(name):
    kwargs = {} if name.startswith("ssd") else dict(SMALL)
    return get_model(name, weights=None, weights_backbone=None, **kwargs).eval()


@pytest.mark.parametrize("name", DETECTION)
def test_detection(name):
    model = _detector(name)
    inputs = ([torch.rand(3, 128, 160)],)
    with pytest.raises(UsageError, match="fx capture"):
        _analyze(model, inputs, "fx")
    graph, result = _analyze(model, inputs, None if name in FULL_CHAIN else "dispatch")
    _check(result)
    assert result.strategy in ("export", "dispatch")
    if name in FULL_CHAIN:
        assert any(n.startswith("fx capture failed") for n in result.details)
        assert any(n.startswith(f"captured with {result.strategy}: fx could not") for n in result.notes)
    convs = [layer for layer in result.layers if layer.kind == "conv"]
    assert convs and all(layer.module for layer in convs)


@pytest.mark.parametrize("name", list_models(module=torchvision.models.optical_flow))
def test_optical_flow(name):
    model = get_model(name, weights=None).eval()
    inputs = (torch.rand(1, 3, 128, 128), torch.rand(1, 3, 128, 128))
    with pytest.raises(UsageError, match="fx capture"):
        _analyze(model, inputs, "fx")
    _, result = _analyze(model, inputs, "dispatch")  # export takes 40-50 s here, then succeeds
    _check(result)


# A fixed sample of timm models across families (CNNs, ViTs, hybrids, MLPs), default input sizes.
TIMM = """resnet18 resnet26d resnext26ts seresnext26d_32x4d efficientnet_b0 efficientnet_lite0
mobilenetv2_050 mobilenetv3_small_050 mobilenetv3_large_100 mnasnet_small fbnetc_100 ghostnet_100
regnetx_002 regnety_002 rexnet_100 dla34 hrnet_w18_small cspresnet50 cspdarknet53 vgg11
inception_v3 xception41 convnext_atto convnextv2_atto vit_tiny_patch16_224 deit_tiny_patch16_224
cait_xxs24_224 swin_tiny_patch4_window7_224 pit_ti_224 levit_128s mobilevit_xxs efficientformer_l1
poolformer_s12 coat_lite_tiny deit3_small_patch16_224 edgenext_xx_small tinynet_a lcnet_050
hardcorenas_a repvgg_a0 res2net50_14w_8s resnest14d skresnet18 nf_resnet26 gernet_s mixnet_s
selecsls42b ese_vovnet19b_dw xcit_nano_12_p16_224 tiny_vit_5m_224 visformer_tiny mixer_s16_224
resmlp_12_224 convit_tiny pvt_v2_b0 repghostnet_050""".split()


def test_timm_sample_size():
    assert len(TIMM) >= 50 and len(set(TIMM)) == len(TIMM)


@pytest.mark.parametrize("name", TIMM)
def test_timm(name):
    timm = pytest.importorskip("timm")
    with warnings.catch_warnings():
        _quiet()
        try:
            with torch.device("meta"):
                model = timm.create_model(name, pretrained=False)
        except Exception:  # a constructor that needs real data: what the CLI does too
            model = timm.create_model(name, pretrained=False)
        finally:
            logging.disable(logging.NOTSET)
    size = model.pretrained_cfg["input_size"]
    _, result = _analyze(model.eval(), (torch.randn(1, *size),))
    _check(result)
    assert result.totals.unknown_ops == 0, {layer.op for layer in result.layers if not layer.known}
