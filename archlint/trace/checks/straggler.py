"""AL512: one rank of a distributed job reaches the collectives last and the others wait for it.

Cross-rank: runs only when traces of two or more ranks of one job are read together
(archlint/trace/ranks.py makes the wait/transfer split). Priced per step as the smallest of the
other ranks' waits on the calls it reached last: were it as fast as the next slowest rank, every
rank's step would shorten by at least that much (the ranks run the collectives in lockstep).
"""

from __future__ import annotations

from archlint.diagnostics import Diagnostic, Severity
from archlint.trace.findings import finding, ms, share
from archlint.trace.ranks import CrossRank

CODE = "AL512"
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ("estimated",)  # a share of the step estimated from the trace's measured times
FIX = "none"
ACROSS_RANKS = True  # reads the traces of one job's ranks together (archlint.trace.ranks)
# min_share: the wait it causes the others, as a share of its step time; max_chance: how likely a rank
# would be last this often by chance (Straggler.chance): jitter makes every rank last on some calls
OPTIONS = {"min_share": 0.05, "max_chance": 0.01}


def check(report: CrossRank, group: list, options: dict) -> list[Diagnostic]:
    s = report.straggler
    if s is None or s.caused_wait_us <= 0:
        return []
    t = next(t for t in group if t.rank == s.rank)
    mine = next(f for f in report.per_rank if f.rank == s.rank)
    step = mine.step_us
    if not step or s.caused_wait_us / step < options["min_share"]:
        return []
    others = [f for f in report.per_rank if f.rank != s.rank]
    compute_over = mine.compute_us - min(f.compute_us for f in others)
    # a straggler, not jitter: last more often than chance explains, or (on a few calls, where no
    # count can be rare) its own extra compute accounts for at least half the wait it causes
    if s.chance > options["max_chance"] and compute_over < s.caused_wait_us / 2:
        return []
    waits = ", ".join(f"rank {r} {ms(us)}" for r, us in s.others_wait_us.items())
    return [
        finding(
            t,
            CODE,
            f"rank {s.rank} reaches the collectives last ({s.last_arrivals} of {s.calls} calls over {len(report.steps)} steps "
            f"of {len(report.ranks)} ranks): per step the others wait for it ({waits}), at least {ms(s.caused_wait_us)} "
            f"({share(s.caused_wait_us, step)} of the step; the others' AL507 prices their exposed communication without it); its {report.compute_on} compute per step is {ms(mine.compute_us)}, "
            f"{ms(compute_over)} over the fastest rank's",
            saving_us=s.caused_wait_us,
            alternative="balance the work before the collectives: the same batch size and sequence lengths on every rank "
            "(pad or bucket by length), no extra work on this rank (logging, evaluation, checkpointing on rank 0 only "
            "between collectives), the same GPU clocks and data loading speed (AL501)",
            evidence={
                "straggler": s.rank,
                "last_arrivals": s.last_arrivals,
                "calls": s.calls,
                "caused_wait_us": round(s.caused_wait_us, 3),
                "chance": float(f"{s.chance:.3g}"),
                "others_wait_us": {str(r): round(us, 3) for r, us in s.others_wait_us.items()},
                "compute_over_fastest_us": round(compute_over, 3),
                "basis_note": "the smallest of the other ranks' waits on the calls this rank reached last, per step "
                "(transfer = the shortest duration of a call among the ranks, as HTA)",
            },
        )
    ]
