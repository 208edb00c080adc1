"""Far pages: huge-page blocks of an arena assembled from scattered 2 MiB pages.

An arena's addresses are its physical segment mapped as it is (offset = file offset, the
*near* range ``[0, P)``), then a *far* range ``[far_base(P), span(P))`` in which the card
places a huge-page block that no contiguous run of free pages can hold: each 2 MiB page of
such a block is one free physical page of the segment, wherever it lies, as a card's MMU
joins scattered pages into one virtual range (``device/memory/arenas.py`` decides which).
So a device pointer into the far range is an ordinary pointer of the arena: every process
that maps an arena (``shm.Segment(far=True)``) reserves ``span(P)`` bytes of address space,
maps the segment over the first ``P`` and maps far pages as the card publishes them in the
arena's page table, a segment of its own (``/npuemu.<node>.d<id>.<arena>.pages``, created by
the worker; its words are ``layout.PAGE_TABLE``: a generation, the number of far pages, then
one word per far page: the physical page it shows, or -1).

The card writes the entries of a new block, maps them in its own process, bumps the
generation and only then replies to the malloc; any other process calls
:meth:`FarPages.ensure_range` before it touches a far address, so it has mapped every page
of a block whose pointer it was given (the pointer came after the reply), and a range on a
page never published (inaccessible address space: touching it would fault the process) is
refused with 107000 instead. A freed block's
entries go back to -1 without a bump: a process keeps mapping the old pages until the far
page is used again (the runtime refuses access to freed memory before any byte moves).

Threading model: the card's loop thread publishes (under ``DeviceMemory.lock``); any thread
of any process calls ``ensure``, and ``_lock`` guards this process's mapped list.
"""

from __future__ import annotations

import array
import ctypes
import mmap
import os
import threading

from npuemu.shared import address, errors
from npuemu.shared.layout import PAGE_TABLE

PAGE = 2 << 20
"""A far page: one huge page."""
PROT_NONE, PROT_RW = 0, mmap.PROT_READ | mmap.PROT_WRITE
MAP_SHARED, MAP_PRIVATE, MAP_FIXED = mmap.MAP_SHARED, mmap.MAP_PRIVATE, 0x10
MAP_ANON, MAP_NORESERVE = mmap.MAP_ANONYMOUS, 0x4000
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_MAP_FAILED = ctypes.c_void_p(-1).value


def map_memory(addr: int, length: int, prot: int, flags: int, fd: int, offset: int) -> int:
    """``mmap(2)`` (``addr`` 0: anywhere); AclError 207001 when the kernel refuses."""
    got: int | None = _libc.mmap(addr or None, length, prot, flags, fd, offset)
    if got is None or got == _MAP_FAILED:
        err = ctypes.get_errno()
        raise errors.error_for(errors.ACL_ERROR_RT_MEMORY_ALLOCATION,
                               f"mmap of {length} bytes failed: {os.strerror(err)}")
    return got


def unmap_memory(addr: int, length: int) -> None:
    _libc.munmap(addr, length)


def reserve(length: int) -> int:
    """Inaccessible address space of ``length`` bytes (costs no memory)."""
    return map_memory(0, length, PROT_NONE, MAP_PRIVATE | MAP_ANON | MAP_NORESERVE, -1, 0)


def far_base(phys: int) -> int:
    """Arena offset of the far range: the segment's size rounded up to a page."""
    return -(-phys // PAGE) * PAGE


def far_size(phys: int) -> int:
    """Bytes of the far range: twice the segment (so its own address space never runs out
    first), within the arena's address window (``address.ARENA_STRIDE``)."""
    room = address.ARENA_STRIDE - far_base(phys)
    return max(0, min(room, 2 * phys)) // PAGE * PAGE


def span(phys: int) -> int:
    """Address space of an arena of ``phys`` bytes: near and far ranges."""
    return far_base(phys) + far_size(phys)


_GEN, _N, _ENTRIES = PAGE_TABLE.GENERATION, PAGE_TABLE.PAGES, PAGE_TABLE.words


def table_size(phys: int) -> int:
    return 8 * (_ENTRIES + far_size(phys) // PAGE)


class FarPages:
    """This process's far pages of one arena: the shared table, and what is mapped here.

    ``base`` is this process's address of arena offset 0 (a ``span(P)`` reservation whose
    first ``P`` bytes map the segment, ``fd``)."""

    def __init__(self, table: memoryview, base: int, fd: int, phys: int) -> None:
        self.words = table.cast("q")
        self.base, self.fd = base, fd
        self.first = far_base(phys)  # arena offset of far page 0
        self.mapped = [-1] * (far_size(phys) // PAGE)  # physical page mapped at far page i
        self.gen = 0
        self._lock = threading.Lock()

    @classmethod
    def create(cls, table: memoryview, base: int, fd: int, phys: int) -> FarPages:
        """The card's side: a table of unused far pages."""
        words = table.cast("q")
        n = far_size(phys) // PAGE
        words[_N] = n
        words[_ENTRIES : _ENTRIES + n] = array.array("q", [-1]) * n
        words.release()
        return cls(table, base, fd, phys)

    # the card ---------------------------------------------------------------------------
    def publish(self, first: int, phys_pages: list[int]) -> None:
        """Far pages ``first, first+1, ...`` show ``phys_pages``: mapped here, then the
        generation is bumped."""
        words = self.words
        for i, p in enumerate(phys_pages, first):
            words[_ENTRIES + i] = p
        with self._lock:
            self._map(first, phys_pages)
            words[_GEN] += 1
            self.gen = words[_GEN]  # the card maps all it publishes: nothing to follow here

    def unpublish(self, first: int, count: int) -> None:
        """Far pages of a freed block: unused (their mappings stay until reused)."""
        words = self.words
        for i in range(first, first + count):
            words[_ENTRIES + i] = -1

    # any process ----------------------------------------------------------------------------
    def ensure(self) -> None:
        """Map every page the card has published (O(1) when nothing changed)."""
        if self.words[_GEN] != self.gen:
            self._sync()

    def ensure_range(self, offset: int, count: int) -> None:
        """:meth:`ensure`, then check that ``[offset, offset+count)`` (arena offsets past the
        segment) lies on far pages mapped here; AclError 107000 otherwise (touching a page
        never published would fault this process). A range that starts in the segment is
        refused too: no block spans both."""
        self.ensure()
        first = (offset - self.first) // PAGE
        last = (offset + max(count, 1) - 1 - self.first) // PAGE
        if offset < self.first or last >= len(self.mapped) or min(self.mapped[first:last + 1]) < 0:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"arena offset {offset:#x}+{count} is not in far pages of "
                                   "a block")

    def _sync(self) -> None:
        with self._lock:
            gen = self.words[_GEN]  # read before the entries: a later change bumps it again
            table = self.words[_ENTRIES : _ENTRIES + len(self.mapped)].tolist()
            i, n = 0, len(table)
            while i < n:
                p = table[i]
                if p < 0 or p == self.mapped[i]:
                    i += 1
                    continue
                j = i + 1
                while j < n and table[j] == p + (j - i) and table[j] != self.mapped[j]:
                    j += 1
                self._map(i, table[i:j])
                i = j
            self.gen = gen

    def _map(self, first: int, phys_pages: list[int]) -> None:
        """Map far pages ``first..`` to ``phys_pages`` here, one mmap per run of
        consecutive pages (the caller holds ``_lock``)."""
        i, n = 0, len(phys_pages)
        while i < n:
            j = i + 1
            while j < n and phys_pages[j] == phys_pages[i] + (j - i):
                j += 1
            map_memory(self.base + self.first + (first + i) * PAGE, (j - i) * PAGE, PROT_RW,
                       MAP_SHARED | MAP_FIXED, self.fd, phys_pages[i] * PAGE)
            i = j
        self.mapped[first : first + n] = phys_pages

    def close(self) -> None:
        self.words.release()
