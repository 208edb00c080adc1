"""Kernels of the capture scenarios (``tests/progs/capture.py`` loads this text with
``aclrtBinaryLoadFromData``)."""

import time

from npuemu.shared.kernel import kernel


@kernel("aicore")
def axpb(ctx, ptr, n, a, b):
    """x = a * x + b over ``n`` float32 at ``ptr`` (block 0 does all)."""
    if ctx.block_idx == 0:
        x = ctx.tensor(ptr, "float32", n)
        x[:] = a * x + b


@kernel("aicore")
def add_into(ctx, dst, src, n):
    """dst += src over ``n`` float32."""
    if ctx.block_idx == 0:
        ctx.tensor(dst, "float32", n)[:] += ctx.tensor(src, "float32", n)


@kernel("aicore")
def boom(ctx):
    raise RuntimeError("aicore kernel fails on purpose")


@kernel("aicpu")
def nap(ctx, seconds):
    time.sleep(seconds)
