"""The card's trace ring writer: one record per completed task while a host profiles.

Layout and protocol: ``shared/trace.py``. A task is recorded if its frame carried a host
submit stamp (``Task.submit_ns``; only a profiling host stamps): the scheduler tests that
field when a task starts (to note its first start) and when it completes (to call
``write``), and that is all profiling costs a card when it is off. The record goes into a
preallocated slot of the ring (a handful of word stores, no allocation); if the reader is
behind by a whole ring the record is dropped and counted, never waited for.

Threading model: ``write`` and ``name_id`` run in the worker's loop thread only (task
completions are all processed there), so the ring has one writer and needs no lock. Engine
threads only set ``Task.start_ns``/``end_ns`` of the task they run. The host reader writes
``read`` and ``reader_pid`` (its own cache line).
"""

from __future__ import annotations

import os
import time
from typing import Any

from npuemu.shared import shm
from npuemu.shared import trace as tl
from npuemu.shared.protocol import Op

_H, _R = tl.TRACE_HEADER, tl.TRACE_RECORD
_ENGINE = tl.ENGINE_IDS
_WORDS = _R.words
_BASE = tl.RECORDS_OFFSET // 8


class TraceWriter:
    """Writer end of device ``dev``'s trace ring."""

    def __init__(self, node: str, dev: int, boot_ns: int) -> None:
        self.capacity = int(os.environ.get("NPUEMU_TRACE_RECORDS") or tl.DEFAULT_RECORDS)
        name = shm.name(node, *tl.segment_name_parts(dev))
        size = tl.segment_size(self.capacity)
        try:
            self.seg = shm.Segment(name, size, create=True)
        except FileExistsError:  # left by a worker of this card that died: start afresh
            shm.unlink_segment(name)
            self.seg = shm.Segment(name, size, create=True)
        self.name = name
        words = self.words = self.seg.buf.cast("Q")
        words[_H.CAPACITY], words[_H.RECORD_WORDS] = self.capacity, _WORDS
        words[_H.BOOT_NS], words[_H.DEV], words[_H.VERSION] = boot_ns, dev, tl.TRACE_VERSION
        words[_H.MAGIC] = tl.MAGIC_TRACE
        self._names: dict[str, int] = {}

    def write(self, task: Any, code: int) -> None:
        """Record the completed ``task`` (a scheduler ``Task``). Never blocks."""
        words = self.words
        written = words[_H.WRITE]
        if written - words[_H.READ] >= self.capacity:
            words[_H.DROPPED] += 1
            return
        now = time.monotonic_ns()
        stream = task.stream
        op, args = task.op, task.args
        b = _BASE + (written % self.capacity) * _WORDS
        words[b + _R.OP] = op
        words[b + _R.CLIENT] = stream.client.slot
        words[b + _R.STREAM_SLOT] = stream.slot
        words[b + _R.STREAM_ID] = stream.sid
        words[b + _R.SEQ] = task.seq
        words[b + _R.SUBMIT_NS] = task.submit_ns
        start = task.start_ns or now
        words[b + _R.START_NS] = start
        end = task.end_ns
        words[b + _R.END_NS] = end if end >= start else now
        words[b + _R.CODE] = code
        engine, size, slot, gen, name, peers = task.engine, 0, 0, 0, 0, 0
        if op == Op.COPY_ASYNC or op == Op.MEMSET_ASYNC:
            size = args[2]
            if op == Op.COPY_ASYNC and len(args) == 4:
                for peer in args[3]:
                    peers |= 1 << peer.dev
        elif op == Op.LAUNCH:
            size, name = args[2], self.name_id(args[1])
            if not engine and args[4] is not None:
                engine = args[4].__npu_kernel__
        elif op == Op.RECORD or op == Op.WAIT_EVENT:
            slot, gen = args[0], args[1]
        elif op == Op.RESET_EVENT:
            slot = args[0]
        words[b + _R.ENGINE] = _ENGINE.get(engine, 0)
        words[b + _R.SIZE] = size
        words[b + _R.EVENT_SLOT] = slot
        words[b + _R.EVENT_GEN] = gen
        words[b + _R.NAME] = name
        words[b + _R.PEERS] = peers
        words[_H.WRITE] = written + 1

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
        self.seg.close()
        shm.unlink_segment(self.name)
