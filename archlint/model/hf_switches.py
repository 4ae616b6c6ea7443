"""Findings in transformers' classes are library code, on an `hf:NAME` model and on one the user's
own factory builds alike: the user cannot edit the classes, but a config key often picks the
better implementation. Each such finding says it is library code and, where the rule knows one,
names the switch (`activation_function="gelu_pytorch_tanh"`, `attn_implementation="sdpa"`) as a
config key: for `hf:NAME` with the `--config` flag that tries it, for a factory as the key to set
in the config it builds.
"""

from __future__ import annotations

import networkx as nx
from torch import nn

from archlint.diagnostics import Diagnostic
from archlint.model.libraries import library_module

# A transformers activation written out of pointwise ops → the name of the same function computed
# by one fused PyTorch kernel (transformers.activations.ACT2CLS names).
FUSED_ACTIVATION = {
    "gelu_new": "gelu_pytorch_tanh",
    "gelu_fast": "gelu_pytorch_tanh",
    "gelu_python_tanh": "gelu_pytorch_tanh",
    "gelu_python": "gelu",
}
HANDWRITTEN_OP = "AL110"
HANDWRITTEN_ATTENTION = "AL106"
ELEMENTWISE_HEAVY = "AL104"


def activation_switch(config, module_class: str | None) -> tuple[str, str] | None:
    """(config key, fused name) when a config key selects the activation `module_class` computes
    by hand and a fused equivalent exists."""
    try:
        from transformers.activations import ACT2CLS
    except ImportError:
        return None
    for key, value in sorted(config.to_dict().items()):
        if isinstance(value, str) and value in FUSED_ACTIVATION:
            cls = ACT2CLS.get(value)
            cls = cls[0] if isinstance(cls, tuple) else cls
            if cls is not None and cls.__name__ == module_class:
                return key, FUSED_ACTIVATION[value]
    return None


def attention_switch(config, model: nn.Module | None = None) -> tuple[str, str] | None:
    """attn_implementation="sdpa" when the model runs its eager (hand-written) attention and its
    class takes SDPA (transformers' `_supports_sdpa`): DeBERTa-v2, RoFormer and SqueezeBERT do not,
    and naming the key there would contradict the finding's own "has no SDPA attention"."""
    if getattr(config, "_attn_implementation", None) != "eager":
        return None
    if model is not None and not getattr(model, "_supports_sdpa", False):
        return None
    return "attn_implementation", "sdpa"


def logits_switch(model: nn.Module, d: Diagnostic) -> tuple[str, int] | None:
    """("logits_to_keep", 1) when AL104's costliest place is the model's own forward after its
    output embedding (Gemma-2's final logit softcap over every position's logits) and the forward
    takes logits_to_keep: with it, lm_head and what follows run for the last position only."""
    import inspect

    places = d.evidence.get("places") or []
    if d.code != ELEMENTWISE_HEAVY or not places or not places[0].get("after"):
        return None
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    names = {m: n for n, m in model.named_modules()}
    if head is None or names.get(head) != places[0]["module"]:
        return None
    try:
        takes = "logits_to_keep" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return None
    return ("logits_to_keep", 1) if takes else None


def annotate(
    diagnostics: list[Diagnostic], model: nn.Module, module_types: dict[str, str], graph: nx.DiGraph, *, hf_target: bool
) -> None:
    """Say, on each finding in transformers' code, that it is library code and the switch. The finding
    is placed where the user can act: a factory's line that built the model, else (`hf:NAME`, no
    code of the user's) the transformers class itself."""
    config = getattr(model, "config", None)
    for d in diagnostics:
        in_file = bool(d.file) and "transformers" in d.file.replace("\\", "/").split("/")
        if not in_file and library_module(graph, d.module) != "transformers":
            continue
        switch = None
        if config is not None and d.code == HANDWRITTEN_OP:
            switch = activation_switch(config, module_types.get(d.module or ""))
        elif config is not None and d.code == HANDWRITTEN_ATTENTION:
            switch = attention_switch(config, model)
        logits = logits_switch(model, d)
        if logits:
            key, value = logits
            d.evidence["switch"] = {key: value}
            d.message += (
                f" (library code: transformers' class; where only the next token's logits are needed, the "
                f"forward argument {key}={value} — what generate() passes — runs {d.module} and the ops after "
                "it for the last position only; otherwise torch.compile fuses them)"
            )
            continue
        if switch:
            key, value = switch
            d.evidence["switch"] = {key: value}
            named = f'"{value}"' in d.message  # the rule named the switch already: say only where it goes
            if not hf_target:  # the user's code builds the config: the key is set there
                d.message += (
                    " (library code: transformers' class; set it in the config your code builds)"
                    if named
                    else f" (library code: transformers' class; the switch you have is the config key "
                    f'{key}="{value}" in the config your code builds)'
                )
            elif named:
                d.message += f" (library code: transformers' class; --config {key}={value} tries it)"
            else:
                d.message += (
                    f" (library code: transformers' class; the switch you have is the config key "
                    f'{key}="{value}", e.g. --config {key}={value})'
                )
        else:
            d.message += " (library code: transformers' class; no config key known to change it)"
