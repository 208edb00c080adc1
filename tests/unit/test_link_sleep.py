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
