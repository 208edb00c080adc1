"""How a kernel binary declares its kernels (imported by kernel files; no runtime inside).

A kernel binary is a Python source file. Each kernel is a function decorated with
``@kernel(engine)`` where engine is ``"aicore"`` (cube work such as matmul), ``"aivector"``
(elementwise) or ``"aicpu"`` (general Python). The device worker runs it once per block::

    from npuemu.shared.kernel import kernel

    @kernel("aivector")
    def add(ctx, x, y, z, n, dtype="float32"):
        lo, hi = ctx.split(n)                      # this block's share of n elements
        a = ctx.tensor(x, dtype, n)[lo:hi]         # numpy view of device memory
        ctx.tensor(z, dtype, n)[lo:hi] = a + ctx.tensor(y, dtype, n)[lo:hi]

``ctx.block_idx`` / ``ctx.block_num`` give the block; ``ctx.tensor(ptr, dtype, count)`` maps a
device pointer as a numpy array, bounds-checked against the launching process's live
allocations (touching anything else fails the task with 507053, as an MTE error would).
A kernel that raises fails its task with its engine's exception code (AI Core 507015,
AI Vector 507035, AI CPU 507018).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ENGINES = ("aicore", "aivector", "aicpu")


def kernel(engine: str = "aicore") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark ``fn`` as a kernel that runs on ``engine``."""
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r} is not one of {ENGINES}")

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.__npu_kernel__ = engine  # type: ignore[attr-defined]
        return fn

    return mark
