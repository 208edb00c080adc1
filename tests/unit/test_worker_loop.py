"""``Worker.run``, the worker's main loop, on a stand-in worker (no processes, no shared
memory): a failing housekeeping pass (heartbeat, client slots, the stop checks) is logged as
an internal error and the loop goes on to its next pass, as a failing serve or pump does;
the worker's own stop passes through. While an engine thread runs a task the loop does not
spin: it sleeps on its doorbell, in bounded slices, and still serves a frame the host posts
meanwhile."""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

import posix_ipc
import pytest

from npuemu.device import containment, engines, worker
from npuemu.shared import layout


class _Scheduler:
    def pump(self) -> float:
        return 0.0

    def idle(self) -> bool:
        return False


class _Card:
    """What ``Worker.run`` touches; ``housekeeping`` raises ``failures`` times, then stops
    the loop."""

    def __init__(self, failures: list[BaseException]) -> None:
        self.running = True
        self.scheduler = _Scheduler()
        self.failures = failures
        self.housekept = 0
        self.internal: list[str] = []
        self._contain = worker.Worker._contain.__get__(self)

    def serve(self) -> int:
        return 1

    def housekeeping(self) -> None:
        self.housekept += 1
        if self.failures:
            raise self.failures.pop(0)
        self.running = False

    def internal_error(self, where: str) -> None:
        self.internal.append(where)


def test_a_failing_housekeeping_is_logged_and_the_loop_goes_on(monkeypatch) -> None:
    monkeypatch.setattr(worker, "HOUSEKEEPING_S", -1.0)  # every pass housekeeps
    card = _Card([RuntimeError("bug"), SystemExit(2), KeyboardInterrupt()])
    worker.Worker.run(card)
    assert card.housekept == 4
    assert card.internal == ["housekeeping"] * 3


def test_the_workers_own_stop_passes_the_housekeeping_net(monkeypatch) -> None:
    monkeypatch.setattr(worker, "HOUSEKEEPING_S", -1.0)
    monkeypatch.setattr(containment, "_signalled", True)  # as after the SIGINT handler ran
    card = _Card([KeyboardInterrupt()])
    with pytest.raises(KeyboardInterrupt):
        worker.Worker.run(card)
    assert card.internal == []


class _Bell:
    """The doorbell as ``shm.wait`` uses it (a post, a timed acquire); counts the posts."""

    def __init__(self) -> None:
        self._sem = threading.Semaphore(0)
        self.posts = 0

    def release(self) -> None:
        self.posts += 1
        self._sem.release()

    def acquire(self, timeout: float) -> None:
        if not self._sem.acquire(timeout=timeout):
            raise posix_ipc.BusyError


class _Task:
    start_ns = end_ns = 0


class _EngineScheduler:
    """One real engine thread; ``pump`` reaps what it reported and then stops the loop."""

    def __init__(self, card: _EngineCard) -> None:
        self.card = card
        self.done: collections.deque[tuple[_Task, int, int]] = collections.deque()
        self.engine: engines.Engine[_Task] = engines.Engine(engines.AICORE, self.done,
                                                            card.wake)
        self.on_engines = 0
        self.progressed = False

    def start(self, run: Any) -> None:
        self.on_engines += 1
        self.engine.submit(_Task(), run)

    def pump(self) -> float:
        reaped = bool(self.done)
        while self.done:
            self.done.popleft()
            self.engine.running -= 1
            self.on_engines -= 1
            self.card.running = False
        self.progressed = reaped
        return 1.0

    def idle(self) -> bool:
        return not self.done and not self.progressed


class _EngineCard:
    """What ``run``, ``_sleep`` and ``wake`` touch: the first pass serves a frame that puts
    a long task on an engine; the task, as the host would, waits for the loop to sleep,
    pushes a frame and posts the doorbell, then waits (at most 5 s) for the loop to serve
    it before it ends."""

    def __init__(self) -> None:
        self.running = True
        self.ctl = [0] * (layout.DEVICE_CTL_SIZE // 8)
        self.bell = _Bell()
        self.active: list[Any] = []
        self.frames = ["launch"]
        self.served: list[str] = []
        self.served_meanwhile = threading.Event()
        self.sleeps: list[float] = []
        self.yields_while_busy = 0
        self.wake = worker.Worker.wake.__get__(self)
        self.scheduler = _EngineScheduler(self)
        self._sleep_real = worker.Worker._sleep.__get__(self)
        self._contain = worker.Worker._contain.__get__(self)

    def serve(self) -> int:
        handled = 0
        while self.frames:
            frame = self.frames.pop(0)
            self.served.append(frame)
            handled += 1
            if frame == "launch":
                self.scheduler.start(self._long_task)
            else:
                self.served_meanwhile.set()
        return handled

    def _long_task(self, _task: _Task) -> int:
        for _ in range(5000):  # the host's view: the loop's sleeping flag (at most 5 s)
            if self.ctl[layout.DEVICE_CTL.SLEEPING]:
                break
            time.sleep(0.001)
        self.frames.append("frame")  # as the host's push: the frame, then the flag handshake
        if self.ctl[layout.DEVICE_CTL.SLEEPING]:
            self.ctl[layout.DEVICE_CTL.SLEEPING] = 0
            self.bell.release()
        self.served_meanwhile.wait(5.0)
        return 0

    def _sleep(self, timeout: float) -> None:
        self.sleeps.append(timeout)
        self._sleep_real(timeout)

    def housekeeping(self) -> None:
        pass

    def internal_error(self, where: str) -> None:
        raise AssertionError(where)


def test_the_loop_sleeps_while_an_engine_runs_and_still_serves_a_frame(monkeypatch) -> None:
    card = _EngineCard()

    def counting_yield() -> None:
        if card.scheduler.on_engines:
            card.yields_while_busy += 1

    monkeypatch.setattr(worker.os, "sched_yield", counting_yield)
    monkeypatch.setattr(worker, "QUIET_S", 0.0)  # any slept wait would shorten the spin
    try:
        worker.Worker.run(card)
    finally:
        card.scheduler.engine.stop()
    assert card.served == ["launch", "frame"]
    assert card.served_meanwhile.is_set()  # served while the engine's task still ran
    assert card.yields_while_busy == 0
    assert card.sleeps and max(card.sleeps) <= 0.01  # bounded slices right after work
    assert card.bell.posts >= 1  # the engine's post at its end, the host's if it saw the flag
    assert card.spin.budget == worker.SPIN_S  # a sleep for an engine teaches the spin nothing
