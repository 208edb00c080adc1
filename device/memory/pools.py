"""Page pools of one memory arena and how fragmented they are (the allocation policies of
``aclrtMalloc`` and the level-2 merge).

The arena's heap (:class:`npuemu.device.memory.allocator.Allocator`) is one address space; the pools
are a partition of it at 2 MiB granularity, as a driver that hands out huge pages and carves
normal pages out of some of them would see it:

| pool     | reserved                                        | used                 |
|----------|-------------------------------------------------|----------------------|
| normal   | 2 MiB chunks holding at least one NORMAL block   | NORMAL block spans   |
| huge     | every other byte except live 1 GiB pages         | HUGE (2 MiB) spans   |
| huge1g   | live 1 GiB pages (taken from the huge pool's free space on demand) | their spans |

So ``sum(reserved) == capacity`` and per pool ``used + free == reserved``. The heap merges
free neighbours by address at once (O(1) per free). A chunk whose last NORMAL block is freed
stays in the normal pool, *idle* (a page pool keeps its carved pages), until the
level-2 merge (idle 2 MiB chunks back to the huge-page pool) returns it:
:meth:`NormalChunks.merge` (``DeviceMemory.merge_free``: after a model execute, on
``empty_cache``), or a huge-page allocation that needs the chunk (:meth:`NormalChunks.claim`:
a huge-page allocation never fails for want of idle chunks). Until then the huge
pool's ``largest_free`` does not count idle chunks.

Per pool, ``largest_free`` is the largest free run a request of that pool could use (normal:
any run inside the normal chunks; huge: 2 MiB-aligned runs outside them, or all of them
together on a card that assembles huge-page blocks from scattered pages, ``arenas.py``;
huge1g: 0, its pages are all in use) and ``fragmentation = 1 - largest_free / free`` (0 when
nothing is free): the external fragmentation of the figures
published for Ascend 910B (35-50 % before the level-2 merge, 5-10 % after).

:class:`NormalChunks` keeps the normal pool's chunk set incrementally (O(chunks a block
touches) per malloc/free); :func:`pool_stats` is O(live + free blocks), for queries, not for
the hot path. Pure bookkeeping: no I/O, no locks (the caller holds ``DeviceMemory.lock``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from npuemu.device.memory.allocator import HUGE_PAGE, Allocator, PageClass

__all__ = ["CHUNK", "NormalChunks", "PoolStats", "fragmentation", "pool_stats"]

CHUNK = HUGE_PAGE
"""Granule of the pool partition (one 2 MiB huge page)."""
POOL_NAMES = ("normal", "huge", "huge1g")


@dataclass(frozen=True, slots=True)
class PoolStats:
    """Figures of one page pool, in bytes."""

    name: str
    reserved: int
    used: int
    free: int
    largest_free: int
    fragmentation: float

    def as_row(self) -> list[str | int]:
        """Wire form: ``[name, reserved, used, free, largest_free, fragmentation ppm]``."""
        return [self.name, self.reserved, self.used, self.free, self.largest_free,
                round(self.fragmentation * 1e6)]

    @classmethod
    def from_row(cls, row: list[Any] | tuple[Any, ...]) -> PoolStats:
        name, reserved, used, free, largest, ppm = row
        return cls(name, reserved, used, free, largest, ppm / 1e6)


def fragmentation(largest_free: int, free: int) -> float:
    """External fragmentation ``1 - largest_free / free`` (0.0 when nothing is free)."""
    return 1.0 - largest_free / free if free > 0 else 0.0


class NormalChunks:
    """Reference counts of NORMAL blocks per 2 MiB chunk: the normal pool's reserved chunks.

    A chunk whose count drops to 0 stays reserved (``idle``) until :meth:`merge` or
    :meth:`claim` gives it back to the huge pool. :meth:`add`, :meth:`merge` and
    :meth:`claim` return the change of the pool's reserved bytes (so the caller can log when
    the pool grows or shrinks); :meth:`remove` never changes it.
    """

    __slots__ = ("counts", "idle")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.idle: set[int] = set()  # chunks with count 0, still in the normal pool

    def add(self, offset: int, span: int) -> int:
        counts, grown = self.counts, 0
        for chunk in range(offset // CHUNK, (offset + span - 1) // CHUNK + 1):
            n = counts.get(chunk)
            if n is None:
                counts[chunk] = 1
                grown += CHUNK
            else:
                if not n:
                    self.idle.discard(chunk)
                counts[chunk] = n + 1
        return grown

    def remove(self, offset: int, span: int) -> int:
        counts = self.counts
        for chunk in range(offset // CHUNK, (offset + span - 1) // CHUNK + 1):
            n = counts[chunk] - 1
            counts[chunk] = n
            if not n:
                self.idle.add(chunk)
        return 0

    def merge(self) -> int:
        """Level 2: every idle chunk goes back to the huge pool (O(idle chunks); O(1) when
        none). Returns the (negative) change of reserved bytes."""
        idle = self.idle
        if not idle:
            return 0
        counts = self.counts
        for chunk in idle:
            del counts[chunk]
        shrunk = -len(idle) * CHUNK
        idle.clear()
        return shrunk

    def claim(self, offset: int, span: int) -> int:
        """A huge-page block was placed on ``[offset, offset+span)``: the idle chunks it
        covers go back to the huge pool (a chunk with live NORMAL blocks cannot be under
        it). Returns the (negative) change of reserved bytes."""
        idle = self.idle
        if not idle:
            return 0
        shrunk = 0
        for chunk in range(offset // CHUNK, (offset + span - 1) // CHUNK + 1):
            if chunk in idle:
                idle.discard(chunk)
                del self.counts[chunk]
                shrunk -= CHUNK
        return shrunk

    def clear(self) -> None:
        self.counts.clear()
        self.idle.clear()

    @property
    def reserved(self) -> int:
        return len(self.counts) * CHUNK


def _runs(free_blocks: list[tuple[int, int]], chunks: dict[int, int],
          capacity: int, paged: bool) -> tuple[int, int]:
    """Largest free run inside the normal chunks and largest 2 MiB-aligned free run outside
    them (``paged``: all those runs together, as a far block joins them)."""
    best_normal = best_huge = total_huge = 0
    for start, size in free_blocks:
        end = start + size
        pos = start
        normal_run = huge_run = 0
        while pos < end:
            chunk = pos // CHUNK
            step_end = min(end, (chunk + 1) * CHUNK, capacity)
            if chunk in chunks:
                normal_run += step_end - pos
                best_huge = max(best_huge, huge_run)
                huge_run = 0
            else:
                best_normal = max(best_normal, normal_run)
                normal_run = 0
                if pos == chunk * CHUNK and step_end == (chunk + 1) * CHUNK:
                    huge_run += CHUNK
                    total_huge += CHUNK
                else:  # a partial chunk cannot hold a huge page
                    best_huge = max(best_huge, huge_run)
                    huge_run = 0
            pos = step_end
        best_normal = max(best_normal, normal_run)
        best_huge = max(best_huge, huge_run)
    return best_normal, total_huge if paged else best_huge


def pool_stats(heap: Allocator[Any], chunks: NormalChunks, paged: bool = False) -> list[PoolStats]:
    """The three pools of ``heap`` (see the module docstring), normal first; ``paged``: the
    arena has a far range, so a huge-page request can use every free page at once."""
    used_by = heap.stats().used_by
    used = [used_by.get(PageClass.NORMAL, 0), used_by.get(PageClass.HUGE, 0),
            used_by.get(PageClass.HUGE1G, 0)]
    normal_reserved = chunks.reserved
    reserved = [normal_reserved, heap.capacity - normal_reserved - used[2], used[2]]
    largest_normal, largest_huge = _runs(heap.free_blocks(), chunks.counts, heap.capacity,
                                         paged)
    largest = [largest_normal, largest_huge, 0]
    out = []
    for i, name in enumerate(POOL_NAMES):
        free = reserved[i] - used[i]
        out.append(PoolStats(name, reserved[i], used[i], free, largest[i],
                             fragmentation(largest[i], free)))
    return out
