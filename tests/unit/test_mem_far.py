"""Huge-page blocks assembled from scattered pages, on the pure bookkeeping
(``Arena.assemble``, ``Allocator.take``) and on real mappings of one segment
(``shared/pages.py``: the card publishes, another mapping of the segment follows)."""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npuemu.device.memory.allocator import HUGE_PAGE, Allocator
from npuemu.device.memory.arenas import PAGES, Arena, DeviceMemory
from npuemu.shared import address, errors, pages, shm

G = HUGE_PAGE
PAGES_N = 32
HUGE_ONLY = 1


class _Seg:
    size = PAGES_N * G

    def commit(self, offset: int, length: int) -> None:
        pass


def _memory(far: bool = True) -> tuple[Arena, DeviceMemory]:
    arena = Arena(_Seg(), address.HBM, pages.far_size(_Seg.size) if far else 0)  # type: ignore
    return arena, DeviceMemory(0, [arena], lambda *_: None)


def _offset(ptr: int) -> int:
    return address.decode(ptr)[2]


def _fragment(mem: DeviceMemory) -> list[int]:
    """Every other page of the card kept: the free memory is 2 MiB holes only."""
    ptrs = [mem.malloc(1, G - 64, HUGE_ONLY)[0] for _ in range(PAGES_N)]
    for ptr in ptrs[::2]:
        mem.free(1, ptr)
    return ptrs[1::2]


def test_take_carves_a_chosen_range() -> None:
    heap = Allocator(16 * G)
    heap.take(4 * G, 2 * G, "x")
    assert heap.find(5 * G) == (4 * G, 2 * G, "x")
    assert heap.free_blocks() == [(0, 4 * G), (6 * G, 10 * G)]
    with pytest.raises(ValueError):
        heap.take(5 * G, G, "y")  # not free
    heap.free(4 * G)
    assert heap.free_blocks() == [(0, 16 * G)]


def test_a_request_larger_than_every_hole_is_assembled_and_given_back() -> None:
    arena, mem = _memory()
    kept = _fragment(mem)
    assert arena.alloc.largest_free == G and arena.largest_block() == PAGES_N // 2 * G
    used = arena.alloc.used
    ptr, span, _cls = mem.malloc(1, 3 * G - 64, HUGE_ONLY)
    off = _offset(ptr)
    assert span == 3 * G and off >= arena.near and off % G == 0
    assert arena.alloc.used == used + 3 * G  # the near heap counts the physical pages
    runs = arena.file_runs(off, 3 * G)
    assert sorted(runs) == runs and len(runs) == 3 and all(n == G for _s, n in runs)
    assert arena.file_runs(off + G + 64, 100) == [(runs[1][0] + 64, 100)]
    assert arena.file_runs(off + G - 32, 64) == [(runs[0][0] + G - 32, 32), (runs[1][0], 32)]
    assert arena.find(off + G) == (off, 3 * G, arena.tag_at(off))
    assert arena.find(runs[0][0])[2].client == PAGES  # a host cannot reach it that way
    with pytest.raises(errors.AclError):
        mem.resolve(1, address.encode(0, 0, runs[0][0]), 16)
    mem.resolve(1, ptr + 5 * (G // 2), 16)
    assert [b[0] for b in arena.blocks()][-1] == off  # far blocks are listed, pages are not
    assert all(b[2].client != PAGES for b in arena.blocks())
    free_huge = mem.mem_info(1)[0]
    mem.free(1, ptr)
    assert arena.alloc.used == used and mem.mem_info(1)[0] == free_huge + 3 * G
    for p in kept:
        mem.free(1, p)
    assert arena.alloc.free_blocks() == [(0, PAGES_N * G)] and not arena.far_runs


def test_a_large_normal_page_request_is_assembled_into_the_normal_pool() -> None:
    arena, mem = _memory()
    kept = _fragment(mem)
    ptr, span, cls = mem.malloc(1, 5 * (G // 2), 2)  # NORMAL_ONLY, 5 MiB: 3 whole pages
    assert _offset(ptr) >= arena.near and span == 3 * G and cls == 0
    assert arena.normal.reserved == 3 * G
    normal = next(p for p in mem.pools()[0] if p.name == "normal")
    assert normal.used == normal.reserved == 3 * G
    mem.free(1, ptr)
    assert arena.normal.reserved == 3 * G and len(arena.normal.idle) == 3  # idle until merged
    assert mem.merge_free() == 3 * G and arena.normal.reserved == 0
    for p in kept:
        mem.free(1, p)
    assert arena.alloc.free_blocks() == [(0, PAGES_N * G)]


def test_too_many_small_holes_take_the_largest_runs_first(monkeypatch) -> None:
    from npuemu.device.memory import arenas

    monkeypatch.setattr(arenas, "MAX_RUNS", 4)
    arena, mem = _memory()
    kept = _fragment(mem)
    for p in kept[-3:]:  # the top pages join into one run of 6 pages (+ 13 single holes)
        mem.free(1, p)
    ptr = mem.malloc(1, 8 * G - 64, HUGE_ONLY)[0]  # 8 single holes would be 8 runs
    assert [n for _s, n in arena.file_runs(_offset(ptr), 8 * G)] in ([6 * G, G, G],
                                                                     [G, 6 * G, G],
                                                                     [G, G, 6 * G])
    with pytest.raises(errors.AclError):  # 11 single holes left: 8 runs either way
        mem.malloc(1, 8 * G - 64, HUGE_ONLY)


def test_without_a_far_range_the_same_request_fails() -> None:
    _arena, mem = _memory(far=False)
    _fragment(mem)
    with pytest.raises(errors.AclError) as info:
        mem.malloc(1, 3 * G - 64, HUGE_ONLY)
    assert info.value.code == errors.ACL_ERROR_RT_MEMORY_ALLOCATION


def test_more_than_the_free_pages_is_out_of_memory() -> None:
    arena, mem = _memory()
    _fragment(mem)
    with pytest.raises(errors.AclError) as info:
        mem.malloc(1, (PAGES_N // 2 + 1) * G - 64, HUGE_ONLY)
    assert info.value.code == errors.ACL_ERROR_RT_MEMORY_ALLOCATION
    assert not arena.far_runs and arena.far.used == 0  # nothing half taken


def test_huge_pool_reports_every_free_page_as_one_block() -> None:
    _arena, mem = _memory()
    _fragment(mem)
    huge = next(p for p in mem.pools()[0] if p.name == "huge")
    assert huge.largest_free == huge.free == PAGES_N // 2 * G and huge.fragmentation == 0.0


def test_reclaim_frees_far_blocks_and_their_pages() -> None:
    arena, mem = _memory()
    _fragment(mem)
    mem.malloc(1, 4 * G - 64, HUGE_ONLY)
    mem.reclaim(1)
    assert arena.alloc.used == 0 and not arena.far_runs and arena.far.used == 0


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.integers(20, 120))
def test_accounting_holds_through_random_sequences(seed: int, steps: int) -> None:
    """used + free = capacity; far blocks' spans = the pages held for them; no page is
    used twice (near blocks and pages never overlap); freeing all leaves one free run."""
    rng = random.Random(seed)
    arena, mem = _memory()
    live: list[int] = []
    for _ in range(steps):
        if live and rng.random() < 0.45:
            mem.free(1, live.pop(rng.randrange(len(live))))
        else:
            size = rng.choice([rng.randint(1, 64 << 10), rng.randint(1, 3 * G),
                               rng.randint(G, 9 * G)])
            with contextlib.suppress(errors.AclError):
                live.append(mem.malloc(1, size, rng.choice([0, HUGE_ONLY, 2]))[0])
        heap = arena.alloc
        assert heap.used + heap.stats().free == heap.capacity
        far_spans = sum(span for _s, span, _t in arena.far.snapshot())
        held = sum(span for _s, span, tag in heap.snapshot() if tag.client == PAGES)
        assert far_spans == held
        pools = mem.pools()[0]
        assert sum(p.reserved for p in pools) == heap.capacity
        assert all(p.used + p.free == p.reserved for p in pools)
        assert heap.free_pages == sum(max(0, (s + n) // G - -(-s // G))
                                      for s, n in heap.free_blocks())
        ranges = sorted((s, s + span) for s, span, _t in heap.snapshot())
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(ranges))
    for ptr in live:
        mem.free(1, ptr)
    assert arena.alloc.free_blocks() == [(0, arena.alloc.capacity)]


def test_another_mapping_follows_the_published_pages() -> None:
    """Two mappings of one arena segment, as a card and a host hold them: after the card
    publishes far pages, the other mapping sees the same bytes there once it ensured."""
    node = f"farpages{os.getpid()}"
    card = shm.open_arena(node, 0, address.HBM, 8 * G, create=True)
    try:
        host = shm.open_arena(node, 0, address.HBM)
        try:
            seg, _table, far = card
            hseg, _htable, hfar = host
            assert hseg.address != seg.address
            for page, byte in ((5, b"A"), (2, b"B"), (6, b"C")):
                seg.buf[page * G : page * G + 1] = byte
            far.publish(0, [5, 2, 6])  # far pages 0, 1, 2
            base = pages.far_base(seg.size)
            def at(mapping, off):
                return ctypes.string_at(mapping.address + base + off, 1)

            assert [at(seg, i * G) for i in range(3)] == [b"A", b"B", b"C"]
            hfar.ensure()
            assert [at(hseg, i * G) for i in range(3)] == [b"A", b"B", b"C"]
            far.unpublish(0, 3)
            far.publish(0, [6, 7])  # reused, other pages: followed at the next ensure
            hfar.ensure()
            assert at(hseg, 0) == b"C" and at(hseg, G) == b"\0"
            hfar.ensure_range(base + 16, 2 * G - 32)  # mapped here: no error
            for offset, count in ((base + 3 * G, 16),  # page 3: never published
                                  (base + 2 * G, G + 1),  # runs into it
                                  (base - 16, 32)):  # from the segment into the far range
                with pytest.raises(errors.AclError):
                    hfar.ensure_range(offset, count)
        finally:
            for part in host[::-1]:
                part.close()
    finally:
        for part in card[::-1]:
            part.close()
        for seg in card[:2]:
            seg.unlink()
