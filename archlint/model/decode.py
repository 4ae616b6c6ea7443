"""`--decode N`: one generation step of a causal LM with a KV cache of N tokens, as its own model.

Prefill (the analyzed forward over the prompt) is compute-bound; a decode step computes one token
per sequence and reads every weight and the whole cache for it, so memory traffic (MAC) bounds
its time. The step is captured from a real forward (dispatch recording) of the model given
`input_ids` of shape (batch, 1) and the KV cache a forward over N random tokens returned, the
way generation runs it: Hugging Face-style causal LMs (a forward taking `use_cache` and the cache
as `past_key_values` or, in newer transformers, `cache`). The batch is the first integer input's,
else 1.
"""

from __future__ import annotations

import dataclasses
import inspect
import os

import torch

from archlint.config import ModelSpec, Settings
from archlint.errors import UsageError
from archlint.result import ModelResult


def _batch(loaded) -> int:
    for t in (*loaded.inputs, *loaded.kwargs.values()):
        if isinstance(t, torch.Tensor) and not t.is_floating_point() and t.dim() >= 1:
            return int(t.shape[0])
    return 1


def _vocab(model) -> int:
    from archlint.model.loading.inputs import token_range

    return int(getattr(getattr(model, "config", None), "vocab_size", 0) or token_range(model))


# What a forward calls its KV cache argument (and its output field): `past_key_values` through
# transformers 4.x and early 5.x, `cache` since (the old name deprecated); a Cache object or tuples.
CACHE_NAMES = ("past_key_values", "cache")


def decode_inputs(model, batch: int, cache_length: int) -> dict:
    """`input_ids` (batch, 1) and the KV cache of a forward over `cache_length` random tokens."""
    params = inspect.signature(model.forward).parameters
    name = next((n for n in CACHE_NAMES if n in params), None)
    if name is None or "use_cache" not in params:
        raise UsageError(
            f"--decode needs a causal LM whose forward takes a KV cache ({' or '.join(CACHE_NAMES)}) and "
            f"use_cache (a Hugging Face model); {type(model).__name__}.forward does not"
        )
    generator = torch.Generator().manual_seed(0)
    vocab = _vocab(model)
    prompt = torch.randint(0, vocab, (batch, cache_length), generator=generator)
    try:
        with torch.no_grad():
            out = model(input_ids=prompt, use_cache=True)
    except Exception as exc:
        raise UsageError(
            f"--decode: the forward over {cache_length} tokens failed ({type(exc).__name__}: {exc})"
        ) from exc
    cache = next((c for c in map(lambda n: _field(out, n), (name, *CACHE_NAMES)) if c is not None), None)
    if cache is None:
        raise UsageError(f"--decode: {type(model).__name__} returned no KV cache ({name}) with use_cache=True")
    step = torch.randint(0, vocab, (batch, 1), generator=generator)
    return {"input_ids": step, name: cache, "use_cache": True}


def _field(out, name: str):
    """A model output's field (ModelOutput is both an object and a dict; a plain dict is only one)."""
    value = out.get(name) if isinstance(out, dict) else None
    return value if value is not None else getattr(out, name, None)


def analyze_decode(spec: ModelSpec, settings: Settings) -> ModelResult:
    """The decode step as its own ModelResult (target `... (decode step, KV cache N)`); no rules run on it."""
    from archlint.model import opgraph
    from archlint.model.costed import capture_and_cost
    from archlint.model.loading.load import load
    from archlint.model.loading.loaded import Loaded

    n = int(spec.decode or 0)
    if n < 1:
        raise UsageError(f"--decode {spec.decode}: give the KV cache length, a positive number of tokens")
    loaded = load(spec, settings)
    batch = _batch(loaded)
    if loaded.on_meta:  # sized before anything is allocated: a 20B config would need ~80 GB
        need, parts = needed_bytes(loaded.model, batch, n)
        available = available_bytes()
        if available is not None and need > 0.8 * available:
            raise UsageError(
                f"--decode {n} builds {spec.target} with real weights and runs it: that needs about {need / 1e9:.1f} GB "
                f"({parts}), more than the {available / 1e9:.1f} GB of memory available; analyze a smaller config "
                "(e.g. --config num_hidden_layers=2) or a shorter cache, or leave out --decode"
            )
    model = loaded.real_model().eval()  # the cache comes from a real forward
    step = Loaded(model, (), "real", loaded.dtype, [], kwargs=decode_inputs(model, batch, n))
    forced = dataclasses.replace(settings, strategy="dispatch")
    target = f"{spec.target} (decode step, KV cache {n})"
    graph, result = capture_and_cost(step, target, spec.device, forced)
    result.layers = opgraph.to_layers(graph)
    result.phase = "decode"
    t = result.totals
    intensity = 2 * t.flops / t.mac_bytes if t.mac_bytes else 0.0
    cache_bytes = sum(int(d.get("in_bytes", 0)) for _, d in opgraph.ops(graph) if d["kind"] == "attention")
    result.notes.insert(
        0,
        (
            f"decode step: batch {batch}, 1 new token per sequence, KV cache of {n} tokens: {2 * t.flops / 1e6:.1f} "
            f"MFLOP (2 per multiply-add) over {t.mac_bytes / 1e6:.1f} MB of memory traffic = {intensity:.2f} FLOP/byte; "
            f"MAC dominates: the step is bound by reading the weights ({t.params * _itemsize(loaded.dtype) / 1e6:.1f} MB) "
            f"and the cache (attention reads {cache_bytes / 1e6:.2f} MB), not by arithmetic"
        ),
    )
    return result


def _itemsize(dtype: torch.dtype) -> int:
    return torch.tensor([], dtype=dtype).element_size()


def needed_bytes(model, batch: int, cache_length: int) -> tuple[int, str]:
    """The memory a real build and the cache forward need, estimated from the meta-built model:
    its weights and buffers, and the KV cache (keys and values of every layer: 2 · layers ·
    batch · tokens · kv heads · head size) from its config. (bytes, an account of them)."""
    weights = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
    itemsize = next((p.element_size() for p in model.parameters() if p.is_floating_point()), 4)
    config = getattr(model, "config", None)
    text = getattr(config, "get_text_config", lambda: config)() if config is not None else None

    def field(*names):
        return next((int(v) for v in (getattr(text, k, None) for k in names) if isinstance(v, int) and v > 0), 0)

    layers = field("num_hidden_layers", "n_layer", "num_layers")
    hidden = field("hidden_size", "n_embd", "d_model")
    heads = field("num_attention_heads", "n_head")
    kv_heads = field("num_key_value_heads") or heads
    head_dim = field("head_dim") or (hidden // heads if heads else 0)
    cache = 2 * layers * batch * cache_length * kv_heads * head_dim * itemsize
    return weights + cache, f"{weights / 1e9:.1f} GB of weights and buffers, {cache / 1e9:.1f} GB of KV cache"


def available_bytes() -> int | None:
    """Memory the system can give now (MemAvailable), else None (then nothing is refused)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
