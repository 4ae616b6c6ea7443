"""Targets `hf:NAME`: a Hugging Face transformers model built from its config, never downloaded.

NAME is a model type (`gpt2`, `llama`, `bert`: the default config of that architecture) or a
transformers class name (`BertModel`, `GPT2LMHeadModel`). `--config KEY=VALUE` (or `config = {..}`
in `[[tool.archlint.models]]`) overrides config fields: `archlint hf:gpt2 --config n_layer=4`.
A model type gets the first auto class that knows it: sequence-to-sequence LM (T5, Whisper),
causal LM (GPT-2, Llama), then the bare model (BERT, ViT, CLIP). An encoder whose causal-LM head is
only a decoder with `is_decoder=True` (BERT, RoBERTa, ELECTRA) gets its bare model (`BertModel`),
as `hf:BertLMHeadModel` names the head. The output names the class built.

Inputs, when none are given: the model's main input (`input_ids` 1×128 int64, `pixel_values`
1×C×S×S, `input_features` 1×mels×frames, sized from the config, `input_values` 1×16000: one
second of 16 kHz audio), plus `decoder_input_ids` 1×16 for
encoder-decoder models and `pixel_values` for text-image models (CLIP).
"""

from __future__ import annotations

import difflib
import inspect
import logging
import re
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from archlint.errors import UsageError
from archlint.model.loading.inputs import bind_inputs, example_inputs
from archlint.model.loading.loaded import Loaded, meta_build, one_line, seeded_build

PREFIX = "hf:"
DEFAULT_TOKENS = 128
DEFAULT_DECODER_TOKENS = 16
DEFAULT_AUDIO_SAMPLES = 16_000


def is_hf_target(target: str) -> bool:
    return target.startswith(PREFIX) and len(target) > len(PREFIX)


def _transformers():
    try:
        import transformers
    except ImportError:
        raise UsageError("hf: targets need the transformers package: pip install transformers") from None
    return transformers


def model_class(name: str, overrides: dict[str, Any]):
    """(config, the transformers class `hf:NAME` builds); raises UsageError."""
    tf = _transformers()
    cls = getattr(tf, name, None)
    if inspect.isclass(cls) and issubclass(cls, nn.Module) and getattr(cls, "config_class", None):
        return _config(lambda **kw: cls.config_class(**kw), name, overrides), cls
    try:
        config = _config(lambda **kw: tf.AutoConfig.for_model(name, **kw), name, overrides)
    except ValueError:
        known = list(tf.CONFIG_MAPPING.keys())
        close = difflib.get_close_matches(name, known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else " (a model type such as gpt2, llama, bert, t5, vit)"
        raise UsageError(f"hf:{name}: not a transformers model type or class name{hint}") from None
    for auto in (tf.AutoModelForSeq2SeqLM, tf.AutoModelForCausalLM, tf.AutoModel):
        if type(config) in auto._model_mapping:
            cls = auto._model_mapping[type(config)]
            if (
                auto is tf.AutoModelForCausalLM
                and _decoder_only_if_told(cls, config)
                and type(config) in tf.AutoModel._model_mapping
            ):
                continue  # BERT's type names the encoder, not BertLMHeadModel
            return config, cls
    raise UsageError(f"hf:{name}: no transformers model class builds a {type(config).__name__}")


def _decoder_only_if_told(cls: type, config) -> bool:
    """A causal-LM class that is an encoder's head made a decoder by `is_decoder=True` (its
    constructor checks the flag: BertLMHeadModel warns "add `is_decoder=True`"), on a config
    without the flag."""
    if getattr(config, "is_decoder", False):
        return False
    try:
        source = inspect.getsource(cls.__init__)
    except (OSError, TypeError):  # no source (a compiled install): keep the causal LM, as before
        return False
    return re.search(r"not\s+(self\.)?config\.is_decoder", source) is not None


@contextmanager
def _library_messages(into: list[str]):
    """transformers' log messages while building (its own handler prints them to the terminal)
    collected into `into`, for the notes, instead of printed."""
    logger = logging.getLogger("transformers")
    collector = _Collector(into)
    handlers, propagate = logger.handlers[:], logger.propagate
    logger.handlers, logger.propagate = [collector], False
    try:
        yield
    finally:
        logger.handlers, logger.propagate = handlers, propagate


class _Collector(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        message = " ".join(record.getMessage().split())
        if message and f"transformers: {message}" not in self.into:
            self.into.append(f"transformers: {message}")


# Keyword arguments every transformers config takes that are not fields of it.
CONFIG_KWARGS = ("attn_implementation",)


def _config(make, name: str, overrides: dict[str, Any]):
    config = make()
    unknown = [k for k in overrides if not hasattr(config, k) and k not in CONFIG_KWARGS]
    if unknown:
        fields = [k for k in config.to_dict() if not k.startswith("_")]
        close = difflib.get_close_matches(unknown[0], fields, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UsageError(f"hf:{name}: --config {unknown[0]}=...: {type(config).__name__} has no such field{hint}")
    if not overrides:
        return config
    try:
        return make(**overrides)
    except Exception as exc:  # a value the config rejects (a string for an int, a bad combination)
        raise UsageError(f"hf:{name}: --config {_listed(overrides)}: {one_line(exc)}; fix the value") from None


def _built(build, name: str, overrides: dict[str, Any], said: list[str]):
    """A function building the model whose failure (a config transformers accepts but its model
    does not: n_embd not divisible by n_head) is one line naming the config; what transformers logs
    while building goes to `said`."""

    def made():
        try:
            with _library_messages(said):
                return build()
        except Exception as exc:
            given = f" with --config {_listed(overrides)}" if overrides else ""
            raise UsageError(
                f"hf:{name}: building the model{given} failed: {one_line(exc)}; check the config values"
            ) from exc

    return made


def default_inputs(model: nn.Module) -> dict[str, torch.Tensor]:
    """Keyword inputs for a model given none, sized from its config (see the module docstring)."""
    config = model.config
    main = getattr(model, "main_input_name", "input_ids")
    inputs: dict[str, torch.Tensor] = {}
    params = set(inspect.signature(model.forward).parameters)
    vocab = getattr(config, "vocab_size", None) or getattr(getattr(config, "text_config", None), "vocab_size", 2)
    if main == "input_ids" or ("input_ids" in params and main not in ("pixel_values", "input_features")):
        positions = getattr(config, "max_position_embeddings", None) or getattr(
            getattr(config, "text_config", None), "max_position_embeddings", DEFAULT_TOKENS
        )
        inputs["input_ids"] = torch.randint(0, vocab, (1, min(DEFAULT_TOKENS, positions)))
    vision = getattr(config, "vision_config", None) or config
    if main == "pixel_values" or ("pixel_values" in params and hasattr(config, "vision_config")):
        size = getattr(vision, "image_size", 224)
        size = size if isinstance(size, int) else size[0]
        inputs["pixel_values"] = torch.randn(1, getattr(vision, "num_channels", 3), size, size)
    if main == "input_features":
        frames = 2 * getattr(config, "max_source_positions", 1500)
        inputs["input_features"] = torch.randn(1, getattr(config, "num_mel_bins", 80), frames)
    if main == "input_values":  # raw audio (wav2vec2, HuBERT, WavLM): one second at 16 kHz
        inputs["input_values"] = torch.randn(1, DEFAULT_AUDIO_SAMPLES)
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        inputs["decoder_input_ids"] = torch.randint(0, vocab, (1, DEFAULT_DECODER_TOKENS))
    if not inputs:
        raise UsageError(
            f"no default inputs for {type(model).__name__} (main input {main!r}): "
            "give them with --input NAME=SHAPE[:DTYPE]"
        )
    return inputs


def load_hf(spec, settings, dtype: torch.dtype):
    """Loaded for an `hf:NAME` spec: built on meta (counting needs shapes only) unless latency is
    asked for; inputs from --input-shape/--input, else default_inputs()."""
    name = spec.target[len(PREFIX) :]
    overrides = {**spec.init, **spec.hf_config}
    config, cls = model_class(name, overrides)
    said: list[str] = []
    build = _built(lambda: cls(config), name, overrides, said)

    def factory() -> nn.Module:
        with seeded_build():  # the same random weights on every run (loaded.BUILD_SEED)
            model = build()
        return model.to(dtype) if dtype != torch.float32 else model

    notes = [
        f"built {cls.__name__} from {type(config).__name__}"
        + (f" with {_listed(overrides)}" if overrides else "")
        + " (no download)"
    ]
    if settings.latency:
        loaded = Loaded(factory().eval(), (), "real", dtype, notes, factory)
    else:
        try:
            model, note = meta_build(lambda: build(), {})
            model = model.to(dtype) if dtype != torch.float32 else model
            loaded = Loaded(model.eval(), (), "meta", dtype, notes + ([note] if note else []), factory)
        except Exception as exc:
            notes.append(f"meta-device build failed ({type(exc).__name__}); built with real weights")
            loaded = Loaded(factory().eval(), (), "real", dtype, notes, factory)
    loaded.notes += said
    if spec.input_shapes or spec.keyword_inputs:
        args, kwargs = example_inputs(spec, None, None, None, dtype, loaded.model)
        loaded.inputs, loaded.kwargs = bind_inputs(loaded.model, args, kwargs, spec.inputs_source)
    else:
        given = default_inputs(loaded.model)
        loaded.notes.append(
            "default inputs: " + ", ".join(f"{k} {'×'.join(map(str, v.shape))}" for k, v in given.items())
        )
        loaded.inputs, loaded.kwargs = bind_inputs(loaded.model, (), given, "inputs")
    return loaded


def _listed(overrides: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in overrides.items())
