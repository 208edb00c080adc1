"""Kernel file of the containment tests: kernels that end their card's thread, on purpose.

``leave_*`` raise, in their second block, one of the BaseExceptions that are not an
``Exception`` (``kind``: "exit" = ``sys.exit(3)``, "interrupt" = KeyboardInterrupt,
"generator" = GeneratorExit); ``mark_*`` write 1 into an int64; ``flaky`` succeeds while
its flag is 0 (so it is learned as tiny and later runs inline, in the worker's loop
thread) and calls ``sys.exit`` once the flag is set.
"""

import sys

from npuemu.shared.kernel import kernel


def _leave(ctx, kind):
    if ctx.block_idx != 1:
        return
    if kind == "exit":
        sys.exit(3)
    if kind == "interrupt":
        raise KeyboardInterrupt
    if kind == "generator":
        raise GeneratorExit
    raise ValueError(f"unknown kind {kind!r}")


@kernel("aicore")
def leave_aicore(ctx, kind):
    _leave(ctx, kind)


@kernel("aivector")
def leave_aivector(ctx, kind):
    _leave(ctx, kind)


@kernel("aicpu")
def leave_aicpu(ctx, kind):
    _leave(ctx, kind)


def _mark(ctx, ptr):
    ctx.tensor(ptr, "int64", 1)[0] = 1


@kernel("aicore")
def mark_aicore(ctx, ptr):
    _mark(ctx, ptr)


@kernel("aivector")
def mark_aivector(ctx, ptr):
    _mark(ctx, ptr)


@kernel("aicpu")
def mark_aicpu(ctx, ptr):
    _mark(ctx, ptr)


@kernel("aivector")
def flaky(ctx, ptr):
    if ctx.tensor(ptr, "int64", 1)[0]:
        sys.exit("flaky: flag set")
