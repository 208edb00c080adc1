"""A vector kernel busy for ``seconds`` in all (``tests/progs/kernels.py`` loads this text
with ``aclrtBinaryLoadFromData``)."""

import time

from npuemu.shared.kernel import kernel


@kernel("aivector")
def busy(ctx, seconds):
    time.sleep(seconds / ctx.block_num)
