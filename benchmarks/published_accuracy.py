"""`estimate_accuracy.py --published`: archlint's `--device-spec` estimate against published GPU tables.

Each table in benchmarks/eval_data/published/ is timm's own inference benchmark (AMP fp16, NCHW,
eager, the batch size and image size in the row; see the README there). For each sampled row the
timm model is built on meta in float16 at the table's batch and image size, captured and costed
once (cached as a pickled graph in $ARCHLINT_BENCH_CACHE), then estimated with the table's
device spec three times: the roofline alone (`terms=estimate.ROOFLINE_ONLY`: the estimate as it
was before the measured terms), the measured terms on the float16 model (what
`archlint --dtype float16 --device-spec` gives) and those terms with torch.autocast's dtype flow
(`autocast=True`: how the tables were measured). Printed per table: Spearman ρ between
estimated and published throughput, the median of |estimated / published − 1|, the share of
rows within 2×, and beside them the ρ of FLOPs alone (1 / FLOPs against throughput).

The samples are deterministic and the same models on every table: the rows of the reference
table (timm's RTX 4090, torch 2.4 file) ordered by sha256 of "model,image size", models timm
cannot build skipped; the first 100 are the tuning sample, the next 100 the held-out sample
(looked at only to report, never to tune), the next 100 the fresh sample (added later, never
looked at while tuning). Each table gives its rows of those models; a model the table holds only
at another image size is taken at its nearest size, and said so.

Per table and sample, beside the scores: the 10 models the estimate ranks furthest from the
table, with the share of each op family in their estimated time, and per op family the median
estimated / published ratio of the models where that family takes the largest share of the time.
Tables measured in channels_last ("-nhwc-" in the file name) are captured with the model in
channels_last and estimated so (the graph's memory_format: no NCHW → NHWC transposes).
"""

from __future__ import annotations

import csv
import hashlib
import os
import pickle
import statistics
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
TABLES = HERE / "eval_data" / "published"
SAMPLE = 100
# The table the samples are drawn from; every other table gives its rows of the same models.
REFERENCE = TABLES / "timm-infer-amp-nchw-pt240-cu124-rtx4090.csv"
PARTS = ("tune", "heldout", "fresh")  # consecutive slices of SAMPLE rows of the reference ordering
GROUPS = {"both": ["tune", "heldout"], "all": list(PARTS)}
# The device spec each table was measured on: a substring of the file name → built-in spec.
DEVICES = {
    "rtx4090": "rtx4090",
    "-4090": "rtx4090",
    "rtx3090": "rtx3090",
    "5090": "rtx5090",
    "pro6000maxq": "rtx-pro-6000-maxq",
}
WORST = 10  # models listed per table: the furthest from the table's rank order


def device_of(table: Path) -> str:
    for key, spec in DEVICES.items():
        if key in table.name:
            return spec
    raise SystemExit(f"{table.name}: no device spec known for this table (add it to DEVICES)")


def torch_of(table: Path) -> str:
    """The torch a table was measured with, from its name (`-pt291-`: 2.9.1): the estimate costs
    that torch's SDPA math path (archlint.model.sdpa_math)."""
    tag = next((p[2:] for p in table.stem.split("-") if p.startswith("pt") and p[2:].isdigit()), "")
    return ".".join(tag[:3]) if len(tag) >= 3 else ""


def channels_last(table: Path) -> bool:
    """timm's benchmark ran this table with the model and its input in channels_last."""
    return "-nhwc-" in table.name


def read_table(table: Path) -> list[dict]:
    torch_version = torch_of(table)
    with table.open(newline="") as f:
        return [
            {
                "model": r["model"],
                "img": int(r["infer_img_size"]),
                "batch": int(r["infer_batch_size"]),
                "published": float(r["infer_samples_per_sec"]),
                "torch": torch_version,
            }
            for r in csv.DictReader(f)
        ]


def drawn(which: str, reference: list[dict] | None = None) -> list[tuple[str, int]]:
    """The (model, image size) pairs of a sample, in sha256 order of the reference table's rows
    ("model,image size"), models timm cannot build skipped."""
    import timm

    known = set(timm.list_models())
    rows = read_table(REFERENCE) if reference is None else reference
    ordered = sorted(
        (r for r in rows if r["model"] in known),
        key=lambda r: hashlib.sha256(f"{r['model']},{r['img']}".encode()).hexdigest(),
    )
    start = PARTS.index(which) * SAMPLE
    return [(r["model"], r["img"]) for r in ordered[start : start + SAMPLE]]


def sample(rows: list[dict], which: str, reference: list[dict] | None = None) -> list[dict]:
    """This table's rows of a sample's models, in the sample's order: the row at the drawn image
    size, else the model's row at the nearest size that no sample draws (marked `drawn_img`);
    models the table lacks are left out (the caller reports how many rows it got)."""
    reference = read_table(REFERENCE) if reference is None else reference
    taken = {pair for part in PARTS for pair in drawn(part, reference)}
    at = {(r["model"], r["img"]): r for r in rows}
    out = []
    for model, img in drawn(which, reference):
        if (model, img) in at:
            out.append(at[model, img])
            continue
        spare = [r for r in rows if r["model"] == model and (model, r["img"]) not in taken]
        if spare:
            near = min(spare, key=lambda r: (abs(r["img"] - img), r["img"]))
            out.append({**near, "drawn_img": img})
    return out


def cache_dir() -> Path:
    path = Path(os.environ.get("ARCHLINT_BENCH_CACHE", "/tmp/archlint-published"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def graph_for(row: dict, nhwc: bool = False):
    """The costed graph of one row (timm model on meta, float16, the row's batch and image size;
    `nhwc`: the model in channels_last, as timm's NHWC tables ran), from the cache when captured
    before."""
    path = cache_dir() / f"{row['model']}-{row['img']}-{row['batch']}{'-nhwc' if nhwc else ''}.pickle"
    if path.exists():
        return pickle.loads(path.read_bytes())
    from archlint.config import ModelSpec, Settings
    from archlint.model.analyze import capture_graph
    from archlint.model.cost import cost_graph
    from archlint.model.loading.load import load

    with tempfile.TemporaryDirectory() as tmp:
        zoo = Path(tmp) / "zoo.py"
        build = f"timm.create_model({row['model']!r})" + (".to(memory_format=torch.channels_last)" if nhwc else "")
        zoo.write_text(f"import timm\nimport torch\n\ndef net():\n    return {build}\n")
        settings = Settings()
        settings.select = ["AL0"]
        spec = ModelSpec(target=f"{zoo}:net", input_shapes=[[row["batch"], 3, row["img"], row["img"]]], dtype="float16")
        loaded = load(spec, settings)
        graph = capture_graph(loaded, spec.target, settings)
    graph.graph["dtype"] = str(loaded.dtype).removeprefix("torch.")
    graph.graph["build"] = loaded.build
    cost_graph(graph)
    path.write_bytes(pickle.dumps(picklable(graph)))
    return graph


def picklable(graph):
    """The graph with plain data only (numbers, strings, lists, dicts): the estimate reads only
    the ops' shapes, costs and edges; an export's GraphModule or an op's target function would
    not load back in another process."""
    import networkx as nx

    def plain(value) -> bool:
        if value is None or isinstance(value, (bool, int, float, str)):
            return True
        if isinstance(value, (list, tuple)):
            return all(plain(v) for v in value)
        if isinstance(value, dict):
            return all(isinstance(k, str) and plain(v) for k, v in value.items())
        return False

    copy = nx.DiGraph()
    copy.graph.update({k: v for k, v in graph.graph.items() if plain(v)})
    for name, data in graph.nodes(data=True):
        copy.add_node(name, **{k: v for k, v in data.items() if plain(v)})
    copy.add_edges_from(graph.edges())
    return copy


def evaluate(rows: list[dict], spec_name: str, per_model: bool, nhwc: bool = False) -> list[dict]:
    from archlint.devices import resolve
    from archlint.model import opgraph
    from archlint.model.estimating import estimate

    spec = resolve(spec_name)
    out = []
    for row in rows:
        start = time.perf_counter()
        try:
            graph = graph_for(row, nhwc)
        except Exception as exc:  # one model's failure costs only its row; said here
            print(f"  {row['model']} {row['img']}: capture failed ({type(exc).__name__}: {str(exc)[:100]})", flush=True)
            continue
        graph.graph["torch_version"] = row["torch"]
        graph.graph["memory_format"] = "channels_last" if nhwc else "contiguous"  # as costed.memory_format says
        flops = sum(int(op.get("flops", 0)) for _, op in opgraph.ops(graph))
        before = estimate.estimate_graph(graph, spec, terms=estimate.ROOFLINE_ONLY)
        half = estimate.estimate_graph(graph, spec)  # what `--dtype float16 --device-spec` gives
        after = estimate.estimate_graph(graph, spec, autocast=True)  # the tables run under torch.autocast
        r = {
            **row,
            "flops": flops,
            "half": row["batch"] / half["latency_ms"] * 1e3,
            "before": row["batch"] / before["latency_ms"] * 1e3,
            "after": row["batch"] / after["latency_ms"] * 1e3,
            "range": [row["batch"] / ms * 1e3 for ms in reversed(after.get("range_ms", [after["latency_ms"]] * 2))],
            "families": family_ms(graph),
        }
        out.append(r)
        if per_model:
            print(
                f"  {row['model']:34s} {row['img']:4d} b{row['batch']:<5d} published {row['published']:9.1f}/s  "
                f"before {r['before']:9.1f} ({r['before'] / row['published']:5.2f}×)  after {r['after']:9.1f} "
                f"({r['after'] / row['published']:5.2f}×)  [{time.perf_counter() - start:.1f} s]",
                flush=True,
            )
    return out


def op_family(op: dict) -> str:
    """The family an op's time is reported under: grouped convolutions apart, the kinds that launch no
    kernel (views) as one."""
    from archlint.model.estimating.torch_kernels import VIEW_KINDS

    kind = op["kind"]
    if kind == "conv":
        groups = int(op.get("attrs", {}).get("groups", 1) or 1)
        return "conv" if groups == 1 else "grouped-conv"
    if kind in VIEW_KINDS:
        return "view"
    return kind


def family_ms(graph) -> dict[str, float]:
    """Estimated ms per op family (the last estimate_graph run on this graph)."""
    from archlint.model import opgraph

    out: dict[str, float] = {}
    for _, op in opgraph.ops(graph):
        fam = op_family(op)
        out[fam] = out.get(fam, 0.0) + float(op.get("estimated_ms", 0.0))
    return out


def spearman(a: list[float], b: list[float]) -> float:
    from estimate_accuracy import spearman as rho

    return rho(a, b)


def scores(rows: list[dict], key: str) -> str:
    pub = [r["published"] for r in rows]
    ratios = [r[key] / r["published"] for r in rows]
    err = statistics.median(abs(x - 1) for x in ratios)
    within = sum(0.5 <= x <= 2 for x in ratios) / len(ratios)
    return (
        f"ρ {spearman([r[key] for r in rows], pub):.3f}  median error {err:6.1%}  within 2× {within:4.0%}  "
        f"median est/pub {statistics.median(ratios):.2f}"
    )


def ranks(values: list[float]) -> list[float]:
    """1 = the highest throughput."""
    from estimate_accuracy import ranks as ascending

    return [len(values) + 1 - r for r in ascending(values)]


def shares(families: dict[str, float]) -> list[tuple[str, float]]:
    """A model's op families by their share of its estimated time, largest first."""
    total = sum(families.values()) or 1.0
    return sorted(((f, ms / total) for f, ms in families.items()), key=lambda x: -x[1])


def worst(rows: list[dict], key: str = "after", n: int = WORST) -> list[str]:
    """The n models the estimate ranks furthest from the table, with their largest families."""
    pub, est = ranks([r["published"] for r in rows]), ranks([r[key] for r in rows])
    order = sorted(range(len(rows)), key=lambda i: -abs(est[i] - pub[i]))[:n]
    lines = []
    for i in order:
        r = rows[i]
        fams = ", ".join(f"{f} {x:.0%}" for f, x in shares(r["families"])[:4] if x >= 0.05)
        lines.append(
            f"    {r['model']:34s} {r['img']:4d}  rank {pub[i]:3.0f} → {est[i]:3.0f} ({est[i] - pub[i]:+4.0f})  "
            f"est/pub {r[key] / r['published']:5.2f}  [{fams}]"
        )
    return lines


def by_family(rows: list[dict], key: str = "after") -> list[str]:
    """Per op family: the models where it takes the largest share of the estimated time, their
    count, median share and median estimated / published (> 1: the estimate is too fast)."""
    groups: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        fam, share = shares(r["families"])[0]
        groups.setdefault(fam, []).append((share, r[key] / r["published"]))
    lines = []
    for fam, items in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        ratios = [x for _, x in items]
        lines.append(
            f"    {fam:14s} {len(items):3d} models  median share {statistics.median(s for s, _ in items):4.0%}  "
            f"median est/pub {statistics.median(ratios):5.2f}  (range {min(ratios):.2f}–{max(ratios):.2f})"
        )
    return lines


def report(table: Path, spec: str, which: str, rows: list[dict], asked: int) -> None:
    pub = [r["published"] for r in rows]
    flops_rho = spearman([-r["flops"] / r["batch"] for r in rows], pub)
    inside = sum(r["range"][0] <= r["published"] <= r["range"][1] for r in rows) / len(rows)
    print(f"\n{table.stem} ({spec}), {which} sample, {len(rows)} models (of {asked} in the sample's draw)")
    moved = [f"{r['model']} {r['img']} (drawn at {r['drawn_img']})" for r in rows if "drawn_img" in r]
    if moved:
        print(f"  at another image size than drawn (the table lacks the drawn one): {', '.join(moved)}")
    print(f"  FLOPs alone:  ρ {flops_rho:.3f}")
    print(f"  before:       {scores(rows, 'before')}")
    print(f"  after, fp16:  {scores(rows, 'half')}   (the measured terms on the model in float16)")
    print(f"  after:        {scores(rows, 'after')}   (and torch.autocast's dtypes, as the tables ran)")
    print(f"  published inside the estimate's range: {inside:.0%}")
    if channels_last(table):
        print(
            "  this table ran channels_last: captured so, and estimated as the model's memory format says "
            "(NHWC convs: no cuDNN transposes, depthwise on cuDNN)"
        )
    print(
        f"  worst {min(WORST, len(rows))} by rank displacement (published rank → estimated rank; families' share of the estimated time):"
    )
    print("\n".join(worst(rows)))
    print("  by dominant op family (the family with the largest share of a model's estimated time):")
    print("\n".join(by_family(rows)), flush=True)


def run_published(args) -> int:
    tables = sorted(TABLES.glob(args.tables))
    if not tables:
        print(f"no tables match {args.tables} in {TABLES}")
        return 1
    for which in GROUPS.get(args.sample, [args.sample]):
        asked = len(drawn(which))
        for table in tables:
            spec = device_of(table)
            picked = sample(read_table(table), which)
            if len(picked) < 3:
                print(
                    f"\n{table.stem}: {len(picked)} rows of the {which} sample in this table (it holds only some models)"
                )
                continue
            rows = evaluate(picked, spec, args.per_model, channels_last(table))
            if len(rows) < 3:
                print(f"\n{table.stem}: too few rows captured")
                continue
            report(table, spec, which, rows, asked)
    return 0
