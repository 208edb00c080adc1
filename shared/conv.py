"""The body of the op library's Conv2D kernels (imported by their generated source on the card;
no state, no threads, nothing of host/ or device/).

``conv2d`` computes an NCHW convolution image by image as one GEMM per image: the filter as
a ``(groups, Cout/groups, Cin/groups*kh*kw)`` matrix times that image's im2col matrix
``(groups, Cin/groups*kh*kw, Ho*Wo)``, so the product is the image's NCHW output as it is laid
out (written straight into ``out`` when that is a C-contiguous array of the result's dtype:
no transposed copy after). Then the bias and the fused Relu are applied in place on that
image's output while it is still in cache.

The im2col matrix is built without a padded copy of the input: for each kernel offset the
rows and columns of the output whose window position falls inside the image are copied in
one strided copy (``x[:, i0::sh, j0::sw]``), and only the border strips that fall in the
padding are zeroed. A 1x1 window with stride 1 and no padding needs no matrix (the image is
its own im2col); a 1x1 window with stride or padding is one offset of the general path. The
matrix lives in ``ws`` (the planned scratch a model passes, see ``workspace_bytes``) when it
is given and large enough, else in a fresh array.

A depthwise convolution (``groups`` equal to the input's and the output's channels, one
filter per channel) of float32 or float64 takes a direct path instead (``depthwise``): the
GEMM would be one tiny matrix product per channel. The image is copied once into a padded
channels-last array (only its padding zeroed), the kernel taps are two axes of one strided
view of it, and ``np.einsum`` sums the taps' windows times their per-channel weights into a
channels-last accumulator in one call; the accumulator goes back to NCHW in the one copy
that also adds the bias (or applies the fused Relu without one; with a bias the Relu is a
pass over the NCHW output). Its scratch is ``depthwise_bytes``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from npuemu.shared.relu import relu as _relu

ALIGN = 64


def out_hw(h: int, w: int, kh: int, kw: int, sh: int, sw: int, dh: int, dw: int,
           pads: Any) -> tuple[int, int]:
    """Output height and width of a window ``kh x kw`` over ``h x w`` (pads: top, bottom,
    left, right)."""
    ho = (h + pads[0] + pads[1] - (kh - 1) * dh - 1) // sh + 1
    wo = (w + pads[2] + pads[3] - (kw - 1) * dw - 1) // sw + 1
    return ho, wo


def needs_matrix(kh: int, kw: int, sh: int, sw: int, pads: Any) -> bool:
    """Whether an im2col matrix is built (else the image itself is the matrix)."""
    return not (kh == kw == 1 and sh == sw == 1 and not any(pads))


def workspace_bytes(c: int, kh: int, kw: int, ho: int, wo: int, sh: int, sw: int, pads: Any,
                    itemsize: int) -> int:
    """Bytes of scratch ``conv2d`` uses for one image: its im2col matrix (0 if none)."""
    if not needs_matrix(kh, kw, sh, sw, pads):
        return 0
    return -(-c * kh * kw * ho * wo * itemsize // ALIGN) * ALIGN


def depthwise_bytes(c: int, h: int, w: int, ho: int, wo: int, pads: Any, itemsize: int) -> int:
    """Bytes of scratch ``depthwise`` uses for one image: the padded channels-last image and
    the channels-last accumulator."""
    hp, wp = h + pads[0] + pads[1], w + pads[2] + pads[3]
    return sum(-(-n * c * itemsize // ALIGN) * ALIGN for n in (hp * wp, ho * wo))


def is_depthwise(c: int, w_shape: Any, groups: int, dtype: Any) -> bool:
    """Whether a convolution of ``c`` input channels takes the ``depthwise`` path."""
    return (groups == c == w_shape[0] and w_shape[1] == 1 and groups > 1
            and np.dtype(dtype) in (np.float32, np.float64))


def _scratch(ws: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """A ``shape`` array at the start of the uint8 workspace ``ws``, or a fresh one when
    there is no workspace or it is too small."""
    dt = np.dtype(dtype)
    size = math.prod(shape) * dt.itemsize
    if ws is not None and size <= ws.size:
        return ws[:size].view(dt).reshape(shape)
    return np.empty(shape, dt)


def _span(size: int, k: int, d: int, pad: int, s: int, n_out: int) -> tuple[int, int, int]:
    """For kernel offset ``k``: the output range ``[lo, hi)`` whose input position
    ``o * s + k * d - pad`` lies inside ``[0, size)``, and the input position of ``lo``."""
    off = k * d - pad
    lo = max(0, -(off // s))
    hi = min(n_out, (size - 1 - off) // s + 1)
    return lo, max(lo, hi), lo * s + off


def im2col(x: Any, kh: int, kw: int, sh: int, sw: int, dh: int, dw: int, pads: Any,
           cols: Any) -> Any:
    """Fill ``cols`` (C, kh, kw, Ho, Wo) from one image ``x`` (C, H, W); returns ``cols``."""
    _c, h, w = x.shape
    ho, wo = cols.shape[3], cols.shape[4]
    for i in range(kh):
        r0, r1, ih = _span(h, i, dh, pads[0], sh, ho)
        for j in range(kw):
            c0, c1, iw = _span(w, j, dw, pads[2], sw, wo)
            dst = cols[:, i, j]
            if r0 >= r1 or c0 >= c1:
                dst.fill(0)
                continue
            dst[:, r0:r1, c0:c1] = x[:, ih:ih + (r1 - r0 - 1) * sh + 1:sh,
                                     iw:iw + (c1 - c0 - 1) * sw + 1:sw]
            if r0:
                dst[:, :r0].fill(0)
            if r1 < ho:
                dst[:, r1:].fill(0)
            if c0:
                dst[:, r0:r1, :c0].fill(0)
            if c1 < wo:
                dst[:, r0:r1, c1:].fill(0)
    return cols


def _carve(ws: Any, shapes: list[tuple[int, ...]], dtype: Any) -> list[Any]:
    """Arrays of ``shapes`` one after the other (ALIGN-aligned) in the uint8 workspace
    ``ws``, or fresh ones when it is missing or too small."""
    dt = np.dtype(dtype)
    sizes = [-(-math.prod(sh) * dt.itemsize // ALIGN) * ALIGN for sh in shapes]
    if ws is None or sum(sizes) > ws.size:
        return [np.empty(sh, dt) for sh in shapes]
    out, at = [], 0
    for sh, size in zip(shapes, sizes, strict=True):
        out.append(ws[at:at + math.prod(sh) * dt.itemsize].view(dt).reshape(sh))
        at += size
    return out


def depthwise(x: Any, w: Any, sh: int, sw: int, dh: int, dw: int, pads: Any, ws: Any,
              out: Any, bias: Any, relu: bool) -> Any:
    """``conv2d`` when ``is_depthwise``: ``x`` (N, C, H, W) by ``w`` (C, 1, kh, kw) into
    ``out`` (N, C, Ho, Wo, C-contiguous, x's dtype), in channels-last scratch: every tap's
    window is one axis of a strided view of the padded image, and ``np.einsum`` sums the
    taps times their per-channel weights in one call (no product temporaries)."""
    n, c, h, wd = x.shape
    kh, kw = w.shape[2], w.shape[3]
    ho, wo = out.shape[2], out.shape[3]
    pt, pb, pl, pr = pads
    hp, wp = h + pt + pb, wd + pl + pr
    xp, acc = _carve(ws, [(hp, wp, c), (ho, wo, c)], x.dtype)
    taps = np.ascontiguousarray(w.reshape(c, kh, kw).transpose(1, 2, 0), dtype=x.dtype)
    b = None if bias is None else np.asarray(bias, x.dtype).reshape(c, 1, 1)
    for strip in (xp[:pt], xp[pt + h:], xp[pt:pt + h, :pl], xp[pt:pt + h, pl + wd:]):
        strip.fill(0)  # only the padding: the inside is overwritten by every image
    inner = xp[pt:pt + h, pl:pl + wd]
    s0, s1, s2 = xp.strides
    windows = np.lib.stride_tricks.as_strided(
        xp, (kh, kw, ho, wo, c), (s0 * dh, s1 * dw, s0 * sh, s1 * sw, s2), writeable=False)
    for img in range(n):
        inner[...] = x[img].transpose(1, 2, 0)
        np.einsum("ijhwc,ijc->hwc", windows, taps, out=acc)
        dst, res = out[img], acc.transpose(2, 0, 1)
        if b is not None:
            np.add(res, b, out=dst)
            if relu:
                _relu(dst, dst)
        elif relu:
            np.maximum(res, 0, out=dst)
        else:
            dst[...] = res
    return out


def conv2d(x: Any, w: Any, sh: int, sw: int, dh: int, dw: int, pads: Any, groups: int,
           ws: Any = None, out: Any = None, bias: Any = None, relu: bool = False,
           shuffle: int = 0) -> Any:
    """The convolution of ``x`` (N, C, H, W) by ``w`` (Cout, C/groups, kh, kw) as
    (N, Cout, Ho, Wo), plus ``bias`` (Cout values) and then ``max(., 0)`` if ``relu``.
    Written into ``out`` (returned) when it is a C-contiguous array of that shape and of the
    product's dtype; otherwise a new array is returned. ``shuffle`` (``groups`` or 0, not
    with a depthwise convolution): the output's channels shuffled in that many groups, as
    ShuffleNet's channel shuffle does after the convolution: channel ``i * Cout/shuffle + j``
    of the convolution is stored as channel ``j * shuffle + i`` (the GEMM writes each group
    through a strided view of the output, so the shuffle costs no pass of its own)."""
    n, c, h, wd = x.shape
    cout, cin, kh, kw = w.shape
    ho, wo = out_hw(h, wd, kh, kw, sh, sw, dh, dw, pads)
    k, m = cin * kh * kw, cout // groups
    dtype = np.result_type(x.dtype, w.dtype)
    shape = (n, cout, ho, wo)
    if out is None or not out.flags.c_contiguous or out.dtype != dtype or out.shape != shape:
        out = np.empty(shape, dtype)
    if is_depthwise(c, w.shape, groups, dtype) and x.dtype == dtype and not shuffle:
        return depthwise(x, w, sh, sw, dh, dw, pads, ws, out, bias, relu)
    if shuffle and shuffle != groups:
        raise ValueError(f"a channel shuffle in {shuffle} groups of a convolution of {groups}")
    wm = np.ascontiguousarray(w).reshape(groups, m, k)
    matrix = needs_matrix(kh, kw, sh, sw, pads)
    cols = _scratch(ws, (c, kh, kw, ho, wo), x.dtype) if matrix else None
    b = None if bias is None else np.asarray(bias).reshape(groups, m, 1)
    for img in range(n):
        if cols is not None:
            mat = im2col(x[img], kh, kw, sh, sw, dh, dw, pads, cols).reshape(groups, k, ho * wo)
        else:
            mat = x[img].reshape(groups, k, ho * wo)
        res = out[img].reshape(cout, ho * wo)
        prod = res.reshape(m, groups, ho * wo).transpose(1, 0, 2) if shuffle else \
            res.reshape(groups, m, ho * wo)  # (group, channel of the group, pixel)
        np.matmul(wm, mat, out=prod)
        if b is not None:
            prod += b
        if relu:
            _relu(res, res)
    return out
