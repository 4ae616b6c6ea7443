"""Read a torch.profiler (Kineto) Chrome trace into compact columns: the reader layer.

One pass over the streamed events (archlint.trace.scan) keeps only what the analysis needs, in
arrays of machine numbers rather than dicts: the GPU events (kernels, memcpy, memset, sync waits)
and the host events that explain them (kernel launches, synchronisations, copies, DataLoader
`__next__`, ProfilerStep ranges, module and user annotations, the user's own Python frames when
the trace has stacks, memory counters). Never imports torch.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archlint.trace import frames
from archlint.trace.scan import STDIN, Truncated, events

_STEP = re.compile(r"ProfilerStep\s*#\s*(\d{1,18})(?!\d)", re.ASCII)
_LAUNCH = re.compile(r"LaunchKernel|LaunchCooperativeKernel|GraphLaunch|ModuleLaunchKernel|hipExtLaunch|cuLaunch", re.I)
_SYNC = re.compile(r"(cuda|hip)(Stream|Device|Event|Context)Synchroni[sz]e|cuCtxSynchronize|cuStreamSynchronize", re.I)
_ALLOC = re.compile(r"^(cuda|hip)(Malloc|Free)(Async)?$|^cuMem(Alloc|Free)", re.I)
_MEMCPY = re.compile(r"^(cuda|hip)Memcpy", re.I)
# host ops in which the thread is blocked, no compute: a wait (c10d::wait, wait_tensor) or a collective's
# own call (c10d::allreduce_ and the rest can block for the whole transfer, and so does the autograd node
# whose DDP hook made the call); their time is taken out of the thread's busy time (analyze._host_lanes)
_BLOCKED = re.compile(r"wait|^c10d::|^record_param_comms$", re.I)
_USER_FRAME = re.compile(r"^(?P<file>.+?\.py)\((?P<line>\d+)\): (?P<func>.+)$")
SLOW_CALL_US = 1_000.0  # runtime calls this long are kept: start-up (context, handles, lazy modules), allocator misses
GRAPH_LAUNCH = 2  # launch_is_kernel's value for a CUDA/HIP graph replay (1: a kernel launch, 0: other calls)
_DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "c10::Float": 4,
    "double": 8,
    "c10::Double": 8,
    "half": 2,
    "c10::Half": 2,
    "bfloat16": 2,
    "c10::BFloat16": 2,
    "c10::BFloat": 2,
    "int": 4,
    "long": 8,
    "long int": 8,
    "int64": 8,
    "signed char": 1,
    "unsigned char": 1,
    "char": 1,
    "bool": 1,
    "c10::Float8_e4m3fn": 1,
}
_DATA_PARALLEL_OP = re.compile(r"^(Broadcast|ReduceAddCoalesced|Gather|Scatter)$|(?<!Distributed)DataParallel")
_STREAM_TID = re.compile(r"stream\s*(\d{1,9})$", re.ASCII)  # torch 1.8's GPU rows: tid "stream 7"


def is_dataloader(name: str) -> bool:
    """A DataLoader `__next__` range (`enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`).
    String searches, not the regex `DataLoader.*__next__`: that one backtracks over the rest of
    the name at every "DataLoader" in it (quadratic in a long name). The first "DataLoader" is the
    one with the most text after it, so it alone decides."""
    if "_SingleProcessDataLoaderIter" in name or "_MultiProcessingDataLoaderIter" in name:
        return True
    i = name.find("DataLoader")
    return i >= 0 and name.find("__next__", i + 10) >= 0


@dataclass(slots=True)
class Range:
    """A host-side interval (µs) on one thread."""

    name: str
    ts: float
    dur: float
    tid: Any

    @property
    def end(self) -> float:
        return self.ts + self.dur


@dataclass
class TraceData:
    """Everything the analysis reads from one trace file; times in µs as the trace has them."""

    file: str
    rank: int | None = None
    world_size: int | None = None
    devices: list[dict] = field(default_factory=list)  # deviceProperties, as written
    events: int = 0
    truncated: bool = False  # the file ended inside the event array (a cut trace)
    # GPU events (columns): start, duration, correlation id, device, name index, category index
    gpu_ts: array = field(default_factory=lambda: array("d"))
    gpu_dur: array = field(default_factory=lambda: array("d"))
    gpu_corr: array = field(default_factory=lambda: array("q"))
    gpu_device: array = field(default_factory=lambda: array("q"))
    gpu_name: array = field(default_factory=lambda: array("l"))
    gpu_cat: array = field(default_factory=lambda: array("b"))
    gpu_stream: array = field(default_factory=lambda: array("q"))
    gpu_bytes: array = field(default_factory=lambda: array("q"))  # a copy's bytes (args.bytes), else -1
    names: list[str] = field(default_factory=list)  # interned GPU event names
    categories: list[str] = field(default_factory=list)
    # kernel launches and other runtime calls that carry a correlation id (columns)
    launch_corr: array = field(default_factory=lambda: array("q"))
    launch_ts: array = field(default_factory=lambda: array("d"))
    launch_dur: array = field(default_factory=lambda: array("d"))
    launch_tid: list = field(default_factory=list)
    launch_is_kernel: array = field(default_factory=lambda: array("b"))
    steps: list[tuple[int, Range]] = field(default_factory=list)  # (N, ProfilerStep#N range)
    dataloader: list[Range] = field(default_factory=list)
    syncs: list[Range] = field(default_factory=list)  # cuda*Synchronize calls
    memcpy_calls: list[tuple[Range, int]] = field(default_factory=list)  # (cudaMemcpy* call, correlation)
    alloc_calls: list[Range] = field(default_factory=list)  # cudaMalloc/cudaFree: the caching allocator's misses
    item_calls: list[Range] = field(default_factory=list)  # aten::item / _local_scalar_dense
    annotations: list[Range] = field(default_factory=list)  # nn.Module ranges and user annotations
    frames: list[Range] = field(default_factory=list)  # the user's Python frames ("file.py(12): fn")
    data_parallel_ops: int = 0
    peak_allocated: dict[int, int] = field(default_factory=dict)  # device → bytes, from [memory] events
    peak_reserved: dict[int, int] = field(default_factory=dict)
    # what the reader set right, said in the analysis' notes
    skipped: int = 0  # complete events whose ts or dur is not a finite number (a string, NaN, 1e400): left out
    negative: int = 0  # events with a negative duration: counted as 0 µs
    negative_min_us: float = 0.0  # the most negative of them
    categories_seen: set = field(default_factory=set)  # the old (torch 1.8-1.10) category names met, as written
    # read by trace/windows.py and trace/queue.py: start-up calls, graph replays, stacks, collectives
    slow_calls: list[Range] = field(default_factory=list)  # runtime/driver calls of SLOW_CALL_US or more
    graph_launches: int = 0  # cudaGraphLaunch / hipGraphLaunch calls (their kernels' interiors go untraced)
    python_events: int = 0  # python_function events: with_stack=True (its overhead inflates host time)
    collectives: list[tuple[Range, int | None]] = field(default_factory=list)  # (nccl:* / record_param_comms, bytes)
    call_sites: list[Range] = field(default_factory=list)  # Python calls made from a user's line ("file.py:LINE")
    # a CPU job's collectives as they run (gloo:* ranges on gloo's worker threads: from when the rank's
    # worker starts the op to when its data has moved, as a GPU collective kernel), with their bytes
    host_collectives: list[tuple[Range, int | None]] = field(default_factory=list)
    # a CPU job's busy time per thread: each operator's range (cpu_op: ATen ops, autograd nodes; not a
    # user annotation or module range, which may span a wait, nor an op that waits), merged as read (a
    # range inside or overlapping the thread's last one extends it): its compute, what can overlap its
    # collectives (trace/analyze.py _host_lanes)
    host_busy: dict[Any, array] = field(default_factory=dict)  # tid → flat (start, end, start, end, ...)
    host_blocked: dict[Any, array] = field(default_factory=dict)  # the same of the ops that block (_BLOCKED)

    @property
    def gpu_events(self) -> int:
        return len(self.gpu_ts)


def read_trace(path: Path) -> TraceData:
    """One pass over a trace file; a file cut mid-write gives what came before the cut."""
    data = TraceData(file="<stdin>" if str(path) == STDIN else str(path))
    name_index: dict[str, int] = {}
    cat_index: dict[str, int] = {}
    cats: dict[str, str] = {}

    def header(key: str, value: Any) -> None:
        if key == "distributedInfo" and isinstance(value, dict):
            data.rank = _int(value.get("rank"))
            data.world_size = _int(value.get("world_size"))
        elif key == "deviceProperties" and isinstance(value, list):
            data.devices = [d for d in value if isinstance(d, dict)][:1024]

    stream = events(path, header)
    try:
        for e in stream:
            data.events += 1
            _take(e, data, name_index, cat_index, cats)
    except Truncated:
        data.truncated = True
    return data


# Kineto's event categories over torch's releases, each to the name the reader uses. torch 1.8
# wrote its own names ("Operator", "Runtime", "Kernel", "Memcpy", "Memset", "Python", "Trace", as
# the TensorBoard plugin still reads them); later releases write libkineto's ActivityType names
# (cpu_op, user_annotation, gpu_user_annotation — "gpu_user_Annotation" in some builds —,
# gpu_memcpy, gpu_memset, kernel, cuda_runtime, cuda_driver, cuda_sync, python_function, ...).
# Looked up as written, then case-folded; a category not listed is kept as it is (HTA's rule then
# decides: an event with an integer stream is a GPU event).
_CANONICAL = {
    "operator": "cpu_op",
    "cpu_op": "cpu_op",
    "user_annotation": "user_annotation",
    "gpu_user_annotation": "gpu_user_annotation",
    "runtime": "cuda_runtime",
    "cuda_runtime": "cuda_runtime",
    "hip_runtime": "cuda_runtime",
    "privateuse1_runtime": "cuda_runtime",
    "xpu_runtime": "cuda_runtime",
    "mtia_runtime": "cuda_runtime",
    "driver": "cuda_driver",
    "cuda_driver": "cuda_driver",
    "privateuse1_driver": "cuda_driver",
    "kernel": "kernel",
    "memcpy": "gpu_memcpy",
    "gpu_memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
    "gpu_memset": "gpu_memset",
    "python": "python_function",
    "python_function": "python_function",
    "trace": "Trace",
}
OLD_CATEGORIES = frozenset(("Operator", "Runtime", "Kernel", "Memcpy", "Memset", "Python", "Driver"))
# GPU categories: an event of one without an integer `stream` arg takes its stream from a "stream N" tid (torch 1.8).
_GPU = frozenset(("kernel", "gpu_memcpy", "gpu_memset"))
# Host-side categories: never GPU events, whatever their args say (checked first: most events are these).
_HOST = frozenset(
    (
        "cpu_op",
        "python_function",
        "user_annotation",
        "cuda_runtime",
        "cuda_driver",
        "gpu_user_annotation",
        "Trace",
        "cpu_instant_event",
        "python_function_event",
        "overhead",
        "",
    )
)
# The cpu_op / annotation names the analysis reads (one regex test per host event).
_INTEREST = re.compile(
    r"ProfilerStep|DataLoader|^aten::(item|_local_scalar_dense)$|^(Broadcast|ReduceAddCoalesced|Gather|Scatter)$"
    r"|DataParallel|^record_param_comms$"
)


def canonical(cat: str, seen: dict[str, str]) -> str:
    """The reader's name of category `cat` (cached in `seen`, one entry per distinct category)."""
    name = seen.get(cat)
    if name is None:
        name = seen[cat] = _CANONICAL.get(cat, _CANONICAL.get(cat.lower(), cat))
    return name


def _take(
    e: dict, data: TraceData, name_index: dict[str, int], cat_index: dict[str, int], cats: dict[str, str]
) -> None:
    # Every field is checked for its type: a trace is outside input, and one odd event (a list for
    # `args`, a string for `ts`) is left out or read as empty, never an error for the whole file.
    ph = e.get("ph")
    if ph != "X":
        if (ph == "i" or ph == "I") and e.get("name") == "[memory]":
            args = e.get("args")
            if type(args) is dict:
                _memory(args, data)
        return
    raw = e.get("cat")
    if type(raw) is not str:
        raw = ""
    cat = cats.get(raw)
    if cat is None:
        cat = canonical(raw, cats)
    if cat != raw and raw in OLD_CATEGORIES:
        data.categories_seen.add(raw)
    name = e.get("name")
    if type(name) is not str:
        name = "" if name is None else str(name)[:200]
    if cat == "cpu_op":  # the most frequent kind: only a few names matter
        if _INTEREST.search(name):
            _host_op(e, name, cat, data)
        # a CPU job's busy time: not read for a GPU trace's (deviceProperties in the header, or a GPU event seen)
        if not data.devices and not data.gpu_ts and _STEP.match(name) is None:
            _busy(e, data, data.host_blocked if _BLOCKED.search(name) else data.host_busy)
        return
    ts, dur = e.get("ts"), e.get("dur")
    if ts is None or dur is None:  # not a complete event
        return
    if not (type(ts) is float and type(dur) is float and -_LIMIT < ts < _LIMIT and 0.0 <= dur < _LIMIT):
        times = _times(ts, dur, data)  # the fast test above passes what Kineto writes; the rest here
        if times is None:
            return
        ts, dur = times
    args = e.get("args")
    if type(args) is not dict:
        args = {}
    if cat not in _HOST:
        stream = _int(args.get("stream"))
        if stream is None and cat in _GPU:
            tid = e.get("tid")
            m = _STREAM_TID.match(tid) if type(tid) is str else None
            stream = int(m.group(1)) if m else None
        if stream is not None and stream != -1:  # a GPU event, as HTA counts them: an integer stream
            if data.host_busy or data.host_blocked:  # a GPU trace: the host's busy time is not read (a CPU job's only)
                data.host_busy.clear()
                data.host_blocked.clear()
            index = name_index.get(name)
            if index is None:
                index = name_index[name] = len(data.names)
                data.names.append(name)
            c = cat_index.get(cat)
            if c is None:
                c = cat_index[cat] = len(data.categories)
                data.categories.append(cat)
            corr = _int(args.get("correlation"))
            device = _int(args.get("device"))
            data.gpu_ts.append(ts)
            data.gpu_dur.append(dur)
            data.gpu_corr.append(-1 if corr is None else corr)
            data.gpu_device.append(-1 if device is None else device)
            data.gpu_name.append(index)
            data.gpu_cat.append(c)
            data.gpu_stream.append(stream)
            nbytes = _int(args.get("bytes")) if "bytes" in args else None  # copies (and memsets) say it
            data.gpu_bytes.append(-1 if nbytes is None else nbytes)
        return
    tid = e.get("tid")
    if type(tid) is not int and type(tid) is not str and tid is not None:
        tid = _tid(tid)
    if cat == "cuda_runtime" or cat == "cuda_driver":
        corr = _int(args.get("correlation"))
        if corr is not None:
            data.launch_corr.append(corr)
            data.launch_ts.append(ts)
            data.launch_dur.append(dur)
            data.launch_tid.append(tid)
            graph = "GraphLaunch" in name  # cudaGraphLaunch, hipGraphLaunch, cuGraphLaunch
            data.launch_is_kernel.append(GRAPH_LAUNCH if graph else 1 if _LAUNCH.search(name) else 0)
            data.graph_launches += graph
        if dur >= SLOW_CALL_US:
            data.slow_calls.append(Range(name, ts, dur, tid))
        if _ALLOC.search(name):
            data.alloc_calls.append(Range(name, ts, dur, tid))
        elif _SYNC.search(name):
            data.syncs.append(Range(name, ts, dur, tid))
        elif _MEMCPY.match(name):
            data.memcpy_calls.append((Range(name, ts, dur, tid), -1 if corr is None else corr))
        return
    if cat == "python_function":
        data.python_events += 1
        if name.startswith("nn.Module: "):
            data.annotations.append(Range(name[11:], ts, dur, tid))
            if name.startswith("nn.Module: DataParallel"):
                data.data_parallel_ops += 1
        elif is_dataloader(name):
            data.dataloader.append(Range(name, ts, dur, tid))
        elif _USER_FRAME.match(name) and not frames.is_library(name):
            data.frames.append(Range(name, ts, dur, tid))
        site = frames.call_site(args.get("CallFrom"))  # the user's line this call was made from
        if site is not None:
            data.call_sites.append(Range(site, ts, dur, tid))
        return
    if cat == "gpu_user_annotation":  # the GPU-side projection of a host range: the host's is read
        return
    if _INTEREST.search(name):
        _host_op(e, name, cat, data)
    elif cat == "user_annotation":
        data.annotations.append(Range(name, ts, dur, tid))
        if name.startswith("nccl:"):
            data.collectives.append((Range(name[5:], ts, dur, tid), _message_bytes(args)))
        elif name.startswith("gloo:"):  # gloo runs the collective on its worker thread: this range is the run
            run = (Range(name[5:], ts, dur, tid), _message_bytes(args))
            data.collectives.append(run)
            data.host_collectives.append(run)


def _busy(e: dict, data: TraceData, into: dict[Any, array]) -> None:
    """One host op's range into its thread's busy (or blocked) time (TraceData.host_busy, host_blocked)."""
    ts, dur = e.get("ts"), e.get("dur")
    if not (type(ts) is float and type(dur) is float and -_LIMIT < ts < _LIMIT and 0.0 <= dur < _LIMIT):
        ts, dur = _finite(ts), _finite(dur)
        if ts is None or dur is None:  # (not counted: the event is not one the analysis reads otherwise)
            return
        dur = max(dur, 0.0)
    tid = e.get("tid")
    if type(tid) is not int:
        tid = _tid(tid)
    spans = into.get(tid)
    if spans is None:
        into[tid] = array("d", (ts, ts + dur))
    elif spans[-2] <= ts <= spans[-1]:
        if ts + dur > spans[-1]:
            spans[-1] = ts + dur
    else:
        spans.extend((ts, ts + dur))


def _host_op(e: dict, name: str, cat: str, data: TraceData) -> None:
    """A host range whose name the analysis reads: a step, the DataLoader, .item(), DataParallel."""
    ts, dur = e.get("ts"), e.get("dur")
    if ts is None or dur is None:
        return
    times = _times(ts, dur, data)
    if times is None:
        return
    ts, dur = times
    tid = _tid(e.get("tid"))
    step = _STEP.match(name)
    if step:
        data.steps.append((int(step.group(1)), Range(name, ts, dur, tid)))
    elif is_dataloader(name):
        data.dataloader.append(Range(name, ts, dur, tid))
    elif name in ("aten::item", "aten::_local_scalar_dense"):
        data.item_calls.append(Range(name, ts, dur, tid))
    elif name == "record_param_comms":  # torch.distributed's collective record (newer torch): named in its args
        args = e.get("args")
        collective = args.get("Collective name") if type(args) is dict else None
        if isinstance(collective, str) and collective:
            data.collectives.append((Range(collective, ts, dur, tid), _message_bytes(args)))
    else:
        if _DATA_PARALLEL_OP.search(name):
            data.data_parallel_ops += 1
        if cat == "user_annotation":
            data.annotations.append(Range(name, ts, dur, tid))


def _times(ts: Any, dur: Any, data: TraceData) -> tuple[float, float] | None:
    """An event's (ts, dur) as finite floats, a negative duration as 0 (counted); None for one
    that is not a finite number (a string, NaN, 1e400: counted as skipped)."""
    ts, dur = _finite(ts), _finite(dur)
    if ts is None or dur is None:
        data.skipped += 1
        return None
    if dur < 0:
        data.negative += 1
        data.negative_min_us = min(data.negative_min_us, dur)
        dur = 0.0
    return ts, dur


_LIMIT = 1e18  # µs: 31,000 years; anything beyond is not a time


def _finite(value: Any) -> float | None:
    kind = type(value)
    if kind is float:
        return value if -_LIMIT < value < _LIMIT else None  # False for NaN and ±inf too
    if kind is int:
        return float(value) if -_LIMIT < value < _LIMIT else None
    return None


def _tid(value: Any) -> Any:
    """A thread id as a dict key: an int or string as written; anything else (a list) as its text."""
    kind = type(value)
    return value if kind is int or kind is str or value is None else repr(value)[:100]


def _message_bytes(args: dict) -> int | None:
    """A collective's message size: `In msg nelems` × dtype (record_param_comms), or the first input's
    dims × type (nccl:* annotations of older torch); None when the trace does not say."""
    nelems = _int(args.get("In msg nelems"))
    dtype = args.get("dtype")
    if nelems is None:
        dims, types = args.get("Input Dims"), args.get("Input type")
        if isinstance(dims, list) and dims and isinstance(dims[0], list) and dims[0]:
            nelems = 1
            for d in dims[0]:
                nelems = nelems * d if isinstance(d, int) else 0
        dtype = types[0] if isinstance(types, list) and types else None
    size = _DTYPE_BYTES.get(dtype) if isinstance(dtype, str) else None
    return nelems * size if nelems and size else None


def _memory(args: dict, data: TraceData) -> None:
    device = _int(args.get("Device Id"))
    if device is None or device < 0 or _int(args.get("Device Type")) == 0:  # the CPU's counters
        return
    for key, peaks in (("Total Allocated", data.peak_allocated), ("Total Reserved", data.peak_reserved)):
        value = _int(args.get(key))
        if value is not None and value > peaks.get(device, -1):
            peaks[device] = value


_INT64 = 1 << 63


def _int(value: Any) -> int | None:
    """An integer field (a correlation id, a device, a stream) as a 64-bit int, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, str) and 0 < len(value) <= 20:
        try:
            value = int(value)
        except ValueError:
            return None
    if isinstance(value, int) and -_INT64 <= value < _INT64:
        return value
    return None
