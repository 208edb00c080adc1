"""Host end of a card's trace ring (profiling): claim it, stamp submissions, drain records.

The ring's layout and protocol are in ``shared/trace.py``; the writer is ``device/trace.py``.
``TraceReader(link)`` maps the card's ring, claims it for this process (one profiling process
per card at a time: a second gets ``ACL_ERROR_PROF_ALREADY_RUN``, 100042), and ``start``
makes the link stamp every task frame with its submit time, which is what makes the card
record the task. ``drain`` copies the new records out (numpy, one fancy-index copy) and
returns this client's; ``sample`` reads the card's HBM use and P2P link counters.

Threading model: a reader belongs to one profiling session; ``drain``, ``sample`` and
``close`` are called under that session's lock (host/prof/session.py), so the reader needs
none of its own. ``link.tracer`` is a plain attribute read by submitting threads; ``stamp``
runs under the link's lock (so ``submitters`` is guarded by it).
"""

from __future__ import annotations

import collections
import itertools
import os
import threading
import time
from typing import Any

import numpy as np

from npuemu.shared import errors, liveness, logring, shm
from npuemu.shared import trace as tl
from npuemu.shared.layout import CTL_LINKS, DEVICE_CTL, LINK_ENTRY
from npuemu.shared.protocol import Frame

_H, _R = tl.TRACE_HEADER, tl.TRACE_RECORD
RECORD_DTYPE = np.dtype([(f.name, "<u8") for f in _R.fields])
"""One trace record as a numpy structured type (field names of TRACE_RECORD)."""
ENGINE_NAMES = tl.ENGINE_NAMES
_local = threading.local()
_now = time.monotonic_ns


def _thread_label() -> str:
    """A label unique to the calling thread for the life of the process (idents are reused
    once a thread ends; these labels are not)."""
    try:
        found: str = _local.label
        return found
    except AttributeError:
        current = threading.current_thread()
        label = _local.label = (f"{current.name} (tid {threading.get_native_id()}, "
                                f"#{next(_thread_numbers)})")
        return label
_thread_numbers = itertools.count(1)


class TraceReader:
    """Reader end of the trace ring of ``link``'s card, for ``link``'s client slot."""

    def __init__(self, link: Any) -> None:
        if not hasattr(link, "ctl") or not hasattr(link, "node"):  # e.g. the in-process fake
            raise errors.error_for(errors.ACL_ERROR_PROFILING_FAILURE,
                                   f"device {link.dev}: this link has no trace ring")
        self.link = link
        self.dev = link.dev
        try:
            self.seg = shm.Segment(shm.name(link.node, *tl.segment_name_parts(link.dev)))
        except FileNotFoundError:
            raise errors.error_for(errors.ACL_ERROR_PROFILING_FAILURE,
                                   f"device {link.dev} has no trace ring") from None
        words = self.words = self.seg.buf.cast("Q")
        if words[_H.MAGIC] != tl.MAGIC_TRACE or words[_H.RECORD_WORDS] != _R.words:
            self._release()
            raise errors.error_for(errors.ACL_ERROR_PROFILING_FAILURE,
                                   f"device {link.dev}: trace ring of another version")
        self.capacity = words[_H.CAPACITY]
        self.boot_ns = words[_H.BOOT_NS]
        self.records = np.frombuffer(self.seg.buf, RECORD_DTYPE, count=self.capacity,
                                     offset=tl.RECORDS_OFFSET)
        other = words[_H.READER_PID]
        if other and other != os.getpid() and liveness.alive_now(other):  # a zombie: free
            self._release()
            raise errors.error_for(errors.ACL_ERROR_PROF_ALREADY_RUN,
                                   f"device {link.dev} is profiled by process {other}")
        words[_H.READER_PID] = os.getpid()
        words[_H.READ] = words[_H.WRITE]  # older records are someone else's run
        self.dropped_at_start = words[_H.DROPPED]
        self.submitters: collections.Counter[tuple[int, str]] = collections.Counter()
        """(stream slot, host thread label) -> turns that thread took submitting there."""
        self.last_thread: dict[int, str] = {}  # stream slot -> label of its last submitter

    def start(self) -> None:
        """Stamp this process's task frames from now on (the card records them)."""
        self.link.tracer = self

    def stop(self) -> None:
        if self.link.tracer is self:
            self.link.tracer = None

    def stamp(self, frame: list[Any] | Frame) -> list[Any] | Frame:
        """``frame`` with its submit time (a list is stamped in place, the cheap way the
        runtime's stream tasks take; a tuple is copied); notes which host thread submits to
        which stream slot (a turn is counted each time another thread than the last one
        submits there). Called by ``DeviceLink.submit_locked`` under the link's lock."""
        try:
            thread = _local.label
        except AttributeError:
            thread = _thread_label()
        slot = frame[2]
        if self.last_thread.get(slot) is not thread:
            self.last_thread[slot] = thread
            self.submitters[(slot, thread)] += 1
        if type(frame) is list:
            frame[1] = _now()
            return frame
        return (frame[0], _now(), *frame[2:])

    def drain(self) -> np.ndarray:
        """Copy out every record written since the last drain; returns this client's."""
        words = self.words
        read, written = words[_H.READ], words[_H.WRITE]
        if written == read:
            return np.empty(0, RECORD_DTYPE)
        records, lo, hi = self.records, read % self.capacity, written % self.capacity
        # one or two slice copies (the writer never gets a whole ring ahead, so lo == hi
        # means a full ring: the tail part, then the head part)
        out = records[lo:hi].copy() if lo < hi else np.concatenate((records[lo:], records[:hi]))
        words[_H.READ] = written
        mine = out["client"] == self.link.slot
        return out if mine.all() else out[mine]

    def dropped(self) -> int:
        """Records the card dropped (ring full) since this reader started."""
        return self.words[_H.DROPPED] - self.dropped_at_start

    def words_names(self) -> int:
        """How many kernel names the card's name table holds."""
        return self.words[_H.NAMES]

    def names(self) -> list[str]:
        """The card's kernel-name table (index = record ``name`` - 1)."""
        count = self.words[_H.NAMES]
        size = tl.NAME_WORDS * 8
        buf = self.seg.buf
        return [bytes(buf[tl.NAMES_OFFSET + i * size : tl.NAMES_OFFSET + (i + 1) * size])
                .split(b"\0", 1)[0].decode(errors="replace") for i in range(count)]

    def sample(self) -> tuple[int, int, dict[int, int]]:
        """``(monotonic ns, HBM bytes used, {peer card: bytes copied to and from it})``."""
        ctl = self.link.ctl  # a DeviceLink's mapping of the control block (this is the driver)
        links = {}
        for peer in range(64):
            base = CTL_LINKS + peer * LINK_ENTRY.words
            moved = ctl[base + LINK_ENTRY.TX_BYTES] + ctl[base + LINK_ENTRY.RX_BYTES]
            if moved:
                links[peer] = moved
        return time.monotonic_ns(), ctl[DEVICE_CTL.HBM_USED], links

    def device_log(self) -> str:
        """The card's log ring text (``shared/logring.py``), oldest first; "" if it is gone."""
        try:
            return logring.read_device_log(self.link.node, self.link.dev) or ""
        except PermissionError:
            return ""

    def close(self) -> None:
        """Stop stamping and give the ring up."""
        self.stop()
        if self.words[_H.READER_PID] == os.getpid():
            self.words[_H.READER_PID] = 0
        self._release()

    def _release(self) -> None:
        self.records = None  # type: ignore[assignment]
        self.words.release()
        self.seg.close()
