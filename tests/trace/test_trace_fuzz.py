"""Fuzzing `archlint trace` over trace files (issue 38): field types, sizes, nesting, encodings,
the category names of every torch release since 1.8, gzip shapes. Every file gets a report or
one line naming its problem (exit 2): never a traceback, never an internal error."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archlint import cli
from tests.trace.synth import GEMM, RELEASES, release_trace

CATEGORIES = sorted(
    {v for r in RELEASES.values() for k, v in r.items() if isinstance(v, str)}
    | {
        "cuda_sync",
        "cpu_instant_event",
        "python_function",
        "overhead",
        "Trace",
        "Python",
        "Driver",
        "ac2g",
        "fwdbwd",
        "gpu_user_Annotation",
        "external_correlation",
        "cuda_profiler_range",
        "glow_runtime",
        "xpu_runtime",
        "KERNEL",
        "",
    }
)
NAMES = [
    GEMM,
    "ProfilerStep#3",
    "ProfilerStep#",
    "ProfilerStep#99999999999999999999",
    "cudaLaunchKernel",
    "cuLaunchKernel",
    "cudaDeviceSynchronize",
    "cudaMemcpyAsync",
    "cudaMalloc",
    "Memcpy DtoH (Device -> Pageable)",
    "Memcpy HtoD (Pageable -> Device)",
    "Memset (Device)",
    "nn.Module: DataParallel",
    "aten::item",
    "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
    "train.py(12): step",
    "ncclKernel_AllReduce",
    "[memory]",
    "Stream Sync",
    "Broadcast",
    "\x1b[31m\u202e\udc80",
    "DataLoader" * 50,
    "ampere_sgemm_128x64_tn\udc80\x1b[31m",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from([1e308, -1e308, 0.5, 7, -1]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8,
)
numbers = st.one_of(st.floats(min_value=-1e6, max_value=1e7), st.integers(min_value=-10, max_value=10**7), values)
args = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "stream": st.one_of(st.sampled_from([7, -1, 0]), values),
            "correlation": st.one_of(st.integers(0, 20), values),
            "device": st.one_of(st.integers(-1, 2), values),
            "Device Id": st.one_of(st.integers(-1, 2), values),
            "Device Type": st.one_of(st.integers(0, 1), values),
            "Total Allocated": st.one_of(st.integers(0, 2**40), values),
            "Total Reserved": st.one_of(st.integers(0, 2**40), values),
        },
    ),
    values,
)
events = st.fixed_dictionaries(
    {"ph": st.one_of(st.sampled_from(["X", "X", "X", "i", "s", "f", "M"]), values)},
    optional={
        "cat": st.one_of(st.sampled_from(CATEGORIES), values),
        "name": st.one_of(st.sampled_from(NAMES), values),
        "ts": numbers,
        "dur": numbers,
        "tid": st.one_of(st.sampled_from([1, "stream 7", 7]), values),
        "pid": values,
        "args": args,
    },
)


def _document(release, extra, position, headers):
    doc = release_trace(release, steps_n=2)
    k = position % (len(doc["traceEvents"]) + 1)
    doc["traceEvents"][k:k] = extra
    doc.update(headers)
    return doc


documents = st.builds(
    _document,
    st.sampled_from(sorted(RELEASES)),
    st.lists(events, max_size=6),
    st.integers(0, 10**6),
    st.fixed_dictionaries(
        {}, optional={"deviceProperties": values, "distributedInfo": values, "schemaVersion": values}
    ),
)


def _encode(doc, indent, shape, cut, bom, depth) -> bytes:
    text = json.dumps(doc, indent=indent, allow_nan=True)  # NaN and Infinity: Python writes them, Chrome does not
    if depth:
        text = text.replace('"traceEvents": [', '"traceEvents": [{"args": ' + "[" * depth + "]" * depth + "}, ", 1)
    data = ("\ufeff" if bom else "").encode() + text.encode("utf-8", "surrogatepass")
    if shape == "gzip":
        data = gzip.compress(data)
    elif shape == "gzip twice":
        data = gzip.compress(gzip.compress(data))
    elif shape == "latin-1":
        data = text.encode("latin-1", "replace")
    elif shape == "utf-16":  # not a trace's encoding: one line, exit 2
        data = text.encode("utf-16", "surrogatepass")
    if cut is not None:
        data = data[: math.floor(len(data) * cut)]
    return data


files = st.builds(
    _encode,
    documents,
    st.sampled_from([None, 0, 2]),
    st.sampled_from(["plain", "plain", "gzip", "gzip twice", "latin-1", "utf-16"]),
    st.one_of(st.none(), st.floats(0, 1)),
    st.booleans(),
    st.sampled_from([0, 0, 0, 50, 5000]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=files, fmt=st.sampled_from(["text", "json", "sarif"]))
def test_no_traceback_on_any_trace_file(tmp_path_factory, data, fmt):
    path = tmp_path_factory.mktemp("fuzz") / "t.json"
    path.write_bytes(data)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["trace", str(path), "--output-format", fmt, "--timeout", "60"])
    err = err.getvalue()
    assert code in (0, 1, 2), err
    assert "internal error" not in err and "Traceback" not in err, err
    if code == 2:  # one line naming the problem
        assert len(err.strip().splitlines()) == 1 and err.startswith("archlint: error:"), err
    out.getvalue().encode("utf-8")  # strict: no lone surrogate reaches the report
    if fmt != "text" and code != 2:
        json.loads(out.getvalue())
