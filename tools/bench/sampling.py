"""Timing helpers shared by the figures: per-call durations, calibrated samples, rates."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def check_ret(ret: int, what: str) -> None:
    if ret != 0:
        from npuemu.host import acl

        raise RuntimeError(f"{what} returned {ret}: {acl.get_recent_err_msg()}")


def time_each(fn: Callable[[], object], n: int) -> list[int]:
    """Duration of each of ``n`` calls, ns."""
    pc = time.perf_counter_ns
    out = [0] * n
    for i in range(n):
        t0 = pc()
        fn()
        out[i] = pc() - t0
    return out


def time_k(fn: Callable[[], object], k: int) -> float:
    t0 = time.perf_counter()
    for _ in range(k):
        fn()
    return time.perf_counter() - t0


def calibrate(fn: Callable[[], object], sample_s: float) -> int:
    """Calls per sample so that one sample lasts about ``sample_s``."""
    k = 1
    while True:
        t = time_k(fn, k)
        if t >= sample_s / 4 or k >= 1 << 22:
            break
        k *= 4
    return max(1, round(k * sample_s / max(t, 1e-9)))


def sample_rates(ops: dict[str, Callable[[], object]], work: float, reps: int,
                 sample_s: float) -> dict[str, float]:
    """Median of ``work`` per second over ``reps`` samples of each op, samples interleaved."""
    ks = {name: calibrate(fn, sample_s) for name, fn in ops.items()}
    got: dict[str, list[float]] = {name: [] for name in ops}
    for _ in range(reps):
        for name, fn in ops.items():
            got[name].append(work * ks[name] / time_k(fn, ks[name]))
    return {name: statistics.median(v) for name, v in got.items()}
