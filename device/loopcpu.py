"""CPU time of the worker's loop thread, split into work and idle (the card's own counters).

The loop (``worker.py``) calls ``begin`` at the start of every pass and ``end`` after it,
saying whether the pass did work (frames served, tasks started or completed) or found
nothing (a pass of its bounded spin before it sleeps), and ``pause`` before it sleeps. A
working pass is one that served frames or started or reaped tasks; a pass that only finds
work still running on an engine, or a stream blocked on an event, is idle, and so is
everything else the loop does awake between passes (its spin's yields, its housekeeping).

Passes are timed with the monotonic clock (``time.monotonic_ns``, read in user space, about
0.1 us). The thread's CPU clock (``time.thread_time_ns``) is a system call, about 1 us in a
VM: read once or twice a pass, it would cost more than a tiny task's own work and lengthen
every idle pass of the spin. It is read once per ``settle`` instead
(the loop's housekeeping, every few ms): the CPU the thread used since the last settle is
exact, and it is split between work and idle in proportion to the wall time of the working
passes and of the rest of the time awake (sleeps, from ``pause`` to the next ``begin``,
count nowhere: they cost no CPU). So the totals are exact and the split is an estimate: a
pass preempted by another process counts the time it waited. ``work_ns`` over the tasks
completed is the card's CPU per task from intake (the ring pop) to completion (``npuemu
bench``: "card CPU per tiny task"); the control block publishes both totals and the whole
process's CPU (``LOOP_WORK_CPU_NS``, ``LOOP_IDLE_CPU_NS``, ``PROCESS_CPU_NS``).

Threading model: the loop thread only (the clock is that thread's own).
"""

from __future__ import annotations

import time

_clock = time.thread_time_ns
_wall = time.monotonic_ns


class LoopCpu:
    """Work and idle CPU nanoseconds of the calling thread since it was made, as of the last
    ``settle``."""

    __slots__ = ("_awake", "_cpu", "_since", "_work", "idle_ns", "work_ns")

    def __init__(self) -> None:
        self.work_ns = self.idle_ns = 0
        self._cpu = _clock()
        self._since = _wall()
        self._work = self._awake = 0  # wall ns since the last settle: working, all awake

    def begin(self) -> None:
        """A pass starts (the loop was awake since the last ``end``, unless it paused)."""
        now = _wall()
        if self._since:
            self._awake += now - self._since
        self._since = now

    def end(self, working: bool) -> None:
        """The pass that ``begin`` started is over; ``working``: it did work."""
        now = _wall()
        spent = now - self._since
        self._awake += spent
        if working:
            self._work += spent
        self._since = now

    def pause(self) -> None:
        """The loop goes to sleep: the time until the next ``begin`` counts nowhere."""
        self._awake += _wall() - self._since
        self._since = 0

    def settle(self) -> None:
        """Read the thread's CPU clock and split what it advanced since the last settle
        between work and idle (see the module docstring)."""
        cpu = _clock()
        used, self._cpu = cpu - self._cpu, cpu
        if self._since:
            now = _wall()
            self._awake += now - self._since
            self._since = now
        work = used * min(self._work, self._awake) // self._awake if self._awake else 0
        self.work_ns += work
        self.idle_ns += used - work
        self._work = self._awake = 0
