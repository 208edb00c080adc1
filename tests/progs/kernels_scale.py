"""A user's kernel file (``tests/integration/test_kernels.py`` copies it to a directory of
its own and loads it with ``aclrtBinaryLoadFromFile``): one vector kernel and a helper that
is not a kernel."""

from npuemu.shared.kernel import kernel


def helper(x):  # not a kernel: not visible to binary_get_function
    return x


@kernel("aivector")
def scale(ctx, x, y, n, factor):
    lo, hi = ctx.split(n)
    ctx.tensor(y, "float32", n)[lo:hi] = ctx.tensor(x, "float32", n)[lo:hi] * factor
