"""Host-side caching allocator (what torch_npu and CuPy put above ``aclrtMalloc``).

Blocks freed by the program stay mapped on the card and are handed out again without a
round trip to the worker. Sizes are rounded up (512 B up to 1 MiB, 2 MiB above) and a cached
block is reused only for the same rounded size and policy on the same card; no block is
split or merged here (the device heap merges when ``empty_cache`` gives blocks back).

Stream safety: a block freed while any stream of this process on its card still has
pending tasks records those streams with their last task number; it is handed out again
only once every one of them has passed that task (``Stream.done``). Until then a request of
that size gets a fresh block. This is conservative (the emulator does not track which
stream used a block, so it never hands out memory that a pending task on any stream may
still use); torch_npu instead reuses at once on the allocating stream. It never blocks.

When the card is full (207001), the cache of that card is emptied and the malloc retried
once (``num_alloc_retries``); a second failure raises (``num_ooms``).

Accounting (per card, bytes): ``allocated`` = rounded sizes lent to the program,
``requested`` = the sizes it asked for, ``reserved`` = device spans held (lent + cached), so
cached bytes show as reserved, not allocated, and ``aclrtGetMemInfo`` counts them as used
(on hardware the runtime holds them too). ``stats()`` returns torch's key names.

With ``NPUEMU_TRACK_ALLOC=1`` each block keeps the stack that allocated it, and each card
keeps a trace of torch's events (``segment_alloc``, ``alloc``, ``free_requested``,
``free_completed``, ``segment_free``; the snapshot's ``device_traces``).

Used by the Pythonic face by default; the ``acl`` face only with
``NPUEMU_CACHING_ALLOCATOR=1`` (``aclrtMalloc``/``aclrtFree`` must move ``aclrtGetMemInfo``
at once, and real samples check that). Nothing here blocks except ``malloc`` on a cache
miss (one round trip).

Threading model: any thread may call in. ``CachingAllocator.lock`` guards the free lists,
the lent table, the counters, the per-card stream lists and the traces; the round trip of a
miss runs outside it. The runtime's close hook (device reset) drops the card's blocks under
the same lock (``Runtime.lock`` is taken before it, never after).
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
import traceback
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any

from npuemu.host.core import memory, runtime
from npuemu.host.core import stream as streams
from npuemu.host.core.runtime import Allocation
from npuemu.host.driver.interface import Link
from npuemu.shared import errors
from npuemu.shared.protocol import Op

__all__ = ["Block", "CachingAllocator", "get", "round_size"]

TRACE_MAX = 100_000
"""Most trace events kept per card (torch's ``_record_memory_history`` default)."""
SMALL_LIMIT = 1 << 20
SMALL_ROUND = 512
LARGE_ROUND = 2 << 20


def round_size(size: int) -> int:
    """The size class of a request (512 B steps up to 1 MiB, 2 MiB steps above)."""
    if size <= SMALL_LIMIT:
        return (size + SMALL_ROUND - 1) & -SMALL_ROUND
    return (size + LARGE_ROUND - 1) & -LARGE_ROUND


Key = tuple[Link, int, int]
"""Where a cached block is kept: (card, size class, policy)."""
Ready = tuple[tuple[streams.Stream, int], ...]
"""``((stream, task seq), ...)``: work that must be done before a block is reused."""


class Block:
    """One device allocation owned by the cache: lent to the program or cached."""

    __slots__ = ("alloc", "counters", "key", "ptr", "ready", "requested", "rounded", "stack")

    def __init__(self, alloc: Allocation, key: Key) -> None:
        self.alloc = alloc
        self.ptr: int = alloc.ptr  # the device pointer (fixed for the block's life)
        self.key = key
        self.rounded: int = key[1]
        self.counters: Counters = Counters()  # replaced by its card's counters when lent
        self.ready: Ready = ()  # ((stream, task seq), ...) that must be done before reuse
        self.requested = 0
        self.stack: object = ()  # traceback.StackSummary with NPUEMU_TRACK_ALLOC=1


@dataclass(slots=True)
class Counters:
    """Per-card counters, named after torch's memory_stats keys. ``hits``, ``free_count``
    and ``freed_total`` are derived (the hot path counts less)."""

    allocated: int = 0
    allocated_peak: int = 0
    requested: int = 0
    requested_peak: int = 0
    reserved: int = 0
    reserved_peak: int = 0
    active: int = 0  # blocks lent
    active_peak: int = 0
    segments: int = 0  # blocks held from the device (lent + cached)
    segments_peak: int = 0
    alloc_count: int = 0  # allocation requests served
    segment_alloc: int = 0  # device mallocs (misses)
    segment_free: int = 0  # device frees (empty_cache)
    allocated_total: int = 0  # bytes lent ever
    retries: int = 0
    ooms: int = 0
    reset_blocks: int = 0  # lent blocks released with their card (not freed by the program)
    reset_bytes: int = 0

    @property
    def hits(self) -> int:
        """Requests served from the cache (every miss is one device malloc)."""
        return self.alloc_count - self.segment_alloc

    @property
    def free_count(self) -> int:
        """Blocks the program gave back."""
        return self.alloc_count - self.active - self.reset_blocks

    @property
    def freed_total(self) -> int:
        """Bytes (size classes) the program gave back."""
        return self.allocated_total - self.allocated - self.reset_bytes


class CachingAllocator:
    """Caches freed device blocks per card, size class and policy (module docstring)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._free: dict[Key, list[Block]] = defaultdict(list)  # key -> cached blocks
        self._lent: dict[int, Block] = {}
        self._counters: dict[Link, Counters] = {}
        self._streams: dict[Link, tuple[int, tuple[streams.Stream, ...]]] = {}  # (gen, streams)
        self._traces: dict[Link, deque[dict[str, Any]]] = {}  # events (NPUEMU_TRACK_ALLOC=1)

    # malloc / free -------------------------------------------------------------------------
    def malloc(self, size: int, policy: int = 0, link: Link | None = None) -> Block:
        """A block of at least ``size`` bytes on ``link``'s card (None: the current
        device's): from the cache when a ready one is there (no round trip), else from
        ``aclrtMalloc``. Raises AclError.

        The hit path is written flat (one lock, no call per counter): it is what a program
        pays per tensor."""
        if type(size) is not int or size <= 0:
            size = memory._check_size(size, "size")
        rt = runtime.get()
        if link is None:
            ctx = getattr(rt.local, "ctx", None)
            if ctx is None or ctx.destroyed or rt.forked:
                link = rt.current_link()  # raises what the runtime raises
            else:
                link = rt.devices[ctx.device].link
        elif rt.forked:
            rt.check_fork()
        rounded = (((size + 511) & -512) if size <= SMALL_LIMIT
                   else ((size + LARGE_ROUND - 1) & -LARGE_ROUND))
        key = (link, rounded, policy)
        with self.lock:
            blocks = self._free.get(key)
            if blocks:
                block = blocks[-1]
                if block.ready or rt.allocations.get(block.alloc.ptr) is not block.alloc:
                    found = self._take(rt, blocks)  # waits on a stream, or gone: scan
                else:
                    found = blocks.pop()
                if found is not None:
                    self._lend(found, size, rt)
                    return found
        block = Block(self._device_malloc(link, rounded, policy), key)
        with self.lock:
            c = self._counters_of(link)
            c.segment_alloc += 1
            c.segments += 1
            c.segments_peak = max(c.segments_peak, c.segments)
            c.reserved += block.alloc.span
            c.reserved_peak = max(c.reserved_peak, c.reserved)
            block.counters = c
            if rt.config.track_alloc:
                self._trace(link, "segment_alloc", block.ptr, block.alloc.span, ())
            self._lend(block, size, rt)
        return block

    def _take(self, rt: runtime.Runtime, blocks: list[Block]) -> Block | None:
        allocations = rt.allocations
        for i in range(len(blocks) - 1, -1, -1):
            block = blocks[i]
            alloc = block.alloc
            if allocations.get(alloc.ptr) is not alloc:  # its device was reset
                del blocks[i]
                continue
            ready = block.ready
            if not ready or all(s.done(seq) or s.destroyed for s, seq in ready):
                del blocks[i]
                if ready:
                    block.ready = ()
                    if rt.config.track_alloc:  # the streams passed the free point
                        self._trace(alloc.link, "free_completed", block.ptr, block.rounded, ())
                return block
        return None

    def _lend(self, block: Block, size: int, rt: runtime.Runtime) -> None:
        c = block.counters
        rounded = block.rounded
        c.alloc_count += 1
        block.requested = size
        if rt.config.track_alloc:
            block.stack = traceback.extract_stack(limit=16)[:-2]
            self._trace(block.alloc.link, "alloc", block.ptr, rounded, block.stack)
        self._lent[block.alloc.ptr] = block
        allocated = c.allocated + rounded
        c.allocated = allocated
        c.allocated_total += rounded
        if allocated > c.allocated_peak:
            c.allocated_peak = allocated
        requested = c.requested + size
        c.requested = requested
        if requested > c.requested_peak:
            c.requested_peak = requested
        active = c.active + 1
        c.active = active
        if active > c.active_peak:
            c.active_peak = active

    def _device_malloc(self, link: Link, rounded: int, policy: int) -> Allocation:
        rt = runtime.get()
        ctx = getattr(rt.local, "ctx", None)
        od = rt.devices.get(link.logical)
        if od is None or od.link is not link:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"device {link.logical} was reset")
        if ctx is not None and not ctx.destroyed and ctx.device == link.logical:
            return self._device_malloc_here(link, rounded, policy)
        rt.local.ctx = od.primary  # aclrtMalloc on that card, then the caller's context
        try:
            return self._device_malloc_here(link, rounded, policy)
        finally:
            rt.local.ctx = ctx

    def _device_malloc_here(self, link: Link, rounded: int, policy: int) -> Allocation:
        try:
            ptr = memory.malloc(rounded, policy, traced=False)
        except errors.AclError as err:
            if err.code != errors.ACL_ERROR_RT_MEMORY_ALLOCATION:
                raise
            with self.lock:
                self._counters_of(link).retries += 1
            self.empty_cache(link)
            try:
                ptr = memory.malloc(rounded, policy, traced=False)
            except errors.AclError as err2:
                if err2.code == errors.ACL_ERROR_RT_MEMORY_ALLOCATION:
                    with self.lock:
                        self._counters_of(link).ooms += 1
                raise
        return runtime.get().allocations[ptr]

    def free(self, ptr: int) -> None:
        """Give a lent block back to the cache (no round trip). 107000 if ``ptr`` is not a
        block this allocator lent."""
        rt = runtime.get()
        with self.lock:
            try:
                block = self._lent.pop(ptr)
            except (KeyError, TypeError):
                raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                       f"{ptr!r} is not a live block of the caching "
                                       "allocator") from None
            self._returned(rt, block)

    def free_block(self, block: Block) -> bool:
        """Give ``block`` back if it is still lent (False when its card was reset meanwhile,
        or it was given back already): one lock, for owners that keep the ``Block``."""
        rt = runtime.get()
        with self.lock:
            if self._lent.get(block.ptr) is not block:
                return False
            del self._lent[block.ptr]
            self._returned(rt, block)
            return True

    def _returned(self, rt: runtime.Runtime, block: Block) -> None:
        """Book a block the program gave back and cache it (caller holds ``self.lock``)."""
        ptr = block.ptr
        alloc = block.alloc
        link = alloc.link
        # stream safety: the streams of the card with queued work, and how far
        known = self._streams.get(link)
        if known is None or known[0] != rt.handles_gen:
            known = self._list_streams(rt, link)
        ready: Ready = ()
        for s in known[1]:
            submitted = s.submitted
            if s.link.completed[s.slot] < submitted and not s.destroyed:
                ready += ((s, submitted),)
        block.ready = ready
        c = block.counters
        c.allocated -= block.rounded
        c.requested -= block.requested
        c.active -= 1
        if block.stack or rt.config.track_alloc:
            block.stack = ()
            self._trace_free(rt, block)
        if rt.allocations.get(ptr) is alloc:
            self._free[block.key].append(block)
        else:  # its device was reset (or the program freed it through acl.rt.free)
            self._drop(c, block)

    def _list_streams(self, rt: runtime.Runtime, link: Link
                      ) -> tuple[int, tuple[streams.Stream, ...]]:
        """The card's streams, listed again only when a handle was registered since
        (``Runtime.handles_gen``, read before the listing; a stream destroyed meanwhile is
        skipped by the caller). Caller holds ``self.lock``."""
        known = self._streams[link] = (rt.handles_gen, tuple(
            obj for obj in list(rt.handles.values())
            if type(obj) is streams.Stream and obj.link is link))
        return known

    def lent(self, ptr: int) -> Block | None:
        """The block lent at ``ptr`` (and not given back), or None."""
        return self._lent.get(ptr)

    def keeps(self, ptr: int) -> bool:
        """``ptr`` is a block given back and kept for reuse (a scan: the free path only)."""
        with self.lock:
            return any(b.ptr == ptr for blocks in self._free.values() for b in blocks)

    # empty_cache -------------------------------------------------------------------------
    def empty_cache(self, link: Link | None = None) -> int:
        """Give every cached block (of ``link``'s card, or of all cards) back to the device
        (``aclrtFree`` each; queued, not waited for), then ask each card for the level-2
        merge (``Op.MEM_MERGE``: idle normal-page chunks back to the huge-page pool; posted,
        not waited for). Returns the bytes released."""
        with self.lock:
            victims = []
            for key in [k for k in self._free if link is None or k[0] is link]:
                victims += self._free.pop(key)
            released = 0
            for block in victims:
                released += block.alloc.span
                self._drop(self._counters_of(block.alloc.link), block)
        rt = runtime.get()
        allocations = rt.allocations
        with rt.lock:  # the cards concerned: level 2 merges them even with nothing cached
            links = {link} if link is not None else {od.link for od in rt.devices.values()}
        for block in victims:
            if allocations.get(block.alloc.ptr) is block.alloc:
                memory.free(block.alloc.ptr, traced=False)
                links.add(block.alloc.link)
        for each in links:  # given back now, not batched (freebatch.py), then merged
            memory.flush_frees(each)
            if each.alive():
                each.post(Op.MEM_MERGE)  # the level-2 merge (DeviceMemory.merge_free)
        return released

    def forget(self, link: Link) -> None:
        """The card is being reset: its cached blocks go with it (runtime close hook; the
        caller holds ``Runtime.lock`` and removes them from its tables)."""
        with self.lock:
            self._streams.pop(link, None)
            c = self._counters_of(link)
            for key in [k for k in self._free if k[0] is link]:
                for block in self._free.pop(key):
                    self._drop(c, block)
                    runtime.get().allocations.pop(block.alloc.ptr, None)
            for ptr in [p for p, b in self._lent.items() if b.alloc.link is link]:
                block = self._lent.pop(ptr)  # lent blocks are released with the card
                c.allocated -= block.key[1]
                c.requested -= block.requested
                c.active -= 1
                c.reset_blocks += 1
                c.reset_bytes += block.key[1]
                self._drop(c, block)
            self._traces.pop(link, None)  # the card's history ends with it

    def _drop(self, c: Counters, block: Block) -> None:
        c.segments -= 1
        c.segment_free += 1
        c.reserved -= block.alloc.span
        if block.alloc.link in self._traces or runtime.get().config.track_alloc:
            if block.ready:  # given back before its streams passed the free point
                self._trace(block.alloc.link, "free_completed", block.ptr, block.rounded, ())
            self._trace(block.alloc.link, "segment_free", block.ptr, block.alloc.span, ())

    # trace (torch's device_traces; NPUEMU_TRACK_ALLOC=1) -------------------------------
    def _trace(self, link: Link, action: str, addr: int, size: int, stack: object) -> None:
        """Record one event of ``link``'s card (caller holds ``self.lock``). ``stack`` is a
        ``traceback.StackSummary`` (or ``()``), turned into frames by the snapshot."""
        traces = self._traces.get(link)
        if traces is None:
            traces = self._traces[link] = deque(maxlen=TRACE_MAX)
        traces.append({"action": action, "addr": addr, "size": size, "stream": 0,
                       "time_us": time.time_ns() // 1000, "frames": stack})

    def trace_uncached(self, link: Link, action: str, ptr: int, span: int, size: int,
                       stack: str) -> None:
        """A device block outside the cache (``acl.rt.malloc``, pools, physical handles)
        in the same trace, as torch shows a segment that is one block: ``segment_alloc`` +
        ``alloc``, or ``free_requested`` + ``free_completed`` + ``segment_free`` (the
        free is queued to the card at once). ``stack`` is text (``Allocation.stack``)."""
        with self.lock:
            if action == "malloc":
                self._trace(link, "segment_alloc", ptr, span, stack)
                self._trace(link, "alloc", ptr, size, stack)
            else:
                self._trace(link, "free_requested", ptr, size, stack)
                self._trace(link, "free_completed", ptr, size, "")
                self._trace(link, "segment_free", ptr, span, "")

    def _trace_free(self, rt: runtime.Runtime, block: Block) -> None:
        """``free_requested`` (with the freeing stack), and ``free_completed`` at once when
        no stream of the card still has work queued (else when a reuse finds them past)."""
        if not rt.config.track_alloc:
            return
        link = block.alloc.link
        stack = traceback.extract_stack(limit=16)[:-3]  # from the caller of free()
        self._trace(link, "free_requested", block.ptr, block.rounded, stack)
        if not block.ready:
            self._trace(link, "free_completed", block.ptr, block.rounded, ())

    def traces(self, link: Link) -> list[dict[str, Any]]:
        """A copy of the trace events of ``link``'s card, oldest first."""
        with self.lock:
            return list(self._traces.get(link, ()))

    # queries -----------------------------------------------------------------------------
    def _counters_of(self, link: Link) -> Counters:
        c = self._counters.get(link)
        if c is None:
            c = self._counters[link] = Counters()
        return c

    def counters(self, link: Link) -> Counters:
        """A copy of the counters of ``link``'s card."""
        with self.lock:
            c = self._counters_of(link)
            return dataclasses.replace(c)

    def cached_bytes(self, link: Link) -> int:
        """Device bytes (spans) of cached, not lent, blocks of ``link``'s card."""
        with self.lock:
            return sum(b.alloc.span for k, blocks in self._free.items() if k[0] is link
                       for b in blocks)

    def blocks(self, link: Link) -> tuple[list[Block], list[Block]]:
        """``(lent, cached)`` blocks of ``link``'s card (for snapshots)."""
        with self.lock:
            lent = [b for b in self._lent.values() if b.alloc.link is link]
            cached = [b for k, bl in self._free.items() if k[0] is link for b in bl]
            return lent, cached

    def reset_peaks(self, link: Link) -> None:
        with self.lock:
            c = self._counters_of(link)
            c.allocated_peak, c.requested_peak = c.allocated, c.requested
            c.reserved_peak, c.active_peak, c.segments_peak = c.reserved, c.active, c.segments


def acl_enabled() -> bool:
    """``NPUEMU_CACHING_ALLOCATOR=1``: the ``acl`` face's malloc/free go through the cache
    (read when ``acl`` is imported)."""
    return os.environ.get("NPUEMU_CACHING_ALLOCATOR", "0").strip() not in ("", "0")


def acl_malloc(size: int, policy: int = 0) -> int:
    """``aclrtMalloc`` through the cache (``NPUEMU_CACHING_ALLOCATOR=1``)."""
    return get().malloc(size, memory._check_size(policy, "policy", allow_zero=True)).ptr


def acl_free(ptr: int) -> None:
    """``aclrtFree`` through the cache: the block is kept for reuse; a block the cache did
    not lend (``aclrtMallocAlign32``'s) is freed at once (107000 if neither knows it)."""
    cache = get()
    try:
        cache.free(ptr)
    except errors.AclError:
        if cache.keeps(ptr):  # freed twice: the cache's block stays the cache's
            raise
        memory.free(ptr)


_allocator: CachingAllocator | None = None
_allocator_lock = threading.Lock()


def get() -> CachingAllocator:
    """The process-wide caching allocator (made on first use; registers the reset hook)."""
    global _allocator
    if _allocator is None:
        with _allocator_lock:
            if _allocator is None:
                _allocator = CachingAllocator()
    return _allocator


def _on_close(link: Link) -> None:
    if _allocator is not None:
        _allocator.forget(link)


runtime.on_close_device(_on_close)
memory.on_trace(lambda *event: get().trace_uncached(*event))
