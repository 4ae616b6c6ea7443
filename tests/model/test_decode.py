"""`--decode N`: one generation step with a KV cache of N tokens, next to the prefill, as a second
model in the JSON; multiply-adds against hand formulas on a small Llama-style config (grouped-query
attention, SwiGLU), and the step's memory traffic dominating its arithmetic."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

from archlint.cli import main  # noqa: E402

B, T, N = 2, 16, 32
D, HEADS, KV_HEADS, F, L, V = 64, 4, 2, 176, 2, 1000
KV = D // HEADS * KV_HEADS
GEMM = ("linear", "matmul", "attention")
CONFIG = [
    f"num_hidden_layers={L}",
    f"hidden_size={D}",
    f"num_attention_heads={HEADS}",
    f"num_key_value_heads={KV_HEADS}",
    f"intermediate_size={F}",
    f"vocab_size={V}",
]


def per_token_weights():
    """Multiply-adds of one token through every weight matrix: q, o (d·d), k, v (d·kv), gate, up, down."""
    return 2 * D * D + 2 * D * KV + 3 * D * F


def test_decode_step_against_hand_formula(capsys):
    argv = [
        "hf:llama",
        *(a for c in CONFIG for a in ("--config", c)),
        "--input-shape",
        f"{B},{T}:int64",
        "--decode",
        str(N),
        "--output-format",
        "json",
        "--exit-zero",
    ]
    assert main(argv) == 0, capsys.readouterr().err
    prefill, decode = json.loads(capsys.readouterr().out)["models"]
    assert prefill["phase"] is None and decode["phase"] == "decode"
    assert decode["target"] == f"hf:llama (decode step, KV cache {N})"
    # the one new token; a transformers that passes its cache as tuples of tensors (4.45) lists them too
    assert decode["inputs"][0] == {"name": "input_ids", "shape": [B, 1], "dtype": "int64"}
    assert all(
        i["name"].startswith("past_key_values_") and i["shape"] == [B, KV_HEADS, N, D // HEADS]
        for i in decode["inputs"][1:]
    )
    for model in (prefill, decode):
        assert model["totals"]["unknown_ops"] == 0

    def gemm(model):  # the weights and attention; not the rotary table (a matmul in transformers 4.x)
        return sum(
            layer["flops"]
            for layer in model["layers"]
            if layer["kind"] in GEMM and "rotary_emb" not in (layer["module"] or "")
        )

    # prefill: T tokens each through the weights, T×T attention; decode: one token against N + 1 keys
    assert gemm(prefill) == B * (L * (T * per_token_weights() + 2 * T * T * D) + T * D * V)
    assert gemm(decode) == B * (L * (per_token_weights() + 2 * (N + 1) * D) + D * V)
    # the step reads every weight (4 bytes each) but the embedding table's, of which it reads one row
    # a token, and the whole cache, for two multiply-adds a weight
    weights = 4 * (decode["totals"]["params"] - V * D)
    cache = L * 2 * B * KV_HEADS * (N + 1) * (D // HEADS) * 4
    assert decode["totals"]["mac_bytes"] >= weights + cache
    intensity = {m["phase"]: 2 * m["totals"]["flops"] / m["totals"]["mac_bytes"] for m in (prefill, decode)}
    assert intensity["decode"] < 1 < intensity[None] / 4
    assert any("MAC dominates" in note for note in decode["notes"])


def test_decode_needs_a_causal_lm(capsys):
    from pathlib import Path

    models = Path(__file__).resolve().parents[1] / "fixtures" / "models" / "token_models.py"
    assert main([f"{models}:TinyLM", "--input-shape", "1,8:int64", "--decode", "4"]) == 2
    assert (
        "--decode needs a causal LM whose forward takes a KV cache (past_key_values or cache)"
        in capsys.readouterr().err
    )
