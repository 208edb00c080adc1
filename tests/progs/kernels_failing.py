"""Kernels that fail on each engine, and one that writes as many bytes as it is told
(``tests/progs/kernels.py`` loads this text with ``aclrtBinaryLoadFromData``)."""

from npuemu.shared.kernel import kernel


@kernel("aicore")
def boom_core(ctx):
    raise RuntimeError("aicore fails on purpose")


@kernel("aivector")
def boom_vec(ctx):
    raise RuntimeError("aivector fails on purpose")


@kernel("aicpu")
def boom_cpu(ctx):
    raise RuntimeError("aicpu fails on purpose")


@kernel("aivector")
def touch(ctx, ptr, n):
    ctx.tensor(ptr, "uint8", n)[:] = 7
