"""``link._sleep``, the one place a host thread sleeps on a semaphore: asynchronous signals
are held back during the wait and delivered right after it, and the thread's signal mask is
left exactly as it was found, whatever a signal handler raises and wherever."""

from __future__ import annotations

import os
import signal
import threading
import time

import posix_ipc
import pytest

from npuemu.host.driver import link


class Interrupted(Exception):
    pass


@pytest.fixture
def sem():
    name = f"/npuemu-test-sleep-{os.getpid()}-{time.monotonic_ns()}"
    s = posix_ipc.Semaphore(name, posix_ipc.O_CREX)
    try:
        yield s
    finally:
        s.unlink()
        s.close()


def mask() -> set[int]:
    return set(signal.pthread_sigmask(signal.SIG_BLOCK, ()))


def test_the_mask_is_restored_and_the_programs_own_blocked_signals_stay_blocked(sem):
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
    try:
        before = mask()
        assert link._sleep(sem, 0.001) is False  # timed out
        sem.release()
        assert link._sleep(sem, 1.0) is True
        assert mask() == before  # SIGUSR2 still blocked, nothing else
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR2})


def test_a_sigint_during_the_wait_is_raised_right_after_it(sem, monkeypatch):
    before = mask()
    real_wait = link.shm.wait
    woke = []

    def wait(s, timeout):
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # this thread's: held back
        time.sleep(0.01)
        woke.append(real_wait(s, timeout))
        return woke[-1]

    monkeypatch.setattr(link.shm, "wait", wait)
    with pytest.raises(KeyboardInterrupt):
        link._sleep(sem, 0.001)
    assert woke == [False]  # the wait itself ran to its end: no SignalError
    assert mask() == before


@pytest.mark.parametrize("call", [0, 1, 2])
def test_a_handler_raising_just_after_any_mask_change_leaves_the_mask_as_found(
        sem, monkeypatch, call):
    """A pending signal's handler runs at the first bytecode after a mask change returns
    (a signal another thread took a moment before): its exception right after the read
    (0), the block (1) or the restore (2) leaves the thread's mask as it was. (A mask left
    blocked once loses every later SIGINT and SIGTERM of the program and of the processes
    it starts.)"""
    before = mask()
    real = link._sigmask
    calls = []

    def sigmask(how, new, old):
        ret = real(how, new, old)
        calls.append(how)
        if len(calls) == call + 1:
            raise Interrupted
        return ret

    monkeypatch.setattr(link, "_sigmask", sigmask)
    with pytest.raises(Interrupted):
        link._sleep(sem, 0.001)
    monkeypatch.undo()
    assert mask() == before, calls


class _Link:
    """What ``DeviceLink._await_eta`` uses of a link: the stream table's estimates (one
    slot) and its one sleep (a plain sleep here, recorded; no completion cuts it short)."""

    def __init__(self, eta_ns: int) -> None:
        self.stream_eta = [eta_ns]
        self.slept: list[float] = []

    def _sleep_once(self, done, timeout_s: float) -> bool:
        self.slept.append(timeout_s)
        time.sleep(timeout_s)
        return done()


def awaited(eta_ns: int, done, deadline: float | None = None) -> tuple[bool, list[float]]:
    fake = _Link(eta_ns)
    got = link.DeviceLink._await_eta(fake, done, 0, deadline)  # type: ignore[arg-type]
    return got, fake.slept


def done_on(n: int):
    """A ``done`` that turns true at its ``n``-th call (``calls`` counts them)."""
    calls: list[int] = []

    def done() -> bool:
        calls.append(1)
        return len(calls) >= n

    done.calls = calls  # type: ignore[attr-defined]
    return done


def test_a_synchronize_sleeps_until_shortly_before_the_cards_estimate_then_polls():
    ahead = link.ETA_AHEAD_MAX_NS // 2
    got, slept = awaited(time.monotonic_ns() + ahead, done_on(1))  # done when it wakes
    assert got is True and len(slept) == 1 and 0 < slept[0] <= (ahead - link.ETA_LEAD_NS) / 1e9
    done = done_on(2)  # an estimate within the lead: polled at once, no sleep
    assert awaited(time.monotonic_ns() + link.ETA_LEAD_NS // 2, done) == (True, [])


def test_without_a_near_estimate_it_sleeps_as_before():
    done = done_on(1)
    for eta in (0, time.monotonic_ns() - 2 * link.ETA_GRACE_NS,  # none; a task long ended
                time.monotonic_ns() + 2 * link.ETA_AHEAD_MAX_NS):  # too far ahead
        assert awaited(eta, done) == (False, [])
    assert done.calls == []
    far = time.monotonic_ns() + link.ETA_AHEAD_MAX_NS // 2
    assert awaited(far, lambda: False, deadline=time.monotonic() - 1) == (False, [])  # timed out


def test_a_task_that_runs_past_its_estimate_is_waited_for_asleep():
    eta = time.monotonic_ns() + link.ETA_LEAD_NS // 2
    got, slept = awaited(eta, lambda: False)
    assert got is False and slept == [] and time.monotonic_ns() >= eta + link.ETA_GRACE_NS
