"""Where in the user's code a trace finding points: the call site of the host events it is about.

With stacks, each Python call in the trace says the line it was made from (`args.CallFrom`,
archlint.trace.frames); the innermost call made from a user's line around an event is its call
site, in the innermost user function around it. Without call sites, that function's line (its
`def`). An `aten::item` with no blocking call inside it read a CPU tensor: no sync to point at.
Pure functions of TraceData; no torch.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from archlint.trace import frames as frames_mod
from archlint.trace.read import Range, TraceData

_FRAME = re.compile(r"^(?P<file>.+?\.py)\((?P<line>\d+)\): (?P<func>.+)$")


def gpu_items(data: TraceData, blocking_calls: list[Range]) -> list[Range]:
    """The aten::item calls that wait for the GPU (a blocking copy or sync inside them, on their
    thread); the others read a CPU tensor and synchronise nothing."""
    by_tid: dict[Any, list[Range]] = defaultdict(list)
    for r in blocking_calls:
        by_tid[r.tid].append(r)
    starts = {tid: sorted(r.ts for r in rs) for tid, rs in by_tid.items()}
    out = []
    for r in data.item_calls:
        ts = starts.get(r.tid, [])
        k = bisect.bisect_left(ts, r.ts)
        if k < len(ts) and ts[k] < r.end:
            out.append(r)
    return out


def locations(data: TraceData, blocking: list[Range], gpu_items: list[Range]) -> dict[str, tuple[str, int, str]]:
    """For each host event kind a finding points at (sync, dataloader, memcpy), the user's line
    that issued its longest occurrences, when the trace has stacks: the innermost call made from a
    user's line around it (`args.CallFrom`, trace/frames.py), in the innermost user function
    around it; without call sites, that function's line (its `def`)."""
    if not data.frames and not data.call_sites:
        return {}
    frames_by = _by_tid(data.frames)
    sites_by = _by_tid(data.call_sites)
    kinds = {
        "sync": blocking + gpu_items,  # an .item() on a CPU tensor is no sync
        "dataloader": data.dataloader,
        "memcpy": [r for r, _ in data.memcpy_calls],
    }
    out = {}
    for what, ranges in kinds.items():
        votes: dict[tuple[str, int, str], float] = defaultdict(float)
        for r in ranges:
            frame = _innermost(frames_by.get(r.tid), r)
            m = _FRAME.match(frame.name) if frame else None
            site = _innermost(sites_by.get(r.tid), r)
            parsed = frames_mod.parse_call_site(site.name) if site else None
            if parsed and (m is None or Path(parsed[0]).name == Path(m["file"]).name):
                votes[(parsed[0], parsed[1], m["func"] if m else "<module>")] += r.dur
            elif m:
                votes[(m["file"], int(m["line"]), m["func"])] += r.dur
        if votes:
            out[what] = max(sorted(votes), key=votes.get)  # ties: one answer on every run
    return out


def _by_tid(ranges: list[Range]) -> dict[Any, tuple[list[Range], list[float]]]:
    by: dict[Any, list[Range]] = defaultdict(list)
    for f in ranges:
        by[f.tid].append(f)
    out = {}
    for tid, rs in by.items():
        rs.sort(key=lambda r: r.ts)
        out[tid] = (rs, [r.ts for r in rs])
    return out


def _innermost(indexed: tuple[list[Range], list[float]] | None, r: Range) -> Range | None:
    """The latest-starting range that contains r (nesting on one thread: the innermost)."""
    if not indexed:
        return None
    ranges, starts = indexed
    k = bisect.bisect_right(starts, r.ts)
    for f in reversed(ranges[max(0, k - 200) : k]):
        if f.end >= r.end:
            return f
    return None
