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

import math
from collections.abc import Callable, Iterator
from typing import Any, Protocol

ENGINES = ("aicore", "aivector", "aicpu")
MAX_BLOCKS = 65535
"""Largest ``numBlocks`` of one launch. ``aclrtLaunchKernel`` takes it as a ``uint32_t``; the
Ascend C kernel-launch documentation gives blockDim the range [1, 65535]. Our choice: the
runtime source we read does not show the check; 0 and larger values are refused
with ``ACL_ERROR_INVALID_PARAM`` (100000) by the host and as a bad frame by the worker."""

TIMEOUT_INTERVAL_US = 4_294_967
"""``aclrtGetOpTimeOutInterval`` of the emulated cards, in us. The CANN documentation of
``aclrtSetOpExecuteTimeOut`` (Atlas A2/A3) gives the AI Core default, 1091 s, and the largest
settable timeout, ``interval * 254`` us; 1091 s / 254 gives this interval (about 2**32 ns).
The interval itself is not documented: it is our derivation from those two figures."""
MAX_TIMEOUT_US = TIMEOUT_INTERVAL_US * 254
"""Largest settable execution timeout (about 1091 s), also what a timeout of 0 means, and
the default of AI Core, AI Vector and every non-kernel task."""
AICPU_DEFAULT_TIMEOUT_US = 28_000_000
"""Default execution timeout of AI CPU kernels (Atlas A2: 28 s)."""


def actual_timeout_us(timeout_us: int) -> int:
    """The execution timeout a card applies for a requested one (``aclrtSetOpExecuteTimeOutV2``
    semantics): 0 = the maximum; otherwise rounded up to a multiple of the interval, at most
    ``MAX_TIMEOUT_US``."""
    if timeout_us <= 0:
        return MAX_TIMEOUT_US
    return min(-(-timeout_us // TIMEOUT_INTERVAL_US) * TIMEOUT_INTERVAL_US, MAX_TIMEOUT_US)


class Context(Protocol):
    """What a kernel gets as ``ctx``: the card's ``KernelContext`` (``device/exec/kernels.py``)
    as kernel files see it, its block and numpy views of device memory."""

    block_idx: int
    block_num: int

    def split(self, n: int) -> tuple[int, int]:
        """This block's ``[lo, hi)`` share of ``n`` items."""
        ...

    def tensor(self, ptr: int, dtype: Any, count: int) -> Any:
        """``count`` elements of ``dtype`` at device pointer ``ptr`` as a writable numpy view."""
        ...

    def view(self, ptr: int, dtype: Any, shape: tuple[int, ...]) -> Any:
        """``tensor(ptr, dtype, prod(shape)).reshape(shape)``; the card keeps it between
        launches on the same buffers (the op compiler's kernels use it)."""
        ...


def kernel(engine: str = "aicore") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark ``fn`` as a kernel that runs on ``engine``."""
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r} is not one of {ENGINES}")

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.__npu_kernel__ = engine  # type: ignore[attr-defined]
        return fn

    return mark


def tensors(ctx: Context, shapes: Any, dtypes: tuple[str, ...], *ptrs: int) -> list[Any]:
    """The arrays of a kernel the op compiler built: ``ptrs[i]`` as ``dtypes[i]`` of shape
    ``shapes[i]`` (``ctx.tensor`` of each, reshaped). One call in place of a line per tensor,
    so the card compiles a shorter source; ValueError unless there are as many of each."""
    return [ctx.tensor(p, dt, math.prod(sh)).reshape(sh)
            for p, dt, sh in zip(ptrs, dtypes, shapes, strict=True)]


def tiles(ctx: Context, rows: int, tile: int) -> Iterator[slice]:
    """This block's share of ``rows`` (``ctx.split``) as slices of at most ``tile`` rows: the
    loop of a kernel the op compiler built."""
    lo, hi = ctx.split(rows)
    for r in range(lo, hi, tile):
        yield slice(r, min(r + tile, hi))
