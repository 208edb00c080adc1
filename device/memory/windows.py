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
reservation has no mapping left becomes one scratch mapping (nothing in it is found) and
is reused if the host maps at the same base again with the same size; it is unmapped when
the client detaches, or when the client maps a new window while it has no task on an
engine (the host never says when it releases a reservation, and gives each new one a new
address: without this, a long-running process would pile up windows to the limits).

Limits (each ``Windows`` is one client's; a refused map changes nothing): every mapping the
worker makes is a kernel memory area (VMA) of the worker process, and a process has at most
``vm.max_map_count`` of them (65530 by default): past that every ``mmap`` of the worker fails,
far pages and peers' arenas included, and the card dies. So

- ``MAX_WINDOWS`` = 256 windows (reservations with a window on this card) per client;
- ``MAX_WINDOW_BYTES`` = 1 TiB of window address space per client (the worker's own address
  space is 128 TiB; 32 clients at their limit leave it three quarters free);
- ``MAX_PIECES`` = 4096 mappings (``aclrtMapMem`` pieces) per client;
- ``MAX_CLIENT_AREAS`` = 8192 memory areas per client, counted as an upper bound (a window is
  1, a mapped piece 2 + its runs of pages, a piece's scratch after an unmap 2);

each past which ``VMM_MAP`` is refused with ``ACL_ERROR_RT_OVER_LIMIT`` (207012), the
runtime's code for a resource count past its limit. All clients' windows together may hold
at most a quarter of ``vm.max_map_count`` areas (``area_budget``, read once); past that
``VMM_MAP`` is refused with ``ACL_ERROR_RT_RESOURCE_ALLOC_FAIL`` (207005): the card has no
mapping left to give, whatever this client holds.

Threading model: the loop thread maps, unmaps and releases (``VMM_MAP``/``VMM_UNMAP``,
client detach); engine threads look ranges up (``find``, from ``KernelContext.tensor``).
A window's list of pieces is replaced, never changed in place, so a reader holds one
consistent list. An unmapped piece is replaced by anonymous memory (never left as a hole),
so a kernel still running on a view of it touches scratch pages instead of faulting; the
window itself is unmapped only when no kernel of its client can be running: the client
released after its last task reported, or a ``VMM_MAP`` while the client has no task on an
engine (``idle``; the loop thread, which alone counts those tasks, says so). The limits'
counters (``Windows.areas``, ``bytes``, ``pieces``, ``Window.runs``, ``scratch``, ``spare``
and the module's ``_areas_in_use``) are the loop thread's alone.
"""

from __future__ import annotations

import bisect
import contextlib
import mmap
from dataclasses import dataclass, field

from npuemu.shared import address, errors, pages

_PAGE = mmap.PAGESIZE
_map, _RW = pages.map_memory, pages.PROT_RW
_SHARED_FIXED = pages.MAP_SHARED | pages.MAP_FIXED
_SCRATCH = pages.MAP_PRIVATE | pages.MAP_ANON | pages.MAP_NORESERVE | pages.MAP_FIXED

MAX_WINDOWS = 256
MAX_WINDOW_BYTES = 1 << 40
MAX_PIECES = 4096
MAX_CLIENT_AREAS = 8192
_areas_in_use = [0]  # memory areas of every client's windows in this worker (loop thread)


def area_budget() -> int:
    """Memory areas all windows of this worker may hold: a quarter of vm.max_map_count."""
    if not _budget:
        limit = 65530
        with contextlib.suppress(OSError, ValueError), \
                open("/proc/sys/vm/max_map_count") as f:
            limit = int(f.read())
        _budget.append(max(1024, limit // 4))
    return _budget[0]


_budget: list[int] = []


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
    runs: dict[int, int] = field(default_factory=dict)  # piece offset -> its runs of pages
    scratch: dict[int, int] = field(default_factory=dict)  # offset -> size of unmapped pieces
    spare: int = 0  # areas charged for maps that failed half way

    def set(self, pieces: list[Piece]) -> None:
        pieces.sort(key=lambda p: p.offset)
        self.table = (tuple(pieces), tuple(p.offset for p in pieces))  # one store


class Windows:
    """The windows of one client (``Client.windows``)."""

    def __init__(self) -> None:
        self.by_va: dict[int, Window] = {}
        self.vas: list[int] = []  # sorted reservation bases
        self.areas = 0  # memory areas its windows hold, an upper bound (see the limits)
        self.bytes = 0  # address space of its windows
        self.pieces = 0  # its live mappings

    # loop thread ----------------------------------------------------------------------------
    def map(self, va: int, size: int, offset: int, phys: int, length: int,
            arena_fd: int, runs: list[tuple[int, int]], idle: bool = False) -> None:
        """``VMM_MAP``: ``[va+offset, +length)`` shows the physical block at ``phys``, whose
        bytes are ``runs`` (``(file offset, bytes)`` in the arena whose descriptor is
        ``arena_fd``: one run, or a far block's runs of pages, ``Arena.file_runs``).
        ``idle``: the client has no task on an engine (no kernel holds a view of its
        windows), so a new window may first drop the windows left without mappings."""
        if not (address.is_virtual(va) and address.is_virtual(va + size - 1) and size > 0
                and va % _PAGE == 0
                and size % _PAGE == 0 and offset % _PAGE == 0 and length > 0
                and length % _PAGE == 0 and offset + length <= size):
            raise _invalid(f"VMM_MAP 0x{va:x}+{size}: piece {offset}+{length} is not whole "
                           "pages inside it")
        win = self.by_va.get(va)
        windowed = all(start % _PAGE == 0 for start, _n in runs)
        cost = 2 + (len(runs) if windowed else 0)
        new = win is None or win.size != size
        if new:
            self._clear(va, size)  # windows of released reservations there go
            if idle:
                self._drop_empty()
        again = (win is not None and not new and windowed
                 and win.scratch.get(offset) == length)  # its scratch goes
        self._check_limits(new, size, cost - 2 * again)
        if win is None or new:
            win = self._open(va, size)
        pieces, starts = win.table
        i = bisect.bisect_right(starts, offset) - 1
        if (i >= 0 and pieces[i].offset + pieces[i].size > offset) or \
                (i + 1 < len(pieces) and pieces[i + 1].offset < offset + length):
            raise _invalid(f"0x{va + offset:x}+{length} overlaps a mapping")
        if windowed:
            self._map_runs(win, offset, length, cost, arena_fd, runs)
        else:
            self._charge(cost)
        win.runs[offset] = cost
        self.pieces += 1
        win.set([*pieces, Piece(offset, length, phys, windowed)])

    def _map_runs(self, win: Window, offset: int, length: int, cost: int, arena_fd: int,
                  runs: list[tuple[int, int]]) -> None:
        """Map a piece's runs of pages into its window (charged first: an upper bound)."""
        self._charge(cost)
        try:
            at = win.base + offset
            for start, n in runs:
                _map(at, n, _RW, _SHARED_FIXED, arena_fd, start)
                at += n
        except BaseException:
            win.spare += cost  # some areas may have been made: kept until the window goes
            raise
        if win.scratch.get(offset) == length:  # the same place mapped again: no scratch left
            del win.scratch[offset]
            self._charge(-2)

    def _check_limits(self, new_window: bool, size: int, areas: int) -> None:
        """Refuse a map past this client's limits (207012) or the worker's budget (207005)."""
        over = ""
        if new_window and len(self.by_va) >= MAX_WINDOWS:
            over = f"{MAX_WINDOWS} windows"
        elif new_window and self.bytes + size > MAX_WINDOW_BYTES:
            over = f"{MAX_WINDOW_BYTES >> 30} GiB of windows"
        elif self.pieces >= MAX_PIECES:
            over = f"{MAX_PIECES} mappings"
        elif self.areas + areas + new_window > MAX_CLIENT_AREAS:
            over = f"{MAX_CLIENT_AREAS} memory areas"
        if over:
            raise errors.error_for(errors.ACL_ERROR_RT_OVER_LIMIT,
                                   f"VMM_MAP: this process has {over} on this card already")
        if _areas_in_use[0] + areas + new_window > area_budget():
            raise errors.error_for(errors.ACL_ERROR_RT_RESOURCE_ALLOC_FAIL,
                                   f"VMM_MAP: the card's {area_budget()} memory areas for "
                                   "windows are all in use")

    def _charge(self, areas: int) -> None:
        self.areas += areas
        _areas_in_use[0] += areas

    def _open(self, va: int, size: int) -> Window:
        base = pages.reserve(size)
        win = self.by_va[va] = Window(va, size, base)
        bisect.insort(self.vas, va)
        self.bytes += size
        self._charge(1)
        return win

    def unmap(self, va: int, offset: int) -> None:
        """``VMM_UNMAP``: the piece at ``offset`` shows scratch memory and is no longer
        found."""
        win = self.by_va.get(va)
        pieces = win.table[0] if win else ()
        piece = next((p for p in pieces if p.offset == offset), None)
        if piece is None or win is None:
            raise _invalid(f"0x{va + offset:x} is not the start of a mapping of this card")
        if piece.windowed:
            _map(win.base + offset, piece.size, _RW, _SCRATCH, -1, 0)
            if win.scratch.get(offset) != piece.size:
                win.scratch[offset] = piece.size
                self._charge(2)
        self._charge(-win.runs.pop(offset, 0))
        self.pieces -= 1
        win.set([p for p in pieces if p is not piece])
        if not win.table[0]:  # no mapping left: one area of scratch for the whole window
            _map(win.base, win.size, _RW, _SCRATCH, -1, 0)
            self._charge(-(2 * len(win.scratch) + win.spare))
            win.scratch.clear()
            win.spare = 0

    def _drop_empty(self) -> None:
        """Unmap the windows without mappings (reservations the host has released, or
        will map again: a later map makes a new window). Only while no kernel runs."""
        for win in [w for w in self.by_va.values() if not w.table[0]]:
            self._drop(win)

    def release(self) -> None:
        """The client is gone and its tasks have all reported: unmap every window."""
        for win in list(self.by_va.values()):
            self._drop(win)

    def _drop(self, win: Window) -> None:
        pages.unmap_memory(win.base, win.size)
        del self.by_va[win.va]
        self.vas.remove(win.va)
        self.bytes -= win.size
        self.pieces -= len(win.table[0])
        self._charge(-(1 + sum(win.runs.values()) + 2 * len(win.scratch) + win.spare))

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
