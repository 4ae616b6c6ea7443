"""--html FILE: one self-contained page (no network when opened) with the summary, findings and
rule pages, and per model the training step (with --train: its split, its memory and the memory
timeline, drawn as inline SVG), the roofline, where the time goes, the OpGraph and the layer table.

Text sections are written here as static HTML, so they read without JavaScript. The charts are
drawn in the browser by Chart.js (vendored in assets/vendor, inlined); the graph's coordinates
come from archlint.report.layout and the page's own script only draws and wires them up. A
Content-Security-Policy that allows no source at all keeps the page from loading anything.
"""

from __future__ import annotations

import functools
import html
import json
import math
import os
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from archlint import __version__
from archlint.config import Settings
from archlint.diagnostics import Diagnostic
from archlint.errors import UsageError
from archlint.printable import printable
from archlint.report.distributed_html import distributed_section
from archlint.report.layout import layered
from archlint.report.train_html import train_section
from archlint.report.what_if_html import what_if_section
from archlint.report.wording import location, price_bits
from archlint.result import KIND_FAMILIES, Estimate, GateResult, Layer, ModelResult, RunResult
from archlint.units import human_bytes, human_count, significant

ASSETS = Path(__file__).resolve().parent / "assets"
CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"
# Sections of a rule page shown inline with a finding; the whole page when none of them is found.
RULE_SECTIONS = ("what it does", "why", "example", "use instead")
# Families for "share by kind": the analyzer's (result.KIND_FAMILIES), except that this chart has
# always drawn a host sync among the memory-only ops; the kinds of "other" are listed for its colours.
FAMILIES = {
    **KIND_FAMILIES,
    "memory-only": (*KIND_FAMILIES["memory-only"], "sync"),
    "other": ("pool", "reduction", "embedding", "other"),
}
EVIDENCE_CHARS = 160
LAYER_LINKS = 8  # layer links shown with a finding before "and N more"
# Evidence keys as a reader would name them (others: underscores read as spaces).
EVIDENCE_LABELS = {
    "proposed": "severity the rule proposed",
    "bn_mac_bytes": "BatchNorm memory traffic",
    "whatif_costliest_pair_ms": "costliest pair folded alone, timed (what-if)",
    "pair_nodes": "layer → BatchNorm",
    "bias_bytes": "bias memory",
    "bias_parameters": "bias parameters",
    "reparameterize": "re-parameterise with",
    "whatif": "timed as",
}
GRAPH_DETAIL_OPS = 600  # up to this many ops the graph opens op by op, else grouped by module


def write_html(result: RunResult, settings: Settings | None, path: Path | str) -> None:
    from archlint.outputs import write_text

    write_text(Path(path), render_html(result, settings), "the HTML report")


def render_html(result: RunResult, settings: Settings | None = None) -> str:
    diagnostics = sorted(result.diagnostics, key=Diagnostic.sort_key)
    model_diags = defaultdict(list)
    code_diags = []
    trace_files = {t.file for t in result.traces}
    for d in diagnostics:
        model = _owner(d, result.models)
        if d.target in trace_files:
            continue  # shown with its trace
        if model is None:
            code_diags.append(d)
        else:
            model_diags[id(model)].append(d)
    payload = {
        "families": {kind: fam for fam, kinds in FAMILIES.items() for kind in kinds},
        "models": [_model_payload(m, model_diags[id(m)]) for m in result.models],
    }
    body = [_header(result, diagnostics)]
    body += [_model_section(i, m, model_diags[id(m)], result.gate, settings) for i, m in enumerate(result.models)]
    if result.loaders:
        from archlint.report.loader_html import loader_section

        body += [loader_section(i, lr) for i, lr in enumerate(result.loaders)]
    if result.traces:
        from archlint.report.trace_html import trace_section

        body += [
            trace_section(i, t, [d for d in diagnostics if d.target == t.file]) for i, t in enumerate(result.traces)
        ]
    if code_diags or result.files_checked:
        body.append(_code_section(code_diags, result.files_checked))
    title = "archlint report" + (f": {result.models[0].target}" if len(result.models) == 1 else "")
    data = json.dumps(_finite(payload), separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_asset('report.css')}</style></head>\n<body>\n"
        + "\n".join(body)
        + f"\n<script>{_asset('vendor/chart.umd.min.js')}</script>"
        f'\n<script type="application/json" id="archlint-data">{data}</script>'
        f"\n<script>{_asset('report.js')}</script>\n</body></html>\n"
    )


def _finite(value):
    """JSON.parse rejects NaN and Infinity: a number that is not finite is shown as missing."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


@functools.cache
def _asset(name: str) -> str:
    return (ASSETS / name).read_text(encoding="utf-8")


def _e(value: Any) -> str:
    return html.escape(printable(str(value)), quote=True)


def _owner(d: Diagnostic, models: list[ModelResult]) -> ModelResult | None:
    """The model a finding belongs to; None for code findings (a file span and no node)."""
    if d.node is None and d.target is None:
        return None
    for m in models:
        if d.target == m.target:
            return m
    return models[0] if len(models) == 1 and d.node is not None else None


# ---------------------------------------------------------------- data for the page's script


def _model_payload(m: ModelResult, diagnostics: list[Diagnostic]) -> dict:
    index = {layer.name: i for i, layer in enumerate(m.layers)}
    flagged: dict[int, list[str]] = defaultdict(list)
    for d in diagnostics:
        for name in _pointed_at(d, index):
            flagged[index[name]].append(d.code)
    measured = any(layer.latency_ms is not None for layer in m.layers)
    return {
        "target": m.target,
        "measured": measured,
        "peaks": _peaks(m.roofline) or _spec_roofs(m.estimate),
        "estimated": bool(m.estimate) and not measured,
        "layers": [_layer(layer, index, flagged.get(i, [])) for i, layer in enumerate(m.layers)],
        "levels": graph_levels(m.layers),
        "detail": _default_level(m.layers),
    }


def _layer(layer: Layer, index: dict[str, int], codes: list[str]) -> dict:
    return {
        "name": layer.name,
        "display": layer.label,
        "kind": layer.kind,
        "op": layer.op,
        "module": layer.module or "",
        "flops": layer.flops,
        "mac": layer.mac_bytes,
        "params": layer.params,
        "out": [list(s) for s in layer.out_shapes],
        "in": [list(s) for s in layer.in_shapes],
        "dtype": layer.dtype,
        "known": layer.known,
        "attrs": layer.attrs,
        "lat": layer.latency_ms,
        "spread": layer.latency_spread_ms,
        "roof": layer.roofline,
        "est": layer.estimated_ms,
        "bound": layer.bound,
        "inputs": [index[p] for p in layer.inputs if p in index],
        "findings": sorted(set(codes)),
    }


def _peaks(roofline: dict | None) -> dict | None:
    """The device's roofs as archlint.model.timing.roofline measures them (FLOP/s counts 2 per FMA)."""
    if not roofline:
        return None
    flops, bw = roofline.get("peak_flops_per_s"), roofline.get("bandwidth_bytes_per_s")
    if not flops or not bw:
        return None
    cache = roofline.get("cache_bandwidth_bytes_per_s")
    return {
        "flops": float(flops),
        "bandwidth": float(bw),
        "device": device_label(roofline.get("device")),
        "cache_bandwidth": float(cache) if cache else None,
        "cache_bytes": roofline.get("cache_bytes"),
    }


def device_label(key: str | None) -> str | None:
    """The roofline cache's device key ("cpu|AMD EPYC 7B13 x2 threads|float32") as a reader
    writes it: "AMD EPYC 7B13, 2 threads (CPU, float32)"."""
    if not key or key.count("|") != 2:
        return key
    kind, name, dtype = key.split("|")
    name = name.replace(" x", ", ").rstrip() if name.endswith(" threads") else name
    return f"{name} ({kind.upper() if kind == 'cpu' else kind}, {dtype})"


def _spec_roofs(estimate: Estimate | None) -> dict | None:
    """The spec's roofs for an estimate (datasheet peak of the dtype's best unit, DRAM bandwidth)."""
    roofs = estimate.roofs if estimate is not None else None
    if not roofs:
        return None
    return {
        "flops": float(roofs["peak_flops_per_s"]),
        "bandwidth": float(roofs["bandwidth_bytes_per_s"]),
        "device": f"{estimate.device_spec} (spec sheet, {roofs['unit']})",
    }


def _pointed_at(d: Diagnostic, index) -> list[str]:
    """The layers a finding names: its node, plus node lists in its evidence (e.g. the
    fragments of a block)."""
    names = [d.node] if d.node in index else []
    for value in d.evidence.values():
        items = value if isinstance(value, list) else [value]
        items = [v for item in items for v in (item if isinstance(item, list) else [item])]  # pairs
        names += [v for v in items if isinstance(v, str) and v in index and v not in names]
    return names


def _default_level(layers: list[Layer]) -> int:
    """Index into graph_levels: op by op when small enough, else the finest grouping that keeps
    the drawing under GRAPH_DETAIL_OPS / 2 nodes."""
    levels = _group_depths(layers)
    if len(layers) <= GRAPH_DETAIL_OPS:
        return len(levels)
    best = 0
    for k, depth in enumerate(levels):
        if _node_count(layers, depth) <= GRAPH_DETAIL_OPS // 2:
            best = k
    return best


def _group_depths(layers: list[Layer]) -> list[int]:
    """Module depths worth a level of their own: each one draws fewer nodes than the next."""
    deepest = max((len(layer.module.split(".")) for layer in layers if layer.module), default=0)
    depths, last = [], None
    for depth in range(1, deepest + 1):
        count = _node_count(layers, depth)
        if count != last and count < len(layers):
            depths.append(depth)
        last = count
    return depths


def _node_count(layers: list[Layer], depth: int) -> int:
    keys = [_group(layer, depth) for layer in layers]
    return len(set(keys) - {""}) + keys.count("")


def _group(layer: Layer, depth: int) -> str:
    """The module prefix an op is drawn inside at this depth ("" = drawn on its own)."""
    if not layer.module:
        return ""
    return ".".join(layer.module.split(".")[:depth])


def graph_levels(layers: list[Layer]) -> list[dict]:
    """The OpGraph drawn at every grouping depth, coarsest first, then op by op. A node is
    {"op": layer index} or {"group": module path, "ops": [layer indices]}; an edge is
    [source node, target node, [x0, y0, x1, y1, ...]]."""
    index = {layer.name: i for i, layer in enumerate(layers)}
    op_edges = [(index[p], i) for i, layer in enumerate(layers) for p in layer.inputs if p in index]
    levels = []
    for depth in [*_group_depths(layers), None]:
        nodes: list[dict] = []
        where: list[int] = []  # op index -> node index
        by_group: dict[str, int] = {}
        for i, layer in enumerate(layers):
            key = _group(layer, depth) if depth is not None else ""
            if key and key in by_group:
                nodes[by_group[key]]["ops"].append(i)
                where.append(by_group[key])
                continue
            if key:
                by_group[key] = len(nodes)
                nodes.append({"group": key, "ops": [i]})
            else:
                nodes.append({"op": i})
            where.append(len(nodes) - 1)
        for node in nodes:  # a group of one op is drawn as that op
            if "group" in node and len(node["ops"]) == 1:
                node["op"] = node.pop("ops")[0]
                del node["group"]
        drawing = layered(len(nodes), [(where[u], where[v]) for u, v in op_edges])
        for node, (x, y) in zip(nodes, drawing.xy):
            node["x"], node["y"] = round(x, 1), round(y, 1)
        levels.append(
            {
                "depth": depth,
                "nodes": nodes,
                "edges": [[u, v, pts] for u, v, pts in drawing.edges],
                "width": round(drawing.width, 1),
                "height": round(drawing.height, 1),
            }
        )
    return levels


# ---------------------------------------------------------------- static sections


def _header(result: RunResult, diagnostics: list[Diagnostic]) -> str:
    counts = Counter(d.severity.value for d in diagnostics)
    failed = [g for g in result.gate if not g.passed]
    chips = [f"<span class=chip>{_plural(len(diagnostics), 'finding')}</span>"]
    chips += [f"<span class='chip sev-{_e(s)}'>{n} {_e(s)}</span>" for s, n in sorted(counts.items())]
    if result.gate:
        cls = "bad" if failed else "good"
        verdict = f"gate failed ({len(failed)} of {len(result.gate)})" if failed else "gate passed"
        chips.append(f"<span class='chip {cls}'>{verdict}</span>")
    nav = "".join(f"<a href='#model-{i}'>{_e(m.target)}</a>" for i, m in enumerate(result.models))
    nav += "".join(f"<a href='#loader-{i}'>loader {_e(lr.target)}</a>" for i, lr in enumerate(result.loaders))
    nav += "".join(f"<a href='#trace-{i}'>trace {_e(t.file)}</a>" for i, t in enumerate(result.traces))
    traced = {t.file for t in result.traces}
    if result.files_checked or (any(d.target not in traced for d in diagnostics) and not result.models):
        nav += "<a href='#code'>code findings</a>"
    return (
        "<header><h1>archlint report</h1>"
        f"<div class=chips>{''.join(chips)}</div><nav>{nav}</nav>"
        f"<p class=muted>archlint {_e(__version__)} · written {_written()}"
        " · self-contained: this file loads nothing from the network</p></header>"
    )


def _written() -> str:
    """When the report was written; SOURCE_DATE_EPOCH (the reproducible-builds convention) fixes it,
    so two runs on the same input can give byte-identical reports."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    when = time.gmtime(int(epoch)) if epoch.isdigit() else time.gmtime()
    return time.strftime("%Y-%m-%d %H:%M UTC", when)


def _model_section(
    i: int, m: ModelResult, diagnostics: list[Diagnostic], gate: list[GateResult], settings: Settings | None = None
) -> str:
    t = m.totals
    shapes = (
        ", ".join(f"{i['name']} {'×'.join(str(v) for v in i['shape'])} {i['dtype']}" for i in m.inputs)
        if m.inputs
        else ", ".join("×".join(str(v) for v in s) for s in m.input_shapes) or "—"
    )
    latency = _ms(t.latency_ms) if t.latency_ms is not None else "not measured (run with --latency)"
    op_sum = _ms(t.latency_ms_sum_of_ops) if t.latency_ms_sum_of_ops is not None else "—"
    rows = [
        ("model", f"<code>{_e(m.target)}</code>"),
        ("inputs", _e(shapes)),
        ("device · dtype", f"{_e(m.device)} · {_e(m.dtype)}"),
        ("capture", f"{_e(m.strategy)} (built on {_e(m.build)}, {_e(m.mode)} mode)"),
        ("FLOPs", f"<b>{human_count(t.flops)}</b> <span class=muted>{_e(m.flops_convention)}</span>"),
        ("MAC", f"<b>{human_bytes(t.mac_bytes)}</b> <span class=muted>memory access cost, ShuffleNetV2</span>"),
        (
            "params",
            f"<b>{human_count(t.params)}</b>"
            + (
                f" <span class=muted>{human_count(t.unused_params)} of them never reached by the traced forward</span>"
                if t.unused_params
                else ""
            ),
        ),
        ("activations", human_bytes(t.activation_bytes)),
        ("latency end-to-end", f"<b>{_e(latency)}</b>"),
        ("latency, sum of ops", _e(op_sum) + (f" <span class=muted>{_e(m.timing)}</span>" if m.timing else "")),
        *(
            [
                (
                    "latency ESTIMATED",
                    f"<b>{_e(_ms(m.estimate.latency_ms))}</b> on {_e(m.estimate.device_spec)} "
                    f"<span class=muted>static estimate from the spec sheet, not measured: {_e(m.estimate.method)}; "
                    f"assumes {_e('; '.join(m.estimate.assumptions))}</span>",
                )
            ]
            if m.estimate
            else []
        ),
        ("ops", f"{len(m.layers)}" + (f" ({t.unknown_ops} without a cost formula, not counted)" * bool(t.unknown_ops))),
    ]
    if m.roofline:
        peaks = _peaks(m.roofline)
        if peaks:
            rows.append(
                (
                    "device roofs",
                    f"{peaks['flops'] / 1e9:,.1f} GFLOP/s · {peaks['bandwidth'] / 1e9:,.1f} GB/s"
                    f" <span class=muted>measured by archlint calibrate; FLOP/s count 2 per multiply-add, "
                    f"as the roofline chart</span>",
                )
            )
    summary = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    notes = "".join(f"<li>{_e(n)}</li>" for n in m.notes)
    verdicts = [g for g in gate if g.target == m.target]
    names = {layer.name: layer.label for layer in m.layers}  # id → the name every output shows
    return f"""
<section class=model id="model-{i}" data-model="{i}">
<h2>{_e(m.target)}</h2>
<div class=cols><table class=summary>{summary}</table>
<div>{_gate_table(verdicts)}{f"<h4>Notes</h4><ul class=notes>{notes}</ul>" if notes else ""}</div></div>
<h3>Findings <span class=muted>({len(diagnostics)}, costliest first)</span></h3>
{"".join(_finding(d, names, settings) for d in diagnostics) or "<p class=muted>No findings.</p>"}
{what_if_section(m.what_if)}
{train_section(m)}
{distributed_section(m)}
<h3>Roofline</h3><p class=muted id="roof-cap-{i}"></p>
<div class=chartbox><canvas id="roof-{i}" class=roofline></canvas></div>
<h3>Where the time goes</h3><p class=muted id="time-cap-{i}"></p>
<div class=cols><div class="chartbox tall"><canvas id="time-{i}"></canvas></div>
<div class=chartbox><canvas id="kind-{i}"></canvas></div></div>
<h3>Graph</h3><p class=muted>Nodes shaded by cost (<span id="graph-metric-{i}"></span>), red border: a finding points at it.
Drag to pan, wheel to zoom, click a node for its details; click a module box to open it one level down.</p>
<div class=graphbar id="graph-bar-{i}"></div>
<div class=graphwrap><svg class=opgraph id="graph-{i}"></svg><div class=details id="details-{i}">
<p class=muted>Click a node, a bar, a point or a table row to see that op here.</p></div></div>
<h3>Layers</h3>
<div class=tablebar><input type=search id="filter-{i}" placeholder="filter by module path (e.g. layer1.0)">
<span class=muted id="count-{i}"></span></div>
<div class=tablewrap><table class=layers id="table-{i}"></table></div>
</section>"""


def _ms(value: float) -> str:
    return f"{significant(value)} ms"


def _gate_table(verdicts: list[GateResult]) -> str:
    if not verdicts:
        return ""
    rows = "".join(
        f"<tr class={'good' if g.passed else 'bad'}><td>{'pass' if g.passed else 'FAIL'}</td>"
        f"<td>{_e(g.check)}</td><td>{_e(g.message)}</td></tr>"
        for g in verdicts
    )
    return f"<h4>Gate</h4><table class=gate>{rows}</table>"


def _finding(d: Diagnostic, names: dict[str, str], settings: Settings | None = None) -> str:
    layers = _pointed_at(d, names) or ([d.node] if d.node else [])
    links = [f"<a class=op href='#op={_e(n)}' data-op='{_e(n)}'>{_e(names.get(n, n))}</a>" for n in layers]
    pointers = " ".join(links[:LAYER_LINKS])
    if len(links) > LAYER_LINKS:  # a finding over a whole model names a hundred layers: the rest on demand
        pointers += (
            f" <details class=more><summary>and {len(links) - LAYER_LINKS} more</summary>"
            f"{' '.join(links[LAYER_LINKS:])}</details>"
        )
    return f"""<article class="finding sev-{_e(d.severity.value)}" data-node="{_e(d.node or "")}">
<div class=fhead><span class=code>{_e(d.code)}</span> <span class=where>{_e(location(d, settings))}</span>
<span class=price>{_price(d)}</span></div>
<p class=msg>{_e(d.message)}</p>
{f"<div class=layers>layers: {pointers}</div>" if pointers else ""}
{_evidence(d.evidence, names)}
{f"<p class=fix>fix ({_e(d.fix.applicability.value)}): {_e(d.fix.message)}</p>" if d.fix else ""}
<details class=rule><summary>rule {_e(d.code)}: what, why, use instead</summary>{_rule_html(d.code)}</details>
</article>"""


def _price(d: Diagnostic) -> str:
    return _e(" · ".join(price_bits(d)))


def _evidence_text(value, names: dict[str, str] | None = None, items: int = 6) -> str:
    """Evidence as a reader would write it, never a JSON blob: a list reads "a, b, c … and 9 more",
    a pair "a → b", a mapping "key value"; op ids read as the ops' display names."""
    names = names or {}
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, dict):
        return ", ".join(f"{k} {_evidence_text(v, names)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        parts = [_evidence_text(v, names) for v in value[:items]]
        if value and all(isinstance(v, (list, tuple)) for v in value):  # node pairs: a → b
            parts = [" → ".join(_evidence_text(x, names) for x in v) for v in value[:items]]
        more = f" … and {len(value) - items} more" if len(value) > items else ""
        return ", ".join(parts) + more
    if isinstance(value, float):
        return f"{significant(value, 4)}"
    return str(value)


def evidence_label(key: str) -> str:
    return EVIDENCE_LABELS.get(key, key.replace("_", " "))


def _evidence_value(key: str, value, names: dict[str, str] | None) -> str:
    """A figure in its unit where the key names one (`..._bytes`, `..._ms`)."""
    noise = getattr(value, "noise", None)  # a what-if inside the timing noise (archlint.model.timing.paired)
    if noise is not None and key.endswith("_ms"):
        return f"could not measure (noise ±{significant(noise)} ms)"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if key.endswith("_bytes"):
            return human_bytes(value)
        if key.endswith("_ms"):
            return f"{significant(value)} ms"
    return _evidence_text(value, names)


def _evidence(evidence: dict, names: dict[str, str] | None = None) -> str:
    items = []
    for key, value in evidence.items():
        if value is None:
            continue
        text = _evidence_value(key, value, names)
        if len(text) > EVIDENCE_CHARS:  # all of it on hover; the page stays readable
            shown = f"<span title='{_e(text)}'>{_e(text[:EVIDENCE_CHARS])}… ({len(text)} chars)</span>"
        else:
            shown = _e(text)
        items.append(f"<span><b>{_e(evidence_label(key))}</b> {shown}</span>")
    return f"<p class=evidence>{''.join(items)}</p>" if items else ""


@functools.cache
def _rule_html(code: str) -> str:
    from markdown_it import MarkdownIt  # rich's own Markdown parser: no new dependency

    from archlint import registry

    try:
        rule = registry.get(code)
    except (UsageError, FileNotFoundError, ValueError) as exc:
        return f"<p class=muted>No rule page for {_e(code)}: {_e(exc)}</p>"
    sections, current = [], None
    for line in rule.body.splitlines(keepends=True):
        if line.startswith("## "):
            current = [line]
            sections.append(current)
        elif current is not None:
            current.append(line)
    kept = ["".join(s) for s in sections if s[0][3:].strip().lower().startswith(RULE_SECTIONS)]
    text = "".join(kept) if kept else rule.body
    md = MarkdownIt("commonmark", {"html": False})
    head = f"<p><b>{_e(rule.code)} {_e(rule.name)}</b>: {_e(rule.summary)}</p>"
    return f"<div class=rulepage>{head}{md.render(text)}</div>"


def _code_section(diagnostics: list[Diagnostic], files_checked: int) -> str:
    """Code findings twice: by rule (with its page, once) and by file (then by rule, by line)."""
    rules = "".join(_rule_group(code, ds) for code, ds in sorted(_grouped(diagnostics, "code").items()))
    files = "".join(_file_group(f, ds) for f, ds in sorted(_grouped(diagnostics, "file").items()))
    return f"""<section class=codelint id=code><h2>Code findings</h2>
<p>{_plural(len(diagnostics), "finding")} in {_plural(files_checked, "file")} checked.</p>
<h3>By rule</h3>{rules or "<p class=muted>All checks passed.</p>"}
<h3>By file</h3>{files}</section>"""


def _rule_group(code: str, ds: list[Diagnostic]) -> str:
    items = "".join(f"<li>{_e(location(d))}: {_e(d.message)}</li>" for d in ds)
    files = len({d.file for d in ds})
    return (
        f"<details class=rulegroup id='rule-{_e(code)}'><summary><span class=code>{_e(code)}</span> "
        f"{_plural(len(ds), 'finding')} in {_plural(files, 'file')}</summary>{_rule_html(code)}<ul>{items}</ul></details>"
    )


def _file_group(path: str, ds: list[Diagnostic]) -> str:
    rows = []
    for code, group in sorted(_grouped(ds, "code").items()):
        items = "".join(
            f"<li><span class=where>{d.line or '-'}:{d.column or '-'}</span> {_e(d.message)}"
            + (" <span class=chip>fixable</span>" if d.fix else "")
            + "</li>"
            for d in sorted(group, key=lambda d: (d.line or 0, d.column or 0))
        )
        rows.append(f"<div class=rulerow><a class=code href='#rule-{_e(code)}'>{_e(code)}</a><ul>{items}</ul></div>")
    return (
        f"<details class=filegroup open><summary><code>{_e(path)}</code> ({len(ds)})</summary>{''.join(rows)}</details>"
    )


def _grouped(ds: list[Diagnostic], attr: str) -> dict[str, list[Diagnostic]]:
    out: dict[str, list[Diagnostic]] = defaultdict(list)
    for d in ds:
        out[getattr(d, attr) or "<no file>"].append(d)
    return out


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
