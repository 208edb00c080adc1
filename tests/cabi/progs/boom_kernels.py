"""An npuemu kernel file for the C ABI tests: one kernel that fails on the AI Core, one that
doubles float32 values (``scale2(x, n)``, in place), one that takes ``ms`` milliseconds
(``nap(ms)``, on the AI CPU)."""

import time

from npuemu.shared.kernel import kernel


@kernel("aicore")
def boom_core(ctx):
    raise RuntimeError("aicore fails on purpose")


@kernel("aivector")
def scale2(ctx, x, n):
    lo, hi = ctx.split(n)
    view = ctx.tensor(x, "float32", n)[lo:hi]
    view *= 2


@kernel("aicpu")
def nap(ctx, ms):
    time.sleep(ms / 1000)
