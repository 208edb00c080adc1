"""CPU time of the worker's loop thread, split into work and idle (the card's own counters).

The loop (``worker.py``) calls ``begin`` at the start of every pass and ``end`` after it,
saying whether the pass did work (frames served, tasks started or completed) or found
nothing (a pass of its bounded spin before it sleeps). The thread's CPU clock
(``time.thread_time_ns``, a system call) is read at the end of a working pass and at the
start of a pass that follows an idle one, so work and idle CPU are split exactly and a
backlog worked through in one pass pays for one read. A working pass is one that served
frames or started or reaped tasks; a pass that only finds work still running on an engine,
or a stream blocked on an event, is idle. ``work_ns`` over the tasks completed is the card's
CPU per task from intake (the ring pop) to completion (``npuemu bench``: "card CPU per tiny
task"); the control block publishes both totals and the whole process's CPU
(``LOOP_WORK_CPU_NS``, ``LOOP_IDLE_CPU_NS``, ``PROCESS_CPU_NS``). Sleeping costs no CPU and
counts nowhere; the loop's housekeeping (``aside``) and its idle spin count as idle.

Threading model: the loop thread only (the clock is that thread's own).
"""

from __future__ import annotations

import time

_clock = time.thread_time_ns


class LoopCpu:
    """Work and idle CPU nanoseconds of the calling thread since it was made."""

    __slots__ = ("_idle", "_since", "idle_ns", "work_ns")

    def __init__(self) -> None:
        self.work_ns = self.idle_ns = 0
        self._idle = True
        self._since = _clock()

    def begin(self) -> None:
        """A pass starts (what ran since an idle pass ended was idle)."""
        if self._idle:
            now = _clock()
            self.idle_ns += now - self._since
            self._since = now

    def end(self, working: bool) -> None:
        """The pass that ``begin`` started is over; ``working``: it did work."""
        if working:
            now = _clock()
            self.work_ns += now - self._since
            self._since = now
        self._idle = not working

    def aside(self) -> None:
        """What runs from here to the next pass is no task's work (the loop's housekeeping):
        it counts as idle, read at the next ``begin``."""
        self._idle = True
