"""ShuffleNetV2's Tables 1–4 re-measured with archlint's own latency on this machine.

Every row of the paper's four guideline experiments (tests/fixtures/models/shufflenet_tables.py:
the paper's ARM channel counts, 56×56, blocks stacked 10×) is timed with archlint's measure
layer — its timer and its interleaved sampling (archlint.model.timing.timer.sample: warm-up, then the
rows of a table run in turn, repeat times, median and quartiles kept) — and costed with
archlint's capture + cost (MAC). It prints, per table, archlint's ranking next to the paper's
ARM ranking (Snapdragon 810, one thread; this run uses --threads, 1 by default, to match) and
the fraction of row pairs ordered as in the paper, for measured latency and for MAC.

It first checks the rules against the paper (--rules-only stops there): each table's guideline
rule (Table 1 AL101, 2 AL102, 3 AL103, 4 AL104) on every row, statically (the ARM rows, as
`archlint` runs by default) and, for Table 3, on the paper's GPU column (c = 128/256/512) with a
GPU --device-spec (--spec, a100-pcie and rtx3090 by default): a row the paper measured slower
than its table's baseline (at most 90% of its speed) should draw the rule's finding, the
baseline and rows within 10% of it no warning.

    python benchmarks/shufflenet_tables.py [--threads 1] [--warmup 10] [--repeat 30] [--rules-only] [--spec a100-pcie,rtx3090]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "models"))

import shufflenet_tables as tables  # noqa: E402

from archlint.model.capture import capture  # noqa: E402
from archlint.model.cost import cost_graph  # noqa: E402
from archlint.model.opgraph import totals  # noqa: E402
from archlint.model.timing.timer import make_timer, sample  # noqa: E402


def mac_bytes(row: tables.Row) -> int:
    graph, _ = capture(row.build().eval(), (torch.randn(*row.input_shape),), "fx")
    cost_graph(graph)
    return totals(graph).mac_bytes


def measure_table(rows: list[tables.Row], warmup: int, repeat: int):
    """Median and quartiles (ms) of each row's forward, rows interleaved so they share conditions."""
    timer = make_timer("cpu")
    runs = []
    for row in rows:
        model = row.build().eval()
        x = torch.randn(*row.input_shape)

        def run(model=model, x=x):
            with timer.region("model"):
                model(x)

        runs.append(run)
    with torch.no_grad():
        sampled = sample(runs, timer, warmup, repeat)
    return [s.regions["model"] for s in sampled]


def ranks(values: list[float], reverse: bool = False) -> list[int]:
    order = sorted(range(len(values)), key=lambda i: values[i], reverse=reverse)
    out = [0] * len(values)
    for rank, i in enumerate(order, 1):
        out[i] = rank
    return out


RULE = {1: "AL101", 2: "AL102", 3: "AL103", 4: "AL104"}
SLOW = 0.9  # "slower" in the paper: at most 90% of the baseline's speed (the paper gives no spread)
BASELINE = {1: "1:1", 2: "g=1", 3: "1-fragment", 4: "ReLU no, shortcut no"}


def rule_findings(row: tables.Row, code: str, spec: str | None) -> list:
    from archlint.config import ModelSpec, Settings
    from archlint.model.analyze import analyze

    _, found = analyze(
        ModelSpec(row.label, model=row.build().eval(), given_args=(torch.randn(*row.input_shape),), given_kwargs={}),
        Settings(device_spec=spec),
    )
    return [d for d in found if d.code == code]


def check_rules(specs: list[str]) -> tuple[int, int]:
    """Print each row's finding for its table's rule; (rows as the paper says, rows)."""
    print("Rules against the paper: a row slower than its table's baseline should draw the rule, the baseline none.")
    runs = [(n, None, tables.table(n), lambda r: r.arm, "ARM img/s") for n in (1, 2, 3, 4)]
    runs += [(3, spec, tables.GPU_TABLE3, lambda r: r.gpu, "GPU batch/s") for spec in specs]
    right = total = 0
    for n, spec, rows, speed, unit in runs:
        print(f"Table {n} ({RULE[n]}, {'static' if spec is None else 'device spec ' + spec})")
        for r in rows:
            base = next(
                b
                for b in rows
                if b.label.split(" c=")[0] == BASELINE[n]
                and b.label[len(BASELINE[n]) :] == r.label[len(r.label.split(" c=")[0]) :]
            )
            slower = speed(r) < SLOW * speed(base)
            found = rule_findings(r, RULE[n], spec)
            got = ", ".join(sorted({d.severity.value for d in found})) or "silent"
            share = ", ".join(f"{d.price.saving_share:.0%} {d.price.basis}" for d in found if d.price is not None)
            # slow: the rule's finding (a warning where its price pays, else info); not slow: no
            # warning (info is hidden by default and never fails a gate)
            ok = bool(found) if slower else not any(d.severity.value == "warning" for d in found)
            right, total = right + ok, total + 1
            print(
                f"  {r.label:28s} {unit} {speed(r):7.1f} {'slower' if slower else 'within 10%':11s} "
                f"{RULE[n]}: {got:8s} {share:24s} {'ok' if ok else 'MISSED' if slower else 'NOISE'}"
            )
    print(f"Rules as the paper says: {right}/{total} rows\n")
    return right, total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (paper's ARM: one)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--rules-only", action="store_true", help="check the rules against the paper, time nothing")
    p.add_argument("--spec", default="a100-pcie,rtx3090", help="GPU device specs for Table 3's GPU column")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    check_rules([s for s in args.spec.split(",") if s])
    if args.rules_only:
        return 0

    print(
        f"ShuffleNetV2 Tables 1-4 on this CPU ({args.threads} thread(s), warmup {args.warmup}, "
        f"repeat {args.repeat}; median [q1, q3]) vs the paper's ARM column (Snapdragon 810, 1 thread)."
    )
    print("Rank 1 = fastest. MAC = archlint's static memory access cost of the whole stack.\n")
    all_lat = all_mac = all_pairs = 0
    for n in (1, 2, 3, 4):
        rows = tables.table(n)
        stats = measure_table(rows, args.warmup, args.repeat)
        lat = [s.median for s in stats]
        macs = [mac_bytes(r) for r in rows]
        paper_rank = ranks([r.arm for r in rows], reverse=True)
        lat_rank = ranks(lat)
        mac_rank = ranks(macs)
        print(f"Table {n}")
        print(
            f"  {'row':28s} {'paper ARM img/s':>15s} {'rank':>4s} | {'archlint ms':>24s} {'img/s':>7s} "
            f"{'rank':>4s} | {'MAC MiB':>8s} {'rank':>4s}"
        )
        for r, s, m, pr, lr, mr in zip(rows, stats, macs, paper_rank, lat_rank, mac_rank):
            spread = f"{s.median:7.3f} [{s.q1:6.3f}, {s.q3:6.3f}]"
            print(
                f"  {r.label:28s} {r.arm:15.1f} {pr:4d} | {spread:>24s} {1000 / s.median:7.1f} {lr:4d} | "
                f"{m / 2**20:8.2f} {mr:4d}"
            )
        la, ld, lt = tables.pair_agreement(rows, lat)
        ma, md, mt = tables.pair_agreement(rows, [float(m) for m in macs])
        pairs = la + ld + lt
        print(
            f"  pairs ordered as in the paper: latency {la}/{pairs} ({la / pairs:.0%})"
            f"{f', {lt} tied' if lt else ''}; MAC {ma}/{pairs} ({ma / pairs:.0%}){f', {mt} tied' if mt else ''}\n"
        )
        all_lat += la
        all_mac += ma
        all_pairs += pairs
    print(
        f"All tables: latency orders {all_lat}/{all_pairs} row pairs as the paper's ARM column "
        f"({all_lat / all_pairs:.0%}); MAC {all_mac}/{all_pairs} ({all_mac / all_pairs:.0%})."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
