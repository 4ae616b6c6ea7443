"""Hugging Face models built from small configs (no hub downloads): captured with no unknown op,
and their multiply-adds in GEMMs (linear, matmul, attention, conv) equal to a hand formula ±1%.

B batch, T tokens, d hidden, f MLP width, L layers, V vocabulary; attention costs 2·T·S·d
(QKᵀ and AV) per layer however many key/value heads there are."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from archlint.model.analyze import analyze_model  # noqa: E402
from archlint.model.loading.loaded import meta_build  # noqa: E402

B, T, D, H, F, L, V = 2, 16, 64, 4, 256, 2, 1000
GEMM = ("conv", "linear", "matmul", "attention")


def ids(length=T):
    return torch.randint(0, V, (B, length))


def layer(tokens, d=D, f=F, kv=None, context=None):
    """One transformer layer on `tokens` positions: q/k/v/o projections (k and v of width kv),
    attention over `context` positions (self-attention: the same), a two-matrix MLP of width f."""
    kv = kv or d
    context = context or tokens
    return tokens * (2 * d * d + 2 * d * kv + 2 * d * f) + 2 * tokens * context * d


def cross(tokens, source, d=D):
    """Cross-attention: q/o on the decoder positions, k/v on the encoder's, attention between them."""
    return tokens * 2 * d * d + source * 2 * d * d + 2 * tokens * source * d


def gpt2():
    config = transformers.GPT2Config(n_layer=L, n_embd=D, n_head=H, vocab_size=V, n_positions=64)
    return transformers.GPT2LMHeadModel, config, {"input_ids": ids()}, B * (L * layer(T, f=4 * D) + T * D * V)


def bert():
    config = transformers.BertConfig(
        num_hidden_layers=L, hidden_size=D, num_attention_heads=H, intermediate_size=F, vocab_size=V
    )
    inputs = {"input_ids": ids(), "attention_mask": torch.ones(B, T, dtype=torch.long)}
    return transformers.BertModel, config, inputs, B * (L * layer(T) + D * D)  # + pooler on [CLS]


def llama():
    # grouped-query attention (2 KV heads for 4), SwiGLU (three matrices), RMSNorm, RoPE
    f, kv_heads = 176, 2
    config = transformers.LlamaConfig(
        num_hidden_layers=L,
        hidden_size=D,
        num_attention_heads=H,
        num_key_value_heads=kv_heads,
        intermediate_size=f,
        vocab_size=V,
    )
    kv = D // H * kv_heads
    per_layer = layer(T, kv=kv, f=f) + T * D * f  # the third (gate) matrix
    return transformers.LlamaForCausalLM, config, {"input_ids": ids()}, B * (L * per_layer + T * D * V)


def mixtral():
    # mixture of experts: a router, each token through top-2 of 4 SwiGLU experts
    f, experts, top = 128, 4, 2
    config = transformers.MixtralConfig(
        num_hidden_layers=L,
        hidden_size=D,
        num_attention_heads=H,
        num_key_value_heads=2,
        intermediate_size=f,
        vocab_size=V,
        num_local_experts=experts,
        num_experts_per_tok=top,
    )
    kv = D // H * 2
    attention = T * (2 * D * D + 2 * D * kv) + 2 * T * T * D
    moe = T * D * experts + top * T * 3 * D * f
    return transformers.MixtralForCausalLM, config, {"input_ids": ids()}, B * (L * (attention + moe) + T * D * V)


def t5():
    td = 8
    config = transformers.T5Config(
        num_layers=L, num_decoder_layers=L, d_model=D, d_kv=D // H, num_heads=H, d_ff=F, vocab_size=V
    )
    inputs = {"input_ids": ids(), "decoder_input_ids": ids(td)}
    encoder = L * layer(T)
    decoder = L * (layer(td) + cross(td, T))
    return transformers.T5ForConditionalGeneration, config, inputs, B * (encoder + decoder + td * D * V)


def vit():
    image, patch = 32, 8
    config = transformers.ViTConfig(
        num_hidden_layers=L,
        hidden_size=D,
        num_attention_heads=H,
        intermediate_size=F,
        image_size=image,
        patch_size=patch,
    )
    patches = (image // patch) ** 2
    tokens = patches + 1  # [CLS]
    embed = patches * D * 3 * patch * patch
    return (
        transformers.ViTModel,
        config,
        {"pixel_values": torch.randn(B, 3, image, image)},
        B * (embed + L * layer(tokens) + D * D),
    )


def whisper():
    mels, frames, td = 16, 64, 8
    config = transformers.WhisperConfig(
        encoder_layers=L,
        decoder_layers=L,
        d_model=D,
        encoder_attention_heads=H,
        decoder_attention_heads=H,
        encoder_ffn_dim=F,
        decoder_ffn_dim=F,
        num_mel_bins=mels,
        max_source_positions=frames // 2,
        vocab_size=V,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
    )
    source = frames // 2  # the second conv has stride 2
    convs = frames * D * mels * 3 + source * D * D * 3
    encoder = convs + L * layer(source)
    decoder = L * (layer(td) + cross(td, source)) + td * D * V
    inputs = {"input_features": torch.randn(B, mels, frames), "decoder_input_ids": ids(td)}
    return transformers.WhisperForConditionalGeneration, config, inputs, B * (encoder + decoder)


def clip():
    image, patch, projection = 32, 8, 32
    tower = dict(num_hidden_layers=L, hidden_size=D, num_attention_heads=H, intermediate_size=F)
    config = transformers.CLIPConfig(
        text_config={**tower, "vocab_size": V},
        vision_config={**tower, "image_size": image, "patch_size": patch},
        projection_dim=projection,
    )
    tokens = (image // patch) ** 2 + 1
    text = L * layer(T) + D * projection
    vision = (tokens - 1) * D * 3 * patch * patch + L * layer(tokens) + D * projection
    logits = B * projection  # each text against each image, per text
    inputs = {"input_ids": ids(), "pixel_values": torch.randn(B, 3, image, image)}
    return transformers.CLIPModel, config, inputs, B * (text + vision + logits)


ZOO = {f.__name__: f for f in (bert, gpt2, llama, mixtral, t5, vit, whisper, clip)}


@pytest.mark.parametrize("name", list(ZOO))
def test_hf_model_captured_and_costed_against_hand_formula(name):
    torch.manual_seed(0)
    cls, config, inputs, expected = ZOO[name]()
    model, _ = meta_build(cls, {"config": config})
    graph, result = analyze_model(model.eval(), (), kwargs=inputs, target=name)
    assert result.totals.unknown_ops == 0, [layer.op for layer in result.layers if not layer.known]
    gemm = sum(layer.flops for layer in result.layers if layer.kind in GEMM)
    assert gemm == pytest.approx(expected, rel=0.01), (name, result.strategy, gemm, expected)
    assert [i["name"] for i in result.inputs] == list(inputs)


def _json(capsys, argv):
    import json

    from archlint.cli import main

    assert main([*argv, "--output-format", "json", "--exit-zero"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)["models"][0]


def test_hf_target_from_the_command_line(capsys):
    argv = [
        "hf:gpt2",
        "--config",
        "n_layer=2",
        "--config",
        "n_embd=64",
        "--config",
        "n_head=4",
        "--config",
        f"vocab_size={V}",
        "--input-shape",
        f"{B},{T}:int64",
    ]
    model = _json(capsys, argv)
    assert model["target"] == "hf:gpt2" and model["totals"]["unknown_ops"] == 0
    assert model["inputs"] == [{"name": "input_ids", "shape": [B, T], "dtype": "int64"}]
    gemm = sum(layer["flops"] for layer in model["layers"] if layer["kind"] in GEMM)
    assert gemm == B * (L * layer(T, f=4 * D) + T * D * V)
    assert any("built GPT2LMHeadModel from GPT2Config with n_layer=2" in note for note in model["notes"])


def test_hf_target_default_inputs_and_class_names(capsys):
    model = _json(
        capsys,
        ["hf:ViTModel", "--config", "num_hidden_layers=1", "--config", "image_size=32", "--config", "patch_size=16"],
    )
    assert model["inputs"] == [{"name": "pixel_values", "shape": [1, 3, 32, 32], "dtype": "float32"}]
    model = _json(
        capsys,
        [
            "hf:t5",
            "--config",
            "num_layers=1",
            "--config",
            "d_model=32",
            "--config",
            "d_ff=64",
            "--config",
            "num_heads=2",
            "--config",
            "d_kv=16",
        ],
    )
    assert [i["name"] for i in model["inputs"]] == ["input_ids", "decoder_input_ids"]


def test_hf_audio_model_gets_raw_audio_and_its_weight_norm_is_costed(capsys):
    """wav2vec2 takes `input_values` (raw audio); its positional conv recomputes a weight-normed
    kernel each call (aten._weight_norm): 4 FLOPs per kernel element, never an unknown op."""
    model = _json(
        capsys,
        [
            "hf:wav2vec2",
            "--config",
            "num_hidden_layers=1",
            "--config",
            "hidden_size=32",
            "--config",
            "intermediate_size=64",
            "--config",
            "num_attention_heads=2",
            "--config",
            "num_conv_pos_embeddings=16",
            "--config",
            "num_conv_pos_embedding_groups=4",
        ],
    )
    assert model["inputs"] == [{"name": "input_values", "shape": [1, 16000], "dtype": "float32"}]
    assert model["totals"]["unknown_ops"] == 0
    (norm,) = [layer for layer in model["layers"] if "weight_norm" in layer["op"]]
    assert norm["flops"] == 4 * 32 * (32 // 4) * 16  # kernel: out × in/groups × width


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["hf:gtp2"], "hf:gtp2: not a transformers model type or class name; did you mean gpt2"),
        (["hf:gpt2", "--config", "n_layers=2"], "GPT2Config has no such field; did you mean n_layer"),
        (["hf:gpt2", "--config", "a.b=2"], "must look like KEY=VALUE"),
    ],
)
def test_hf_target_errors(capsys, argv, expected):
    from archlint.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1


def test_hf_factory_in_the_users_file(capsys):
    from pathlib import Path

    models = Path(__file__).resolve().parents[1] / "fixtures" / "models" / "token_models.py"
    model = _json(capsys, [f"{models}:tiny_gpt2", "--input", "input_ids=1,16:int64"])
    assert model["totals"]["unknown_ops"] == 0
    gemm = sum(layer["flops"] for layer in model["layers"] if layer["kind"] in GEMM)
    assert gemm == 2 * 16 * (12 * 32 * 32 + 2 * 16 * 32) + 16 * 32 * 500


def test_hf_target_in_the_config_file(tmp_path, capsys, monkeypatch):
    import json

    from archlint.cli import main

    (tmp_path / "pyproject.toml").write_text(
        '[tool.archlint]\n[[tool.archlint.models]]\ntarget = "hf:gpt2"\n'
        "config = { n_layer = 1, n_embd = 32, n_head = 2, vocab_size = 100 }\n"
        'input-shapes = ["1,8:int64"]\n'
    )
    monkeypatch.chdir(tmp_path)
    assert main(["--models", "--output-format", "json", "--exit-zero"]) == 0
    (model,) = json.loads(capsys.readouterr().out)["models"]
    assert model["target"] == "hf:gpt2" and model["inputs"][0]["shape"] == [1, 8]
    assert (
        sum(layer["flops"] for layer in model["layers"] if layer["kind"] in GEMM)
        == 8 * (12 * 32 * 32 + 2 * 8 * 32) + 8 * 32 * 100
    )


def test_hf_bert_builds_the_bare_model_it_promises_and_says_so(capsys):
    """Issue 39 item 7: `hf:bert` built BertLMHeadModel (an LM head over 30522 tokens, 2.6x the bare
    model's FLOPs) and leaked transformers' "add is_decoder=True" warning to the terminal."""
    argv = [
        "hf:bert",
        "--config",
        "num_hidden_layers=1",
        "--config",
        "hidden_size=64",
        "--config",
        "num_attention_heads=4",
        "--config",
        "intermediate_size=128",
        "--input-shape",
        "1,16:int64",
    ]
    model = _json(capsys, argv)
    assert any(n.startswith("built BertModel from BertConfig") for n in model["notes"]), model["notes"]
    assert not [layer for layer in model["layers"] if (layer["module"] or "").startswith("cls.")]  # no LM head
    assert "is_decoder" not in capsys.readouterr().err
    # the head, named as a class, is built; transformers' message is a note, not printed
    head = _json(capsys, ["hf:BertLMHeadModel", *argv[1:]])
    assert any(n.startswith("built BertLMHeadModel from BertConfig") for n in head["notes"])
    assert any("is_decoder=True" in n for n in head["notes"]) and "is_decoder" not in capsys.readouterr().err
    assert head["totals"]["flops"] > model["totals"]["flops"]


def test_hf_encoders_with_decoder_heads_get_their_bare_model():
    from archlint.model.loading.hf import model_class

    for name, bare in (("bert", "BertModel"), ("roberta", "RobertaModel"), ("electra", "ElectraModel")):
        assert model_class(name, {})[1].__name__ == bare
    assert model_class("gpt2", {})[1].__name__ == "GPT2LMHeadModel"
    assert model_class("t5", {})[1].__name__ == "T5ForConditionalGeneration"
    assert model_class("bert", {"is_decoder": True})[1].__name__ == "BertLMHeadModel"  # told to be a decoder


def test_a_factory_built_transformers_model_is_library_code_as_hf_is(capsys, tmp_path):
    """Issue 46: the same GPT-2 built by the user's factory and by `hf:gpt2` gets the same findings,
    each said to be library code with the switch the user has (set in the factory's config, or by
    --config); the factory's finding stays at the factory's line, hf:'s at transformers' block class
    (not at torch's LayerNorm inside it)."""
    factory = tmp_path / "fac.py"
    factory.write_text(
        "from transformers import GPT2Config, GPT2LMHeadModel\n\n\ndef make():\n"
        f"    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size={V}))\n"
    )
    shape = ["--input-shape", f"{B},{T}:int64", "--show-info"]
    mine = _json_run(capsys, [f"{factory}:make", *shape])
    hf = _json_run(
        capsys,
        [
            "hf:gpt2",
            "--config",
            "n_layer=2",
            "--config",
            "n_embd=64",
            "--config",
            "n_head=4",
            "--config",
            f"vocab_size={V}",
            *shape,
        ],
    )
    assert sorted(d["code"] for d in mine) == sorted(d["code"] for d in hf) and mine
    for d in mine:
        assert "library code: transformers' class" in d["message"] and (d["file"], d["line"]) == (str(factory), 5)
        assert "--config" not in d["message"].rpartition("library code")[2]
    gelu = next(d for d in mine if d["code"] == "AL110")
    assert gelu["evidence"]["switch"] == {"activation_function": "gelu_pytorch_tanh"}
    assert gelu["message"].endswith("set it in the config your code builds)")
    for d in hf:
        assert "library code: transformers' class" in d["message"]
        assert "/transformers/" in d["file"].replace("\\", "/"), d  # never torch's nn/modules/normalization.py


def _json_run(capsys, argv):
    import json

    from archlint.cli import main

    assert main([*argv, "--output-format", "json", "--exit-zero"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)["diagnostics"]
