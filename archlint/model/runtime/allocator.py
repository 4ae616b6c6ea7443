"""The host allocator kept warm while archlint times on the CPU.

glibc's malloc hands large freed blocks back to the OS (munmap, heap trimming) and takes fresh,
zero-filled pages for the next pass, so a pass pays page faults whose number depends on the
process's history rather than on the model: the same BatchNorm fold measured a 1.2 ms saving in
one process and 7 ms in another (mobilenet_v2, batch 1). With freed memory kept for reuse — what
jemalloc and tcmalloc do, and what PyTorch's CPU performance guide recommends — the figures
repeat. Blocks above 32 MB are still mapped afresh (glibc's ceiling), as they would be anyway.

Process-wide and once: glibc has no call that restores its adaptive thresholds.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_TRIM_BYTES = 1 << 30  # free memory kept at the heap's top before it is given back
_MMAP_BYTES = 32 << 20  # glibc's largest mmap threshold on 64-bit

_done: str | None = None


def keep_warm() -> str:
    """Set glibc's thresholds once; say in words what the timings ran under."""
    global _done
    if _done is None:
        _done = _set_thresholds()
    return _done


def _set_thresholds() -> str:
    if not sys.platform.startswith("linux"):
        return f"host allocator as the platform has it ({sys.platform}): not glibc, left alone"
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and others: no mallopt
        return "host allocator left as it is (no glibc mallopt): passes may include page faults of fresh memory"
    if mallopt(_M_TRIM_THRESHOLD, _TRIM_BYTES) != 1 or mallopt(_M_MMAP_THRESHOLD, _MMAP_BYTES) != 1:
        return "host allocator left as it is (glibc refused mallopt): passes may include page faults of fresh memory"
    return "host allocator kept warm (glibc mallopt: freed blocks up to 32 MB reused, not returned to the OS)"
