"""The card's trace ring writer: one record per completed task while a host profiles.

Layout and protocol: ``shared/trace.py``. A task is recorded if its frame carried a host
submit stamp (``Task.submit_ns``; only a profiling host stamps): the scheduler tests that
field when a task starts (to note its first start) and when it completes (to call
``write``), and that is all profiling costs a card when it is off. The record goes into a
preallocated slot of the ring (one ``struct.pack_into``, nothing kept); if the reader is
behind by a whole ring the record is dropped and counted, never waited for. Tasks that never
complete through the scheduler (dropped by ``stream_abort`` or ``destroy_stream``, cancelled
when their client detached) leave no record. Engines store ``start_ns``/``end_ns`` on every
task they run (two attribute stores, profiled or not).

Threading model: ``write`` and ``name_id`` run in the worker's loop thread only (task
completions are all processed there), so the ring has one writer and needs no lock. Engine
threads only set ``Task.start_ns``/``end_ns`` of the task they run. The host reader writes
``read`` and ``reader_pid`` (its own cache line).
"""

from __future__ import annotations

import os
import struct
import time
from typing import Any

from npuemu.shared import shm
from npuemu.shared import trace as tl
from npuemu.shared.protocol import Op

_H, _R = tl.TRACE_HEADER, tl.TRACE_RECORD
_ENGINE = tl.ENGINE_IDS
_WORDS = _R.words
_RECORD = struct.Struct(f"<{_R.words}Q")  # one record, packed in one call
_COPY, _MEMSET, _LAUNCH = int(Op.COPY_ASYNC), int(Op.MEMSET_ASYNC), int(Op.LAUNCH)
_REC, _WAIT, _RESET = int(Op.RECORD), int(Op.WAIT_EVENT), int(Op.RESET_EVENT)
_now = time.monotonic_ns
_WRITE, _READ, _DROPPED = _H.WRITE, _H.READ, _H.DROPPED
_OFFSET, _SIZE = tl.RECORDS_OFFSET, _R.size


def _capacity(raw: str) -> int:
    """``NPUEMU_TRACE_RECORDS``, 1..2**24; anything else is the default (a worker never dies
    of its environment)."""
    try:
        value = int(raw.strip())
    except ValueError:
        return tl.DEFAULT_RECORDS
    return value if 1 <= value <= 1 << 24 else tl.DEFAULT_RECORDS


class TraceWriter:
    """Writer end of device ``dev``'s trace ring."""

    def __init__(self, node: str, dev: int, boot_ns: int) -> None:
        self.capacity = _capacity(os.environ.get("NPUEMU_TRACE_RECORDS", ""))
        name = shm.name(node, *tl.segment_name_parts(dev))
        size = tl.segment_size(self.capacity)
        try:
            self.seg = shm.Segment(name, size, create=True)
        except FileExistsError:  # left by a worker of this card that died: start afresh
            shm.unlink_segment(name)
            self.seg = shm.Segment(name, size, create=True)
        self.name = name
        self.buf = self.seg.buf
        words = self.words = self.buf.cast("Q")
        words[_H.CAPACITY], words[_H.RECORD_WORDS] = self.capacity, _WORDS
        words[_H.BOOT_NS], words[_H.DEV], words[_H.VERSION] = boot_ns, dev, tl.TRACE_VERSION
        words[_H.MAGIC] = tl.MAGIC_TRACE
        self._names: dict[str, int] = {}
        self._read_seen = words[_H.READ]  # a lower bound of the reader's position

    def write(self, task: Any, code: int) -> None:
        """Record the completed ``task`` (a scheduler ``Task``). Never blocks, never raises:
        a record that cannot be made (a bug of ours) is counted as dropped."""
        try:
            self._write(task, code)
        except Exception:
            self.words[_DROPPED] += 1

    def _write(self, task: Any, code: int) -> None:
        words = self.words
        written = words[_WRITE]
        # the reader's position as last read: read again (the reader's cache line) only
        # when the ring looks full behind it
        if written - self._read_seen >= self.capacity:
            self._read_seen = words[_READ]
            if written - self._read_seen >= self.capacity:
                words[_DROPPED] += 1
                return
        stream = task.stream
        op, args = task.op, task.args
        start, end = task.start_ns, task.end_ns
        if not start or end < start:
            now = _now()
            start = start or now
            end = end if end >= start else now
        engine, size, slot, gen, name, peers = task.engine, 0, 0, 0, 0, 0
        if op in (_COPY, _MEMSET):
            size = args[2]
            if op == _COPY and len(args) == 4:
                for peer in args[3]:
                    peers |= 1 << peer.dev
        elif op == _LAUNCH:
            size, name = args[2], self.name_id(args[1])
            if not engine and args[4] is not None:
                engine = args[4].__npu_kernel__
        elif op in (_REC, _WAIT):
            slot, gen = args[0], args[1]
        elif op == _RESET:
            slot = args[0]
        _RECORD.pack_into(self.buf, _OFFSET + (written % self.capacity) * _SIZE,
                          op if op >= 0 else tl.OP_REFUSED, stream.client.slot, stream.slot,
                          stream.sid, task.seq, _ENGINE.get(engine, 0), task.submit_ns, start,
                          end, size, code,
                          slot, gen, name, peers, 0)
        words[_WRITE] = written + 1

    def name_id(self, name: str) -> int:
        """1 + the index of ``name`` in the name table (added on first use; 0 if full)."""
        found = self._names.get(name)
        if found is not None:
            return found
        index = len(self._names)
        if index >= tl.MAX_NAMES:
            return 0
        raw = name.encode()[: tl.NAME_WORDS * 8 - 1]
        start = tl.NAMES_OFFSET + index * tl.NAME_WORDS * 8
        self.seg.buf[start : start + len(raw)] = raw
        self._names[name] = index + 1
        self.words[_H.NAMES] = index + 1
        return index + 1

    def close(self) -> None:
        """Release and unlink (worker shutdown; the host has drained what it needed)."""
        self.words.release()
        self.buf = memoryview(b"")  # drop the segment's view (seg.close releases it)
        self.seg.close()
        shm.unlink_segment(self.name)
