"""Byte layout of a card's trace ring (profiling), written down once.

Segment ``/npuemu.<node>.d<id>.trace`` (created by the worker at boot, unlinked at its
shutdown; a restarted worker replaces it). Words are little-endian u64, as in ``layout.py``:

  TRACE_HEADER (one page), then the kernel-name table (``MAX_NAMES`` x ``NAME_WORDS`` words,
  NUL-padded UTF-8, written once per new name by the worker) at byte ``NAMES_OFFSET``, then
  ``capacity`` records of TRACE_RECORD at byte ``RECORDS_OFFSET``.

Protocol (one writer: the worker's loop thread; one reader: the profiling host process):

- a profiling host stamps its task frames with their submit time (field 1 of a stream task
  frame, ``protocol.py``); the worker records exactly the tasks that carry a stamp, so a
  process that does not profile costs the card nothing but one test of that field per task;
- the host claims the ring by writing its pid in ``reader_pid`` (a second live reader is
  refused on the host side with ``ACL_ERROR_PROF_ALREADY_RUN``; the claim is a plain store,
  so two hosts claiming in the same instant can both win: a documented limit);
- the worker writes a record into slot ``write % capacity`` and then increments ``write``;
  if ``write - read >= capacity`` the record is dropped and ``dropped`` is incremented
  (never blocks the card, never overwrites unread records);
- the host copies records ``read .. write-1`` and then stores ``read = write``.

x86-64 keeps stores in program order (see ``ring.py``), so a reader that sees ``write``
sees the record before it.

``python -m npuemu.shared.trace`` prints the tables.
"""

from __future__ import annotations

from npuemu.shared.layout import PAGE, Field, Layout, pad

MAGIC_TRACE = 0x4E50_5545_5452_4331  # "NPUETRC1"
TRACE_VERSION = 1
MAX_NAMES = 1024
NAME_WORDS = 8  # 64 bytes: kernel names longer than 63 bytes are cut
NAMES_OFFSET = PAGE
RECORDS_OFFSET = NAMES_OFFSET + MAX_NAMES * NAME_WORDS * 8
DEFAULT_RECORDS = 1 << 17
"""Default capacity (``NPUEMU_TRACE_RECORDS`` overrides): 131072 records = 16 MiB, sparse
until touched. At 100k tasks/s and a 50 ms drain period a reader needs 5000 slots."""


class TRACE_HEADER(Layout, stride=PAGE // 8):
    MAGIC = Field(1, "MAGIC_TRACE")
    VERSION = Field(1, "TRACE_VERSION")
    CAPACITY = Field(1, "number of record slots")
    RECORD_WORDS = Field(1, "words per record (TRACE_RECORD.words)")
    BOOT_NS = Field(1, "worker boot time, time.monotonic_ns()")
    DEV = Field(1, "physical device id")
    PAD0 = pad(2)
    WRITE = Field(1, "records written so far (worker)")
    DROPPED = Field(1, "records dropped because the ring was full (worker)")
    NAMES = Field(1, "kernel names in the name table (worker)")
    PAD1 = pad(5)
    READ = Field(1, "records consumed so far (host reader)")
    READER_PID = Field(1, "pid of the profiling host that drains the ring, 0 = none")
    PAD2 = pad(6)



OP_REFUSED = 0xFFFF
"""TRACE_RECORD.op of a task the card refused (a frame that broke the protocol, failed in its
turn; the scheduler's internal op -1)."""

ENGINE_IDS = {"": 0, "dma": 1, "aicore": 2, "aivector": 3, "aicpu": 4, "dvpp": 5}
"""TRACE_RECORD.engine: 0 = run by the scheduler itself (events, callbacks, small copies)."""
ENGINE_NAMES = {v: k or "scheduler" for k, v in ENGINE_IDS.items()}


class TRACE_RECORD(Layout):
    OP = Field(1, "task op (protocol.Op: COPY_ASYNC, LAUNCH, RECORD, WAIT_EVENT, ...)")
    CLIENT = Field(1, "client slot of the submitting process")
    STREAM_SLOT = Field(1, "stream slot in that client")
    STREAM_ID = Field(1, "device stream id (aclrtStreamGetId)")
    SEQ = Field(1, "task sequence number in its stream (the task id)")
    ENGINE = Field(1, "ENGINE_IDS value that ran it")
    SUBMIT_NS = Field(1, "host submit time (monotonic ns; 0 if the host did not stamp it)")
    START_NS = Field(1, "device start (monotonic ns): engine start, or first attempt of a wait")
    END_NS = Field(1, "device end (monotonic ns)")
    SIZE = Field(1, "bytes of a copy/memset, blocks of a kernel")
    CODE = Field(1, "ACL code the task completed with (0 = success)")
    EVENT_SLOT = Field(1, "event slot of a RECORD / WAIT_EVENT / RESET_EVENT")
    EVENT_GEN = Field(1, "event generation of a RECORD / WAIT_EVENT")
    NAME = Field(1, "1 + index of the kernel name in the name table (0 = none)")
    PEERS = Field(1, "bit mask of the peer cards a P2P copy touched")
    RESERVED = Field(1, "0")




def segment_name_parts(dev: int) -> tuple[str, str]:
    """The parts of ``shm.name(node, *parts)`` of device ``dev``'s trace ring."""
    return f"d{dev}", "trace"


def segment_size(capacity: int) -> int:
    return RECORDS_OFFSET + capacity * TRACE_RECORD.size


if __name__ == "__main__":
    for table in (TRACE_HEADER, TRACE_RECORD):
        print(table.table(), end="\n\n")
