"""Host end of a communicator segment (``shared/layout.py``: COMM_HEADER, COMM_RANK): the
shared memory through which the cards of a communicator synchronise
(``device/exec/collective.py``). The host creates it (``create``: ``O_EXCL``, mode 0600),
each rank's host writes its entry and creates its semaphore (``join``), the workers attach
it (``COMM_ATTACH``); the host then only reads a rank's ``error`` word
(``HcclGetCommAsyncError``).

Size: any process of the user can make a segment of a communicator's name, or truncate one
(a POSIX shared-memory segment cannot be sealed against ``ftruncate``), and a read or write
of a mapping past the end of its file is a SIGBUS. So an opened segment must have
``layout.COMM_SIZE`` bytes (``fstat``; a smaller one is refused with ``PermissionError``,
one of 0 bytes is one whose creator has not sized it yet), and the size is checked again
before each read or write of the words (``_intact``): a truncated segment reads as error
HCCL_E_MEMORY (3) in ``error`` and raises ``SegmentTruncated`` (an ``OSError``) in the
calls that need its words; ``leave`` and ``close`` then skip the writes. The check and the
access are not atomic: a truncation between the two can still fault the process.

Threading model: a ``CommSegment`` is shared by the threads of the ranks of this process;
each thread writes only its own rank's entry (``join``/``leave``); the header is written
once by the creator before anyone else can know the name. No lock is needed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time

import posix_ipc

from npuemu.shared import layout, protocol, shm
from npuemu.shared.layout import COMM_HEADER, COMM_RANK, COMM_RANKS, CommRankState

MAX_RANKS = layout.COMM_MAX_RANKS
_R = COMM_RANK
_E_MEMORY = 3  # HcclResult HCCL_E_MEMORY: what ``error`` reads of a truncated segment
PRESENT = (CommRankState.JOINED, CommRankState.ATTACHED)
ATTACHED = (CommRankState.ATTACHED,)


class SegmentTruncated(OSError):
    """The communicator segment lost its size after it was mapped (another process
    truncated it)."""


class CommSegment:
    """One mapped communicator segment."""

    def __init__(self, name: str, create: bool = False) -> None:
        self.name = name
        self.owner = create
        self.seg = shm.Segment(name, layout.COMM_SIZE if create else 0, create=create)
        if not create and self.seg.size < layout.COMM_SIZE:
            self.seg.close()
            raise PermissionError(f"{name} has {self.seg.size} bytes, not a communicator "
                                  f"segment ({layout.COMM_SIZE}): refused")
        self.words = self.seg.buf.cast("Q")
        if create:
            w = self.words
            w[COMM_HEADER.VERSION] = protocol.PROTOCOL_VERSION
            w[COMM_HEADER.MAX_RANKS] = MAX_RANKS
            w[COMM_HEADER.MAGIC] = layout.MAGIC_COMM
        self.sems: dict[int, posix_ipc.Semaphore] = {}

    @classmethod
    def create(cls, node: str, token: str | None = None) -> CommSegment:
        return cls(shm.name(node, "hccl", token or secrets.token_hex(8)), create=True)

    @classmethod
    def open(cls, name: str, deadline: float) -> CommSegment:
        """Open an existing segment, retrying until ``deadline`` while it does not exist yet
        or its creator has not finished writing its header. FileNotFoundError after."""
        while True:
            try:
                seg = cls(name)
            except PermissionError:
                raise
            except (OSError, ValueError):  # not there yet, or not sized yet
                seg = None
            if seg is not None:
                if seg._intact() and seg.words[COMM_HEADER.MAGIC] == layout.MAGIC_COMM:
                    if seg.words[COMM_HEADER.VERSION] != protocol.PROTOCOL_VERSION:
                        seg.close()
                        raise PermissionError(f"{name}: another protocol version")
                    return seg
                seg.close()
            if time.monotonic() > deadline:
                raise FileNotFoundError(f"communicator segment {name} did not appear")
            time.sleep(0.005)

    def _base(self, rank: int) -> int:
        return COMM_RANKS + rank * _R.words

    def _intact(self) -> bool:
        """The segment still has its whole size (checked before the words are touched)."""
        try:
            return os.fstat(self.seg.fd).st_size >= layout.COMM_SIZE
        except OSError:
            return False

    def _check(self) -> None:
        if not self._intact():
            raise SegmentTruncated(f"communicator segment {self.name} was truncated")

    def join(self, rank: int, n_ranks: int, dev: int, group: int = 0) -> bool:
        """Write this rank's entry (its card and the card's HCCS group) and create its
        semaphore; False if the rank is taken."""
        base = self._base(rank)
        w = self.words
        self._check()
        if w[base + _R.STATE] != CommRankState.FREE:
            return False
        try:
            self.sems[rank] = shm.semaphore(shm.comm_semaphore(self.name, rank, os.getpid()),
                                            create=True)
        except FileExistsError:
            return False
        w[base + _R.N_RANKS] = n_ranks
        w[base + _R.DEV] = dev
        w[base + _R.GROUP] = group
        self._check()
        w[base + _R.PID] = os.getpid()
        w[base + _R.ERROR] = 0
        w[base + _R.STATE] = CommRankState.JOINED
        return True

    def joined(self, n_ranks: int, states: tuple[int, ...] = PRESENT) -> int:
        """How many of ranks ``0..n_ranks-1`` have joined (or are in one of ``states``)
        with this rank count; -1 if one joined with another count."""
        self._check()
        count = 0
        for rank in range(n_ranks):
            base = self._base(rank)
            if self.words[base + _R.STATE] in states:
                if self.words[base + _R.N_RANKS] != n_ranks:
                    return -1
                count += 1
        return count

    def rank_info(self, rank: int) -> tuple[int, int]:
        """(device, host pid) of a joined rank."""
        self._check()
        base = self._base(rank)
        return self.words[base + _R.DEV], self.words[base + _R.PID]

    def attached(self, rank: int) -> None:
        """This rank's card has attached the segment."""
        self._check()
        self.words[self._base(rank) + _R.STATE] = CommRankState.ATTACHED

    def error(self, rank: int) -> int:
        """The HcclResult the rank's card wrote (HCCL_E_MEMORY if the segment is gone)."""
        if not self._intact():
            return _E_MEMORY
        return self.words[self._base(rank) + _R.ERROR]

    def leave(self, rank: int) -> None:
        """This rank (if this process joined it) is done: mark it and remove its
        semaphore's name."""
        sem = self.sems.pop(rank, None)
        if sem is not None:
            if self._intact():
                self.words[self._base(rank) + _R.STATE] = CommRankState.LEFT
            shm.unlink_semaphore(shm.comm_semaphore(self.name, rank, os.getpid()))
            with contextlib.suppress(Exception):
                sem.close()

    def close(self) -> None:
        """Drop this process's mapping; the creator also removes the name."""
        for rank in list(self.sems):
            self.leave(rank)
        if self.owner:
            shm.unlink_segment(self.name)
        with contextlib.suppress(BufferError):
            self.words.release()
            self.seg.close()
