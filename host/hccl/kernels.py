"""The reduce kernel of the host-staged collectives (send/recv, all_to_allv, and the
``staged-*`` algorithms): a kernel binary (see ``npuemu.shared.kernel``) loaded into each
card of a communicator on its first host-staged call, run on the AI Vector engine. The
card-executed collectives reduce in ``device/exec/collective.py`` instead.

| kernel | engine   | arguments              | computes                       |
|--------|----------|------------------------|--------------------------------|
| reduce | aivector | acc, x, n, op, dtype   | acc = op(acc, x), op sum/prod/max/min |

Integer sums and products wrap as on the card (numpy's modular arithmetic). ``dtype``
``"bfloat16"`` means uint16 bits reduced through float32 and rounded to nearest even
(``npuemu.shared.bf16.bf16_reduce``).
"""

from __future__ import annotations

import numpy as np

from npuemu.shared.bf16 import bf16_reduce
from npuemu.shared.kernel import kernel

_UFUNCS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


@kernel("aivector")
def reduce(ctx, acc, x, n, op="sum", dtype="float32"):
    lo, hi = ctx.split(n)
    if dtype == "bfloat16":
        bf16_reduce(op, ctx.tensor(acc, "uint16", n)[lo:hi], ctx.tensor(x, "uint16", n)[lo:hi])
        return
    out = ctx.tensor(acc, dtype, n)[lo:hi]
    _UFUNCS[op](out, ctx.tensor(x, dtype, n)[lo:hi], out=out)
