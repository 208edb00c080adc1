"""Device-memory allocator of an emulated NPU: aclrtMalloc sizing rules plus an offset heap.

Each emulated device worker owns one :class:`Allocator` per memory arena (HBM and DDR, see
:mod:`npuemu.shared.address`). The allocator is pure bookkeeping over integer byte offsets in
``[0, capacity)``: it never touches the backing shared memory, does no I/O and uses no numpy,
so it can be unit-tested exhaustively and stays cheap on the hot ``aclrtMalloc``/``aclrtFree``
path.

Two layers:

**Policy layer** -- :func:`plan` turns an ``aclrtMalloc(size, policy)`` request into a
:class:`Plan` (span, alignment, page class, P2P flag, optional fallback plan):

* ``size`` must be > 0 (``ValueError`` otherwise; the caller maps zero sizes to an ACL error
  before asking).
* Base rounding, as documented for ``aclrtMalloc``: ``size`` is rounded up to a multiple of
  32 bytes and then 32 bytes of padding are added. The 1 GiB page classes get no padding.
* Page classes (:class:`PageClass`):

  - ``NORMAL``: the padded size is rounded up to 64 bytes and the block is 64-byte aligned.
    This 64-byte granule, and placing NORMAL blocks anywhere at 64-byte granularity (several
    blocks may share one 4 KiB/64 KiB "page"), is *our* choice: the real driver's small-page
    layout is not documented. It keeps every span and offset a multiple of 64.
  - ``HUGE``: 2 MiB pages -- span rounded up to 2 MiB, start aligned to 2 MiB.
  - ``HUGE1G``: 1 GiB pages -- span rounded up to 1 GiB (no padding), aligned to 1 GiB.

* ``policy & ~0x101100`` is the base policy; the modifiers ``ACL_MEM_TYPE_LOW_BAND_WIDTH``
  (0x100), ``ACL_MEM_TYPE_HIGH_BAND_WIDTH`` (0x1000) and ``ACL_MEM_ACCESS_USER_SPACE_READONLY``
  (0x100000) are ignored here (the caller uses them to choose the arena). A bare modifier
  therefore means base 0, i.e. HUGE_FIRST, as the CANN documentation says. Base policies:

  - 0 ``ACL_MEM_MALLOC_HUGE_FIRST``: size <= 1 MiB -> NORMAL; larger -> HUGE with a NORMAL
    fallback plan;
  - 1 ``ACL_MEM_MALLOC_HUGE_ONLY``: HUGE, no fallback;
  - 2 ``ACL_MEM_MALLOC_NORMAL_ONLY``: NORMAL;
  - 3, 4, 5 (the ``_P2P`` variants): same as 0, 1, 2 with ``p2p=True``;
  - 6 ``ACL_MEM_MALLOC_HUGE1G_ONLY``: HUGE1G; 7 ``..._HUGE1G_ONLY_P2P``: HUGE1G, ``p2p=True``;
  - any other base value: HUGE if size >= 2 MiB else NORMAL, no fallback, ``p2p=False``
    (the documented out-of-range rule).

**Allocator layer** -- :class:`Allocator` hands out blocks of exactly ``span`` bytes whose
start is a multiple of ``align`` (both positive multiples of 64), best-fit with splitting:
the smallest free block that can hold the aligned request is chosen (ties: lowest offset),
and the fragments before and after the aligned block go back to the free lists. Freeing
coalesces with both free neighbours, so freeing everything leaves one free block covering the
whole arena. A full arena is not an error: :meth:`Allocator.alloc` returns ``None``.

Data structures and complexity (F = free blocks, L = live blocks):

* free blocks: ``dict start -> size`` and ``dict end -> start`` (O(1) neighbour lookup for
  coalescing) plus a sorted ``list`` of integer keys ``size << shift | start`` (ordered like
  ``(size, start)``) searched with :mod:`bisect` for best fit;
* live blocks: ``dict start -> (span, tag, class)`` plus a sorted ``list`` of starts;
* whole 2 MiB pages inside free blocks: one counter kept by every split and merge
  (``free_pages``, O(1)), what a huge-page block assembled from scattered pages can use.

:meth:`Allocator.take` places a block at an offset the caller chose (O(1) when the caller
names the free block, else O(F)).
``alloc`` and ``free`` are O(log F + log L) comparisons plus the list insert/delete memmoves
(O(F + L) pointer moves, negligible at realistic sizes). With ``align == 64`` the first
candidate always fits; a larger alignment may scan past candidates that are big enough but
cannot hold the aligned block (worst case O(F)). ``find`` is O(log L); ``stats`` is O(number
of tag classes); ``snapshot`` and ``free_blocks`` are O(L) and O(F log F).
"""

from __future__ import annotations

import operator
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from enum import IntEnum
from typing import Generic, NamedTuple, TypeVar

__all__ = [
    "GRANULE",
    "HUGE1G_PAGE",
    "HUGE_FIRST_THRESHOLD",
    "HUGE_PAGE",
    "POLICY_HUGE1G_ONLY",
    "POLICY_HUGE1G_ONLY_P2P",
    "POLICY_HUGE_FIRST",
    "POLICY_HUGE_FIRST_P2P",
    "POLICY_HUGE_ONLY",
    "POLICY_HUGE_ONLY_P2P",
    "POLICY_MODIFIER_MASK",
    "POLICY_NORMAL_ONLY",
    "POLICY_NORMAL_ONLY_P2P",
    "Allocator",
    "AllocatorStats",
    "PageClass",
    "Plan",
    "plan",
]

GRANULE = 64
"""Span and offset granule of every block (and the alignment of NORMAL blocks)."""
HUGE_PAGE = 2 << 20
"""Size and alignment of a huge page (2 MiB)."""
HUGE1G_PAGE = 1 << 30
"""Size and alignment of a 1 GiB huge page."""
HUGE_FIRST_THRESHOLD = 1 << 20
"""HUGE_FIRST requests up to this many bytes (1 MiB) use normal pages."""

POLICY_MODIFIER_MASK = 0x101100
"""LOW_BAND_WIDTH | HIGH_BAND_WIDTH | USER_SPACE_READONLY: cleared to get the base policy."""

POLICY_HUGE_FIRST = 0
POLICY_HUGE_ONLY = 1
POLICY_NORMAL_ONLY = 2
POLICY_HUGE_FIRST_P2P = 3
POLICY_HUGE_ONLY_P2P = 4
POLICY_NORMAL_ONLY_P2P = 5
POLICY_HUGE1G_ONLY = 6
POLICY_HUGE1G_ONLY_P2P = 7

_BASE_MASK = ~POLICY_MODIFIER_MASK


class PageClass(IntEnum):
    """Kind of pages a block is carved from."""

    NORMAL = 0
    HUGE = 1
    HUGE1G = 2


class Plan(NamedTuple):
    """How to place one aclrtMalloc request: try ``(span, align)``, then ``fallback`` if set."""

    span: int
    align: int
    page_class: PageClass
    p2p: bool = False
    fallback: Plan | None = None


# Enum member lookups through the class are slowish; plan() is on the malloc hot path.
_NORMAL = PageClass.NORMAL
_HUGE = PageClass.HUGE
_HUGE1G = PageClass.HUGE1G


def _normal(padded: int, p2p: bool) -> Plan:
    return Plan((padded + 63) & -64, GRANULE, _NORMAL, p2p, None)


def _huge(padded: int, p2p: bool, fallback: Plan | None) -> Plan:
    return Plan((padded + HUGE_PAGE - 1) & -HUGE_PAGE, HUGE_PAGE, _HUGE, p2p, fallback)


def _huge1g(size: int, p2p: bool) -> Plan:
    span = (size + HUGE1G_PAGE - 1) & -HUGE1G_PAGE
    return Plan(span, HUGE1G_PAGE, _HUGE1G, p2p, None)


def plan(size: int, policy: int) -> Plan:
    """Placement plan for ``aclrtMalloc(size, policy)`` (see the module docstring).

    Raises ``ValueError`` if ``size <= 0`` and ``TypeError`` if ``size`` is not an integer.
    """
    size = operator.index(size)
    if size <= 0:
        raise ValueError(f"allocation size must be > 0, got {size}")
    base = operator.index(policy) & _BASE_MASK
    if base in (POLICY_HUGE1G_ONLY, POLICY_HUGE1G_ONLY_P2P):
        return _huge1g(size, base == POLICY_HUGE1G_ONLY_P2P)
    padded = ((size + 31) & -32) + 32
    if 0 <= base <= POLICY_NORMAL_ONLY_P2P:
        p2p = base >= POLICY_HUGE_FIRST_P2P
        kind = base - 3 if p2p else base
        if kind == POLICY_NORMAL_ONLY:
            return _normal(padded, p2p)
        if kind == POLICY_HUGE_ONLY:
            return _huge(padded, p2p, None)
        # HUGE_FIRST
        if size <= HUGE_FIRST_THRESHOLD:
            return _normal(padded, p2p)
        return _huge(padded, p2p, _normal(padded, p2p))
    # Out-of-range base policy: the documented size rule.
    if size >= HUGE_PAGE:
        return _huge(padded, False, None)
    return _normal(padded, False)


@dataclass(frozen=True, slots=True)
class AllocatorStats:
    """Point-in-time usage figures of one :class:`Allocator` (all in bytes except counts)."""

    capacity: int
    used: int
    free: int
    peak_used: int
    live_count: int
    free_block_count: int
    largest_free: int
    used_by: dict[Hashable, int]
    """``classify(tag) -> bytes`` over live blocks (empty if no ``classify`` was given)."""


_PAGE_MASK = HUGE_PAGE - 1  # whole pages in [a, b): (b >> 21) - ((a + _PAGE_MASK) >> 21), if > 0


def _pages(start: int, size: int) -> int:
    """Whole aligned huge pages inside ``[start, start+size)``."""
    n = ((start + size) >> 21) - ((start + _PAGE_MASK) >> 21)
    return n if n > 0 else 0


T = TypeVar("T")
"""What a block's tag is (the arenas' ``Tag``; anything for a bare allocator)."""


class Allocator(Generic[T]):
    """Best-fit, coalescing allocator of 64-byte-granular blocks over ``[0, capacity)``.

    ``classify`` (optional) maps a block's tag to a hashable class; :meth:`stats` then reports
    live bytes per class in ``used_by``. It is called once per :meth:`alloc`; the class is
    remembered, so tags need not stay classifiable afterwards.
    """

    __slots__ = (
        "_capacity",
        "_classify",
        "_free_end",
        "_free_keys",
        "_free_pages",
        "_free_start",
        "_live",
        "_mask",
        "_peak",
        "_shift",
        "_starts",
        "_used",
        "_used_by",
    )

    def __init__(
        self, capacity: int, classify: Callable[[T], Hashable] | None = None
    ) -> None:
        capacity = operator.index(capacity)
        if capacity < 0 or capacity % GRANULE:
            raise ValueError(f"capacity must be a non-negative multiple of {GRANULE}: {capacity}")
        self._capacity = capacity
        self._classify = classify
        # Free-list key: size << shift | start, which sorts like (size, start) since start
        # < capacity < 2**shift.
        self._shift = max(capacity.bit_length(), 1)
        self._mask = (1 << self._shift) - 1
        self._free_start: dict[int, int] = {}
        self._free_end: dict[int, int] = {}
        self._free_keys: list[int] = []
        self._live: dict[int, tuple[int, T, Hashable]] = {}
        self._starts: list[int] = []
        self._used_by: dict[Hashable, int] = {}
        self._used = 0
        self._peak = 0
        self._free_pages = 0
        self.reset()

    # -- properties ---------------------------------------------------------------------

    @property
    def capacity(self) -> int:
        """Arena size in bytes."""
        return self._capacity

    @property
    def used(self) -> int:
        """Sum of live spans."""
        return self._used

    def __len__(self) -> int:
        return len(self._live)

    @property
    def largest_free(self) -> int:
        """Size of the largest free block (O(1))."""
        keys = self._free_keys
        return keys[-1] >> self._shift if keys else 0

    @property
    def free_pages(self) -> int:
        """Whole 2 MiB pages (aligned) inside free blocks, counted as blocks change (O(1))."""
        return self._free_pages

    @property
    def free_block_count(self) -> int:
        """Number of free blocks (O(1))."""
        return len(self._free_start)

    def __repr__(self) -> str:
        return (
            f"Allocator(capacity={self._capacity}, used={self._used}, "
            f"live={len(self._live)}, free_blocks={len(self._free_start)})"
        )

    # -- core ---------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget every block (device reset): one free block covers the arena, peak is 0."""
        self._free_start.clear()
        self._free_end.clear()
        self._free_keys.clear()
        self._live.clear()
        self._starts.clear()
        self._used_by.clear()
        self._used = 0
        self._peak = 0
        self._free_pages = _pages(0, self._capacity)
        if self._capacity:
            self._free_start[0] = self._capacity
            self._free_end[self._capacity] = 0
            self._free_keys.append(self._capacity << self._shift)

    def alloc(self, span: int, align: int, tag: T) -> int | None:
        """Offset of a new block of ``span`` bytes aligned to ``align``, or ``None`` if full.

        ``span`` and ``align`` must be positive multiples of 64 (``ValueError`` otherwise).
        """
        if span <= 0 or span & 63 or align <= 0 or align & 63:
            raise ValueError(f"span and align must be positive multiples of 64: {span}, {align}")
        keys = self._free_keys
        shift = self._shift
        i = bisect_left(keys, span << shift)
        n = len(keys)
        if i == n:
            return None
        mask = self._mask
        key = keys[i]
        start = key & mask
        size = key >> shift
        if align == GRANULE:
            at = start
        else:
            while True:
                at = -(-start // align) * align
                if at + span <= start + size:
                    break
                i += 1
                if i == n:
                    return None
                key = keys[i]
                start = key & mask
                size = key >> shift
        del keys[i]
        self._carve(start, size, at, span, tag)
        return at

    def take(self, at: int, span: int, tag: T, within: int | None = None) -> None:
        """Make ``[at, at+span)``, which must lie inside one free block, a live block
        (placement chosen by the caller; O(1) when ``within`` names the free block's start,
        else O(F) to find it). ValueError if it is not free."""
        if span <= 0 or span & 63 or at & 63:
            raise ValueError(f"span and offset must be multiples of 64: {at}, {span}")
        free_start = self._free_start
        blocks = ((within, free_start.get(within, 0)),) if within is not None \
            else free_start.items()
        for start, size in blocks:
            if start <= at and at + span <= start + size:
                break
        else:
            raise ValueError(f"[{at}, {at + span}) is not free")
        keys = self._free_keys
        del keys[bisect_left(keys, (size << self._shift) | start)]
        self._carve(start, size, at, span, tag)

    def _carve(self, start: int, size: int, at: int, span: int, tag: T) -> None:
        """The free block ``(start, size)``, already out of the size list, gives up
        ``[at, at+span)`` to a live block; the fragments before and after stay free."""
        keys = self._free_keys
        shift = self._shift
        free_start = self._free_start
        free_end = self._free_end
        end = start + size
        del free_start[start]
        del free_end[end]
        # whole pages: of the block, minus those of the fragments (when it held any)
        pages = (end >> 21) - ((start + _PAGE_MASK) >> 21)
        if at != start:
            free_start[start] = at - start
            free_end[at] = start
            insort(keys, ((at - start) << shift) | start)
            if pages > 0:
                pages -= max(0, (at >> 21) - ((start + _PAGE_MASK) >> 21))
        tail = at + span
        if tail != end:
            free_start[tail] = end - tail
            free_end[end] = tail
            insort(keys, ((end - tail) << shift) | tail)
            if pages > 0:
                pages -= max(0, (end >> 21) - ((tail + _PAGE_MASK) >> 21))
        if pages > 0:
            self._free_pages -= pages
        classify = self._classify
        if classify is None:
            self._live[at] = (span, tag, None)
        else:
            cls = classify(tag)
            self._live[at] = (span, tag, cls)
            used_by = self._used_by
            used_by[cls] = used_by.get(cls, 0) + span
        insort(self._starts, at)
        used = self._used + span
        self._used = used
        if used > self._peak:
            self._peak = used

    def free(self, offset: int) -> tuple[int, T]:
        """Free the live block starting at ``offset``; return its ``(span, tag)``.

        Raises ``KeyError`` if no live block starts exactly at ``offset``.
        """
        try:
            span, tag, cls = self._live.pop(offset)
        except KeyError:
            raise KeyError(offset) from None
        starts = self._starts
        del starts[bisect_left(starts, offset)]
        self._used -= span
        if self._classify is not None:
            used_by = self._used_by
            left = used_by[cls] - span
            if left:
                used_by[cls] = left
            else:
                del used_by[cls]
        keys = self._free_keys
        shift = self._shift
        free_start = self._free_start
        free_end = self._free_end
        start = offset
        end = offset + span
        pages = 0  # whole pages the merged block adds to those of the neighbours it took
        prev = free_end.pop(start, None)
        if prev is not None:
            del free_start[prev]
            del keys[bisect_left(keys, ((start - prev) << shift) | prev)]
            pages = -max(0, (start >> 21) - ((prev + _PAGE_MASK) >> 21))
            start = prev
        nsize = free_start.pop(end, None)
        if nsize is not None:
            del free_end[end + nsize]
            del keys[bisect_left(keys, (nsize << shift) | end)]
            pages -= max(0, ((end + nsize) >> 21) - ((end + _PAGE_MASK) >> 21))
            end += nsize
        merged = (end >> 21) - ((start + _PAGE_MASK) >> 21)
        if merged > 0:
            self._free_pages += pages + merged
        free_start[start] = end - start
        free_end[end] = start
        insort(keys, ((end - start) << shift) | start)
        return span, tag

    def retag(self, offset: int, tag: T) -> int:
        """Give the live block at ``offset`` a new tag (same class); returns its span."""
        span, _old, cls = self._live[offset]
        self._live[offset] = (span, tag, cls)
        return span

    # -- queries ------------------------------------------------------------------------

    def tag_at(self, offset: int) -> T | None:
        """Tag of the live block that starts at ``offset`` (O(1)), or None."""
        block = self._live.get(offset)
        return None if block is None else block[1]

    def find(self, addr: int) -> tuple[int, int, T] | None:
        """The live block ``(start, span, tag)`` containing ``addr``, or ``None``."""
        starts = self._starts
        i = bisect_right(starts, addr) - 1
        if i < 0:
            return None
        start = starts[i]
        span, tag, _ = self._live[start]
        if addr < start + span:
            return start, span, tag
        return None

    def snapshot(self) -> list[tuple[int, int, T]]:
        """Live blocks as ``(start, span, tag)`` sorted by start."""
        live = self._live
        out = []
        for s in self._starts:
            span, tag, _ = live[s]
            out.append((s, span, tag))
        return out

    def free_blocks(self) -> list[tuple[int, int]]:
        """Free blocks as ``(start, size)`` sorted by start."""
        return sorted(self._free_start.items())

    def stats(self) -> AllocatorStats:
        """Current usage figures."""
        keys = self._free_keys
        return AllocatorStats(
            capacity=self._capacity,
            used=self._used,
            free=self._capacity - self._used,
            peak_used=self._peak,
            live_count=len(self._live),
            free_block_count=len(self._free_start),
            largest_free=keys[-1] >> self._shift if keys else 0,
            used_by=dict(self._used_by),
        )
