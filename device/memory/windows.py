"""Virtual windows: reserved address ranges (``aclrtReserveMemAddress`` + ``aclrtMapMem``)
as a card's kernels see them.

For each reservation of a client that has mappings of this card's memory, the worker keeps
a **window**: a contiguous range of its own address space the size of the reservation.
Each mapping's physical block (whole pages of this card's arena) is mapped into it at the
mapping's offset with ``mmap(MAP_FIXED | MAP_SHARED)`` of the arena's descriptor, so a
tensor that spans several mappings is one contiguous numpy view over the very pages of the
arena, as a card's MMU shows it; nothing is copied. The rest of the window is inaccessible
(``PROT_NONE``) and :meth:`Windows.find` refuses any range not wholly mapped (the kernel's
``MemoryFault``: 507053 at the launch's synchronize).

| request   | args                                                 | reply |
|-----------|------------------------------------------------------|-------|
| VMM_MAP   | va (reservation base), reservation size, offset in it, physical ptr, size | |
| VMM_UNMAP | va (reservation base), offset                        |       |

Rules: offsets and sizes are multiples of the page size and lie inside the reservation;
the physical block must be the client's (or imported by it) and on this card; pieces do not
overlap. A block that is not page-aligned in the arena (a NORMAL-page handle can be) is
kept as a mapping without a window piece: a tensor inside it alone still resolves, through
its physical block; one that spans it and a neighbour is refused. A window whose
reservation has no mapping left stays reserved (inaccessible) until the client detaches,
and is reused if the host maps at the same base again with the same size.

Threading model: the loop thread maps, unmaps and releases (``VMM_MAP``/``VMM_UNMAP``,
client detach); engine threads look ranges up (``find``, from ``KernelContext.tensor``).
A window's list of pieces is replaced, never changed in place, so a reader holds one
consistent list. An unmapped piece is replaced by anonymous memory (never left as a hole),
so a kernel still running on a view of it touches scratch pages instead of faulting; the
window itself is unmapped only when its client is released, after its last task reported.
"""

from __future__ import annotations

import bisect
import mmap
from dataclasses import dataclass

from npuemu.shared import address, errors, pages

_PAGE = mmap.PAGESIZE
_map, _RW = pages.map_memory, pages.PROT_RW
_SHARED_FIXED = pages.MAP_SHARED | pages.MAP_FIXED
_SCRATCH = pages.MAP_PRIVATE | pages.MAP_ANON | pages.MAP_NORESERVE | pages.MAP_FIXED


@dataclass(frozen=True)
class Piece:
    offset: int  # in the reservation
    size: int
    phys: int  # device pointer of the physical block
    windowed: bool  # its pages are mapped into the window


@dataclass(eq=False)
class Window:
    va: int
    size: int
    base: int  # address of the window in this process
    table: tuple[tuple[Piece, ...], tuple[int, ...]] = ((), ())  # pieces, their offsets

    def set(self, pieces: list[Piece]) -> None:
        pieces.sort(key=lambda p: p.offset)
        self.table = (tuple(pieces), tuple(p.offset for p in pieces))  # one store


class Windows:
    """The windows of one client (``Client.windows``)."""

    def __init__(self) -> None:
        self.by_va: dict[int, Window] = {}
        self.vas: list[int] = []  # sorted reservation bases

    # loop thread ----------------------------------------------------------------------------
    def map(self, va: int, size: int, offset: int, phys: int, length: int,
            arena_fd: int, runs: list[tuple[int, int]]) -> None:
        """``VMM_MAP``: ``[va+offset, +length)`` shows the physical block at ``phys``, whose
        bytes are ``runs`` (``(file offset, bytes)`` in the arena whose descriptor is
        ``arena_fd``: one run, or a far block's runs of pages, ``Arena.file_runs``)."""
        if not (address.is_virtual(va) and address.is_virtual(va + size - 1) and size > 0
                and va % _PAGE == 0
                and size % _PAGE == 0 and offset % _PAGE == 0 and length > 0
                and length % _PAGE == 0 and offset + length <= size):
            raise _invalid(f"VMM_MAP 0x{va:x}+{size}: piece {offset}+{length} is not whole "
                           "pages inside it")
        win = self.by_va.get(va)
        if win is None or win.size != size:
            self._clear(va, size)  # windows of released reservations there go
            base = pages.reserve(size)
            win = self.by_va[va] = Window(va, size, base)
            bisect.insort(self.vas, va)
        pieces, starts = win.table
        i = bisect.bisect_right(starts, offset) - 1
        if (i >= 0 and pieces[i].offset + pieces[i].size > offset) or \
                (i + 1 < len(pieces) and pieces[i + 1].offset < offset + length):
            raise _invalid(f"0x{va + offset:x}+{length} overlaps a mapping")
        windowed = all(start % _PAGE == 0 for start, _n in runs)
        if windowed:
            at = win.base + offset
            for start, n in runs:
                _map(at, n, _RW, _SHARED_FIXED, arena_fd, start)
                at += n
        win.set([*pieces, Piece(offset, length, phys, windowed)])

    def unmap(self, va: int, offset: int) -> None:
        """``VMM_UNMAP``: the piece at ``offset`` shows scratch memory and is no longer
        found."""
        win = self.by_va.get(va)
        pieces = win.table[0] if win else ()
        piece = next((p for p in pieces if p.offset == offset), None)
        if piece is None:
            raise _invalid(f"0x{va + offset:x} is not the start of a mapping of this card")
        if piece.windowed:
            _map(win.base + offset, piece.size, _RW, _SCRATCH, -1, 0)
        win.set([p for p in pieces if p is not piece])

    def release(self) -> None:
        """The client is gone and its tasks have all reported: unmap every window."""
        for win in list(self.by_va.values()):
            self._drop(win)

    def _drop(self, win: Window) -> None:
        pages.unmap_memory(win.base, win.size)
        del self.by_va[win.va]
        self.vas.remove(win.va)

    def _clear(self, va: int, size: int) -> None:
        """Drop the windows overlapping ``[va, va+size)``: they must have no mapping left
        (the host released those reservations)."""
        while (i := bisect.bisect_right(self.vas, va + size - 1) - 1) >= 0:
            other = self.by_va[self.vas[i]]
            if other.va + other.size <= va:
                return
            if other.table[0]:
                raise _invalid(f"0x{va:x}+{size} overlaps mapped reservation 0x{other.va:x}")
            self._drop(other)

    # any thread -----------------------------------------------------------------------------
    def find(self, ptr: int, nbytes: int) -> tuple[int | None, list[tuple[int, int]]]:
        """Where ``[ptr, ptr+nbytes)`` lies: ``(address in this process, spans)`` when it
        lies in mapped pieces of one window, or ``(None, [span])`` when it lies in one
        piece without window pages (resolve that through its physical block); ``spans``
        are the ``(physical pointer, bytes)`` it touches, piece by piece, for the caller
        to check that those blocks are still live. Raises AclError (107000) when some byte
        is not mapped."""
        i = bisect.bisect_right(self.vas, ptr) - 1
        win = self.by_va.get(self.vas[i]) if i >= 0 else None
        if win is None or ptr + nbytes > win.va + win.size:
            raise _invalid(f"0x{ptr:x}+{nbytes} is not inside a mapped range of this card")
        (pieces, starts), off, end = win.table, ptr - win.va, ptr - win.va + nbytes
        k = bisect.bisect_right(starts, off) - 1
        if k < 0:
            raise _invalid(f"0x{ptr:x} is not mapped")
        first = pieces[k]
        if end <= first.offset + first.size and not first.windowed:
            return None, [(first.phys + off - first.offset, nbytes)]
        spans, pos = [], off
        while pos < end:  # every byte mapped, and mapped into the window
            piece = pieces[k] if k < len(pieces) else None
            if piece is None or piece.offset > pos or pos >= piece.offset + piece.size \
                    or not piece.windowed:
                raise _invalid(f"0x{win.va + pos:x} in 0x{ptr:x}+{nbytes} is not mapped "
                               "(or not in pages the card can join to its neighbour)")
            upto = min(end, piece.offset + piece.size)
            spans.append((piece.phys + pos - piece.offset, upto - pos))
            pos, k = upto, k + 1
        return win.base + off, spans


def _invalid(detail: str) -> errors.AclError:
    return errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, detail)
