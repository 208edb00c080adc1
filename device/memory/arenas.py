"""Device memory: the HBM and DDR arenas of one NPU and the aclrtMalloc rules over them.

Each arena is a sparse POSIX shared-memory segment (``/npuemu.<node>.d<id>.hbm|ddr``) the
size of the card's memory, plus a pure offset allocator (``allocator.py``). Pages are
committed (``posix_fallocate``) in 2 MiB chunks when an allocation first covers them, so a
full ``/dev/shm`` becomes ``ACL_ERROR_RT_MEMORY_ALLOCATION`` at malloc time instead of a
SIGBUS when a host or a worker later touches the page. Committed chunks stay committed until
the device stops (a real driver also keeps its page pool).

Every block is tagged with the client slot that allocated it, so a dead host's memory can be
reclaimed and one host cannot free or copy another host's memory (the real runtime needs IPC
handles for that). Every count and offset is checked (non-negative, inside one live block)
before an address is handed out.

Page pools (``pools.py``): NORMAL blocks are carved from 2 MiB chunks of the normal-page
pool; a chunk emptied by a free stays there, idle, until the level-2 merge
(``merge_free``: after a model execute, on ``empty_cache`` via ``Op.MEM_MERGE``) or a
huge-page allocation placed on it gives it back to the huge-page pool.

Huge-page blocks from scattered pages (``shared/pages.py``): a huge-page request that no
free run of the segment can hold takes free 2 MiB pages wherever they lie (smallest runs
first) and gets an address in the arena's far range, which every process maps page by page,
as a card's MMU joins physical pages into one virtual block. So on a card whose free memory
is in holes of whole pages, a large malloc succeeds as on hardware; a huge-page pool has no
external fragmentation (``pools.py``), only free bytes inside partly used pages do.
A NORMAL-page request of more than 2 MiB is assembled alike (its span rounded up to whole
pages, which join the normal-page pool). Partial: 1 GiB-page requests are never assembled
(they need one free run), nor is memory joined at a granule finer than 2 MiB.

Threading model: the loop thread mallocs, frees and resolves; kernels on engine threads
resolve (``KernelContext.tensor``); the models' task runner calls ``merge_free``.
``DeviceMemory.lock`` guards the allocators, the pools and the committed-chunk maps: every
public method takes it (``merge_free`` only once a lock-free peek found idle chunks), so
an engine never sees a block half freed. ``on_change`` and ``on_pool`` run under it (they
only update control-block counters and log).
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable
from typing import NamedTuple

from npuemu.device.memory.allocator import (
    HUGE1G_PAGE,
    HUGE_PAGE,
    Allocator,
    PageClass,
    Plan,
    plan,
)
from npuemu.device.memory.ipc import ORPHAN, Shares
from npuemu.device.memory.pools import NormalChunks, PoolStats, pool_stats
from npuemu.shared import address, errors, shm
from npuemu.shared.config import PROFILES
from npuemu.shared.enums import MemAttr, MemMallocModifier
from npuemu.shared.pages import FarPages, far_base

COMMIT_CHUNK = HUGE_PAGE
FIRMWARE_RESERVED_HBM = {p.hbm_bytes: 3 << 30 for p in PROFILES.values()}
"""HBM a real card keeps for its firmware and runtime (not allocatable, not in ``free`` of
``aclrtGetMemInfo``, counted as used by ``npuemu status``/``smi``), by HBM size of the SoC
profiles (``shared/config.py``): 3 GiB. Our choice: no documented figure was found; 3 GiB
is close to the HBM usage ``npu-smi info`` commonly shows on an idle Atlas A2 card. A card
given another HBM size (``NPUEMU_HBM``, as tests do) reserves nothing, so small test cards
keep all of it."""
FIRMWARE_RESERVED_DDR = {p.ddr_bytes: 1 << 30 for p in PROFILES.values()}
"""The same for the device DDR, by the profiles' DDR size (8 GiB): 1 GiB, the device OS's
share (our choice, as for HBM: no documented figure). Another DDR size (``NPUEMU_DDR``)
reserves nothing."""
_RESERVED = {address.HBM: FIRMWARE_RESERVED_HBM, address.DDR: FIRMWARE_RESERVED_DDR}
_LOW_BAND_WIDTH = int(MemMallocModifier.ACL_MEM_TYPE_LOW_BAND_WIDTH)


class Tag(NamedTuple):
    """What the allocator remembers of a block."""

    client: int
    page_class: PageClass
    p2p: bool


PAGES = -2
"""Client of the blocks that stand for the physical pages of a far block (never a host's)."""
MAX_RUNS = 1024
"""Most runs of pages one far block is assembled from (each is one mapping per process)."""


class Arena:
    """One memory arena: the segment, its allocators and its committed-chunk map.

    ``alloc`` places blocks in the segment (the *near* range: offset = physical offset).
    With ``far`` bytes of far range (``shared/pages.py``), a huge-page block that no free
    run of the segment can hold is *assembled* (:meth:`assemble`): ``far`` (an allocator of
    far offsets) places it, and each run of free pages it takes is a block of client
    :data:`PAGES` in ``alloc``, so ``alloc`` keeps counting every physical byte. ``pages``
    (``FarPages``, absent in pure bookkeeping) maps far pages in the card's process and
    publishes them to the others.
    """

    def __init__(self, seg: shm.Segment, kind: int, far: int = 0,
                 pages: FarPages | None = None) -> None:
        self.seg = seg
        self.kind = kind
        self.alloc = Allocator(seg.size, classify=_page_class)
        self.near = far_base(seg.size)  # arena offset of the far range
        self.far: Allocator[Tag] | None = Allocator(far) if far else None
        self.span = self.near + far if far else seg.size  # addresses of the arena
        self.far_runs: dict[int, list[tuple[int, int]]] = {}  # far offset -> (phys, bytes)
        self.pages = pages
        self.normal = NormalChunks()  # the normal-page pool's 2 MiB chunks (pools.py)
        self._committed = bytearray(-(-seg.size // COMMIT_CHUNK))
        self.committed_bytes = 0
        self.reserved = _RESERVED[kind].get(seg.size, 0) if kind in _RESERVED else 0
        self.limit = seg.size - self.reserved  # what user allocations may use in all
        self.progress: Callable[[], None] = _no_progress  # after each chunk (worker: beat)

    def commit(self, offset: int, span: int) -> None:
        """Back ``[offset, offset+span)`` with pages; OSError(ENOSPC) when memory is out."""
        first, last = offset // COMMIT_CHUNK, (offset + span - 1) // COMMIT_CHUNK
        for chunk in range(first, last + 1):
            if not self._committed[chunk]:
                start = chunk * COMMIT_CHUNK
                self.seg.commit(start, min(COMMIT_CHUNK, self.seg.size - start))
                self._committed[chunk] = 1
                self.committed_bytes += COMMIT_CHUNK
                self.progress()

    # blocks, near or far -----------------------------------------------------------------
    def find(self, offset: int) -> tuple[int, int, Tag] | None:
        """The live block ``(start, span, tag)`` holding arena ``offset`` (a far block's
        pages found through their near addresses are client :data:`PAGES`)."""
        if offset < self.near:
            return self.alloc.find(offset)
        found = self.far.find(offset - self.near) if self.far else None
        return None if found is None else (found[0] + self.near, found[1], found[2])

    def tag_at(self, offset: int) -> Tag | None:
        if offset < self.near:
            return self.alloc.tag_at(offset)
        return self.far.tag_at(offset - self.near) if self.far else None

    def retag(self, offset: int, tag: Tag) -> int:
        if offset < self.near:
            return self.alloc.retag(offset, tag)
        return self._far_heap(offset).retag(offset - self.near, tag)

    def blocks(self) -> list[tuple[int, int, Tag]]:
        """Live blocks ``(start, span, tag)``: near ones by address, then far ones."""
        out = [b for b in self.alloc.snapshot() if b[2].client != PAGES]
        if self.far is not None and self.far_runs:
            near = self.near
            out += [(start + near, span, tag) for start, span, tag in self.far.snapshot()]
        return out

    def _far_heap(self, offset: int) -> Allocator[Tag]:
        """The far range's allocator (KeyError for a far ``offset`` of an arena without one)."""
        if self.far is None:
            raise KeyError(offset)
        return self.far

    def assemble(self, span: int, tag: Tag) -> int | None:
        """Arena offset of a far block of ``span`` bytes (whole 2 MiB pages, which hold
        huge pages or normal ones as ``tag`` says) made of free pages of the segment:
        smallest free runs first (large runs stay whole for contiguous requests), or the
        largest first when that would take more than :data:`MAX_RUNS` runs; None when
        there are not enough free pages (or not in so few runs). Bookkeeping only: the
        caller commits and publishes (O(free blocks))."""
        if self.far is None:
            return None
        runs = sorted((hi - lo, lo, block) for lo, hi, block in self._free_page_runs() if hi > lo)
        chosen = _cover(runs, span)
        if len(chosen) > MAX_RUNS:  # too many small holes: the largest runs first then
            chosen = _cover(runs[::-1], span)
        if not chosen or len(chosen) > MAX_RUNS:
            return None
        at = self.far.alloc(span, HUGE_PAGE, tag)
        if at is None:
            return None
        chosen.sort()
        pages = Tag(PAGES, tag.page_class, tag.p2p)
        for start, size, block in chosen:  # one run per free block: each still whole
            self.alloc.take(start, size, pages, within=block)
        self.far_runs[at] = [(start, size) for start, size, _block in chosen]
        return self.near + at

    def _free_page_runs(self) -> list[tuple[int, int, int]]:
        """Free whole-page runs ``(lo, hi, start of their free block)`` of the segment."""
        return [(-(-start // HUGE_PAGE) * HUGE_PAGE, (start + size) // HUGE_PAGE * HUGE_PAGE,
                 start) for start, size in self.alloc.free_blocks()]

    def release(self, offset: int) -> tuple[int, Tag]:
        """Free the live block at ``offset``; returns ``(span, tag)`` (KeyError if none). A
        normal-page chunk it empties stays in the normal pool, idle, until a merge."""
        if offset < self.near:
            span, tag = self.alloc.free(offset)
            if tag.page_class is PageClass.NORMAL:
                self.normal.remove(offset, span)
            return span, tag
        at = offset - self.near
        span, tag = self._far_heap(offset).free(at)
        normal = tag.page_class is PageClass.NORMAL
        for start, size in self.far_runs.pop(at):
            self.alloc.free(start)
            if normal:
                self.normal.remove(start, size)
        if self.pages is not None:
            self.pages.unpublish(at // HUGE_PAGE, span // HUGE_PAGE)
        return span, tag

    def file_runs(self, offset: int, length: int) -> list[tuple[int, int]]:
        """``(segment offset, bytes)`` runs behind ``[offset, offset+length)`` of one block."""
        if offset < self.near:
            return [(offset, length)]
        at = offset - self.near
        start = max(s for s in self.far_runs if s <= at)
        out, pos, skip = [], 0, at - start
        for phys, size in self.far_runs[start]:
            if skip >= size:
                skip -= size
                continue
            n = min(size - skip, length - pos)
            out.append((phys + skip, n))
            pos, skip = pos + n, 0
            if pos == length:
                break
        return out

    def largest_block(self) -> int:
        """The largest block a malloc could get now: the largest free run, or, with a far
        range, every free whole page together (O(1))."""
        largest = self.alloc.largest_free
        if self.far is None:
            return largest
        return max(largest, self.alloc.free_pages * HUGE_PAGE)

    def free_at_granularity(self, page: int) -> int:
        """Free bytes usable by allocations of ``page``-sized pages."""
        if page <= 64:
            return self.alloc.stats().free
        if page == HUGE_PAGE:
            return self.alloc.free_pages * HUGE_PAGE
        total = 0
        for start, size in self.alloc.free_blocks():
            lo = -(-start // page) * page
            hi = (start + size) // page * page
            total += max(0, hi - lo)
        return total


def _no_progress() -> None:
    pass


def _cover(runs: list[tuple[int, int, int]], span: int) -> list[tuple[int, int, int]]:
    """Pieces ``(start, bytes, free block)`` of ``runs`` (``(bytes, start, free block)``, in
    the order given) that add up to ``span``; [] when they are not enough."""
    chosen, left = [], span
    for size, start, block in runs:
        take = min(size, left)
        chosen.append((start, take, block))
        left -= take
        if not left:
            return chosen
    return []


def _page_class(tag: Tag) -> PageClass:
    return tag.page_class


_GRANULE = {None: 64, PageClass.NORMAL: 64, PageClass.HUGE: HUGE_PAGE,
            PageClass.HUGE1G: HUGE1G_PAGE}
_H, _D = address.HBM, address.DDR
_N, _HG, _G = PageClass.NORMAL, PageClass.HUGE, PageClass.HUGE1G
# aclrtMemAttr -> (arena, page class or None for all). P2P memory shares the same pool.
MEM_ATTRS: dict[int, tuple[int, PageClass | None]] = {
    MemAttr.ACL_DDR_MEM: (_D, None), MemAttr.ACL_HBM_MEM: (_H, None),
    MemAttr.ACL_DDR_MEM_HUGE: (_D, _HG), MemAttr.ACL_DDR_MEM_NORMAL: (_D, _N),
    MemAttr.ACL_HBM_MEM_HUGE: (_H, _HG), MemAttr.ACL_HBM_MEM_NORMAL: (_H, _N),
    MemAttr.ACL_DDR_MEM_P2P_HUGE: (_D, _HG), MemAttr.ACL_DDR_MEM_P2P_NORMAL: (_D, _N),
    MemAttr.ACL_HBM_MEM_P2P_HUGE: (_H, _HG), MemAttr.ACL_HBM_MEM_P2P_NORMAL: (_H, _N),
    MemAttr.ACL_HBM_MEM_HUGE1G: (_H, _G), MemAttr.ACL_HBM_MEM_P2P_HUGE1G: (_H, _G),
    MemAttr.ACL_MEM_NORMAL: (_H, _N), MemAttr.ACL_MEM_HUGE: (_H, _HG),
    MemAttr.ACL_MEM_HUGE1G: (_H, _G), MemAttr.ACL_MEM_P2P_NORMAL: (_H, _N),
    MemAttr.ACL_MEM_P2P_HUGE: (_H, _HG), MemAttr.ACL_MEM_P2P_HUGE1G: (_H, _G),
}


class DeviceMemory:
    """Both arenas of one device, with per-client accounting.

    ``on_change(client, arena, tag, delta_bytes)`` is called after every malloc (positive
    delta) and free (negative) so the worker can update its published counters in O(1).
    ``on_pool(arena, delta_bytes)`` (optional) is called when the normal-page pool of an
    arena grows or shrinks by whole 2 MiB chunks (the worker logs it at DEBUG).
    """

    def __init__(self, dev: int, arenas: list[Arena],
                 on_change: Callable[[int, int, Tag, int], None],
                 on_pool: Callable[[Arena, int], None] | None = None) -> None:
        self.dev = dev
        self.arenas = arenas
        self.on_change = on_change
        self.on_pool = on_pool
        self.lock = threading.Lock()
        self.merges = 0  # level-2 merges that gave chunks back (merge_free, claims)
        self.shares = Shares()  # IPC export keys and importers (ipc.py)

    # aclrtMalloc / aclrtFree ---------------------------------------------------------------
    def malloc(self, client: int, size: int, policy: int) -> tuple[int, int, int]:
        """Allocate; returns ``(device pointer, span, page class)``. Raises AclError."""
        with self.lock:
            return self._malloc(client, size, policy)

    def _malloc(self, client: int, size: int, policy: int) -> tuple[int, int, int]:
        if size <= 0:
            raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, "size must be > 0")
        kind = _D if policy & _LOW_BAND_WIDTH else _H
        arena = self.arenas[kind]
        step: Plan | None = plan(size, policy)
        while step is not None:
            if arena.alloc.used + step.span > arena.limit:  # the firmware's share stays
                step = step.fallback
                continue
            tag = Tag(client, step.page_class, step.p2p)
            offset = arena.alloc.alloc(step.span, step.align, tag)
            if offset is not None:
                return self._commit(arena, offset, step.span, tag)
            if step.page_class is _HG or (step.page_class is _N and step.span > HUGE_PAGE):
                span = -(-step.span // HUGE_PAGE) * HUGE_PAGE  # no free run: pages from
                offset = arena.assemble(span, tag)             # anywhere, whole ones
                if offset is not None:
                    return self._commit_far(arena, offset, span, tag)
            step = step.fallback
        raise errors.error_for(errors.ACL_ERROR_RT_MEMORY_ALLOCATION,
                               f"device {self.dev} {address.ARENA_NAMES[kind]}: no room for "
                               f"{size} bytes (policy {policy:#x}); "
                               f"{arena.alloc.capacity - arena.alloc.used} free, largest "
                               f"block {arena.largest_block()}")

    def _commit(self, arena: Arena, offset: int, span: int, tag: Tag) -> tuple[int, int, int]:
        try:
            arena.commit(offset, span)
        except OSError as err:
            arena.alloc.free(offset)
            raise self._uncommitted(err) from err
        delta = self._pool(arena, tag, offset, span)
        if delta:
            self._pool_changed(arena, delta)
        self.on_change(tag.client, arena.kind, tag, span)
        return address.encode(self.dev, arena.kind, offset), span, int(tag.page_class)

    @staticmethod
    def _pool(arena: Arena, tag: Tag, start: int, span: int) -> int:
        """Pages of a new block in the page pools: NORMAL ones join the normal-page pool; a
        huge block placed on idle normal chunks takes them back. Returns the change of the
        normal pool's bytes."""
        if tag.page_class is _N:
            return arena.normal.add(start, span)
        return arena.normal.claim(start, span) if arena.normal.idle else 0

    def _pool_changed(self, arena: Arena, delta: int) -> None:
        if delta < 0:  # chunks went back to the huge-page pool
            self.merges += 1
        if self.on_pool is not None:
            self.on_pool(arena, delta)

    def _uncommitted(self, err: OSError) -> errors.AclError:
        """207001 for pages that could not be committed."""
        why = "host shared memory (/dev/shm) is full" if err.errno == errno.ENOSPC else err
        return errors.error_for(errors.ACL_ERROR_RT_MEMORY_ALLOCATION, f"device {self.dev}: {why}")

    def _commit_far(self, arena: Arena, offset: int, span: int,
                    tag: Tag) -> tuple[int, int, int]:
        """Pool, commit and publish the pages of an assembled block: a NORMAL block's
        pages join the normal-page pool, a huge one takes idle normal chunks back."""
        runs = arena.far_runs[offset - arena.near]
        delta = sum(self._pool(arena, tag, start, size) for start, size in runs)
        if delta:
            self._pool_changed(arena, delta)
        try:
            for start, size in runs:
                arena.commit(start, size)
        except OSError as err:
            arena.release(offset)
            raise self._uncommitted(err) from err
        if arena.pages is not None:
            try:
                arena.pages.publish((offset - arena.near) // HUGE_PAGE,
                                    [p // HUGE_PAGE for start, size in runs
                                     for p in range(start, start + size, HUGE_PAGE)])
            except errors.AclError:  # the kernel refused a mapping (vm.max_map_count)
                arena.release(offset)
                raise
        self.on_change(tag.client, arena.kind, tag, span)
        return address.encode(self.dev, arena.kind, offset), span, int(tag.page_class)

    def free(self, client: int, ptr: int) -> int:
        """Free the block starting at ``ptr``; returns its span. Raises AclError (107000)."""
        with self.lock:
            return self._free(client, ptr)

    def _free(self, client: int, ptr: int) -> int:
        arena, offset = self._arena_of(ptr)
        tag = arena.tag_at(offset)
        if tag is None or tag.client != client:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"0x{ptr:x} is not the start of a live allocation of this "
                                   "process")
        block = (arena.kind, offset)
        self.shares.unexport(block)
        if block in self.shares.importers:  # still imported: an orphan until they close
            span = arena.retag(offset, Tag(ORPHAN, tag.page_class, tag.p2p))
            self.on_change(client, arena.kind, tag, -span)
            return span
        return self._release(arena, offset, client)

    def _release(self, arena: Arena, offset: int, client: int) -> int:
        span, tag = arena.release(offset)
        if client != ORPHAN:
            self.on_change(client, arena.kind, tag, -span)
        return span

    # level 2 of fragmentation control: dynamic merging --------------------------------------
    def merge_free(self) -> int:
        """Level-2 merge: free blocks are already merged by address (the heap coalesces on
        every free); every idle 2 MiB chunk of the normal-page pools goes back to the
        huge-page pool. Called after a model execute, on ``empty_cache`` (``Op.MEM_MERGE``)
        and implicitly when a huge-page allocation lands on idle chunks. Returns the bytes
        given back; O(1) (one lock, no scan) when nothing is idle."""
        arenas = self.arenas
        if not any(a.normal.idle for a in arenas):  # racy peek; the merge itself is locked
            return 0
        returned = 0
        with self.lock:
            for arena in arenas:
                shrunk = arena.normal.merge()
                if shrunk:
                    returned -= shrunk
                    if self.on_pool is not None:
                        self.on_pool(arena, shrunk)
            if returned:
                self.merges += 1
        return returned

    # IPC shareable handles (ipc.py) ----------------------------------------------------------
    def export(self, client: int, ptr: int) -> int:
        """Share key of the live block of ``client`` starting at ``ptr`` (107000 otherwise)."""
        with self.lock:
            arena, offset = self._arena_of(ptr)
            tag = arena.tag_at(offset)
            if tag is None or tag.client != client:
                raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                       f"0x{ptr:x} is not the start of a live allocation of "
                                       "this process")
            return self.shares.export(client, (arena.kind, offset))

    def allow_pid(self, client: int, key: int, pid: int) -> None:
        """Let host ``pid`` import ``key`` (only its exporter may; 107000 otherwise)."""
        with self.lock:
            exp = self.shares.exports.get(key)
            if exp is None or exp.owner != client:
                raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                       f"share key {key:#x} is not an export of this process")
            exp.pids.add(pid)

    def import_block(self, client: int, pid: int, key: int) -> tuple[int, int]:
        """``(ptr, span)`` of the block behind ``key`` for ``client`` (host ``pid``); 107000
        for an unknown key and when the pid was not allowed (our choice of code)."""
        with self.lock:
            exp = self.shares.exports.get(key)
            if exp is None:
                raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                       f"share key {key:#x} is not exported on device {self.dev}")
            if pid not in exp.pids and client != exp.owner:
                raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                       f"pid {pid} was not allowed to import {key:#x}")
            kind, offset = exp.block
            found = self.arenas[kind].find(offset)
            assert found is not None and found[0] == offset
            self.shares.add_importer(client, exp.block)
            return address.encode(self.dev, kind, offset), found[1]

    def close_import(self, client: int, ptr: int) -> None:
        """``client`` no longer uses the imported block at ``ptr`` (107000 if it did not)."""
        with self.lock:
            arena, offset = self._arena_of(ptr)
            block = (arena.kind, offset)
            if not self.shares.imported(client, block):
                raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                       f"0x{ptr:x} is not imported by this process")
            self._drop_import(client, arena, offset)

    def _drop_import(self, client: int, arena: Arena, offset: int, every: bool = False) -> None:
        if self.shares.drop_importer(client, (arena.kind, offset), every):
            tag = arena.tag_at(offset)
            if tag is not None and tag.client == ORPHAN:  # the last user of an orphan
                self._release(arena, offset, ORPHAN)

    def reclaim(self, client: int) -> int:
        """Free every block of ``client`` (its host died or detached) and drop its imports;
        returns bytes freed (or orphaned while others still import them)."""
        freed = 0
        with self.lock:
            for kind, offset in self.shares.blocks_imported_by(client):
                self._drop_import(client, self.arenas[kind], offset, every=True)
            for arena in self.arenas:
                for start, _span, tag in arena.blocks():
                    if tag.client == client:
                        freed += self._free(client, address.encode(self.dev, arena.kind, start))
        return freed

    # validation for device-side copies -----------------------------------------------------
    def resolve(self, client: int, ptr: int, count: int) -> tuple[Arena, int]:
        """Check that ``[ptr, ptr+count)`` lies inside one live block of ``client``; both
        must be non-negative ints. Any thread."""
        if type(ptr) is not int or type(count) is not int or ptr < 0 or count < 0:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"bad device range {ptr!r}+{count!r}")
        arena, offset = self._arena_of(ptr)
        with self.lock:
            found = arena.find(offset)
        if found is None or (found[2].client != client and not (
                self.shares.importers and self.shares.imported(client, (arena.kind, found[0])))):
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"0x{ptr:x} is not in a live allocation of this process")
        start, span, _tag = found
        if offset + count > start + span:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"0x{ptr:x}+{count} runs past its allocation "
                                   f"(0x{address.encode(self.dev, arena.kind, start):x}, "
                                   f"{span} bytes)")
        return arena, offset

    def _arena_of(self, ptr: int) -> tuple[Arena, int]:
        try:
            dev, kind, offset = address.decode(ptr)
        except ValueError as err:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, str(err)) from err
        if dev != self.dev or offset >= self.arenas[kind].span:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"0x{ptr:x} is not memory of device {self.dev}")
        return self.arenas[kind], offset

    # aclrtGetMemInfo -----------------------------------------------------------------------
    def mem_info(self, attr: int) -> tuple[int, int]:
        """``(free, total)`` bytes for an ``aclrtMemAttr``; unknown attributes give (0, 0)."""
        if attr not in MEM_ATTRS:
            return 0, 0
        kind, page_class = MEM_ATTRS[attr]
        arena = self.arenas[kind]
        with self.lock:
            free = arena.free_at_granularity(_GRANULE[page_class]) - arena.reserved
            return max(free, 0), arena.seg.size

    def pools(self) -> list[list[PoolStats]]:
        """Page pools of each arena (HBM first), see ``pools.py``. O(live + free blocks)."""
        with self.lock:
            return [pool_stats(a.alloc, a.normal, a.far is not None) for a in self.arenas]

    def snapshot(self) -> list[tuple[int, int, int, int]]:
        """Live blocks as ``(ptr, span, page class, client)``."""
        with self.lock:
            return self._snapshot()

    def _snapshot(self) -> list[tuple[int, int, int, int]]:
        return [(address.encode(self.dev, a.kind, start), span, int(tag.page_class), tag.client)
                for a in self.arenas for start, span, tag in a.blocks()]
