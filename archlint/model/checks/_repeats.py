"""Findings that a model repeats block for block are one finding.

A 32-layer transformer whose block writes its RMSNorm by hand gets the same finding on
`layers.0.norm`, `layers.1.norm`, …: one fix (the block's class) removes all of them, so the
report shows one finding that lists the repeats and is priced as their sum. Two findings are
repeats when they have the same rule and severity, sit on modules of the same class, and their
module paths are equal once indices are set aside (`layers.3.attn` → `layers.#.attn`,
`denseblock2` → `denseblock#`): Swin's window attention in every stage is one finding, whatever
each stage's shapes. Findings on no module (model-wide) are repeats only if their messages match.
A rule whose findings take several forms in one module says which in evidence["pattern"] (AL108:
the layers' names — SegFormer's k/v pair on the reduced tensor is not its q/k/v triple, DeBERTa's
projections of the hidden states are not those of the position embeddings): forms never merge.

Rules whose finding is the module's own code (a norm or attention written by hand in its
forward: FIX_IN_CLASS) group by class alone: Llama's `input_layernorm`, `post_attention_layernorm`
and final `norm` are one LlamaRMSNorm, so one fix and one finding.
"""

from __future__ import annotations

import re
from dataclasses import replace

from archlint.diagnostics import Diagnostic, Price

_INDEX = re.compile(r"(?<=[A-Za-z_#])\.\d+\b")  # `.3` in `layers.3.mlp`, never in `0.8%` or `2.4`
_NUMBERED = re.compile(r"(?<=[A-Za-z_])\d+(?=\.|$)")  # `layer2`, `denseblock3`, `stage4`
_LEADING = re.compile(r"^\d+(?=\.|$)")  # `3.conv` in a top-level nn.Sequential
_LISTED = 4


def pattern(text: str | None) -> str:
    text, before = text or "", None
    while text != before:  # `features.5.3.attn`: each index follows the one replaced before it
        text, before = _INDEX.sub(".#", text), text
    return text


def path_pattern(path: str) -> str:
    return pattern(_LEADING.sub("#", _NUMBERED.sub("#", path)))


def group(found: list[Diagnostic], classes: dict[str, str] | None = None, by_class: bool = False) -> list[Diagnostic]:
    """The findings with each set of repeats merged into the costliest, in their order.
    `classes`: module path → class name; `by_class`: the fix is in the class, wherever it sits."""
    classes = classes or {}
    groups: dict[tuple, list[Diagnostic]] = {}
    for d in found:
        cls = classes.get(d.module) if d.module else None
        shape = str(d.evidence.get("pattern", ""))  # a rule's own form: one module can hold two
        if cls and by_class:
            key = (d.code, d.severity, "", cls, shape)
        elif d.module:
            key = (d.code, d.severity, path_pattern(d.module), cls, shape)
        else:
            key = (d.code, d.severity, "", pattern(d.message), shape)
        groups.setdefault(key, []).append(d)
    return [
        members[0] if len(members) == 1 else merge(sorted(members, key=_cost, reverse=True))
        for members in groups.values()
    ]


def _cost(d: Diagnostic) -> tuple[float, float]:
    return d.price.sort_key() if d.price else (0.0, 0.0)


def merge(members: list[Diagnostic]) -> Diagnostic:
    first = members[0]
    where = [d.module or d.node or "?" for d in members]
    others = [w for w in dict.fromkeys(where) if w != where[0]]  # each place once
    more = ", ".join(others[:_LISTED]) + (f" and {len(others) - _LISTED} more" if len(others) > _LISTED else "")
    return replace(
        first,
        message=f"{first.message} — and {len(members) - 1} more like it ({more}): one fix in their class",
        evidence={**first.evidence, "repeats": where},
        price=total([d.price for d in members]),
    )


def total(prices: list[Price | None]) -> Price | None:
    """The repeats' prices added up: one fix saves them all (None when any is missing)."""
    if any(p is None for p in prices) or len({p.basis for p in prices}) != 1:
        return prices[0]

    def add(field: str):
        values = [getattr(p, field) for p in prices]
        return None if any(v is None for v in values) else sum(values)

    first = prices[0]
    parts = None
    if all(p.parts is not None for p in prices):
        parts = {k: v for p in prices for k, v in p.parts.items()}
    return Price(
        first.basis,
        sum(p.saving_share for p in prices),
        first.alternative,
        add("saving_ms"),
        add("mac_bytes_saved"),
        add("flops_saved"),
        first.device,
        tuple(dict.fromkeys(c for p in prices for c in p.claims)),
        parts,
    )
