"""Kernels of the model task-list scenarios (``tests/progs/model_tasks.py`` loads this text
with ``binary_load_from_data``): a counter bump that fails once a flag is set, a flag raiser
on the AI Vector engine, and a spin whose blocks nap until the flag is set."""

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
