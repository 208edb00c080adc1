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

from npuemu.shared.layout import PAGE, Field, Layout, _pad

MAGIC_TRACE = 0x4E50_5545_5452_4331  # "NPUETRC1"
TRACE_VERSION = 1
MAX_NAMES = 1024
NAME_WORDS = 8  # 64 bytes: kernel names longer than 63 bytes are cut
NAMES_OFFSET = PAGE
RECORDS_OFFSET = NAMES_OFFSET + MAX_NAMES * NAME_WORDS * 8
DEFAULT_RECORDS = 1 << 17
"""Default capacity (``NPUEMU_TRACE_RECORDS`` overrides): 131072 records = 16 MiB, sparse
until touched. At 100k tasks/s and a 50 ms drain period a reader needs 5000 slots."""

TRACE_HEADER = Layout("TRACE_HEADER", [
    Field("magic", 1, "MAGIC_TRACE"),
    Field("version", 1, "TRACE_VERSION"),
    Field("capacity", 1, "number of record slots"),
    Field("record_words", 1, "words per record (TRACE_RECORD.words)"),
    Field("boot_ns", 1, "worker boot time, time.monotonic_ns()"),
    Field("dev", 1, "physical device id"),
    _pad("pad0", 2),
    Field("write", 1, "records written so far (worker)"),
    Field("dropped", 1, "records dropped because the ring was full (worker)"),
    Field("names", 1, "kernel names in the name table (worker)"),
    _pad("pad1", 5),
    Field("read", 1, "records consumed so far (host reader)"),
    Field("reader_pid", 1, "pid of the profiling host that drains the ring, 0 = none"),
    _pad("pad2", 6),
], stride=PAGE // 8)

OP_REFUSED = 0xFFFF
"""TRACE_RECORD.op of a task the card refused (a frame that broke the protocol, failed in its
turn; the scheduler's internal op -1)."""

ENGINE_IDS = {"": 0, "dma": 1, "aicore": 2, "aivector": 3, "aicpu": 4}
"""TRACE_RECORD.engine: 0 = run by the scheduler itself (events, callbacks, small copies)."""
ENGINE_NAMES = {v: k or "scheduler" for k, v in ENGINE_IDS.items()}

TRACE_RECORD = Layout("TRACE_RECORD", [
    Field("op", 1, "task op (protocol.Op: COPY_ASYNC, LAUNCH, RECORD, WAIT_EVENT, ...)"),
    Field("client", 1, "client slot of the submitting process"),
    Field("stream_slot", 1, "stream slot in that client"),
    Field("stream_id", 1, "device stream id (aclrtStreamGetId)"),
    Field("seq", 1, "task sequence number in its stream (the task id)"),
    Field("engine", 1, "ENGINE_IDS value that ran it"),
    Field("submit_ns", 1, "host submit time (monotonic ns; 0 if the host did not stamp it)"),
    Field("start_ns", 1, "device start (monotonic ns): engine start, or first attempt of a wait"),
    Field("end_ns", 1, "device end (monotonic ns)"),
    Field("size", 1, "bytes of a copy/memset, blocks of a kernel"),
    Field("code", 1, "ACL code the task completed with (0 = success)"),
    Field("event_slot", 1, "event slot of a RECORD / WAIT_EVENT / RESET_EVENT"),
    Field("event_gen", 1, "event generation of a RECORD / WAIT_EVENT"),
    Field("name", 1, "1 + index of the kernel name in the name table (0 = none)"),
    Field("peers", 1, "bit mask of the peer cards a P2P copy touched"),
    Field("reserved", 1, "0"),
])


def segment_name_parts(dev: int) -> tuple[str, str]:
    """The parts of ``shm.name(node, *parts)`` of device ``dev``'s trace ring."""
    return f"d{dev}", "trace"


def segment_size(capacity: int) -> int:
    return RECORDS_OFFSET + capacity * TRACE_RECORD.size


if __name__ == "__main__":
    for table in (TRACE_HEADER, TRACE_RECORD):
        print(table.table(), end="\n\n")
