"""A killed process that its parent has not reaped yet (a zombie: ``os.kill(pid, 0)`` and
``psutil.pid_exists`` still succeed) counts as gone where the node asks whether a process
lives: the supervisor's reaper of communicator segments (a segment whose only rank's host
is a zombie is abandoned), its watch of an embedded node's owner (a lost owner stops the
node), and the host's claim of a card's trace ring (a profiler that died leaves it free)."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from types import SimpleNamespace

import psutil
import pytest

from npuemu.device import supervisor
from npuemu.device.trace import TraceWriter
from npuemu.host.driver.trace import TraceReader
from npuemu.shared import errors, layout, liveness, shm
from npuemu.shared.trace import TRACE_HEADER
from tests.unit.test_profiling import _fake_link


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def _zombie(proc: subprocess.Popen[bytes]) -> None:
    """Kill ``proc`` and wait (bounded) until it is a zombie: exited, not reaped."""
    os.kill(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the killed child never became a zombie"
        time.sleep(0.01)
    assert psutil.pid_exists(proc.pid)  # what the node used to ask


@pytest.fixture
def comm_segment() -> Iterator[tuple[str, memoryview]]:
    """A communicator segment with the header written and no rank joined yet."""
    name = shm.name(f"z{secrets.token_hex(4)}", "hccl", "1")
    seg = shm.Segment(name, layout.COMM_SIZE, create=True)
    words = seg.buf.cast("Q")
    words[layout.COMM_HEADER.MAGIC] = layout.MAGIC_COMM
    try:
        yield name, words
    finally:
        words.release()
        seg.unlink()
        seg.close()


def _join(words: memoryview, rank: int, pid: int) -> None:
    base = layout.COMM_RANKS + rank * layout.COMM_RANK.words
    words[base + layout.COMM_RANK.PID] = pid
    words[base + layout.COMM_RANK.STATE] = layout.CommRankState.ATTACHED


def test_a_communicator_whose_rank_is_a_zombie_is_abandoned(child, comm_segment) -> None:
    name, words = comm_segment
    _join(words, 0, child.pid)
    assert not supervisor._abandoned(name, gone=0)  # its host lives
    _zombie(child)
    assert supervisor._abandoned(name, gone=0)


def test_an_embedded_nodes_owner_that_is_a_zombie_is_lost(child) -> None:
    now = time.monotonic()
    state = SimpleNamespace(owner=liveness.ProcessWatch(child.pid), owner_seen=False)
    assert not supervisor.Supervisor.owner_lost(state, now)
    _zombie(child)
    assert supervisor.Supervisor.owner_lost(state, now)
    state.owner.close()


def test_a_trace_ring_claimed_by_a_zombie_is_free(child, monkeypatch) -> None:
    monkeypatch.setenv("NPUEMU_TRACE_RECORDS", "8")
    node = f"z{secrets.token_hex(4)}"
    writer = TraceWriter(node, 0, boot_ns=1)
    try:
        first = TraceReader(_fake_link(node))
        first.words[TRACE_HEADER.READER_PID] = child.pid  # claimed by a live profiler
        with pytest.raises(errors.AclError) as info:
            TraceReader(_fake_link(node))
        assert info.value.code == errors.ACL_ERROR_PROF_ALREADY_RUN
        _zombie(child)
        second = TraceReader(_fake_link(node))  # the dead profiler's claim is void
        assert second.words[TRACE_HEADER.READER_PID] == os.getpid()
        second.close()
        first.close()
    finally:
        writer.close()
