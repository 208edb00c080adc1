"""Fair turns on one card (``device/rotation.py`` and ``Scheduler.pump``): clients take
turns, then their streams; the order of tasks within a stream is kept. No processes: a
stand-in worker and clients with in-memory tables; the tasks are event records and waits,
which the scheduler runs in its own thread."""

from __future__ import annotations

import collections

import pytest

from npuemu.device import scheduler as sched_mod
from npuemu.device.rotation import Rotation
from npuemu.shared import layout
from npuemu.shared.protocol import Op


class _Faults:
    hangs = 0


class _Worker:
    dev, debug, boot_ns = 0, False, 0

    def __init__(self) -> None:
        self.ctl = _table(layout.DEVICE_CTL_SIZE)
        self.faults = _Faults()

    def wake(self) -> None:
        pass

    def log(self, level: str, message: str, module: str = "TS") -> None:
        pass

    def internal_error(self, where: str) -> None:
        raise AssertionError(f"internal error in {where}")


def _table(size: int) -> memoryview:
    return memoryview(bytearray(size)).cast("Q")


class _Ring:
    """A client's submission ring as ``Scheduler.enqueue`` sees it: whether more frames
    follow the one being handled (by default they do, so nothing runs at intake)."""

    def __init__(self) -> None:
        self.drained = False

    def empty(self) -> bool:
        return self.drained


class _Client:
    departed, inflight, op_timeout_s = False, 0, 0.0

    def __init__(self, slot: int) -> None:
        self.slot = slot
        self.sub = _Ring()
        self.streams = _table(layout.MAX_STREAMS * layout.STREAM_ENTRY.size)
        self.events = _table(layout.MAX_EVENTS * layout.EVENT_ENTRY.size)

    def notify_sync(self) -> None:
        pass

    def report(self, frame: tuple) -> None:
        pass


class _LoggedQueue(collections.deque):
    """A stream's queue that logs each task leaving its head (a completed task does, on the
    fast lane and through ``_complete`` alike)."""

    order: list[tuple[int, int, int]]

    def popleft(self):
        task = super().popleft()
        self.order.append((task.stream.client.slot, task.stream.slot, task.seq))
        return task


@pytest.fixture
def card(monkeypatch):
    """A scheduler on a stand-in worker; ``card.order`` lists ``(client slot, stream slot,
    task seq)`` in completion order."""
    worker = _Worker()
    scheduler = sched_mod.Scheduler(worker)
    order: list[tuple[int, int, int]] = []
    init = sched_mod.Stream.__init__

    def logged(stream, *args):
        init(stream, *args)
        stream.queue = _LoggedQueue()
        stream.queue.order = order

    monkeypatch.setattr(sched_mod.Stream, "__init__", logged)
    scheduler.order = order
    yield scheduler
    for engine in scheduler.engines.values():
        engine.stop()


def _records(scheduler, client: _Client, stream: int, count: int, event: int = 0,
             first: int = 1) -> None:
    """Queue ``count`` event records on ``stream``, tasks ``first``, ``first + 1``, ..."""
    for seq in range(first, first + count):
        scheduler.enqueue(client, (int(Op.RECORD), 0, stream, seq, event, seq))


def test_rotation_gives_clients_then_their_streams_turns() -> None:
    rot: Rotation[str] = Rotation()
    rot.add("a", 1, "a1")
    rot.add("a", 2, "a2")
    rot.add("b", 1, "b1")
    rot.add("a", 1, "a1 again")  # already there: keeps its place and its value
    assert rot.clients() == ["a", "b"] and rot.streams("a") == ["a1", "a2"]
    rot.served("a", 1)
    assert rot.clients() == ["b", "a"] and rot.streams("a") == ["a2", "a1"]
    rot.remove("b", 1)
    assert rot.clients() == ["a"] and len(rot) == 2
    rot.remove("a", 2)
    assert rot.streams("a") == ["a1"]
    rot.drop_client("a")
    assert not rot and rot.clients() == [] and rot.streams("a") == []
    rot.served("a", 1)  # a client that left: nothing to move
    assert not rot


def test_two_clients_with_equal_backlogs_get_equal_shares_of_a_pass(card, monkeypatch) -> None:
    monkeypatch.setattr(sched_mod, "PASS_BUDGET", 64)
    monkeypatch.setattr(sched_mod, "QUANTUM", 8)
    a, b = _Client(0), _Client(1)
    for client in (a, b):
        card.create(client, 1, 0, 0)
        _records(card, client, 1, 200)
    card.pump()
    shares = [sum(1 for c, _s, _q in card.order if c == slot) for slot in (0, 1)]
    assert shares == [32, 32]
    while card.rotation:
        card.pump()
    for slot in (0, 1):  # every task ran, in its stream's order
        assert [q for c, _s, q in card.order if c == slot] == list(range(1, 201))


def test_a_client_with_more_streams_gets_no_larger_share(card, monkeypatch) -> None:
    monkeypatch.setattr(sched_mod, "PASS_BUDGET", 60)
    monkeypatch.setattr(sched_mod, "QUANTUM", 5)
    many, one = _Client(0), _Client(1)
    for stream in (1, 2, 3):
        card.create(many, stream, 0, 0)
        _records(card, many, stream, 50, event=stream)
    card.create(one, 1, 0, 0)
    _records(card, one, 1, 150)
    card.pump()
    assert sum(1 for c, _s, _q in card.order if c == 0) == 30
    assert sum(1 for c, _s, _q in card.order if c == 1) == 30
    served = {s for c, s, _q in card.order if c == 0}
    assert served == {1, 2, 3}  # the many-stream client's streams took turns
    while card.rotation:
        card.pump()
    for stream in (1, 2, 3):
        assert [q for c, s, q in card.order if (c, s) == (0, stream)] == list(range(1, 51))


def test_a_stream_blocked_on_an_event_keeps_its_order_and_blocks_no_one(card) -> None:
    a, b = _Client(0), _Client(1)
    card.create(a, 1, 0, 0)
    card.create(b, 1, 0, 0)
    card.enqueue(a, (int(Op.WAIT_EVENT), 0, 1, 1, 5, 1, 0))  # event 5, not recorded yet
    _records(card, a, 1, 3, first=2)
    card.pump()
    assert card.order == []  # client a waits; client b has nothing queued
    assert [t.seq for t in card.streams[(0, 1)].queue] == [1, 2, 3, 4]
    _records(card, b, 1, 4)
    card.pump()
    assert card.order == [(1, 1, q) for q in range(1, 5)]
    a.events[5 * layout.EVENT_ENTRY.words + layout.EVENT_ENTRY.DONE_GEN] = 1  # recorded
    card.pump()
    assert card.order[4:] == [(0, 1, q) for q in range(1, 5)]
    assert not card.rotation
