"""Model rules: one module per rule (or rule family) in this package, found by discovery.

A check module defines
    CODE = "AL101"                      the rule it implements (its page is rules/AL101-*.md)
    OPTIONS = {"threshold": 0.1, ...}   its options with defaults (config/CLI override them)
    def check(graph, options, ctx) -> Iterable[Diagnostic]
and never traces, times or prints: it is a pure function of the OpGraph (with costs) and options.
`ctx.pricer` is the measure layer's what-if interface (None without --latency).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import networkx as nx

from archlint.config import Settings
from archlint.diagnostics import Diagnostic


@dataclass
class CheckContext:
    target: str
    settings: Settings
    pricer: Any = None  # archlint.model.measure.Pricer when latency was measured


@functools.cache
def check_modules() -> tuple[ModuleType, ...]:
    modules = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            modules.append(importlib.import_module(f"{__name__}.{info.name}"))
    return tuple(modules)


def run_checks(graph: nx.DiGraph, ctx: CheckContext) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    for module in check_modules():
        if not ctx.settings.enabled(module.CODE):
            continue
        options = ctx.settings.options(module.CODE, module.OPTIONS)
        for d in module.check(graph, options, ctx):
            if not ctx.settings.module_ignored(d.code, d.module):
                d.target = d.target or ctx.target
                found.append(d)
    return sorted(found, key=Diagnostic.sort_key)
