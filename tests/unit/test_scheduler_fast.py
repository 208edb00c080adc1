"""The card's per-task fast path (``device/scheduler.py``): ``enqueue``'s one-expression
checks accept only frames the full protocol checks accept, and the fast lane of a turn keeps
stream order, publishes a stream's COMPLETED word before any event says more, and hands
failures, injected faults and kernels that turn slow to the general path. No processes: the
stand-in worker and clients of ``test_scheduler_turns``."""

from __future__ import annotations

import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npuemu.device import scheduler as sched_mod
from npuemu.shared import layout, protocol
from npuemu.shared.kernel import kernel
from npuemu.shared.protocol import BadFrame, Op
from tests.unit.test_scheduler_turns import _Client, _Worker

_SE, _EE = layout.STREAM_ENTRY, layout.EVENT_ENTRY
_EDGES = (0, 1, 2, layout.MAX_EVENTS - 1, layout.MAX_EVENTS, protocol.COUNT_LIMIT - 1,
          protocol.COUNT_LIMIT, protocol.U64_LIMIT - 1, protocol.U64_LIMIT, -1)
_VALUE = st.one_of(st.sampled_from(_EDGES), st.integers(-5, 1 << 65), st.booleans(),
                   st.floats(allow_nan=False), st.text(max_size=3), st.none(),
                   st.tuples(st.integers(0, 3)))


def _full_checks_pass(frame: tuple) -> bool:
    checks = sched_mod._TASK_ARGS[frame[0]]
    if len(frame) != 4 + len(checks):
        return False
    try:
        protocol.u64(frame[1])
        protocol.u64(frame[3])
        for value, check in zip(frame[4:], checks, strict=True):
            check(value)
    except BadFrame:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(op=st.sampled_from(sorted(sched_mod._FAST)), stamp=_VALUE, seq=_VALUE,
       args=st.lists(_VALUE, min_size=0, max_size=4))
def test_the_fast_checks_accept_only_what_the_full_checks_accept(op, stamp, seq, args) -> None:
    frame = (op, stamp, 1, seq, *args)
    if sched_mod._FAST[op](frame):
        assert _full_checks_pass(frame)


@pytest.mark.parametrize("op", sorted(sched_mod._FAST))
def test_the_fast_checks_accept_frames_in_range(op) -> None:
    """The fast path serves the common frame: every field at its largest valid value."""
    fields = protocol.TASK_FIELDS[op]
    bound = sched_mod._BOUND
    frame = (op, protocol.U64_LIMIT - 1, 1, 7, *(bound[f.check] - 1 for f in fields))
    assert sched_mod._FAST[op](frame) and _full_checks_pass(frame)


class _Faults:
    hangs = 0

    def __init__(self) -> None:
        self.engine_faults: list[list] = []

    def check_launch(self, engine: str, name: str) -> None:
        for fault in self.engine_faults:
            if fault[0] == engine:
                self.engine_faults.remove(fault)
                raise sched_mod.errors.error_for(fault[1], "injected")


class _Card(_Worker):
    alloc_changes = 0

    def __init__(self) -> None:
        super().__init__()
        self.faults = _Faults()


class _Logged:
    """A table whose writes are logged as ``(name, index, value)``."""

    def __init__(self, name: str, size: int, log: list) -> None:
        self.name, self.words, self.log = name, [0] * size, log

    def __getitem__(self, i: int) -> int:
        return self.words[i]

    def __setitem__(self, i: int, value: int) -> None:
        self.words[i] = value
        self.log.append((self.name, i, value))


@pytest.fixture
def card(monkeypatch):
    # "tiny" is a measured run time: under a loaded test run a 100 us budget can be missed by
    # a kernel that does nothing, and then the fast path these tests look at is not taken
    monkeypatch.setattr(sched_mod, "INLINE_KERNEL_NS", 50_000_000)
    worker = _Card()
    scheduler = sched_mod.Scheduler(worker)
    client = _Client(0)
    client.log = []
    client.streams = _Logged("stream", layout.MAX_STREAMS * _SE.words, client.log)
    client.events = _Logged("event", layout.MAX_EVENTS * _EE.words, client.log)
    client.ranges = None
    module = types.ModuleType("kernels")
    calls: list[int] = []
    mode: list[str] = [""]  # "slow": longer than a tiny kernel; "fail": raises

    @kernel("aicore")
    def tiny(ctx, n):
        calls.append(n)
        if n < 0 or mode[0] == "fail":
            raise ValueError("a failing kernel")
        if mode[0] == "slow":
            sched_mod.time.sleep(2 * sched_mod.INLINE_KERNEL_NS / 1e9)

    module.tiny = tiny
    client.binaries = {1: module}
    scheduler.create(client, 1, 0, 0)
    client.log.clear()  # the stream's fresh entry
    scheduler.client, scheduler.calls, scheduler.mode = client, calls, mode
    yield scheduler
    for engine in scheduler.engines.values():
        engine.stop()


def _completed(client) -> int:
    return client.streams[1 * _SE.words + _SE.COMPLETED]


def _launch(scheduler, seq: int, n: int = 1) -> None:
    scheduler.enqueue(scheduler.client, (int(Op.LAUNCH), 0, 1, seq, 1, "tiny", 1, (n,)))


def _settle(scheduler) -> None:
    for _ in range(1000):  # bounded: the first launch goes to the engine thread
        scheduler.pump()
        if not scheduler.rotation and not scheduler.done and not any(
                e.running for e in scheduler.engines.values()):
            return
        sched_mod.time.sleep(0.001)
    raise AssertionError("the card did not settle")


def test_records_publish_the_stream_before_the_next_event(card) -> None:
    client = card.client
    for seq in (1, 2, 3):
        card.enqueue(client, (int(Op.RECORD), 0, 1, seq, seq, seq))
    card.pump()
    done_gen = {seq * _EE.words + _EE.DONE_GEN: seq for seq in (1, 2, 3)}
    completed_at = 1 * _SE.words + _SE.COMPLETED
    seen = 0
    for name, index, value in client.log:
        if name == "stream" and index == completed_at:
            assert value > seen
            seen = value
        elif name == "event" and index in done_gen:  # every earlier task is in the table
            assert seen == done_gen[index] - 1
    assert _completed(client) == 3 and card.worker.ctl[sched_mod._TASKS] == 3


def test_repeated_tiny_launches_run_inline_in_order_with_one_publish(card) -> None:
    client = card.client
    _launch(card, 1, 1)
    _settle(card)  # the first launch ran on its engine and was measured
    _launch(card, 2, 1)
    _settle(card)  # the second ran inline and kept its prepared callable
    client.log.clear()
    for seq in range(3, 11):
        _launch(card, seq, 1)
    card.pump()
    assert card.calls == [1] * 10
    completed_at = 1 * _SE.words + _SE.COMPLETED
    assert [entry for entry in client.log if entry[1] == completed_at] == [
        ("stream", completed_at, 10)]
    assert card.worker.ctl[sched_mod._TASKS] == 10


def test_a_failing_tiny_launch_and_an_injected_fault_take_the_failure_path(card) -> None:
    client = card.client
    for seq in (1, 2):
        _launch(card, seq)
        _settle(card)
    card.worker.faults.engine_faults.append(["aicore", 507015])
    for seq in (3, 4, 5):
        _launch(card, seq)
    card.pump()
    base = 1 * _SE.words
    assert client.streams[base + _SE.ERR_TASK] == 3
    assert client.streams[base + _SE.ERR_CODE] == 507015
    assert _completed(client) == 5 and card.calls == [1, 1, 1, 1]  # the faulted one never ran
    card.mode[0] = "fail"
    _launch(card, 6)
    card.pump()  # inline, and it raised: the kernel's failure code, reported
    assert client.streams[base + _SE.ERR_TASK] == 6 and _completed(client) == 6
    assert client.streams[base + _SE.ERR_CODE] == sched_mod.engines.FAILURE_CODE["aicore"]
    assert client.streams[base + _SE.ERR_COUNT] == 2
    card.mode[0] = ""
    _launch(card, 7)
    _settle(card)  # the failure forgot its cost: this one ran on the engine again
    card.enqueue(client, (int(Op.LAUNCH), 0, 1, 8, 1, "tiny", 1, (-1,)))
    _settle(card)  # new arguments: the full checks, then the engine
    assert client.streams[base + _SE.ERR_TASK] == 8 and _completed(client) == 8


def test_a_tiny_kernel_that_turns_slow_goes_back_to_its_engine(card) -> None:
    for seq in (1, 2):
        _launch(card, seq)
        _settle(card)
    card.mode[0] = "slow"
    _launch(card, 3)
    card.pump()  # inline (it was tiny last time), and found slow
    assert _completed(card.client) == 3 and not card.engines["aicore"].running
    _launch(card, 4)
    card.pump()
    assert card.engines["aicore"].running == 1 or card.done  # handed to the engine
    _settle(card)
    assert _completed(card.client) == 4 and len(card.calls) == 4


def test_the_last_frame_of_an_idle_card_runs_at_intake(card) -> None:
    """A repeated tiny launch or an event record whose frame is the last in its client's
    ring, on a card with nothing queued, completes in ``enqueue`` (the host is told at the
    end of the pass); with more frames behind it, or other work queued, it waits for
    ``pump``; a profiled one always does."""
    client = card.client
    for seq in (1, 2):
        _launch(card, seq)
        _settle(card)  # measured on the engine, then inline with its prepared callable
    client.sub.drained = True
    _launch(card, 3)
    assert card.calls == [1, 1, 1] and _completed(client) == 3 and not card.rotation
    card.enqueue(client, (int(Op.RECORD), 0, 1, 4, 5, 9))
    assert client.events[5 * _EE.words + _EE.DONE_GEN] == 9 and _completed(client) == 4
    assert card.worker.ctl[sched_mod._TASKS] == 2  # the pass publishes the count
    card.pump()
    assert card.worker.ctl[sched_mod._TASKS] == 4
    client.sub.drained = False  # more frames follow: the pass's pump runs it
    _launch(card, 5)
    assert len(card.calls) == 3 and _completed(client) == 4
    client.sub.drained = True
    _launch(card, 6)  # stream 1 has queued work: behind it
    assert len(card.calls) == 3 and _completed(client) == 4
    card.pump()
    assert len(card.calls) == 5 and _completed(client) == 6
    card.enqueue(client, (int(Op.LAUNCH), 12345, 1, 7, 1, "tiny", 1, (1,)))  # profiled
    assert len(card.calls) == 5 and card.rotation


def test_a_fault_or_failure_at_intake_fails_its_task_as_the_pump_would(card) -> None:
    client = card.client
    for seq in (1, 2):
        _launch(card, seq)
        _settle(card)
    client.sub.drained = True
    card.worker.faults.engine_faults.append(["aicore", 507015])
    _launch(card, 3)
    base = 1 * _SE.words
    assert client.streams[base + _SE.ERR_TASK] == 3 and _completed(client) == 3
    assert client.streams[base + _SE.ERR_CODE] == 507015 and card.calls == [1, 1]
    card.mode[0] = "fail"
    _launch(card, 4)
    assert client.streams[base + _SE.ERR_TASK] == 4 and _completed(client) == 4
    assert client.streams[base + _SE.ERR_CODE] == sched_mod.engines.FAILURE_CODE["aicore"]
    assert not card.rotation
