"""Ring framing, wrap, full and empty, over a plain bytearray and over real shared memory."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npuemu.shared import shm
from npuemu.shared.ring import WRAP, Ring, RingFull, region_size


def make(capacity: int = 256) -> tuple[Ring, Ring]:
    buf = memoryview(bytearray(region_size(capacity)))
    return Ring(buf, capacity, init=True), Ring(buf)


def test_empty_ring_pops_none() -> None:
    producer, consumer = make()
    assert consumer.empty() and consumer.pop() is None
    assert producer.free_bytes() == 256


def test_frames_come_out_in_order_with_their_bytes() -> None:
    producer, consumer = make()
    for msg in (b"a", b"", b"hello", bytes(range(50))):
        producer.push(msg)
    assert [consumer.pop() for _ in range(4)] == [b"a", b"", b"hello", bytes(range(50))]
    assert consumer.pop() is None


def test_full_ring_raises_and_recovers_after_pop() -> None:
    producer, consumer = make(128)
    for i in range(4):  # 4-byte length + 28 bytes = 32 bytes each: exactly full
        producer.push(bytes([i]) * 28)
    with pytest.raises(RingFull):
        producer.push(b"z")
    assert consumer.pop() == b"\x00" * 28
    producer.push(b"z")
    assert [consumer.pop() for _ in range(4)] == [b"\x01" * 28, b"\x02" * 28, b"\x03" * 28,
                                                  b"z"]


def test_wrap_marker_is_written_and_skipped() -> None:
    producer, consumer = make(128)
    for tag in b"abc":  # frames at [0, 32), [32, 64), [64, 96)
        producer.push(bytes([tag]) * 28)
        assert consumer.pop() == bytes([tag]) * 28
    producer.push(b"d" * 44)  # needs 48 bytes: does not fit in [96, 128) -> wraps to 0
    assert int.from_bytes(producer._data[96:100], "little") == WRAP
    assert consumer.pop() == b"d" * 44 and consumer.empty()


def test_oversized_frame_is_refused() -> None:
    producer, _ = make(64)
    with pytest.raises(ValueError):
        producer.push(b"x" * 64)


def test_bad_capacity_and_corrupt_header() -> None:
    with pytest.raises(ValueError):
        Ring(memoryview(bytearray(region_size(100))), 100, init=True)
    with pytest.raises(ValueError):
        Ring(memoryview(bytearray(region_size(64))))  # header never initialised


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.binary(max_size=60)), max_size=200))
def test_random_push_pop_matches_a_fifo(ops: list[tuple[bool, bytes]]) -> None:
    producer, consumer = make(128)
    model: list[bytes] = []
    for is_push, payload in ops:
        if is_push:
            try:
                producer.push(payload)
                model.append(payload)
            except RingFull:
                assert model, "a ring that holds nothing must accept a frame under its limit"
        else:
            assert consumer.pop() == (model.pop(0) if model else None)
    while model:
        assert consumer.pop() == model.pop(0)
    assert consumer.empty()


def test_ring_over_shared_memory_between_two_mappings() -> None:
    name = shm.name(f"unit{os.getpid()}", "ring")
    seg = shm.Segment(name, region_size(4096), create=True)
    other = shm.Segment(name)
    try:
        producer = Ring(seg.buf, 4096, init=True)
        consumer = Ring(other.buf)
        for i in range(1000):
            producer.push(i.to_bytes(4, "little") * (i % 7))
            assert consumer.pop() == i.to_bytes(4, "little") * (i % 7)
        producer.release()
        consumer.release()
    finally:
        seg.unlink()
        seg.close()
        other.close()
    assert not shm.leftovers(f"unit{os.getpid()}")
