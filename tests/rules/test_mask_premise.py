"""Issue 43.3: AL107 where its premise is false. A tensor created from constants but filled in place
with what the forward computed (a detector's paste canvas, RoIAlign's result buffer, a repad
`output[indices] = x`) is no mask to cache: silent. A mask built on one attention implementation's
path only (an unpadding encoder: flash attention unpads and builds no mask) is info saying so."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import torch

from archlint.config import ModelSpec, Settings
from archlint.diagnostics import Severity
from archlint.model.analyze import analyze

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "models"))


def _found(name: str, model, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, found = analyze(ModelSpec(name, model=model.eval(), given_args=args, given_kwargs={}), Settings())
    return found


def test_paste_canvas_is_not_a_mask():
    from paste_masks import MaskHead

    found = _found("paste", MaskHead(), torch.randn(8, 64, 14, 14))
    assert not [d for d in found if d.code == "AL107"], [d.message for d in found if d.code == "AL107"]


def test_a_causal_mask_built_every_call_still_warns():
    from paste_masks import Causal

    (d,) = [d for d in _found("causal", Causal(), torch.randn(2, 128, 64)) if d.code == "AL107"]
    assert d.severity is Severity.WARNING and "is_causal=True" in d.message


def test_canvas_filled_in_place_is_not_constant():
    from paste_masks import MaskHead

    from archlint.model.analyze import analyze_model
    from archlint.model.checks.mask_in_forward import constant_ops

    graph, _ = analyze_model(MaskHead().eval(), (torch.randn(2, 64, 14, 14),), Settings(), target="paste")
    zeros = [n for n, d in graph.nodes(data=True) if str(d.get("op", "")).startswith("aten.zeros")]
    assert zeros and not set(zeros) & constant_ops(graph)


def test_unpadding_encoder_mask_is_info_naming_the_switch():
    import unpad_encoder

    model = unpad_encoder.Encoder()
    (d,) = [d for d in _found("unpad", model, torch.randint(0, 3, (2, 128))) if d.code == "AL107"]
    assert d.severity is Severity.INFO
    branch = d.evidence["implementation_branch"]
    assert branch["test"] == "self.config.attn_implementation == 'flash_attention_2'"
    assert branch["file"].endswith("unpad_encoder.py") and "builds no mask" in d.message


def test_deberta_default_padding_mask_is_info():
    # DeBERTa-v2 expands the all-ones attention mask it makes when none is passed into 1×1×T×T:
    # with a batch's real mask it depends on the batch, nothing to cache (issue 43.3)
    from archlint.model.analyze import analyze as run

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = {"num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 4, "intermediate_size": 256}
        _, found = run(ModelSpec("hf:deberta-v2", hf_config=config), Settings())
    masks = [d for d in found if d.code == "AL107"]
    assert masks and all(d.severity is Severity.INFO for d in masks)
    assert any(d.evidence.get("default_padding_mask") for d in masks)
    # AL106 says transformers has no SDPA for this class: it names no attn_implementation switch
    for d in found:
        if d.code == "AL106":
            assert "has no SDPA attention" in d.message and 'attn_implementation="sdpa"' not in d.message


def test_paste_at_host_read_boxes_records_the_write():
    # the dispatch capture (a host read in forward) records `canvas[a:b] = m` as the write it is
    from paste_masks import PasteAtBoxes

    from archlint.model.analyze import analyze_model
    from archlint.model.checks.mask_in_forward import constant_ops

    args = (torch.randn(4, 64, 14, 14), torch.rand(4, 2) * 40)
    assert not [d for d in _found("boxes", PasteAtBoxes(), *args) if d.code == "AL107"]
    graph, _ = analyze_model(PasteAtBoxes().eval(), args, Settings(), target="boxes")
    writes = [n for n, d in graph.nodes(data=True) if d.get("key") == "setitem"]
    assert len(writes) == 4 and not set(writes) & constant_ops(graph)
    assert all(d["mac_bytes"] == 2 * 28 * 28 * 4 for n, d in graph.nodes(data=True) if n in writes)
