"""Device logs: the line format, the levels, and an overwriting log ring in shared memory.

Line format (as CANN's slog)::

    [ERROR] TS(4242,npuemu-dev0):2026-11-29-09:10:42.123.456 task 7 of stream 1 failed ...

Levels: DEBUG 0, INFO 1, WARNING 2, ERROR 3, NULL 4 (off); EVENT lines are governed by the
event switch instead. ``ASCEND_GLOBAL_LOG_LEVEL`` (0..4, default 3) sets the level;
``ASCEND_MODULE_LOG_LEVEL=MOD=lvl:MOD=lvl`` overrides it per module (one bad token voids
the whole value); ``ASCEND_GLOBAL_EVENT_ENABLE`` (0/1, default 1) switches EVENT lines.

Ring ``/npuemu.<node>.d<id>.log`` (written by the worker only, read by anyone, never
consumed): word 0 = bytes ever written (``head``); the text lives in ``[64, 64+capacity)``
at ``position = offset mod capacity``. A reader copies the last ``min(head, capacity)`` bytes
and drops the first, partial line.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping

from npuemu.shared import shm

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "NULL")
DEBUG, INFO, WARNING, ERROR, NULL = range(5)
EVENT = 5  # a level name of its own; on or off by the event switch
MODULES = ("SLOG", "IDEDD", "HCCL", "FMK", "DVPP", "RUNTIME", "CCE", "HDC", "DRV", "DEVMM",
           "KERNEL", "AICPU", "TS", "TSDUMP", "LP", "TDT", "FE", "GE", "ASCENDCL", "PROFILING",
           "APP")
HEADER = 64
DEFAULT_CAPACITY = 1 << 20


def level_name(level: int) -> str:
    return "EVENT" if level == EVENT else LEVELS[level]


def format_line(level: int, module: str, pid: int, proc: str, message: str,
                when: datetime.datetime | None = None) -> str:
    """One log line in the slog format (ends with a newline)."""
    now = when or datetime.datetime.now()
    stamp = now.strftime("%Y-%m-%d-%H:%M:%S") + f".{now.microsecond // 1000:03d}." \
        f"{now.microsecond % 1000:03d}"
    return f"[{level_name(level)}] {module}({pid},{proc}):{stamp} {message}\n"


def parse_global_level(env: Mapping[str, str] = os.environ) -> int:
    """``ASCEND_GLOBAL_LOG_LEVEL``: 0..4, anything else is ignored (default ERROR)."""
    raw = env.get("ASCEND_GLOBAL_LOG_LEVEL", "").strip()
    return int(raw) if raw in ("0", "1", "2", "3", "4") else ERROR


def parse_module_levels(env: Mapping[str, str] = os.environ) -> dict[str, int]:
    """``ASCEND_MODULE_LOG_LEVEL``: ``MOD=lvl:MOD=lvl``; one bad token voids the value."""
    raw = env.get("ASCEND_MODULE_LOG_LEVEL", "").strip()
    levels: dict[str, int] = {}
    for token in filter(None, raw.split(":")):
        module, _, value = token.partition("=")
        if module.strip().upper() not in MODULES or value.strip() not in ("0", "1", "2", "3", "4"):
            return {}
        levels[module.strip().upper()] = int(value)
    return levels


def parse_event_enable(env: Mapping[str, str] = os.environ) -> bool:
    return env.get("ASCEND_GLOBAL_EVENT_ENABLE", "1").strip() != "0"


class LogRing:
    """Writer/reader of a log ring over ``buf`` (a memoryview of the whole segment).

    ``write`` is not thread-safe (it reads, then advances ``head``): a process with several
    writer threads serialises them (the device worker holds its ``_log_lock``). Readers in
    other processes need no lock: they copy the text and drop the first, partial line."""

    def __init__(self, buf: memoryview) -> None:
        self._head = buf[:8].cast("Q")
        self._data = buf[HEADER:]
        self.capacity = len(self._data)

    def write(self, line: str) -> None:
        raw = line.encode(errors="replace")[: self.capacity]
        head = self._head[0]
        pos = head % self.capacity
        first = min(len(raw), self.capacity - pos)
        self._data[pos : pos + first] = raw[:first]
        if first < len(raw):
            self._data[: len(raw) - first] = raw[first:]
        self._head[0] = head + len(raw)

    def read(self) -> str:
        """The text still in the ring, oldest first, whole lines only."""
        head = self._head[0]
        if head <= self.capacity:
            return bytes(self._data[:head]).decode(errors="replace")
        pos = head % self.capacity
        raw = bytes(self._data[pos:]) + bytes(self._data[:pos])
        return raw[raw.find(b"\n") + 1 :].decode(errors="replace")

    def release(self) -> None:
        self._head.release()
        self._data.release()


def read_device_log(node: str, dev: int) -> str | None:
    """The text in card ``dev``'s log ring (``/npuemu.<node>.d<dev>.log``), oldest first; None
    if the card never started (PermissionError if the ring belongs to another user).
    Read-only."""
    try:
        seg = shm.Segment(shm.name(node, f"d{dev}", "log"))
    except FileNotFoundError:
        return None
    try:
        ring = LogRing(seg.buf)
        try:
            return ring.read()
        finally:
            ring.release()
    finally:
        seg.close()
