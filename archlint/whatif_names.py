"""The --what-if transformations by name, in canonical order (no torch: the settings, the CLI,
the analyzer and the model rules' FIXED_BY declarations read these). The combined what-if applies several in this order: folding before the layout change,
quantization before autocast, compile last so that it compiles the rest."""

from __future__ import annotations

from archlint.errors import UsageError

NAMES = ("fold-bn", "sdpa", "channels-last", "int8-dynamic", "bf16", "fp16", "inference-mode", "compile")
# At most one of these in a combination: each is a way to run the big layers in lower precision.
PRECISION = ("int8-dynamic", "bf16", "fp16")


def parse_names(value: str | list | bool, where: str) -> list[str]:
    """true or "all" → every transformation; else a comma-separated list (or a TOML list) of names."""
    if value is True or value == "all":
        return list(NAMES)
    items = value if isinstance(value, list) else str(value).split(",")
    names = [str(n).strip().lower() for n in items if str(n).strip()]
    unknown = [n for n in names if n not in NAMES]
    if unknown or not names:
        raise UsageError(
            f"{where}: unknown transformation {unknown[0] if unknown else value!r}; use all or a comma-separated "
            f"list of {', '.join(NAMES)} (put --what-if after the model target, or write --what-if=all)"
        )
    return names
