"""Engine queues of a device: DMA, AI Core, AI Vector, AI CPU and DVPP, one thread each.

The scheduler (``scheduler.py``) hands an engine a task whose stream dependencies are met;
the engine runs it (numpy and ``ctypes.memmove`` release the GIL, so engines overlap) and
reports ``(task, code, ns)`` back through ``done`` (a deque: appends are atomic; ``ns`` is
how long the task ran), waking the worker loop if it sleeps. Busy time per engine is
accumulated in nanoseconds and published in the control block
(``aclrtGetDeviceUtilizationRate`` reads it): ``busy_ns`` for what ran on the engine thread
plus ``inline_ns`` for tiny kernels the scheduler ran in its own thread on the engine's
behalf (``scheduler.py``, "Tiny kernels").

Threading model: one thread per engine runs ``_loop``; it owns nothing but its task while
running it. ``submit`` (loop thread) feeds a ``SimpleQueue``; results go back through the
``done`` deque (atomic appends, popped by the loop thread only). ``busy_ns`` is written by
the engine thread only and read (a single int load) by the loop's housekeeping; ``running``
and ``inline_ns`` are touched by the loop thread only.

Failures: whatever a task body raises fails that task with the engine's code, and the
engine goes on with its next task at once: ``Exception`` and every other ``BaseException``
(``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit``: no signal reaches an engine
thread, so none of them is the worker's stop). Kernels and model steps already turn their
own failures into codes, with a device log line (``containment.py``); this is the net
under everything else an engine runs (collectives, copies).
"""

from __future__ import annotations

import collections
import queue
import threading
import time
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from npuemu.shared import errors

DMA, AICORE, AIVECTOR, AICPU = "dma", "aicore", "aivector", "aicpu"
DVPP = "dvpp"  # image decode/encode and VPC (device/exec/dvpp.py)
ENGINES = (DMA, AICORE, AIVECTOR, AICPU, DVPP)
FAILURE_CODE = {
    DMA: errors.ACL_ERROR_RT_SYS_DMA,
    AICORE: errors.ACL_ERROR_RT_AICORE_EXCEPTION,
    AIVECTOR: errors.ACL_ERROR_RT_VECTOR_CORE_EXCEPTION,
    AICPU: errors.ACL_ERROR_RT_AICPU_EXCEPTION,
    DVPP: errors.ACL_ERROR_RT_AICPU_EXCEPTION,
}


class Timed(Protocol):
    """What an engine writes on the task it ran (``scheduler.Task``): when it ran."""

    start_ns: int
    end_ns: int


T = TypeVar("T", bound=Timed)


class Engine(Generic[T]):
    """One engine thread with its FIFO of ready tasks (of type ``T``)."""

    def __init__(self, name: str, done: collections.deque[tuple[T, int, int]],
                 wake: Callable[[], None]) -> None:
        self.name = name
        self.busy_ns = 0
        self.inline_ns = 0  # time of kernels run inline by the scheduler (loop thread)
        self.running = 0  # tasks handed over and not yet reported
        self._queue: queue.SimpleQueue[tuple[T, Callable[[T], int]] | None] = \
            queue.SimpleQueue()
        self._done = done
        self._wake = wake
        self._thread = threading.Thread(target=self._loop, name=f"engine-{name}", daemon=True)
        self._thread.start()

    def submit(self, task: T, run: Callable[[T], int]) -> None:
        """Queue ``run(task)``; it returns 0 or an ACL code."""
        self.running += 1
        self._queue.put((task, run))

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            task, run = item
            start = time.monotonic_ns()
            try:
                code = run(task)
            except errors.AclError as err:
                code = err.code
            except BaseException:  # the thread must outlive any task
                code = FAILURE_CODE[self.name]
            end = time.monotonic_ns()
            self.busy_ns += end - start
            task.start_ns, task.end_ns = start, end  # read by the trace ring writer
            self._done.append((task, code, end - start))
            self._wake()

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=2)
