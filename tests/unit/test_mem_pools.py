"""Page pools and fragmentation arithmetic on the pure allocator (device/memory/pools.py)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from npuemu.device.memory.allocator import HUGE_PAGE, Allocator, PageClass, plan
from npuemu.device.memory.pools import CHUNK, NormalChunks, fragmentation, pool_stats

CAP = 64 * HUGE_PAGE


class Heap:
    """An allocator plus its normal-pool chunks, driven as DeviceMemory drives them."""

    def __init__(self, capacity: int = CAP) -> None:
        self.alloc = Allocator(capacity, classify=lambda tag: tag)
        self.chunks = NormalChunks()
        self.live: list[tuple[int, int, PageClass]] = []

    def malloc(self, size: int, policy: int) -> int | None:
        step = plan(size, policy)
        while step is not None:
            off = self.alloc.alloc(step.span, step.align, step.page_class)
            if off is not None:
                if step.page_class is PageClass.NORMAL:
                    self.chunks.add(off, step.span)
                else:  # a huge page placed on idle normal chunks takes them back
                    self.chunks.claim(off, step.span)
                self.live.append((off, step.span, step.page_class))
                return off
            step = step.fallback
        return None

    def free(self, i: int) -> None:
        off, span, cls = self.live.pop(i)
        self.alloc.free(off)
        if cls is PageClass.NORMAL:
            self.chunks.remove(off, span)


def check_identities(heap: Heap) -> None:
    pools = pool_stats(heap.alloc, heap.chunks)
    assert sum(p.reserved for p in pools) == heap.alloc.capacity
    assert sum(p.used for p in pools) == heap.alloc.used
    for p in pools:
        assert p.used + p.free == p.reserved
        assert 0 <= p.largest_free <= p.free
        assert 0.0 <= p.fragmentation <= 1.0
        assert p.fragmentation == fragmentation(p.largest_free, p.free)
    normal, huge, _ = pools
    assert normal.reserved % CHUNK == 0
    assert huge.largest_free % HUGE_PAGE == 0  # only whole aligned huge pages count
    # the huge pool's largest free run is a huge page the heap can really give
    if huge.largest_free:
        assert heap.alloc.alloc(huge.largest_free, HUGE_PAGE, PageClass.HUGE) is not None


_OPS = st.lists(st.tuples(st.booleans(), st.integers(1, 5 << 20), st.sampled_from([0, 1, 2]),
                          st.integers(0, 1 << 30)), max_size=60)


@settings(max_examples=120, deadline=None)
@given(_OPS)
def test_pool_identities_after_random_sequences(ops: list) -> None:
    heap = Heap()
    for is_alloc, size, policy, pick in ops:
        if is_alloc or not heap.live:
            heap.malloc(size, policy)
        else:
            heap.free(pick % len(heap.live))
        pools = pool_stats(heap.alloc, heap.chunks)
        assert sum(p.reserved for p in pools) == CAP
    check_identities(heap)


def test_fragmentation_formula() -> None:
    assert fragmentation(0, 0) == 0.0
    assert fragmentation(100, 100) == 0.0
    assert fragmentation(25, 100) == 0.75


def test_freeing_normal_blocks_returns_their_chunks_to_the_huge_pool() -> None:
    heap = Heap()
    rng = random.Random(7)
    for _ in range(300):
        heap.malloc(rng.randint(1, 200_000), 2)  # NORMAL_ONLY: scattered small blocks
    normal, huge, _ = pool_stats(heap.alloc, heap.chunks)
    assert normal.reserved > 0 and normal.used > 0
    assert huge.reserved == CAP - normal.reserved
    while heap.live:
        heap.free(rng.randrange(len(heap.live)))
    # the emptied chunks stay idle in the normal pool until the level-2 merge
    idle = len(heap.chunks.idle) * CHUNK
    normal, huge, _ = pool_stats(heap.alloc, heap.chunks)
    assert idle == normal.reserved == normal.free > 0 and normal.used == 0
    assert huge.largest_free < CAP  # idle chunks are not huge pages yet
    assert heap.chunks.merge() == -idle and heap.chunks.merge() == 0  # cheap when none
    normal, huge, g = pool_stats(heap.alloc, heap.chunks)
    assert normal.reserved == 0 and heap.chunks.counts == {}
    assert huge.reserved == huge.free == huge.largest_free == CAP  # merged back, one run
    assert huge.fragmentation == 0.0 and g.reserved == 0


def test_a_fragmented_heap_shows_it() -> None:
    heap = Heap()
    for _ in range(8):
        heap.malloc(HUGE_PAGE - 64, 1)  # 8 huge pages in a row (padding stays inside)
    for i in (6, 4, 2, 0):  # free every other one: 4 separate free pages
        heap.free(i)
    _, huge, _ = pool_stats(heap.alloc, heap.chunks)
    # free: 4 single pages + the tail (56 pages) -> largest 56 of 60 free pages
    assert huge.free == 60 * HUGE_PAGE
    assert huge.largest_free == 56 * HUGE_PAGE
    assert abs(huge.fragmentation - 4 / 60) < 1e-12
    check_identities(heap)


def test_normal_chunk_counts() -> None:
    chunks = NormalChunks()
    assert chunks.add(0, 64) == CHUNK
    assert chunks.add(64, 64) == 0
    assert chunks.add(CHUNK - 64, 128) == CHUNK  # straddles into the second chunk
    assert chunks.reserved == 2 * CHUNK
    assert chunks.remove(0, 64) == 0
    assert chunks.remove(64, 64) == 0
    assert chunks.remove(CHUNK - 64, 128) == 0  # emptied chunks stay, idle
    assert chunks.reserved == 2 * CHUNK and chunks.idle == {0, 1}
    assert chunks.add(64, 64) == 0 and chunks.idle == {1}  # reused: busy again
    assert chunks.remove(64, 64) == 0
    assert chunks.claim(CHUNK, CHUNK) == -CHUNK  # a huge page placed on chunk 1
    assert chunks.merge() == -CHUNK  # level 2: chunk 0 back to the huge pool
    assert chunks.reserved == 0 and chunks.idle == set()


def test_a_huge_allocation_never_fails_for_idle_chunks() -> None:
    heap = Heap(8 * HUGE_PAGE)
    for _ in range(8):
        heap.malloc(1000, 2)  # small blocks: the normal pool takes chunk 0
    while heap.live:
        heap.free(0)
    assert heap.chunks.idle
    assert heap.malloc(8 * HUGE_PAGE - 64, 1) is not None  # the whole card, HUGE_ONLY
    assert heap.chunks.idle == set() and heap.chunks.reserved == 0
    check_identities(heap)


def test_row_round_trip() -> None:
    heap = Heap()
    heap.malloc(1000, 2)
    for pool in pool_stats(heap.alloc, heap.chunks):
        back = type(pool).from_row(pool.as_row())
        assert back.name == pool.name and back.free == pool.free
        assert abs(back.fragmentation - pool.fragmentation) < 1e-6


class _Seg:
    """A segment stand-in: DeviceMemory's bookkeeping needs only its size."""

    size = 16 * HUGE_PAGE

    def commit(self, offset: int, length: int) -> None:
        pass


def test_device_merge_free_returns_idle_chunks_once() -> None:
    from npuemu.device.memory.arenas import Arena, DeviceMemory

    changes: list[int] = []
    arena = Arena(_Seg(), 0)  # type: ignore[arg-type]
    mem = DeviceMemory(0, [arena], lambda *_: None, lambda _a, delta: changes.append(delta))
    assert mem.merge_free() == 0  # nothing idle: no lock, no scan
    ptrs = [mem.malloc(1, 5000, 2)[0] for _ in range(600)]  # ~3 MiB of small blocks
    assert arena.normal.reserved == 2 * CHUNK and changes == [CHUNK, CHUNK]
    for ptr in ptrs:
        mem.free(1, ptr)
    assert arena.normal.reserved == 2 * CHUNK  # kept by the normal pool until a merge
    assert mem.merge_free() == 2 * CHUNK and changes[-1] == -2 * CHUNK
    assert mem.merge_free() == 0 and arena.normal.reserved == 0 and mem.merges == 1
    huge = next(p for p in mem.pools()[0] if p.name == "huge")
    assert huge.largest_free == huge.free == _Seg.size and huge.fragmentation == 0.0
