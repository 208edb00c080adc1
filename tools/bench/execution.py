"""Figure family: execution: submission, queries, kernel launch and copy/compute overlap.

Threads: the figure runs in the bench's main thread. ``_BareOverlap.together`` starts one
more thread for the duration of one sample: it runs ``_relus`` over ``_x`` while the main
thread runs ``_copies`` over ``_src``/``_dst``; the two touch disjoint arrays and the main
thread joins it before reading the clock, so no lock is needed. Nothing else here starts a
thread."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from npuemu.shared.ring import Ring, region_size
from npuemu.tools.bench.records import Record, Target
from npuemu.tools.bench.registry import Context, figure
from npuemu.tools.bench.ring import RawRing
from npuemu.tools.bench.sampling import check_ret, sample_rates, time_each
from npuemu.tools.sizes import MiB

_EMPTY_KERNEL = """
from npuemu.shared.kernel import kernel

@kernel("aicore")
def empty(ctx):
    pass
"""


@figure("execution", devices=1)
def fig_execution(ctx: Context) -> list[Record]:
    """Async submission, queries, idle synchronize, empty-kernel launch and copy/compute
    overlap, each beside a bare primitive measured here."""
    from npuemu.host import acl
    from npuemu.shared import protocol

    check_ret(acl.rt.set_device(0), "set_device(0)")
    stream, ret = acl.rt.create_stream()
    check_ret(ret, "create_stream")
    event, ret = acl.rt.create_event()
    check_ret(ret, "create_event")
    quick = ctx.quick
    n = 20000 if quick else 60000

    # submission: record_event from one thread vs packing the same frame and pushing it on
    # a bare in-process ring (popped right away, so it never fills)
    frame = (protocol.Op.RECORD, 0, 1, 1, 1, 1)
    ring_buf = memoryview(bytearray(region_size(1 << 20)))
    push_ring, pop_ring = Ring(ring_buf, 1 << 20, init=True), Ring(ring_buf)

    def bare_push() -> None:
        push_ring.push(protocol.pack(frame))
        pop_ring.pop()

    check_ret(acl.rt.synchronize_stream(stream), "synchronize")
    rates = sample_rates({"rt": lambda: acl.rt.record_event(event, stream), "bare": bare_push},
                         1.0, 3 if quick else 5, 0.1 if quick else 0.25)
    check_ret(acl.rt.synchronize_stream(stream), "synchronize")
    records = [Record("async submission (record_event)", rates["rt"], "tasks/s",
                      "bare ring push+pop", rates["bare"],
                      Target("≥ 300k/s", "value", ">=", 3e5))]

    # queries and idle synchronize: no round trip; beside a bare ring ping-pong
    def median_us(fn: Callable[[], object]) -> float:
        time_each(fn, 1000)
        return statistics.median(time_each(fn, n // 4)) / 1e3

    ring = RawRing(ctx)
    try:
        raw_rtt = median_us(ring.round_trip)
    finally:
        ring.close()
    for name, fn in (("stream query", lambda: acl.rt.stream_query(stream)),
                     ("event query", lambda: acl.rt.query_event(event))):
        records.append(Record(name, median_us(fn), "µs", "bare ring ping-pong", raw_rtt,
                              Target("≤ 2 µs", "value", "<=", 2.0)))
    records.append(Record("synchronize idle stream", median_us(
        lambda: acl.rt.synchronize_stream(stream)), "µs", "bare ring ping-pong", raw_rtt,
        Target("≤ 2x", "ratio", "<=", 2.0)))

    # empty kernel: launch + synchronize, per launch
    binary, ret = acl.rt.binary_load_from_data(_EMPTY_KERNEL)
    check_ret(ret, "binary_load_from_data")
    func, ret = acl.rt.binary_get_function(binary, "empty")
    check_ret(ret, "binary_get_function")

    def launch_sync() -> None:
        acl.rt.launch_kernel(func, 1, [], stream)
        acl.rt.synchronize_stream(stream)

    records.append(Record("empty kernel launch+sync", median_us(launch_sync), "µs",
                          "bare ring ping-pong", raw_rtt))
    records += _overlap(ctx, acl, stream)
    return records


def _overlap(ctx: Context, acl: Any, copy_stream: int) -> list[Record]:
    """A copy stream and a compute stream, each worth T alone, run together: the time
    together over the longer alone (1.0 = perfect overlap, 2.0 = none); beside it the same
    two pieces of work in two bare threads (``_BareOverlap``), samples taking turns."""
    size = 16 * MiB
    src, ret = acl.rt.malloc(size, 0)
    check_ret(ret, "malloc")
    dst, ret = acl.rt.malloc(size, 0)
    check_ret(ret, "malloc")
    x, ret = acl.rt.malloc(size, 0)
    check_ret(ret, "malloc")
    compute, ret = acl.rt.create_stream()
    check_ret(ret, "create_stream")
    binary, ret = acl.rt.binary_load_from_file(_library_path())
    check_ret(ret, "binary_load_from_file")
    relu, ret = acl.rt.binary_get_function(binary, "relu")
    check_ret(ret, "binary_get_function")
    n = size // 4

    def copies(k: int) -> None:
        for _ in range(k):
            acl.rt.memcpy_async(dst, size, src, size, 3, copy_stream)

    def kernels(k: int) -> None:
        for _ in range(k):
            acl.rt.launch_kernel(relu, 1, [x, x, n, "float32"], compute)

    def timed(*parts: tuple[Callable[[int], None], int]) -> float:
        t0 = time.perf_counter()
        for fn, k in parts:
            fn(k)
        check_ret(acl.rt.synchronize_stream(copy_stream), "synchronize")
        check_ret(acl.rt.synchronize_stream(compute), "synchronize")
        return time.perf_counter() - t0

    timed((copies, 2), (kernels, 2))  # warm-up: pages touched
    budget = 0.1 if ctx.quick else 0.3
    kc = max(1, round(budget / timed((copies, 4)) * 4))
    kk = max(1, round(budget / timed((kernels, 4)) * 4))
    bare = _BareOverlap(size, budget)
    reps = 3 if ctx.quick else 5
    alone, together, bare_alone, bare_together = [], [], [], []
    for _ in range(reps):  # npuemu's and the bare threads' samples taking turns
        alone.append(max(timed((copies, kc)), timed((kernels, kk))))
        together.append(timed((copies, kc), (kernels, kk)))
        bare_alone.append(bare.alone())
        bare_together.append(bare.together())
    return [Record("copy+compute overlap", statistics.median(together), "s",
                   "longer stream alone", statistics.median(alone),
                   Target("≤ 1.2x", "ratio", "<=", 1.2)),
            Record("copy+compute overlap, bare threads", statistics.median(bare_together), "s",
                   "longer thread alone", statistics.median(bare_alone))]


class _BareOverlap:
    """The overlap figure's bare limit: the same 16 MiB ``memmove`` and the same relu
    (``np.maximum`` in place over 4 Mi float32) in two threads of this process, each
    repeated for about ``budget`` seconds alone; what the machine's cores and memory allow
    two such streams of work at once, with no runtime in between."""

    def __init__(self, size: int, budget: float) -> None:
        import ctypes

        import numpy as np

        self._src, self._dst = np.ones(size, np.uint8), np.zeros(size, np.uint8)
        self._x = np.ones(size // 4, np.float32)
        self._memmove, self._maximum, self._size = ctypes.memmove, np.maximum, size
        self._copies(2)
        self._relus(2)
        self.kc = max(1, round(budget / self._time(self._copies, 4) * 4))
        self.kk = max(1, round(budget / self._time(self._relus, 4) * 4))

    def _copies(self, k: int) -> None:
        dst, src = self._dst.ctypes.data, self._src.ctypes.data
        for _ in range(k):
            self._memmove(dst, src, self._size)

    def _relus(self, k: int) -> None:
        for _ in range(k):
            self._maximum(self._x, 0, out=self._x)

    @staticmethod
    def _time(fn: Callable[[int], None], k: int) -> float:
        t0 = time.perf_counter()
        fn(k)
        return time.perf_counter() - t0

    def alone(self) -> float:
        return max(self._time(self._copies, self.kc), self._time(self._relus, self.kk))

    def together(self) -> float:
        import threading

        other = threading.Thread(target=self._relus, args=(self.kk,))
        t0 = time.perf_counter()
        other.start()
        self._copies(self.kc)
        other.join()
        return time.perf_counter() - t0


def _library_path() -> str:
    from npuemu.host.core.kernel import LIBRARY

    return LIBRARY
