"""Kernels of the worker robustness scenarios (``tests/progs/worker_robust.py`` loads this
text with ``aclrtBinaryLoadFromData``): naps on each engine, a slow fill, a kernel viewing
as many bytes as it is told, and a block-split copy."""

import time

from npuemu.shared.kernel import kernel


@kernel("aicpu")
def nap(ctx, seconds):
    time.sleep(seconds)


@kernel("aicpu")
def slow_fill(ctx, ptr, n, value, seconds):
    time.sleep(seconds)
    ctx.tensor(ptr, "uint8", n)[:] = value


@kernel("aivector")
def grab(ctx, ptr, count):
    ctx.tensor(ptr, "uint8", count)[:] = 0xEE


@kernel("aivector")
def copy(ctx, src, dst, n):
    lo, hi = ctx.split(n)
    ctx.tensor(dst, "uint8", n)[lo:hi] = ctx.tensor(src, "uint8", n)[lo:hi]


@kernel("aicore")
def spin(ctx, seconds):
    time.sleep(seconds)
