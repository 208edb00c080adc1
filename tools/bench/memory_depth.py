"""Figure family: memory in depth: the caching allocator, the batched uncached path and
stream-ordered pools beside the allocator in-process, and fragmentation with none, one and
both levels of its control (pooling; the level-2 merge) measured on one generated workload.

``memory-depth`` (one card): malloc+free pairs of 256 B through the host caching allocator
(what the Pythonic face uses), through ``acl.rt.malloc``/``free`` (uncached, frees batched:
the same size again takes the waiting block back), the same with a different size each time
(every malloc a round trip to the worker), and through
``acl.rt.mem_pool_malloc_async``/``free_async`` on one stream, each beside the pure device
allocator called in-process in the same run (the machine may be loaded: read the ratios).

``fragmentation`` (in-process, no node): a workload generator drives the card's real
``DeviceMemory`` (``device/memory/arenas.py``: best-fit heap, HUGE_FIRST plans, page pools,
``merge_free``, huge-page blocks assembled from scattered pages) over a 384 MiB HBM arena
with a mix of dynamic-shape requests: per iteration ("model execute") 40 transient blocks
(sizes: 60 % 256 B-64 KiB, 30 % 64 KiB-1 MiB, 10 % 1-24 MiB) freed at its end, and 4 outputs
of the same mix kept for 1-30 iterations. Fragmentation is ``1 - largest block a malloc
could get / free bytes`` after each execute (averaged over the run), where free bytes
include blocks a host cache keeps but nobody uses. Three set-ups, same sequence (same
seed):

* no pooling: every request goes to the device (which merges free neighbours);
* level 1 (pooling): the transient blocks of an execute are carved from one workspace block
  (grown when an execute needs more) and kept outputs go through the host caching
  allocator's policy (``caching.round_size`` classes, freed blocks kept for reuse; the cache
  is given back only when the card is full);
* level 1+2: the same, and after each execute the cache is given back and the device's
  level-2 merge runs (``empty_cache`` then ``DeviceMemory.merge_free``): free runs go back
  to the huge-page pool, whose pages a huge-page request takes wherever they lie.

Each set-up runs twice: on the card as it is (a huge-page request that no free run can hold is
assembled from free pages anywhere, ``shared/pages.py``, so the largest block is every free
whole page together), and with every block one contiguous run of the arena (no far range: the
"before" of the figures published for Ascend 910B, where the holes the kept outputs leave
cannot be used until their neighbours die). Why level 1 alone is worse than none: random sizes
rarely meet their size class again, so the cache keeps growing with blocks nobody uses (counted
as free, never the largest). Measured on other seeds (1-4) of this generator, none / level 1 /
level 1+2: contiguous 34-56 % / 61 % or out of memory / 37 % or out of memory; with pages 4-6 /
45-54 / 3-5 %: on a paged card most of what is left after level 1+2 is free bytes inside partly
used pages.
"""

from __future__ import annotations

import itertools
import random

from npuemu.tools.bench.records import Record, Target
from npuemu.tools.bench.registry import Context, figure
from npuemu.tools.bench.sampling import check_ret, sample_rates

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
EXECUTES = 120
"""Executes of the workload, quick or not (it is deterministic: more samples change nothing;
400 once ran a heap of this size out of memory: rare executes need up to 158 MiB of
transients beside the kept outputs)."""
HEAP = 384 * MiB
"""Card size of the fragmentation workload: its live peak fills most of it (fragmentation
only matters under pressure; with a mostly empty card every set-up is below 10 %)."""


@figure("memory-depth", devices=1)
def fig_memory_depth(ctx: Context) -> list[Record]:
    """Caching, uncached and pool malloc+free pairs of 256 B vs the allocator in-process."""
    from npuemu.device.memory.allocator import Allocator, plan
    from npuemu.host import acl
    from npuemu.host.core import caching

    check_ret(acl.rt.set_device(0), "set_device(0)")
    cache = caching.get()
    malloc, free = acl.rt.malloc, acl.rt.free
    pool, ret = acl.rt.mem_pool_create({"location": {"type": 1, "id": 0}})
    check_ret(ret, "mem_pool_create")
    stream, ret = acl.rt.create_stream()
    check_ret(ret, "create_stream")
    pmalloc, pfree = acl.rt.mem_pool_malloc_async, acl.rt.mem_pool_free_async

    def cached_pair() -> None:
        cache.free(cache.malloc(256).ptr)

    def uncached_pair() -> None:
        p, _ = malloc(256, 0)
        free(p)

    sizes = itertools.cycle([256, 320, 384, 448])

    def round_trip_pair() -> None:  # a new size each time: every malloc goes to the worker
        p, _ = malloc(next(sizes), 0)
        free(p)

    def pool_pair() -> None:
        p, _ = pmalloc(256, pool, stream)
        pfree(p, stream)

    heap: Allocator[tuple[int, int, int]] = Allocator(4 * GiB, classify=lambda tag: tag[1])

    def allocator_pair() -> None:
        step = plan(256, 0)
        ptr = heap.alloc(step.span, step.align, (0, step.page_class, step.p2p))
        assert ptr is not None  # 4 GiB hold a 256-byte block
        heap.free(ptr)

    for fn in (cached_pair, uncached_pair, round_trip_pair, pool_pair):  # warm and check
        fn()
    reps, sample_s = (3, 0.15) if ctx.quick else (5, 0.4)
    rates = sample_rates({"cache": cached_pair, "acl": uncached_pair, "trip": round_trip_pair,
                          "pool": pool_pair, "alloc": allocator_pair}, 1.0, reps, sample_s)
    check_ret(acl.rt.synchronize_stream(stream), "synchronize_stream")
    check_ret(acl.rt.mem_pool_destroy(pool), "mem_pool_destroy")
    cache.empty_cache()
    limit = "allocator in-process"
    return [
        Record("caching malloc+free (256 B)", rates["cache"], "pairs/s", limit, rates["alloc"],
               Target("≥ 0.5x", "ratio", ">=", 0.5)),
        Record("acl uncached malloc+free (256 B)", rates["acl"], "pairs/s", limit,
               rates["alloc"], Target("≥ 100k/s", "value", ">=", 1e5)),
        Record("acl uncached malloc+free (sizes vary)", rates["trip"], "pairs/s", limit,
               rates["alloc"], None),
        Record("pool malloc_async+free_async (256 B)", rates["pool"], "pairs/s", limit,
               rates["alloc"], Target("≥ 300k/s", "value", ">=", 3e5)),
    ]


# fragmentation ---------------------------------------------------------------------------
def _size(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.6:
        return rng.randint(256, 64 * KiB)
    if r < 0.9:
        return rng.randint(64 * KiB, MiB)
    return rng.randint(MiB, 24 * MiB)


def _workload(seed: int, iterations: int) -> list[tuple[list[int], list[tuple[int, int]]]]:
    """Per execute: transient sizes, and kept outputs as (size, lifetime in executes)."""
    rng = random.Random(seed)
    return [([_size(rng) for _ in range(40)],
             [(_size(rng), rng.randint(1, 30)) for _ in range(4)]) for _ in range(iterations)]


class _Segment:
    """Stands in for the arena's shared-memory segment: the fragmentation figure is pure
    bookkeeping, no byte is touched."""

    def __init__(self, size: int) -> None:
        self.size = size

    def commit(self, offset: int, length: int) -> None:
        pass


class _Sim:
    """The card's real ``DeviceMemory`` (one HBM arena, HUGE_FIRST plans) and, for levels 1
    and 1+2, a workspace block and the host caching allocator's policy (size classes of
    ``caching.round_size``, freed blocks kept for reuse, never split)."""

    def __init__(self, pooling: bool, merge: bool, paged: bool) -> None:
        from npuemu.device.memory.arenas import Arena, DeviceMemory
        from npuemu.shared.pages import far_size

        far = far_size(HEAP) if paged else 0
        self.arena = Arena(_Segment(HEAP), 0, far)  # type: ignore[arg-type]
        self.mem = DeviceMemory(0, [self.arena], lambda *_: None)
        self.pooling, self.merge = pooling, merge
        self.cache: dict[int, list[tuple[int, int]]] = {}
        self.cached_bytes = 0
        self.workspace: tuple[int, int] | None = None  # (ptr, span)

    def _dev_alloc(self, size: int) -> tuple[int, int]:
        from npuemu.shared import errors

        try:
            ptr, span, _cls = self.mem.malloc(0, size, 0)
        except errors.AclError:  # out of memory: give the cache back and retry once
            self.empty()
            ptr, span, _cls = self.mem.malloc(0, size, 0)
        return ptr, span

    def alloc(self, size: int) -> tuple[int, int, int]:
        """A kept block ``(ptr, span, size class)`` (class 0: straight from the device)."""
        from npuemu.host.core.caching import round_size

        if not self.pooling:
            return (*self._dev_alloc(size), 0)
        rounded = round_size(size)
        blocks = self.cache.get(rounded)
        if blocks:
            ptr, span = blocks.pop()
            self.cached_bytes -= span
            return ptr, span, rounded
        return (*self._dev_alloc(rounded), rounded)

    def free(self, block: tuple[int, int, int]) -> None:
        ptr, span, rounded = block
        if not rounded:
            self.mem.free(0, ptr)
            return
        self.cache.setdefault(rounded, []).append((ptr, span))
        self.cached_bytes += span

    def empty(self) -> None:
        """``empty_cache``: every cached block back to the device, then the level-2 merge."""
        for blocks in self.cache.values():
            for ptr, _span in blocks:
                self.mem.free(0, ptr)
        self.cache.clear()
        self.cached_bytes = 0
        self.mem.merge_free()

    def execute(self, transient: list[int]) -> list[tuple[int, int]]:
        """One execute's transient blocks: from the workspace (pooling: offsets aligned to
        512 bytes inside it) or the device."""
        if not self.pooling:
            return [self._dev_alloc(s) for s in transient]
        need = sum((s + 511) & -512 for s in transient)
        if self.workspace is None or self.workspace[1] < need:
            if self.workspace is not None:
                self.mem.free(0, self.workspace[0])
            self.workspace = self._dev_alloc(need)
        return []

    def end(self, transient: list[tuple[int, int]]) -> None:
        for ptr, _span in transient:
            self.mem.free(0, ptr)

    def fragmentation(self) -> float:
        heap = self.arena.alloc
        free = heap.capacity - heap.used + self.cached_bytes
        return 1.0 - self.arena.largest_block() / free if free else 0.0


def _run(pooling: bool, merge: bool, paged: bool, work: list) -> float:
    sim = _Sim(pooling, merge, paged)
    kept: list[tuple[int, tuple[int, int, int]]] = []  # (last execute, block)
    samples = []
    for i, (transient, outputs) in enumerate(work):
        blocks = sim.execute(transient)
        for size, life in outputs:
            kept.append((i + life, sim.alloc(size)))
        sim.end(blocks)
        for entry in [k for k in kept if k[0] <= i]:
            kept.remove(entry)
            sim.free(entry[1])
        if merge:  # level 2 after the execute (what the models helper's merge_free does)
            sim.empty()
        if i >= 10:  # after warm-up
            samples.append(sim.fragmentation())
    return 100.0 * sum(samples) / len(samples)


@figure("fragmentation")
def fig_fragmentation(ctx: Context) -> list[Record]:
    """Mean HBM fragmentation after each execute: no pooling, level 1, level 1+2, on the
    card as it is (huge pages joined) and with contiguous blocks only."""
    work = _workload(12, EXECUTES)
    out = []
    for paged, how in ((False, "contiguous blocks"), (True, "pages joined")):
        none = _run(False, False, paged, work)
        ref = f"no pooling, {how}"
        target = Target("≤ 10 %", "value", "<=", 10.0) if paged else None
        out += [Record(f"fragmentation, no pooling, {how}", none, "%", ref, none, None),
                Record(f"fragmentation, level 1 (pooling), {how}", _run(True, False, paged, work),
                       "%", ref, none, None),
                Record(f"fragmentation, level 1+2 (merge), {how}", _run(True, True, paged, work),
                       "%", ref, none, target)]
    return out
