"""Findings on an `hf:NAME` model are in library code: the user cannot edit transformers' classes,
but a config key often picks the better implementation. Each finding says it is library code and,
where the rule knows one, names the switch (`activation_function="gelu_pytorch_tanh"`,
`attn_implementation="sdpa"`) as a config key and as the `--config` flag that tries it.
"""

from __future__ import annotations

from torch import nn

from archlint.diagnostics import Diagnostic

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


def attention_switch(config) -> tuple[str, str] | None:
    """attn_implementation="sdpa" when the model runs its eager (hand-written) attention."""
    if getattr(config, "_attn_implementation", None) == "eager":
        return "attn_implementation", "sdpa"
    return None


def annotate(diagnostics: list[Diagnostic], model: nn.Module, module_types: dict[str, str]) -> None:
    """Say, on each finding located in transformers' code, that it is library code and the switch."""
    config = getattr(model, "config", None)
    for d in diagnostics:
        if not d.file or "transformers" not in d.file.replace("\\", "/").split("/"):
            continue
        switch = None
        if config is not None and d.code == HANDWRITTEN_OP:
            switch = activation_switch(config, module_types.get(d.module or ""))
        elif config is not None and d.code == HANDWRITTEN_ATTENTION:
            switch = attention_switch(config)
        if switch:
            key, value = switch
            d.evidence["switch"] = {key: value}
            if f'"{value}"' in d.message:  # the rule named the switch already: say only how to try it
                d.message += f" (library code: transformers' class; --config {key}={value} tries it)"
            else:
                d.message += (f" (library code: transformers' class; the switch you have is the config key "
                              f"{key}=\"{value}\", e.g. --config {key}={value})")
        else:
            d.message += " (library code: transformers' class; no config key known to change it)"
