"""The body of the op library's MaxPool and AvgPool kernels (``host/ops/pooling.py``),
imported by their generated source on the card, as Conv2D's is (``shared/conv.py``): a
kernel's source is then a few lines, which the card compiles several times faster than with
these functions in it. No state, no threads, nothing of host/ or device/.

``pool`` is separable: the kw strided column slices of the (padded) input are folded with
``np.maximum`` or ``np.add`` into one array of every input row, then its kh strided row
slices into the output (see ``host/ops/pooling.py`` for the rules).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def pool(x: Any, kh: int, kw: int, sh: int, sw: int, pads: Any, mode: str, out: Any,
         inv: Any = None) -> Any:
    """One pooling tile of ``x`` (N, C, H, W) into ``out`` (or a new array when it is None or
    of another dtype; returned): ``mode`` ``max`` or ``avg``, ``inv`` the window counts' inverses
    of a padded AvgPool (``inv_count``)."""
    pt, pb, pl, pr = pads
    xp = x
    if any(pads):  # a padded copy: x in the middle, only the border strips filled
        n, c, h, w = x.shape
        xp = np.empty((n, c, h + pt + pb, w + pl + pr), x.dtype)
        fill = -np.inf if mode == "max" else 0
        for strip in (xp[:, :, :pt], xp[:, :, pt + h:], xp[:, :, pt:pt + h, :pl],
                      xp[:, :, pt:pt + h, pl + w:]):
            strip.fill(fill)
        xp[:, :, pt:pt + h, pl:pl + w] = x
    ho = (xp.shape[2] - kh) // sh + 1
    wo = (xp.shape[3] - kw) // sw + 1
    hs, ws_ = (ho - 1) * sh + 1, (wo - 1) * sw + 1
    dt = x.dtype if mode == "max" or x.dtype == np.float64 else np.dtype(np.float32)
    fold = np.maximum if mode == "max" else np.add
    rows = np.empty((*xp.shape[:3], wo), dt)  # the windows' columns folded, every input row
    np.copyto(rows, xp[..., 0:ws_:sw])
    for j in range(1, kw):
        fold(rows, xp[..., j:j + ws_:sw], out=rows)
    acc = out if out is not None and out.dtype == dt else np.empty((*x.shape[:2], ho, wo), dt)
    np.copyto(acc, rows[:, :, 0:hs:sh])
    for i in range(1, kh):
        fold(acc, rows[:, :, i:i + hs:sh], out=acc)
    if mode != "max":
        if inv is not None:  # padded: the mean of the window's real elements
            acc *= inv
        else:
            acc /= kh * kw
    if out is None or acc is out:
        return acc
    np.copyto(out, acc)
    return out


def inv_count(h: int, w: int, kh: int, kw: int, sh: int, sw: int, pads: Any) -> Any:
    """1 / the number of real elements in each padded window (Ho, Wo), float64."""
    counts = []
    for size, k, s, lo, hi in ((h, kh, sh, pads[0], pads[1]), (w, kw, sw, pads[2], pads[3])):
        starts = np.arange((size + lo + hi - k) // s + 1) * s - lo
        counts.append(np.minimum(starts + k, size) - np.maximum(starts, 0))
    return 1.0 / np.outer(counts[0], counts[1])
