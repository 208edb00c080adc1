"""Host memory as the runtime sees it: pinned blocks and validation of plain host pointers.

- Pinned memory (``aclrtMallocHost``) is a shared-memory segment per block, named
  ``/npuemu.<node>.p<pid>.<random token>`` (``shm.pinned_name``), so the device workers can
  map it by name (async copies); the worker refuses a block that is not this user's.
- Any other host address (``acl.util.bytes_to_ptr``, a numpy buffer) is pageable memory. It
  is checked against this process's mappings (``/proc/self/maps``, cached and re-read on a
  miss) before the runtime reads or writes it: a bad host pointer gives
  ``ACL_ERROR_RT_PARAM_INVALID`` instead of a segfault of the user's process.

Threading model: every user thread calls in (copies, ``malloc_host``/``free_host``).
``HostMaps`` publishes its cache as one immutable ``(starts, ranges)`` tuple in a single
store (``cache``), so a lock-free reader never pairs the starts of one reload with the ranges
of another, and a range taken from it (``covering``) stays valid while ``cache`` is that same
tuple; ``HostMaps._lock`` only serialises reloads. ``PinnedPool._lock`` serialises
changes of ``blocks`` and the name counter; ``blocks`` and its sorted spans are copied on
write (new ones per malloc/free, never mutated once published), so ``find`` and ``span``
read them without a lock.
``StagingPool._lock`` guards ``free`` and ``busy``.
"""

from __future__ import annotations

import bisect
import threading
from typing import Protocol

from npuemu.shared import errors, shm

HOST_PAGE = 4096


class HostMaps:
    """Cached view of ``/proc/self/maps``: which ranges may be read or written."""

    def __init__(self) -> None:
        self.cache: tuple[list[int], list[tuple[int, int, bool, bool]]] = ([], [])
        self._lock = threading.Lock()

    def _reload(self) -> None:
        ranges = []
        with open("/proc/self/maps") as f:
            for line in f:
                span, perms = line.split(None, 2)[:2]
                lo, hi = (int(x, 16) for x in span.split("-"))
                # the kernel's [vvar] pages are listed readable but fault (SIGBUS) on a read
                readable = perms[0] == "r" and "[vvar" not in line
                ranges.append((lo, hi, readable, perms[1] == "w"))
        ranges.sort()
        merged: list[tuple[int, int, bool, bool]] = []
        for r in ranges:  # join adjacent mappings with the same rights
            if merged and merged[-1][1] == r[0] and merged[-1][2:] == r[2:]:
                merged[-1] = (merged[-1][0], r[1], r[2], r[3])
            else:
                merged.append(r)
        self.cache = ([r[0] for r in merged], merged)  # one store: readers see one reload

    def invalidate(self) -> None:
        """Forget the cached mappings (after this process unmapped something)."""
        with self._lock:
            self.cache = ([], [])

    def _covers(self, addr: int, n: int, write: bool) -> bool:
        starts, ranges = self.cache
        i = bisect.bisect_right(starts, addr) - 1
        if i < 0:
            return False
        _lo, hi, r, w = ranges[i]
        return addr + n <= hi and (w if write else r)

    def check(self, addr: int, n: int, write: bool) -> None:
        """Raise AclError (107000) unless ``[addr, addr+n)`` is mapped with the rights."""
        if addr <= 0:
            raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, "null host pointer")
        starts, ranges = self.cache  # a hit: ``_covers`` inlined (on every small copy)
        i = bisect.bisect_right(starts, addr) - 1
        if i >= 0:
            _lo, hi, r, w = ranges[i]
            if addr + n <= hi and (w if write else r):
                return
        with self._lock:
            self._reload()
        if not self._covers(addr, n, write):
            what = "writable" if write else "readable"
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"host range 0x{addr:x}+{n} is not {what} memory of this "
                                   "process")

    def covering(self, addr: int, n: int, write: bool) -> tuple[int, int, object]:
        """``check``, then the mapped range holding ``addr`` as ``(lo, hi, token)``: any
        ``[a, a+m)`` inside ``[lo, hi)`` has the same rights while ``cache is token`` (a
        caller may skip its next checks on that test alone, as ``check`` would hit)."""
        self.check(addr, n, write)
        token = self.cache
        starts, ranges = token
        i = bisect.bisect_right(starts, addr) - 1
        if i < 0:  # reloaded meanwhile by another thread: nothing to keep
            return 0, 0, None
        lo, hi, r, w = ranges[i]
        if addr + n > hi or not (w if write else r):
            return 0, 0, None
        return lo, hi, token


Span = tuple[int, int, shm.Segment]
"""A pinned block: its first address, the address after its last byte, its segment."""


class PinnedPool:
    """``aclrtMallocHost`` blocks: one shared-memory segment each, page-rounded."""

    def __init__(self, node: str, pid: int) -> None:
        self.node, self.pid = node, pid
        self.blocks: dict[int, shm.Segment] = {}
        self._spans: tuple[list[int], list[Span]] = ([], [])  # sorted, for ``span``
        self._count = 0
        self._lock = threading.Lock()

    def malloc(self, size: int) -> int:
        if size <= 0:
            raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, "size must be > 0")
        with self._lock:
            self._count += 1
            name = shm.pinned_name(self.node, self.pid)  # unguessable, created O_EXCL 0600
        rounded = -(-size // HOST_PAGE) * HOST_PAGE
        try:
            seg = shm.Segment(name, rounded, create=True)
            seg.commit(0, rounded)
        except OSError as err:
            raise errors.error_for(errors.ACL_ERROR_BAD_ALLOC,
                                   f"pinned host memory of {size} bytes: {err}") from err
        with self._lock:
            self._publish({**self.blocks, seg.address: seg})
        return seg.address

    def free(self, ptr: int) -> None:
        with self._lock:
            blocks = dict(self.blocks)
            seg = blocks.pop(ptr, None) if type(ptr) is int else None
            self._publish(blocks)
        if seg is None:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"{ptr!r} is not a block from malloc_host")
        seg.unlink()
        seg.close()

    def _publish(self, blocks: dict[int, shm.Segment]) -> None:
        """Copy on write (under ``_lock``): the new block dict and its sorted spans, the
        spans in one store so that a reader never pairs one's starts with another's."""
        spans = sorted((base, base + seg.size, seg) for base, seg in blocks.items())
        self.blocks = blocks
        self._spans = ([sp[0] for sp in spans], spans)

    def span(self, ptr: int) -> Span | None:
        """``(start, end, segment)`` of the pinned block containing ``ptr``, if any (a
        bisection; no lock: the published spans are never mutated)."""
        starts, spans = self._spans
        i = bisect.bisect_right(starts, ptr) - 1
        if i >= 0 and ptr < spans[i][1]:
            return spans[i]
        return None

    def find(self, ptr: int) -> shm.Segment | None:
        """The pinned block containing ``ptr``, if any."""
        block = self.span(ptr)
        return block[2] if block is not None else None

    def close(self) -> None:
        for ptr in list(self.blocks):
            self.free(ptr)


class CopyStream(Protocol):
    """What the staging pool asks of the stream a staged copy went to (host/core's
    ``Stream``: the driver does not import the core)."""

    @property
    def destroyed(self) -> bool: ...

    def done(self, target: int) -> bool:
        """True once the stream's task number ``target`` has completed."""
        ...


class StagingPool:
    """Pinned bounce buffers for async copies of pageable host memory.

    A buffer goes back to the pool once its stream has passed the copy that used it
    (``release_after``); buffers are kept for reuse until the process ends.
    """

    MIN_BYTES = 64 * 1024

    def __init__(self, pinned: PinnedPool) -> None:
        self.pinned = pinned
        self.free: list[int] = []
        self.busy: list[tuple[CopyStream, int, int]] = []
        self._lock = threading.Lock()

    def take(self, count: int) -> int:
        with self._lock:
            self._reclaim()
            fits = [a for a in self.free if self.pinned.blocks[a].size >= count]
            if fits:
                best = min(fits, key=lambda a: self.pinned.blocks[a].size)
                self.free.remove(best)
                return best
        return self.pinned.malloc(max(count, self.MIN_BYTES))

    def release_after(self, stream: CopyStream, seq: int, addr: int) -> None:
        with self._lock:
            self.busy.append((stream, seq, addr))

    def _reclaim(self) -> None:
        still = []
        for stream, seq, addr in self.busy:
            if stream.destroyed or stream.done(seq):
                self.free.append(addr)
            else:
                still.append((stream, seq, addr))
        self.busy = still
