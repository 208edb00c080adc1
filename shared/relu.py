"""``max(x, 0)`` for the op library's kernels (the Relu op and the Relus ATC fuses into Conv2D,
Add, BatchNorm and Concat), imported by their generated source on the card; no state but
read-only zeros, no threads, nothing of host/ or device/.

numpy's ``np.maximum`` of an array and the scalar 0 runs a loop several times slower (2.5x to
4.5x in float32, measured on the light models' activations) than the same ufunc on two arrays
of one dtype, which it vectorizes. ``relu`` therefore takes the maximum of ``x`` and a
read-only array of zeros, ``CHUNK`` elements at a time over the flat arrays, when ``x`` and
``out`` are C-contiguous arrays of one floating dtype of ``ZEROS``; any other call
(integers, float16, strided views, fewer than ``SMALL`` elements) is the plain
``np.maximum(x, 0, out=out)``. The result is the same ufunc's on the same values either way.

The zeros are one ``np.zeros`` array per dtype made at import: untouched pages of a fresh
mapping, which the kernel reads as the system's zero page (no memory committed, always in
cache).
"""

from __future__ import annotations

from typing import Any

import numpy as np

CHUNK = 1 << 18
"""Elements per ``np.maximum`` call of the array path (1 MiB of float32 zeros)."""
SMALL = 1 << 12
"""Below this many elements the scalar call is as fast as the checks of the array path."""
ZEROS = {np.dtype(dt): np.zeros(CHUNK, dt) for dt in (np.float32, np.float64)}
"""The zeros the array path reads, per dtype (read-only)."""
for _zeros in ZEROS.values():
    _zeros.flags.writeable = False


def relu(x: Any, out: Any) -> Any:
    """``out[...] = max(x, 0)`` (``x`` and ``out`` of one shape; ``out`` may be ``x``);
    returns ``out``."""
    n = out.size
    zeros = ZEROS.get(out.dtype) if n >= SMALL else None
    if zeros is None or x.dtype != out.dtype or not (x.flags.c_contiguous
                                                     and out.flags.c_contiguous):
        return np.maximum(x, 0, out=out)
    src, dst = x.reshape(-1), out.reshape(-1)
    if n <= CHUNK:
        np.maximum(src, zeros[:n], out=dst)
        return out
    for i in range(0, n, CHUNK):
        j = min(n, i + CHUNK)
        np.maximum(src[i:j], zeros[:j - i], out=dst[i:j])
    return out
