"""PyTorch's CUDA caching allocator replayed on the memory model's storages: what it reserves.

The memory model (memory.py) knows every storage of the step: its size, when it is made and when
it is freed. What a GPU must hold is more than the live bytes: the caching allocator carves
blocks out of segments it got from cudaMalloc and keeps them, so a freed block can be reused only
by a request it can hold, and the segments' total (`torch.cuda.max_memory_reserved`) is what the
device must have. This replays the storages through the allocator's rules
(c10/cuda/CUDACachingAllocator.cpp, PyTorch 2.x defaults: no max_split_size, no expandable
segments, one stream):

- every request is rounded up to 512 bytes (kMinBlockSize);
- requests up to 1 MiB come from the small pool, carved out of 2 MiB segments; larger ones from
  the large pool, out of 20 MiB segments for requests under 10 MiB, else a segment of the request
  rounded up to 2 MiB (get_allocation_size);
- a request takes the smallest free block of its pool that holds it (best fit; lowest address on
  a tie); the rest is split off as a free block when at least 512 bytes remain (small pool) or
  more than 1 MiB (large pool), else it stays in the block and counts as allocated;
- a freed block merges with the free blocks beside it in its segment;
- free segments stay reserved; only when a new segment would pass the limit are the wholly free
  segments released and the request tried again; then it is out of memory.

A workspace that cuDNN asks for inside a convolution can be done without: PyTorch tries the plans
cuDNN's heuristics give in turn and takes the next one when a plan's workspace runs out of memory
(aten/src/ATen/native/cudnn/Conv_v8.cpp, try_plans catches c10::OutOfMemoryError). So under a limit
such a request that does not fit (after the free segments are released) is skipped, not out of memory;
the fallback plan is counted as taking no workspace.

Not modelled: allocations outside PyTorch's counters (the CUDA context, cuBLAS/cuDNN handles), and
where the memory model's workspace sizes are estimates (archlint.model.train.gpu_workspaces).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

MIN_BLOCK = 512
SMALL_SIZE = 1 << 20  # kSmallSize: the small pool's largest request
SMALL_BUFFER = 2 << 20  # kSmallBuffer: a small-pool segment
LARGE_BUFFER = 20 << 20  # kLargeBuffer: a large-pool segment for requests under MIN_LARGE_ALLOC
MIN_LARGE_ALLOC = 10 << 20  # kMinLargeAlloc
ROUND_LARGE = 2 << 20  # kRoundLarge


def segment_size(nbytes: int) -> int:
    if nbytes <= SMALL_SIZE:
        return SMALL_BUFFER
    if nbytes < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-nbytes // ROUND_LARGE) * ROUND_LARGE


@dataclass(slots=True)  # (slots: thousands made and read per replay)
class _Block:
    segment: int
    offset: int
    size: int
    free: bool = True
    prev: _Block | None = None
    next: _Block | None = None
    small: bool = False  # in the small pool (its segment's)


@dataclass
class Allocator:
    """The caching allocator's state; `limit` (bytes) plays torch.cuda.set_per_process_memory_fraction."""

    limit: int | None = None
    reserved: int = 0
    allocated: int = 0
    peak_reserved: int = 0
    peak_allocated: int = 0
    out_of_memory: bool = False
    skipped: int = 0  # optional requests (workspaces) that did not fit under the limit
    _free: dict[bool, list[tuple[int, int, int, int]]] = field(default_factory=lambda: {True: [], False: []})
    _blocks: dict[tuple[int, int], _Block] = field(default_factory=dict)  # (segment, offset) → free block
    _segments: dict[int, tuple[bool, int, _Block]] = field(default_factory=dict)  # id → (small, size, first block)
    _next_segment: int = 0

    def malloc(self, nbytes: int, optional: bool = False) -> _Block | None:
        """A block of `nbytes`, or None when it does not fit under the limit: out of memory, or
        for an `optional` request (a workspace the kernel can do without), skipped."""
        size = MIN_BLOCK if nbytes < MIN_BLOCK else -(-nbytes // MIN_BLOCK) * MIN_BLOCK  # the allocator's round_size
        small = size <= SMALL_SIZE
        # the best fit: the smallest free block of the pool that holds it (lowest address on a tie)
        pool = self._free[small]
        i = bisect.bisect_left(pool, (size, -1, -1, -1))
        block: _Block | None
        if i < len(pool):
            _, segment, offset, _ = pool.pop(i)
            block = self._blocks.pop((segment, offset))
        else:
            block = self._new_segment(small, segment_size(size))
        if block is None:
            if optional:
                self.skipped += 1
            else:
                self.out_of_memory = True
            return None
        self._take(block, small, size)
        return block

    def free(self, block: _Block) -> None:
        self.allocated -= block.size
        block.free = True
        for other in (block.prev, block.next):  # merge with free neighbours
            if other is not None and other.free:
                self._unlist(other)
                if other is block.prev:
                    other.size += block.size
                    other.next = block.next
                    if block.next:
                        block.next.prev = other
                    block = other
                else:
                    block.size += other.size
                    block.next = other.next
                    if other.next:
                        other.next.prev = block
        self._list(block)

    # ---- internals

    def _list(self, block: _Block) -> None:
        bisect.insort(self._free[block.small], (block.size, block.segment, block.offset, id(block)))
        self._blocks[(block.segment, block.offset)] = block

    def _unlist(self, block: _Block) -> None:
        pool = self._free[block.small]
        i = bisect.bisect_left(pool, (block.size, block.segment, block.offset, id(block)))
        del pool[i]
        del self._blocks[(block.segment, block.offset)]

    def _new_segment(self, small: bool, size: int) -> _Block | None:
        if self.limit is not None and self.reserved + size > self.limit:
            self._release_free_segments()
            if self.reserved + size > self.limit:
                return None
        sid = self._next_segment
        self._next_segment += 1
        block = _Block(sid, 0, size, True, None, None, small)
        self._segments[sid] = (small, size, block)
        self.reserved += size
        if self.reserved > self.peak_reserved:
            self.peak_reserved = self.reserved
        return block

    def _release_free_segments(self) -> None:
        for sid, (_small, size, first) in list(self._segments.items()):
            if first.free and first.next is None and first.prev is None and (sid, 0) in self._blocks:
                self._unlist(first)
                del self._segments[sid]
                self.reserved -= size

    def _take(self, block: _Block, small: bool, size: int) -> None:
        rest = block.size - size
        if (rest >= MIN_BLOCK) if small else (rest > SMALL_SIZE):
            nxt = block.next
            tail = _Block(block.segment, block.offset + size, rest, True, block, nxt, small)
            if nxt:
                nxt.prev = tail
            block.next, block.size = tail, size
            self._list(tail)
        block.free = False
        self.allocated += block.size
        if self.allocated > self.peak_allocated:
            self.peak_allocated = self.allocated


@dataclass(frozen=True)
class Requests:
    """Storages (and optional workspaces) as the replay takes them: each request's (bytes,
    optional) and the events in order, (when, 1 = malloc / 0 = free, which). Made once for the
    replays of one step under different limits."""

    items: list[tuple[int, bool]]
    events: list[tuple[float, int, int]]


def requests(
    lifetimes: Iterable[tuple[float, float, int]], workspaces: Iterable[tuple[float, float, int]] = ()
) -> Requests:
    """The storages given as (born, died, bytes) event indices (died = inf: never freed) and the
    workspaces likewise (optional requests: skipped where they do not fit under the limit), as
    `replay_requests` replays them."""
    events: list[tuple[float, int, int]] = []
    items = [(*item, False) for item in lifetimes] + [(*item, True) for item in workspaces]
    for i, (born, died, _, _) in enumerate(items):
        events.append((born, 1, i))
        if died != math.inf:
            events.append((died, 0, i))
    events.sort()
    return Requests([(nbytes, optional) for _, _, nbytes, optional in items], events)


def replay(
    lifetimes: Iterable[tuple[float, float, int]],
    limit: int | None = None,
    workspaces: Iterable[tuple[float, float, int]] = (),
) -> Allocator:
    """Replay storages given as (born, died, bytes) event indices (died = inf: never freed) in
    event order through the allocator; `workspaces` likewise, as optional requests (skipped where
    they do not fit under the limit). The result holds its peaks and whether it ran out."""
    return replay_requests(requests(lifetimes, workspaces), limit)


def replay_requests(made: Requests, limit: int | None = None) -> Allocator:
    """`replay` of requests already made (`requests`)."""
    alloc = Allocator(limit=limit)
    blocks: dict[int, _Block] = {}
    malloc, free, items = alloc.malloc, alloc.free, made.items
    for _, is_malloc, i in made.events:
        if is_malloc:
            nbytes, optional = items[i]
            block = malloc(nbytes, optional) if nbytes > 0 else None
            if alloc.out_of_memory:
                break
            if block is not None:
                blocks[i] = block
        elif i in blocks:
            free(blocks.pop(i))
    return alloc
