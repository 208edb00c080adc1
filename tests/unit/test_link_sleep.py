"""``link._sleep``, the one place a host thread sleeps on a semaphore: asynchronous signals
are held back during the wait and delivered right after it, and the thread's signal mask is
left exactly as it was found, whatever a signal handler raises and wherever."""

from __future__ import annotations

import os
import signal
import threading
import time
from types import SimpleNamespace

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


def hinted(until_ns: int, done, deadline: float | None = None) -> bool:
    """``DeviceLink._spin_hinted`` over a stream table of one slot holding ``until_ns``."""
    table = SimpleNamespace(stream_spin_until=[until_ns])
    return link.DeviceLink._spin_hinted(table, done, 0, deadline)  # type: ignore[arg-type]


def test_a_synchronize_spins_on_the_cards_hint_only_while_it_lies_ahead():
    calls = []

    def done_on_third():
        calls.append(1)
        return len(calls) >= 3

    ahead = time.monotonic_ns() + link.HINTED_SPIN_MAX_NS // 2
    assert hinted(ahead, done_on_third) is True and len(calls) == 3
    calls.clear()
    for until in (0, time.monotonic_ns() - 1,  # no hint; a hint of a task that ended
                  time.monotonic_ns() + 2 * link.HINTED_SPIN_MAX_NS):  # too far: sleep
        assert hinted(until, done_on_third) is False
    assert calls == []
    assert hinted(ahead, done_on_third, deadline=time.monotonic() - 1) is False  # timed out


def test_a_task_that_runs_past_its_hint_is_waited_for_asleep():
    calls = []
    until = time.monotonic_ns() + 200_000
    assert hinted(until, lambda: calls.append(1) or False) is False
    assert calls and time.monotonic_ns() >= until
