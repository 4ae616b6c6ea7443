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

The sample is deterministic and table-independent: the rows ordered by sha256 of
"model,image size"; models timm cannot build are skipped; the first 100 are the tuning sample,
the next 100 the held-out sample (looked at only to report, never to tune).
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
# The device spec each table was measured on: a substring of the file name → built-in spec.
DEVICES = {"rtx4090": "rtx4090", "-4090": "rtx4090", "rtx3090": "rtx3090", "5090": "rtx5090"}


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


def read_table(table: Path) -> list[dict]:
    torch_version = torch_of(table)
    with table.open(newline="") as f:
        return [
            {"model": r["model"], "img": int(r["infer_img_size"]), "batch": int(r["infer_batch_size"]),
             "published": float(r["infer_samples_per_sec"]), "torch": torch_version}
            for r in csv.DictReader(f)
        ]


def sample(rows: list[dict], which: str) -> list[dict]:
    import timm

    known = set(timm.list_models())
    ordered = sorted((r for r in rows if r["model"] in known),
                     key=lambda r: hashlib.sha256(f"{r['model']},{r['img']}".encode()).hexdigest())
    parts = {"tune": ordered[:SAMPLE], "heldout": ordered[SAMPLE: 2 * SAMPLE]}
    return parts[which]


def cache_dir() -> Path:
    path = Path(os.environ.get("ARCHLINT_BENCH_CACHE", "/tmp/archlint-published"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def graph_for(row: dict):
    """The costed graph of one row (timm model on meta, float16, the row's batch and image size),
    from the cache when captured before."""
    path = cache_dir() / f"{row['model']}-{row['img']}-{row['batch']}.pickle"
    if path.exists():
        return pickle.loads(path.read_bytes())
    from archlint.config import ModelSpec, Settings
    from archlint.model.analyze import capture_graph
    from archlint.model.cost import cost_graph
    from archlint.model.load import load

    with tempfile.TemporaryDirectory() as tmp:
        zoo = Path(tmp) / "zoo.py"
        zoo.write_text(f"import timm\n\ndef net():\n    return timm.create_model({row['model']!r})\n")
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


def evaluate(rows: list[dict], spec_name: str, per_model: bool) -> list[dict]:
    from archlint.devices import resolve
    from archlint.model import estimate, opgraph

    spec = resolve(spec_name)
    out = []
    for row in rows:
        start = time.perf_counter()
        try:
            graph = graph_for(row)
        except Exception as exc:  # one model's failure costs only its row; said here
            print(f"  {row['model']} {row['img']}: capture failed ({type(exc).__name__}: {str(exc)[:100]})", flush=True)
            continue
        graph.graph["torch_version"] = row["torch"]
        flops = sum(int(op.get("flops", 0)) for _, op in opgraph.ops(graph))
        before = estimate.estimate_graph(graph, spec, terms=estimate.ROOFLINE_ONLY)
        half = estimate.estimate_graph(graph, spec)  # what `--dtype float16 --device-spec` gives
        after = estimate.estimate_graph(graph, spec, autocast=True)  # the tables run under torch.autocast
        r = {**row, "flops": flops, "half": row["batch"] / half["latency_ms"] * 1e3,
             "before": row["batch"] / before["latency_ms"] * 1e3, "after": row["batch"] / after["latency_ms"] * 1e3,
             "range": [row["batch"] / ms * 1e3 for ms in reversed(after.get("range_ms", [after["latency_ms"]] * 2))],
             "families": family_ms(graph)}
        out.append(r)
        if per_model:
            print(f"  {row['model']:34s} {row['img']:4d} b{row['batch']:<5d} published {row['published']:9.1f}/s  "
                  f"before {r['before']:9.1f} ({r['before'] / row['published']:5.2f}×)  after {r['after']:9.1f} "
                  f"({r['after'] / row['published']:5.2f}×)  [{time.perf_counter() - start:.1f} s]", flush=True)
    return out


def family_ms(graph) -> dict[str, float]:
    """Estimated ms per op family (the last estimate_graph run on this graph)."""
    from archlint.model import estimate, opgraph

    out: dict[str, float] = {}
    for _, op in opgraph.ops(graph):
        fam = estimate.op_family(op)
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
    return (f"ρ {spearman([r[key] for r in rows], pub):.3f}  median error {err:6.1%}  within 2× {within:4.0%}  "
            f"median est/pub {statistics.median(ratios):.2f}")


def run_published(args) -> int:
    tables = sorted(TABLES.glob(args.tables))
    if not tables:
        print(f"no tables match {args.tables} in {TABLES}")
        return 1
    for which in (["tune", "heldout"] if args.sample == "both" else [args.sample]):
        for table in tables:
            spec = device_of(table)
            rows = evaluate(sample(read_table(table), which), spec, args.per_model)
            if len(rows) < 3:
                print(f"{table.name}: too few rows")
                continue
            pub = [r["published"] for r in rows]
            flops_rho = spearman([-r["flops"] / r["batch"] for r in rows], pub)
            inside = sum(r["range"][0] <= r["published"] <= r["range"][1] for r in rows) / len(rows)
            print(f"\n{table.stem} ({spec}), {which} sample, {len(rows)} models")
            print(f"  FLOPs alone:  ρ {flops_rho:.3f}")
            print(f"  before:       {scores(rows, 'before')}")
            print(f"  after, fp16:  {scores(rows, 'half')}   (the measured terms on the model in float16)")
            print(f"  after:        {scores(rows, 'after')}   (and torch.autocast's dtypes, as the tables ran)")
            print(f"  published inside the estimate's range: {inside:.0%}", flush=True)
    return 0
