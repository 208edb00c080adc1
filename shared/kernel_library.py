"""The ready library of kernels (a kernel binary like any other: load it by its path,
``npuemu.shared.kernel_library.__file__``, or with ``acl.rt.binary_load_from_file``).

Arguments are device pointers, element counts and numpy dtype names. Each kernel splits its
work across the launch's blocks (``ctx.split``).

| kernel        | engine   | arguments                                      | computes                 |
|---------------|----------|------------------------------------------------|--------------------------|
| add, mul      | aivector | x, y, z, n, dtype                              | z = x + y, z = x * y     |
| relu          | aivector | x, y, n, dtype                                 | y = max(x, 0)            |
| fill          | aivector | x, n, value, dtype                             | x[:] = value             |
| cast          | aivector | x, y, n, src_dtype, dst_dtype                  | y = x.astype(dst_dtype)  |
| softmax       | aivector | x, y, rows, cols, dtype                        | row-wise softmax         |
| reduce_sum    | aicpu    | x, y, n, dtype                                 | y[0] = sum(x)            |
| matmul        | aicore   | a, b, c, m, k, n, dtype                        | c = a @ b (row-major)    |
"""

from __future__ import annotations

import numpy as np

from npuemu.shared.kernel import Context, kernel


@kernel("aivector")
def add(ctx: Context, x: int, y: int, z: int, n: int, dtype: str = "float32") -> None:
    lo, hi = ctx.split(n)
    out = ctx.tensor(z, dtype, n)
    np.add(ctx.tensor(x, dtype, n)[lo:hi], ctx.tensor(y, dtype, n)[lo:hi], out=out[lo:hi])


@kernel("aivector")
def mul(ctx: Context, x: int, y: int, z: int, n: int, dtype: str = "float32") -> None:
    lo, hi = ctx.split(n)
    out = ctx.tensor(z, dtype, n)
    np.multiply(ctx.tensor(x, dtype, n)[lo:hi], ctx.tensor(y, dtype, n)[lo:hi],
                out=out[lo:hi])


@kernel("aivector")
def relu(ctx: Context, x: int, y: int, n: int, dtype: str = "float32") -> None:
    lo, hi = ctx.split(n)
    out = ctx.tensor(y, dtype, n)
    np.maximum(ctx.tensor(x, dtype, n)[lo:hi], 0, out=out[lo:hi])


@kernel("aivector")
def fill(ctx: Context, x: int, n: int, value: float, dtype: str = "float32") -> None:
    lo, hi = ctx.split(n)
    ctx.tensor(x, dtype, n)[lo:hi] = value


@kernel("aivector")
def cast(ctx: Context, x: int, y: int, n: int, src_dtype: str = "float32",
         dst_dtype: str = "float16") -> None:
    lo, hi = ctx.split(n)
    ctx.tensor(y, dst_dtype, n)[lo:hi] = ctx.tensor(x, src_dtype, n)[lo:hi]


@kernel("aivector")
def softmax(ctx: Context, x: int, y: int, rows: int, cols: int, dtype: str = "float32") -> None:
    lo, hi = ctx.split(rows)
    src = ctx.tensor(x, dtype, rows * cols).reshape(rows, cols)[lo:hi]
    shifted = np.exp(src - src.max(axis=1, keepdims=True))
    out = ctx.tensor(y, dtype, rows * cols).reshape(rows, cols)
    out[lo:hi] = shifted / shifted.sum(axis=1, keepdims=True)


@kernel("aicpu")
def reduce_sum(ctx: Context, x: int, y: int, n: int, dtype: str = "float32") -> None:
    if ctx.block_idx == 0:  # a scalar result: one block does the work
        ctx.tensor(y, dtype, 1)[0] = ctx.tensor(x, dtype, n).sum(dtype=dtype)


@kernel("aicore")
def matmul(ctx: Context, a: int, b: int, c: int, m: int, k: int, n: int,
           dtype: str = "float32") -> None:
    lo, hi = ctx.split(m)
    lhs = ctx.tensor(a, dtype, m * k).reshape(m, k)[lo:hi]
    out = ctx.tensor(c, dtype, m * n).reshape(m, n)
    np.matmul(lhs, ctx.tensor(b, dtype, k * n).reshape(k, n), out=out[lo:hi])
