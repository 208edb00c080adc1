"""Unit and property tests of npuemu.device.memory.allocator (aclrtMalloc sizing + offset heap)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
)

from npuemu.device.memory.allocator import (
    HUGE1G_PAGE,
    HUGE_PAGE,
    Allocator,
    AllocatorStats,
    PageClass,
    Plan,
    plan,
)

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30


# ---------------------------------------------------------------------------------------
# plan()
# ---------------------------------------------------------------------------------------


def _normal(span: int, p2p: bool = False) -> Plan:
    return Plan(span, 64, PageClass.NORMAL, p2p, None)


@pytest.mark.parametrize(
    ("size", "span"),
    [
        (1, 64),  # round32 -> 32, +32 -> 64
        (31, 64),
        (32, 64),  # 32 + 32 = 64
        (33, 128),  # round32 -> 64, +32 -> 96, round64 -> 128
        (64, 128),  # 64 + 32 = 96 -> 128
        (96, 128),  # 96 + 32 = 128
        (97, 192),  # 128 + 32 = 160 -> 192
        (256, 320),  # 288 -> 320
        (MiB, MiB + 64),
    ],
)
def test_plan_normal_only_spans(size: int, span: int) -> None:
    assert plan(size, 2) == _normal(span)
    assert plan(size, 5) == _normal(span, p2p=True)


def test_plan_huge_first_threshold() -> None:
    assert plan(MiB, 0) == _normal(MiB + 64)
    p = plan(MiB + 1, 0)
    assert p.page_class is PageClass.HUGE
    assert (p.span, p.align, p.p2p) == (2 * MiB, 2 * MiB, False)
    assert p.fallback == _normal(MiB + 64)  # round32 -> 1M+32, +32 -> 1M+64 (64-aligned)
    assert p.fallback is not None and p.fallback.fallback is None
    # Small HUGE_FIRST requests are plain NORMAL plans with no fallback.
    assert plan(1, 0) == _normal(64)


def test_plan_huge_padding_pushes_to_next_page() -> None:
    # Exactly 2 MiB + 32 bytes of padding needs two huge pages.
    assert plan(2 * MiB, 1) == Plan(4 * MiB, HUGE_PAGE, PageClass.HUGE, False, None)
    assert plan(2 * MiB - 32, 1).span == 2 * MiB
    assert plan(2 * MiB - 31, 1).span == 4 * MiB
    # HUGE_ONLY of a tiny size still takes a whole huge page and has no fallback.
    assert plan(1, 1) == Plan(2 * MiB, 2 * MiB, PageClass.HUGE, False, None)


def test_plan_huge1g_has_no_padding() -> None:
    assert plan(GiB, 6) == Plan(GiB, HUGE1G_PAGE, PageClass.HUGE1G, False, None)
    assert plan(1, 6) == Plan(GiB, GiB, PageClass.HUGE1G, False, None)
    assert plan(GiB + 1, 7) == Plan(2 * GiB, GiB, PageClass.HUGE1G, True, None)


def test_plan_p2p_flag() -> None:
    for base, p2p in [(0, False), (1, False), (2, False), (3, True), (4, True), (5, True)]:
        for size in (100, 3 * MiB):
            p = plan(size, base)
            assert p.p2p is p2p
            if p.fallback is not None:
                assert p.fallback.p2p is p2p
    fallback = _normal(3 * MiB + 64, p2p=True)
    assert plan(3 * MiB, 3) == Plan(4 * MiB, 2 * MiB, PageClass.HUGE, True, fallback)
    assert plan(3 * MiB, 4) == Plan(4 * MiB, 2 * MiB, PageClass.HUGE, True, None)
    assert plan(7, 7).p2p is True and plan(7, 6).p2p is False


@pytest.mark.parametrize("modifier", [0x100, 0x1000, 0x100000, 0x101100])
@pytest.mark.parametrize("base", range(8))
@pytest.mark.parametrize("size", [1, 1000, MiB, MiB + 1, 5 * MiB])
def test_plan_modifiers_are_ignored(modifier: int, base: int, size: int) -> None:
    assert plan(size, base | modifier) == plan(size, base)


@pytest.mark.parametrize("policy", [8, 9, 0x20, 0xFF, 0x200, 1 << 24, -1])
def test_plan_out_of_range_policy(policy: int) -> None:
    assert plan(2 * MiB - 1, policy) == _normal(2 * MiB + 64)  # round32 2M, +32, round64
    assert plan(2 * MiB, policy) == Plan(4 * MiB, 2 * MiB, PageClass.HUGE, False, None)
    assert plan(100, policy) == _normal(192)  # 128 + 32 = 160 -> 192


def test_plan_bare_bandwidth_modifier_is_huge_first() -> None:
    assert plan(3 * MiB, 0x1000) == plan(3 * MiB, 0)
    assert plan(3 * MiB, 0x1000).fallback is not None


@pytest.mark.parametrize("size", [0, -1, -64])
def test_plan_rejects_non_positive_size(size: int) -> None:
    with pytest.raises(ValueError):
        plan(size, 0)


def test_page_class_values() -> None:
    assert [int(c) for c in PageClass] == [0, 1, 2]
    assert [c.name for c in PageClass] == ["NORMAL", "HUGE", "HUGE1G"]


@given(size=st.integers(1, 4 * GiB), policy=st.integers(-(1 << 24), 1 << 24))
@settings(max_examples=300, deadline=None)
def test_plan_properties(size: int, policy: int) -> None:
    p = plan(size, policy)
    while p is not None:
        assert p.span >= size
        assert p.span % p.align == 0 and p.span % 64 == 0
        assert p.align == {PageClass.NORMAL: 64, PageClass.HUGE: 2 * MiB,
                           PageClass.HUGE1G: GiB}[p.page_class]
        if p.page_class is not PageClass.HUGE1G:
            assert p.span >= size + 32  # the padding is always there
            assert p.span - size < 32 + 32 + p.align
        else:
            assert p.span - size < GiB
        p = p.fallback


# ---------------------------------------------------------------------------------------
# Allocator: examples
# ---------------------------------------------------------------------------------------


def test_basic_alloc_free_and_coalescing() -> None:
    a = Allocator(1024, classify=lambda t: t[0])
    x = a.alloc(64, 64, "x1")
    y = a.alloc(128, 64, "y")
    z = a.alloc(64, 64, "x2")
    assert (x, y, z) == (0, 64, 192)
    assert a.stats() == AllocatorStats(1024, 256, 768, 256, 3, 1, 768, {"x": 128, "y": 128})
    assert a.find(0) == (0, 64, "x1")
    assert a.find(100) == (64, 128, "y")
    assert a.find(191) == (64, 128, "y")
    assert a.find(256) is None
    assert a.free(64) == (128, "y")
    assert a.free_blocks() == [(64, 128), (256, 768)]
    # Best fit: the 128-byte hole is chosen over the big tail block.
    assert a.alloc(128, 64, "w") == 64
    assert a.free(64) == (128, "w")
    assert a.free(0) == (64, "x1")
    assert a.free_blocks() == [(0, 192), (256, 768)]
    assert a.free(192) == (64, "x2")
    assert a.free_blocks() == [(0, 1024)]
    st_ = a.stats()
    assert (st_.used, st_.peak_used, st_.live_count, st_.used_by) == (0, 256, 0, {})


def test_full_returns_none_and_bad_free_raises() -> None:
    a = Allocator(256)
    assert a.alloc(256, 64, None) == 0
    assert a.alloc(64, 64, None) is None
    with pytest.raises(KeyError):
        a.free(64)  # inside a live block but not its start
    a.free(0)
    with pytest.raises(KeyError):
        a.free(0)  # double free
    assert a.alloc(320, 64, None) is None


def test_alignment_splits_front_fragment() -> None:
    a = Allocator(4096)
    assert a.alloc(64, 64, "a") == 0
    assert a.alloc(64, 1024, "b") == 1024
    assert a.free_blocks() == [(64, 960), (1088, 3008)]
    assert a.alloc(960, 64, "c") == 64  # exact fit into the front fragment
    assert a.stats().free_block_count == 1


def test_alignment_skips_blocks_that_are_big_enough_but_misaligned() -> None:
    a = Allocator(8192)
    blocks = [a.alloc(64 * k, 64, k) for k in (1, 8, 1, 16, 1)]
    assert blocks == [0, 64, 576, 640, 1664]
    a.free(64)  # [64, 576): 512 bytes, no 512-aligned 512-byte window
    a.free(640)  # [640, 1664): 1024 bytes, holds [1024, 1536)
    assert a.alloc(512, 512, "x") == 1024
    assert (640, 384) in a.free_blocks() and (1536, 128) in a.free_blocks()


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError):
        Allocator(100)
    with pytest.raises(ValueError):
        Allocator(-64)
    a = Allocator(1024)
    for span, align in [(0, 64), (32, 64), (100, 64), (64, 0), (64, 32), (-64, 64)]:
        with pytest.raises(ValueError):
            a.alloc(span, align, None)


def test_zero_capacity() -> None:
    a = Allocator(0)
    assert a.alloc(64, 64, None) is None
    assert a.free_blocks() == []
    assert a.find(0) is None
    assert a.stats().largest_free == 0


def test_reset_and_peak() -> None:
    a = Allocator(MiB, classify=type)
    for _ in range(10):
        a.alloc(1024, 64, 1)
    a.free(0)
    s = a.stats()
    assert (s.used, s.peak_used, s.used_by) == (9 * KiB, 10 * KiB, {int: 9 * KiB})
    a.reset()
    assert a.snapshot() == [] and a.free_blocks() == [(0, MiB)]
    assert a.stats() == AllocatorStats(MiB, 0, MiB, 0, 0, 1, MiB, {})
    assert a.alloc(64, 64, "t") == 0


def test_huge_plan_in_arena_with_fallback() -> None:
    a = Allocator(8 * MiB)
    assert a.alloc(64, 64, "small") == 0
    p = plan(3 * MiB, 0)  # HUGE: 4 MiB span, 2 MiB aligned
    assert a.alloc(p.span, p.align, "big") == 2 * MiB  # first aligned window after "small"
    h = plan(MiB + MiB // 2, 1)  # HUGE_ONLY: one 2 MiB page
    assert a.alloc(h.span, h.align, "huge") == 6 * MiB  # [64, 2M) is too small once aligned
    q = plan(MiB + MiB // 2, 0)
    assert a.alloc(q.span, q.align, "q") is None  # no 2 MiB-aligned page left
    assert q.fallback is not None
    assert a.alloc(q.fallback.span, q.fallback.align, "q") == 64


# ---------------------------------------------------------------------------------------
# Allocator: property-based
# ---------------------------------------------------------------------------------------


def _classify(tag: object) -> object:
    assert isinstance(tag, int)
    return tag % 3


def _check_invariants(a: Allocator, capacity: int) -> None:
    snap = a.snapshot()
    free = a.free_blocks()
    assert snap == sorted(snap, key=lambda b: b[0])
    # Live blocks are inside the arena, 64-granular and disjoint; so are free blocks, and
    # together they tile [0, capacity) exactly.
    pieces = sorted([(s, n) for s, n, _ in snap] + free)
    pos = 0
    for s, n in pieces:
        assert s == pos and n > 0 and s % 64 == 0 and n % 64 == 0
        pos = s + n
    assert pos == capacity
    # Free blocks are fully coalesced: no two are adjacent.
    for (s1, n1), (s2, _) in itertools.pairwise(free):
        assert s1 + n1 < s2
    used = sum(n for _, n, _ in snap)
    used_by: dict[object, int] = {}
    for _, n, tag in snap:
        c = _classify(tag)
        used_by[c] = used_by.get(c, 0) + n
    stats = a.stats()
    assert stats.capacity == capacity
    assert stats.used == used == a.used
    assert stats.free == capacity - used == sum(n for _, n in free)
    assert stats.live_count == len(snap) == len(a)
    assert stats.free_block_count == len(free)
    assert stats.largest_free == max((n for _, n in free), default=0)
    assert stats.used_by == used_by
    assert stats.peak_used >= used


def _fits(free: list[tuple[int, int]], span: int, align: int) -> list[tuple[int, int]]:
    out = []
    for s, n in free:
        at = -(-s // align) * align
        if at + span <= s + n:
            out.append((s, n))
    return out


ALIGNS = st.sampled_from([64, 64, 64, 128, 192, 256, 1024, 4096])


class AllocatorMachine(RuleBasedStateMachine):
    """Random alloc/free/find sequences checked against brute-force recomputation."""

    live = Bundle("live")

    def __init__(self) -> None:
        super().__init__()
        self.capacity = 64 * 256  # 16 KiB: small enough to fill up often
        self.a = Allocator(self.capacity, classify=_classify)
        self.model: dict[int, tuple[int, int, int]] = {}  # start -> (span, align, tag)
        self.peak = 0
        self.counter = 0

    @rule(target=live, units=st.integers(1, 48), align=ALIGNS)
    def alloc(self, units: int, align: int) -> int:
        span = units * 64
        free_before = self.a.free_blocks()
        self.counter += 1
        tag = self.counter
        off = self.a.alloc(span, align, tag)
        candidates = _fits(free_before, span, align)
        if off is None:
            assert candidates == []
            return -1  # marker: nothing to free
        assert off % align == 0
        assert off >= 0 and off + span <= self.capacity
        # Best fit: the chosen free block is a smallest one that can hold the request.
        holder = [(s, n) for s, n in free_before if s <= off and off + span <= s + n]
        assert len(holder) == 1
        assert holder[0][1] == min(n for _, n in candidates)
        self.model[off] = (span, align, tag)
        used = sum(v[0] for v in self.model.values())
        self.peak = max(self.peak, used)
        return off

    @rule(off=consumes(live))
    def free(self, off: int) -> None:
        if off < 0:
            return
        span, _, tag = self.model.pop(off)
        assert self.a.free(off) == (span, tag)

    @rule(addr=st.integers(-64, 64 * 256 + 64))
    def find(self, addr: int) -> None:
        expect = None
        for s, (n, _, tag) in self.model.items():
            if s <= addr < s + n:
                expect = (s, n, tag)
        assert self.a.find(addr) == expect

    @rule(addr=st.integers(0, 64 * 256))
    def free_unknown(self, addr: int) -> None:
        if addr in self.model:
            return
        with pytest.raises(KeyError):
            self.a.free(addr)

    @precondition(lambda self: len(self.model) > 0)
    @rule()
    def find_inside_every_block(self) -> None:
        for s, (n, _, tag) in self.model.items():
            assert self.a.find(s) == (s, n, tag)
            assert self.a.find(s + n - 1) == (s, n, tag)

    @invariant()
    def consistent(self) -> None:
        _check_invariants(self.a, self.capacity)
        assert [(s, n, t) for s, n, t in self.a.snapshot()] == sorted(
            (s, n, t) for s, (n, _, t) in self.model.items()
        )
        assert self.a.stats().peak_used == self.peak

    def teardown(self) -> None:
        for off in list(self.model):
            self.a.free(off)
        assert self.a.free_blocks() == [(0, self.capacity)]
        s = self.a.stats()
        assert (s.used, s.live_count, s.free_block_count, s.used_by) == (0, 0, 1, {})


TestAllocatorMachine = AllocatorMachine.TestCase
TestAllocatorMachine.settings = settings(
    max_examples=150,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@given(
    ops=st.lists(
        st.tuples(st.booleans(), st.integers(1, 3 * MiB), st.integers(0, 9), st.integers()),
        max_size=60,
    )
)
@settings(max_examples=100, deadline=None)
def test_plan_driven_random_ops(ops: list[tuple[bool, int, int, int]]) -> None:
    """aclrtMalloc-like traffic (plan + fallback) on a 16 MiB arena keeps the invariants."""
    capacity = 16 * MiB
    a = Allocator(capacity, classify=_classify)
    live: list[int] = []
    tag = 0
    for is_free, size, policy, pick in ops:
        if is_free and live:
            a.free(live.pop(pick % len(live)))
        else:
            tag += 1
            p: Plan | None = plan(size, policy)
            off = None
            while p is not None and off is None:
                off = a.alloc(p.span, p.align, tag)
                if off is None:
                    assert _fits(a.free_blocks(), p.span, p.align) == []
                else:
                    assert off % p.align == 0
                p = p.fallback
            if off is not None:
                live.append(off)
        _check_invariants(a, capacity)
    for off in live:
        a.free(off)
    assert a.free_blocks() == [(0, capacity)]
