"""Figure family: memory: host/device copy bandwidth and malloc+free."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from npuemu.tools.bench.records import Record, Target
from npuemu.tools.bench.registry import Context, figure
from npuemu.tools.bench.sampling import check_ret, sample_rates
from npuemu.tools.sizes import GiB, KiB, MiB, format_size

COPY_SIZES = [4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 64 * MiB, 256 * MiB]


@figure("copy-bandwidth", devices=2)
def fig_copy_bandwidth(ctx: Context) -> list[Record]:
    """H2D, D2H (host copies) and D2D (worker copies; host copies up to 64 KiB) vs
    np.copyto, per size; at 4 KiB also each call's wall time (``PER_CALL_TARGETS_US``)."""
    import numpy as np

    from npuemu.host import acl
    from npuemu.shared.enums import MemcpyKind

    h2d = int(MemcpyKind.ACL_MEMCPY_HOST_TO_DEVICE)
    d2h = int(MemcpyKind.ACL_MEMCPY_DEVICE_TO_HOST)
    d2d = int(MemcpyKind.ACL_MEMCPY_DEVICE_TO_DEVICE)
    sizes = COPY_SIZES[:-1] if ctx.quick else COPY_SIZES
    reps, sample_s = (3, 0.01) if ctx.quick else (7, 0.025)
    check_ret(acl.rt.set_device(0), "set_device(0)")
    nmax = max(sizes)
    host_src = np.empty(nmax, np.uint8)
    host_dst = np.empty(nmax, np.uint8)
    host_src.fill(7)  # prefault both
    host_dst.fill(0)
    memcpy, records = acl.rt.memcpy, []
    for n in sizes:
        src, dst = host_src[:n], host_dst[:n]
        sp, dp = src.ctypes.data, dst.ctypes.data
        dev_a, ret = acl.rt.malloc(n, 0)
        check_ret(ret, f"malloc({n})")
        try:
            dev_b, ret = acl.rt.malloc(n, 0)
            check_ret(ret, f"malloc({n})")
            try:
                ops: dict[str, Callable[[], Any]] = {
                    "np.copyto": functools.partial(np.copyto, dst, src),
                    "H2D": functools.partial(memcpy, dev_a, n, sp, n, h2d),
                    "D2H": functools.partial(memcpy, dp, n, dev_a, n, d2h),
                    "D2D": functools.partial(memcpy, dev_b, n, dev_a, n, d2d),
                }
                for name, fn in ops.items():  # warm: one untimed copy, checked
                    ret = fn()
                    if name != "np.copyto":
                        check_ret(ret, f"{name} memcpy of {n} bytes")
                rates = sample_rates(ops, n / 1e9, reps, sample_s)
            finally:
                check_ret(acl.rt.free(dev_b), "free")
        finally:
            check_ret(acl.rt.free(dev_a), "free")
        label = format_size(n, digits=0)
        for kind in ("H2D", "D2H", "D2D"):
            target = (Target("≥ 0.85x", "ratio", ">=", 0.85)
                      if n == 64 * MiB and kind != "D2D" else None)
            records.append(Record(f"{kind} {label}", rates[kind], "GB/s",
                                  f"np.copyto {label}", rates["np.copyto"], target))
        if n == 4 * KiB:  # the same samples as one call's wall time
            per_call = {name: n / rate / 1e3 for name, rate in rates.items()}
            for kind, bound in PER_CALL_TARGETS_US.items():
                records.append(Record(f"{kind} {label} per call", per_call[kind], "µs",
                                      f"np.copyto {label} per call", per_call["np.copyto"],
                                      Target(f"≤ {bound:g} µs", "value", "<=", bound)))
    return records


PER_CALL_TARGETS_US = {"H2D": 2.0, "D2H": 2.0, "D2D": 8.0}
"""Targets for one synchronous 4 KiB ``aclrtMemcpy`` (``memory.small_copy``: the host moves
the bytes between its mappings, no request to the card), from the 4 KiB rates."""


# malloc + free -------------------------------------------------------------------------
@figure("malloc-free", devices=2)
def fig_malloc_free(ctx: Context) -> list[Record]:
    """acl.rt.malloc(256)+free pairs/s vs the allocator called in-process."""
    from npuemu.device.memory.allocator import Allocator, plan
    from npuemu.host import acl

    check_ret(acl.rt.set_device(0), "set_device(0)")
    malloc, free = acl.rt.malloc, acl.rt.free
    ptr, ret = malloc(256, 0)
    check_ret(ret, "malloc(256)")
    check_ret(free(ptr), "free")

    def runtime_pair() -> None:
        p, _ = malloc(256, 0)
        free(p)

    # the worker classifies by tag
    heap: Allocator[tuple[int, int, int]] = Allocator(4 * GiB, classify=lambda tag: tag[1])

    def allocator_pair() -> None:
        step = plan(256, 0)
        ptr = heap.alloc(step.span, step.align, (0, step.page_class, step.p2p))
        assert ptr is not None  # 4 GiB hold a 256-byte block
        heap.free(ptr)

    reps, sample_s = (3, 0.15) if ctx.quick else (5, 0.4)
    rates = sample_rates({"rt": runtime_pair, "alloc": allocator_pair}, 1.0, reps, sample_s)
    return [Record("malloc+free (256 B)", rates["rt"], "pairs/s", "allocator in-process",
                   rates["alloc"], Target("≥ 100k/s", "value", ">=", 1e5))]

