"""What torch.compile took on this model here before, for --what-if's estimate of its duration.

The estimate said before the what-ifs start counts compiling by a formula (run.compile_seconds: a
fixed part and a part per op, times the machine's load), measured with inductor's on-disk cache
empty. A second run on the same model finds that cache full: torch.compile then loads its
compiled graphs instead of generating and building C++, 12-15× faster (resnet18 at 1×3×64×64:
23.5 s cold, 1.9 s warm; mobilenet_v3_small 59.5 s and 4.0 s, this 2-core CPU), and the estimate
was 3-7× the time taken. So each compile of --what-if is recorded, by the model's op graph, with
the files it added to inductor's cache: the next run on the same graph estimates from that record,
warm where those files are still there, cold (the recorded time, scaled by the load) where they are
not. The record is a JSON file beside the roofline cache (archlint.model.timing.roofline.cache_dir),
written whole through the one writer; one that cannot be read or written costs only the record.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from archlint.errors import UsageError
from archlint.model import opgraph
from archlint.model.timing.roofline import cache_dir

RECORD_FILE = "compiles.json"
# A warm compile (every graph from inductor's cache) over the cold one that filled the cache: 0.081
# (resnet18) and 0.067 (mobilenet_v3_small) measured here; the estimate takes the higher side, until
# a warm compile of the model has been recorded itself.
WARM_SHARE = 0.1
# ... but never below a warm compile's own part (dynamo's trace, AOTAutograd, loading the built
# kernels): TinyNet's took 1.3-3 s, resnet18's 1.9 s, mobilenet_v3_small's 4.0 s here, at a load of 1.
WARM_FIXED_S = 2.0
# Compiling slows with the machine's load per core less than in proportion: its C++ builds run in
# worker processes (run.compile_seconds, fitted on this 2-core CPU at loads 1-6).
LOAD_POWER = 0.75
KEEP = 200  # records kept, the newest: one a model compiled with --what-if


@dataclass(frozen=True)
class Recorded:
    """One model's compiles here: the cold one's seconds and machine load, the files it added to
    inductor's cache (relative to `folder`), and the last warm one's seconds and load, if any."""

    cold_s: float
    load: float
    folder: str
    files: tuple[str, ...]
    warm_s: float | None = None
    warm_load: float = 1.0


def graph_key(graph, device: object = "") -> str:
    """A digest of what torch.compile would compile: each op's kind, shapes and dtype in order, the
    inputs' shapes and memory format, the device it compiles for, the torch version. A change of
    the model's forward, of its input, of the device or of torch is another key (and a cold
    compile, which inductor's cache would not answer either)."""
    rows = [
        torch.__version__,
        str(device),
        str(graph.graph.get("input_shapes")),
        str(graph.graph.get("dtype")),
        str(graph.graph.get("memory_format")),
    ]
    for _, node in opgraph.ops(graph):
        rows.append(f"{node.get('op')}|{node.get('in_shapes')}|{node.get('out_shapes')}|{node.get('dtype')}")
    return hashlib.sha256("\n".join(rows).encode("utf-8")).hexdigest()


def inductor_folder() -> Path | None:
    """Inductor's on-disk cache (TORCHINDUCTOR_CACHE_DIR, else its default), or None where this
    torch does not say where it is."""
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir as inductor_cache_dir
    except ImportError:
        return None
    return Path(inductor_cache_dir())


def files_in(folder: Path | None) -> set[str]:
    """The files under `folder` (relative paths; inductor's lock files left out)."""
    if folder is None or not folder.is_dir():
        return set()
    found: set[str] = set()
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if d != "locks"]
        found.update(str(Path(root, n).relative_to(folder)) for n in names)
    return found


def _path() -> Path:
    return cache_dir() / RECORD_FILE


def _read() -> dict:
    try:
        data = json.loads(_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):  # absent or corrupt: no record, the formula's estimate
        return {}
    return data if isinstance(data, dict) else {}


def recorded(key: str) -> Recorded | None:
    return _parsed(_read().get(key))


def _parsed(entry) -> Recorded | None:
    if not isinstance(entry, dict):
        return None
    try:
        return Recorded(
            float(entry["cold_s"]),
            float(entry["load"]),
            str(entry["folder"]),
            tuple(str(f) for f in entry["files"]),
            None if entry.get("warm_s") is None else float(entry["warm_s"]),
            float(entry.get("warm_load", 1.0)),
        )
    except (TypeError, KeyError, ValueError):  # none, or one written by hand or by another version
        return None


def expected(record: Recorded | None, formula_s: float, load: float) -> tuple[float, str]:
    """(seconds, basis) of the next compile: from the record where there is one, else `formula_s`."""
    if record is None:
        return formula_s, ""
    folder = inductor_folder()
    warm = (
        folder is not None
        and str(folder) == record.folder
        and bool(record.files)
        and all((folder / f).exists() for f in record.files)
    )
    scaled = at_load(record.cold_s, record.load, load)
    if not warm:
        return scaled, f"its last cold compile here ({record.cold_s:.1f} s at a load of {record.load:.1f} per core)"
    if record.warm_s is not None:
        return at_load(record.warm_s, record.warm_load, load), (
            f"its last compile here, from inductor's cache ({record.warm_s:.1f} s; the cache still holds it)"
        )
    return max(WARM_SHARE * scaled, at_load(WARM_FIXED_S, 1.0, load)), (
        f"{WARM_SHARE:g} of its last cold compile here ({record.cold_s:.1f} s), {WARM_FIXED_S:g} s at least: "
        "inductor's cache still holds it"
    )


def at_load(seconds: float, measured_at: float, load: float) -> float:
    """A compile's `seconds`, measured at a load of `measured_at` per core, at `load` instead."""
    return seconds * (max(load, 1.0) / max(measured_at, 1.0)) ** LOAD_POWER


def remember(key: str, seconds: float, added: set[str], load: float) -> str | None:
    """Record a compile of `seconds` that added `added` to inductor's cache (none: it was answered
    from the cache); None, or a note where the record could not be written."""
    folder = inductor_folder()
    if folder is None:
        return None
    data = _read()
    old = _parsed(data.get(key))  # from the same reading as `data` (another run may rewrite the file)
    if old is not None and old.folder != str(folder):
        old = None  # another inductor cache: that record says nothing of this one
    if not added and old is None:
        return None  # answered from a cache filled before any record: neither its cold time nor its files known
    if added or old is None:  # a cold compile: the files it made
        entry = {"cold_s": round(seconds, 3), "load": round(load, 2), "folder": str(folder), "files": sorted(added)}
    else:
        entry = {**data[key], "warm_s": round(seconds, 3), "warm_load": round(load, 2)}
    entry["at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    data.pop(key, None)
    data[key] = entry  # the newest last: the oldest go first past KEEP
    data = dict(list(data.items())[-KEEP:])
    from archlint.outputs import write_text

    try:  # whole or not at all: two runs never read half a file
        write_text(_path(), json.dumps(data, indent=1), "the compile record")
    except UsageError as exc:
        print(f"archlint: warning: {exc}; the next --what-if estimates compiling by its formula", file=sys.stderr)
        return f"compile time not recorded ({exc})"
    return None
