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

from npuemu.shared.kernel import kernel


@kernel("aivector")
def add(ctx, x, y, z, n, dtype="float32"):
    lo, hi = ctx.split(n)
    out = ctx.tensor(z, dtype, n)
    np.add(ctx.tensor(x, dtype, n)[lo:hi], ctx.tensor(y, dtype, n)[lo:hi], out=out[lo:hi])


@kernel("aivector")
def mul(ctx, x, y, z, n, dtype="float32"):
    lo, hi = ctx.split(n)
    out = ctx.tensor(z, dtype, n)
    np.multiply(ctx.tensor(x, dtype, n)[lo:hi], ctx.tensor(y, dtype, n)[lo:hi],
                out=out[lo:hi])


@kernel("aivector")
def relu(ctx, x, y, n, dtype="float32"):
    lo, hi = ctx.split(n)
    out = ctx.tensor(y, dtype, n)
    np.maximum(ctx.tensor(x, dtype, n)[lo:hi], 0, out=out[lo:hi])


@kernel("aivector")
def fill(ctx, x, n, value, dtype="float32"):
    lo, hi = ctx.split(n)
    ctx.tensor(x, dtype, n)[lo:hi] = value


@kernel("aivector")
def cast(ctx, x, y, n, src_dtype="float32", dst_dtype="float16"):
    lo, hi = ctx.split(n)
    ctx.tensor(y, dst_dtype, n)[lo:hi] = ctx.tensor(x, src_dtype, n)[lo:hi]


@kernel("aivector")
def softmax(ctx, x, y, rows, cols, dtype="float32"):
    lo, hi = ctx.split(rows)
    src = ctx.tensor(x, dtype, rows * cols).reshape(rows, cols)[lo:hi]
    shifted = np.exp(src - src.max(axis=1, keepdims=True))
    out = ctx.tensor(y, dtype, rows * cols).reshape(rows, cols)
    out[lo:hi] = shifted / shifted.sum(axis=1, keepdims=True)


@kernel("aicpu")
def reduce_sum(ctx, x, y, n, dtype="float32"):
    if ctx.block_idx == 0:  # a scalar result: one block does the work
        ctx.tensor(y, dtype, 1)[0] = ctx.tensor(x, dtype, n).sum(dtype=dtype)


@kernel("aicore")
def matmul(ctx, a, b, c, m, k, n, dtype="float32"):
    lo, hi = ctx.split(m)
    lhs = ctx.tensor(a, dtype, m * k).reshape(m, k)[lo:hi]
    out = ctx.tensor(c, dtype, m * n).reshape(m, n)
    np.matmul(lhs, ctx.tensor(b, dtype, k * n).reshape(k, n), out=out[lo:hi])
