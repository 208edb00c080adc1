"""The worker's loop beats its heartbeat inside long handlers (no processes): a synchronous
copy or memset runs in steps with a beat after each, and an arena beats per committed
chunk. Also the submission ring's cached head and tail (shared/ring.py)."""

from __future__ import annotations

import ctypes
import secrets

import pytest

from npuemu.device import dispatch
from npuemu.device.memory.arenas import COMMIT_CHUNK, Arena
from npuemu.shared import address, shm
from npuemu.shared.ring import Ring, RingFull, region_size


def _buffer(data: bytes) -> tuple[ctypes.Array, int]:
    buf = ctypes.create_string_buffer(data, len(data))
    return buf, ctypes.addressof(buf)


@pytest.mark.parametrize("shift", [-5, 0, 5, 40])
def test_beating_memmove_copies_like_memmove_in_steps(monkeypatch, shift):
    monkeypatch.setattr(dispatch, "BEAT_BYTES", 8)
    data = bytes(range(100))
    buf, base = _buffer(data)
    beats = []
    src, count = 10, 30
    dispatch.beating_memmove(lambda: beats.append(1), base + src + shift, base + src, count)
    want = bytearray(data)
    want[src + shift : src + shift + count] = data[src : src + count]  # memmove semantics
    assert buf.raw == bytes(want)
    assert len(beats) == 4  # 30 bytes in steps of 8


def test_beating_memmove_of_nothing_does_nothing():
    beats = []
    dispatch.beating_memmove(lambda: beats.append(1), 0, 0, 0)
    assert beats == []


def test_arena_beats_once_per_newly_committed_chunk():
    seg = shm.Segment(shm.name(f"ut{secrets.token_hex(4)}", "hbm"), 4 * COMMIT_CHUNK,
                      create=True)
    try:
        arena = Arena(seg, address.HBM)
        beats = []
        arena.progress = lambda: beats.append(1)
        arena.commit(0, 3 * COMMIT_CHUNK)
        assert len(beats) == 3
        arena.commit(COMMIT_CHUNK, 2 * COMMIT_CHUNK)  # the second and third: committed
        arena.commit(COMMIT_CHUNK, 3 * COMMIT_CHUNK)  # adds the fourth
        assert len(beats) == 4
    finally:
        seg.unlink()
        seg.close()


def test_ring_cached_tail_sees_the_consumer_catch_up():
    buf = memoryview(bytearray(region_size(64)))
    prod, cons = Ring(buf, 64, init=True), Ring(buf)
    frames = [bytes([i]) * 10 for i in range(4)]  # 16 bytes each on the ring
    for f in frames:
        prod.push(f)
    with pytest.raises(RingFull):
        prod.push(b"x")
    assert cons.pop() == frames[0]
    prod.push(b"y" * 10)  # fits once the producer reads the tail again
    assert [cons.pop() for _ in range(4)] == [*frames[1:], b"y" * 10]
    assert cons.pop() is None
    prod.push(b"z")  # the consumer reads the head again once it took all it saw
    assert cons.pop() == b"z"
    for view in (prod, cons):
        view.release()


class _Bell:
    def __init__(self) -> None:
        self.posts = 0

    def release(self) -> None:
        self.posts += 1


class _Tracer:
    def stamp(self, frame):
        frame[1] = 12345
        return frame


def _bare_link():
    """A DeviceLink's push path over an in-process ring and control block (no worker)."""
    import threading

    from npuemu.host.driver.link import DeviceLink
    from npuemu.shared import protocol
    from npuemu.shared.layout import DEVICE_CTL, DeviceState

    link = object.__new__(DeviceLink)
    buf = memoryview(bytearray(region_size(1 << 12)))
    link.sub, link.lock, link.lost_detail = Ring(buf, 1 << 12, init=True), threading.Lock(), ""
    link.ctl = memoryview(bytearray(DEVICE_CTL.size)).cast("Q")
    link.ctl[DEVICE_CTL.STATE] = DeviceState.READY
    link.bell, link.tracer = _Bell(), None
    return link, Ring(buf), protocol, DEVICE_CTL.SLEEPING


def test_link_posts_the_doorbell_once_per_worker_sleep():
    link, consumer, protocol, sleeping = _bare_link()
    link.ctl[sleeping] = 1  # the worker went to sleep
    for seq in range(1, 4):
        link.submit_locked([34, 0, 1, seq, 1, seq])
    assert link.bell.posts == 1 and link.ctl[sleeping] == 0
    link.ctl[sleeping] = 1  # asleep again
    link.submit_locked([34, 0, 1, 4, 1, 4])
    assert link.bell.posts == 2
    assert [protocol.unpack(consumer.pop())[3] for _ in range(4)] == [1, 2, 3, 4]


def test_tracer_stamps_stream_tasks_but_not_posted_requests():
    link, consumer, protocol, _ = _bare_link()
    link.tracer = _Tracer()
    link.submit_locked([34, 0, 1, 1, 1, 1])
    link.post(3, 0x1000)  # FREE: no reply wanted, so its seq field must stay 0
    assert protocol.unpack(consumer.pop())[1] == 12345
    assert protocol.unpack(consumer.pop()) == (3, 0, 0x1000)


@pytest.mark.parametrize(("read", "written"), [(0, 3), (3, 5), (2, 6), (4, 4)])
def test_trace_drain_copies_records_in_ring_order(read, written):
    import numpy as np

    from npuemu.host.driver import trace
    from npuemu.shared import trace as tl

    reader = object.__new__(trace.TraceReader)
    reader.capacity = 4
    reader.words = np.zeros(tl.TRACE_HEADER.words, dtype=np.uint64)
    reader.words[tl.TRACE_HEADER.READ], reader.words[tl.TRACE_HEADER.WRITE] = read, written
    reader.records = np.zeros(4, trace.RECORD_DTYPE)
    reader.records["seq"] = [10, 11, 12, 13]  # slot i holds the record of seq 10 + i
    reader.records["client"] = [1, 2, 1, 1]
    reader.link = type("L", (), {"slot": 1})()
    got = reader.drain()
    want = [10 + i % 4 for i in range(read, written) if i % 4 != 1]  # client 2 left out
    assert list(got["seq"]) == want
    assert reader.words[tl.TRACE_HEADER.READ] == written


def test_a_refused_task_frame_is_never_answered_even_with_a_submit_stamp():
    """Field 1 of a stream task is the profiling host's submit stamp, not a request number:
    a task the worker refuses is counted (and failed in its stream), never replied to."""
    from npuemu.device import dispatch
    from npuemu.shared import errors, layout, protocol
    from npuemu.shared.protocol import BadFrame, Op

    class Sched:
        def enqueue(self, client, frame):
            raise BadFrame("refused")

    class Worker:
        debug, scheduler = False, Sched()

        def __init__(self):
            self.ctl, self.lines = [0] * layout.DEVICE_CTL_SIZE, []

        def log(self, level, message, module="TS"):
            self.lines.append(level)

    class Client:
        def __init__(self):
            self.replies = []

        def reply(self, frame):
            self.replies.append(frame)

    worker, client = Worker(), Client()
    dispatch.handle(worker, client, protocol.pack([Op.RECORD, 1 << 40, 0, 1, 0, 1]))
    assert client.replies == [] and worker.ctl[layout.DEVICE_CTL.BAD_FRAMES] == 1
    dispatch.handle(worker, client, protocol.pack([Op.PING, 7, "extra"]))  # requests are
    assert client.replies[0][:2] == (7, errors.ACL_ERROR_RT_PARAM_INVALID)  # still answered
