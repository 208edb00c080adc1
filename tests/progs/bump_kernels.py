"""Kernels that ``model_tasks.py`` and ``tiny_kernels.py`` load from this text
(``binary_load_from_data``), each on a pair of int64 ``[counter, flag]`` at ``ptr`` (``nap``:
a float64 of seconds): a counter bump that fails once the flag is set, a flag raiser on the
AI Vector engine, a spin whose blocks nap until the flag is set, and a nap on the AI CPU."""

import time

from npuemu.shared.kernel import kernel


@kernel("aicore")
def bump(ctx, ptr):
    a = ctx.tensor(ptr, "int64", 2)
    if a[1]:
        raise RuntimeError("flag set: fail on purpose")
    a[0] += 1


@kernel("aivector")
def raise_flag(ctx, ptr):
    ctx.tensor(ptr, "int64", 2)[1] = 1


@kernel("aicore")
def spin(ctx, ptr):
    """Block 0 marks the start; every block naps until the flag is set."""
    a = ctx.tensor(ptr, "int64", 2)
    a[0] = 1
    if not a[1]:
        time.sleep(0.01)


@kernel("aicpu")
def nap(ctx, ptr):
    seconds = float(ctx.tensor(ptr, "float64", 1)[0])
    if seconds:
        time.sleep(seconds)
