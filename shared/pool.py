"""The body of the op library's MaxPool and AvgPool kernels (``host/ops/pooling.py``),
imported by their generated source on the card, as Conv2D's is (``shared/conv.py``): a
kernel's source is then a few lines, which the card compiles several times faster than with
these functions in it. No state, no threads, nothing of host/ or device/.

``pool`` is separable: the kw column slices of the (padded) input are folded with
``np.maximum`` or ``np.add`` into one array of every input row, then its kh row slices into
the output (see ``host/ops/pooling.py`` for the rules). With a row stride above 1 the rows
go first instead: their slices keep the last axis contiguous, which numpy's loops
vectorize, and they shrink the data by the stride before the column slices, strided, which
it does not (measured, 3x3 stride 2 MaxPool: 0.95 ms instead of 1.1 on SqueezeNet's
64x111x111, 0.42 instead of 0.61 on its 128x55x55; with stride 1 the order makes no
difference but for small images, where columns first is faster).
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
    acc = out if out is not None and out.dtype == dt else np.empty((*x.shape[:2], ho, wo), dt)
    if sh > 1:  # rows first: the windows' rows folded, every input column
        part = np.empty((*xp.shape[:2], ho, xp.shape[3]), dt)
        _fold_all(fold, [xp[:, :, i:i + hs:sh] for i in range(kh)], part, dt)
        _fold_all(fold, [part[..., j:j + ws_:sw] for j in range(kw)], acc, dt)
    else:  # columns first: the windows' columns folded, every input row
        part = np.empty((*xp.shape[:3], wo), dt)
        _fold_all(fold, [xp[..., j:j + ws_:sw] for j in range(kw)], part, dt)
        _fold_all(fold, [part[:, :, i:i + hs:sh] for i in range(kh)], acc, dt)
    if mode != "max":
        if inv is not None:  # padded: the mean of the window's real elements
            acc *= inv
        else:
            acc /= kh * kw
    if out is None or acc is out:
        return acc
    np.copyto(out, acc)
    return out


def _fold_all(fold: Any, parts: list[Any], out: Any, dt: Any) -> None:
    """``out[...] = fold(parts[0], parts[1], ...)`` computed in ``dt``, one pass per part
    after the first two."""
    if len(parts) == 1:
        np.copyto(out, parts[0])
        return
    if parts[0].dtype == dt:
        fold(parts[0], parts[1], out=out)
    else:  # float16 summed in float32
        fold(parts[0], parts[1], out=out, dtype=dt)
    for part in parts[2:]:
        fold(out, part, out=out)


def inv_count(h: int, w: int, kh: int, kw: int, sh: int, sw: int, pads: Any) -> Any:
    """1 / the number of real elements in each padded window (Ho, Wo), float64."""
    counts = []
    for size, k, s, lo, hi in ((h, kh, sh, pads[0], pads[1]), (w, kw, sw, pads[2], pads[3])):
        starts = np.arange((size + lo + hi - k) // s + 1) * s - lo
        counts.append(np.minimum(starts + k, size) - np.maximum(starts, 0))
    return 1.0 / np.outer(counts[0], counts[1])
