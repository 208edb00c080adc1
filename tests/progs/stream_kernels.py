"""Kernels of the stream scenarios (``tests/progs/streams.py`` loads this text with
``aclrtBinaryLoadFromData``): one that fails on the AI Core, a nap and a slow fill on the
AI CPU."""

import time

from npuemu.shared.kernel import kernel


@kernel("aicore")
def boom(ctx):
    raise RuntimeError("aicore kernel fails on purpose")


@kernel("aicpu")
def nap(ctx, seconds):
    time.sleep(seconds)


@kernel("aicpu")
def slow_fill(ctx, ptr, n, value, seconds):
    time.sleep(seconds)
    ctx.tensor(ptr, "uint8", n)[:] = value
