"""bfloat16 carried as its uint16 bit pattern (numpy has no bfloat16 type).

A bfloat16 is the upper half of a float32: widening is a 16-bit shift, exact. Narrowing
rounds to nearest, ties to even (IEEE 754's default, what the cards' vector units use for
bf16 results); NaN stays NaN (quiet, sign kept); a finite value whose rounding passes the
largest bf16 becomes infinity, as IEEE rounding does. Pure functions of numpy arrays: the
hosts's HCCL code (``host/hccl/types.py`` re-exports them) and the collectives' reduce
kernel (a kernel binary, run by the cards) both import them from here.

| function | computes |
|---|---|
| ``to_float32(u16)`` | float32 array of the same values (exact) |
| ``from_float32(f32, out=None)`` | uint16 bits, round to nearest even |
| ``bf16_reduce(op, acc, x, out=None)`` | ``out = bf16(op(f32(acc), f32(x)))``, sum/prod/max/min |

``bf16_reduce`` works through a bounded float32 scratch (``CHUNK`` elements at a time), so
reducing a large buffer never allocates more than a few MiB.
"""

from __future__ import annotations

import numpy as np

CHUNK = 1 << 18
"""Elements converted per step of ``bf16_reduce`` (1 MiB of float32 per operand)."""

_UFUNCS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


def to_float32(bits: np.ndarray) -> np.ndarray:
    """The float32 values of bfloat16 ``bits`` (uint16), exactly."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def from_float32(values: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """bfloat16 bits (uint16) of float32 ``values``, rounded to nearest, ties to even."""
    u = np.ascontiguousarray(values, np.float32).view(np.uint32)
    rounded = (u + (((u >> 16) & 1) + 0x7FFF)) >> 16  # wraps only for NaN, fixed below
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    if nan.any():
        rounded[nan] = (u[nan] >> 16) | 0x0040  # keep sign and payload top, force quiet
    if out is None:
        return rounded.astype(np.uint16)
    np.copyto(out, rounded, casting="unsafe")
    return out


def bf16_reduce(op: str, acc: np.ndarray, x: np.ndarray,
                out: np.ndarray | None = None) -> np.ndarray:
    """``out = op(acc, x)`` on bfloat16 bits: widen both to float32, apply ``op`` (``sum``,
    ``prod``, ``max``, ``min``), round back to nearest even. ``out`` defaults to ``acc``
    (in place); all three are uint16 arrays of one length."""
    fn = _UFUNCS[op]
    if acc.shape != x.shape:
        raise ValueError(f"bf16_reduce: shapes {acc.shape} and {x.shape} differ")
    out = acc if out is None else out
    n = acc.size
    a32 = np.empty(min(n, CHUNK), np.float32)
    b32 = np.empty_like(a32)
    for lo in range(0, n, CHUNK):
        hi = min(n, lo + CHUNK)
        a, b = a32[:hi - lo], b32[:hi - lo]
        np.left_shift(acc[lo:hi], 16, out=a.view(np.uint32), dtype=np.uint32)
        np.left_shift(x[lo:hi], 16, out=b.view(np.uint32), dtype=np.uint32)
        fn(a, b, out=a)
        from_float32(a, out=out[lo:hi])
    return out
