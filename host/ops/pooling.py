"""Pooling ops (AI Vector): MaxPool, AvgPool, GlobalAveragePool; tiled over the batch N.

``ksize``/``strides`` are 4 values in the data format's order (2 are taken as H, W);
``padding`` is ``VALID`` or ``SAME`` (TensorFlow rules: SAME pads so the output is
ceil(in / stride), and AvgPool averages over the real elements only). ``pads`` (our
attribute, set by ATC for ONNX pooling with pads or ceil mode; ``[top, bottom, left,
right]``) pads explicitly instead, with the same rule (MaxPool never takes a pad, AvgPool
averages the real elements); every window must hold an element of x (100000 otherwise).
GlobalAveragePool averages every axis after the channel (ONNX), keeping them as 1.

A pooling tile is separable: the kw strided column slices of the (padded) input are folded
with ``np.maximum`` or ``np.add`` into one array of every input row, then its kh strided
row slices into the NCHW output itself (rows first when the row stride is above 1:
``shared/pool.py``; kw + kh - 2 folds instead of kh*kw - 1, and no window view, an order of
magnitude slower in numpy). AvgPool sums float16 and float32 in
float32 (float64 in float64) and divides by the window's size (VALID) or multiplies by
1 / its count of real elements (padded: a constant of the kernel, computed once when it is
compiled); a padded input is copied with only its border strips filled; an NHWC output is
the NCHW result transposed into y.
"""

from __future__ import annotations

from typing import Any

from npuemu.host.ops.cube import _hw, _layout
from npuemu.host.ops.registry import FLOATS, Body, OpDef, Spec, bad, register

_POOL = "from npuemu.shared.pool import inv_count as _inv_count, pool as _pool\n"
"""Pooling kernels import their body (``shared/pool.py``): a short source compiles fast."""


def _pads(size: int, k: int, s: int, same: bool) -> tuple[int, int, int]:
    if not same:
        return (size - k) // s + 1, 0, 0
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return out, total // 2, total - total // 2


def _params(ins: list[Spec], attrs: dict[str, Any]):
    layout = _layout(ins[0], attrs)
    kh, kw = _hw(attrs["ksize"], layout, "ksize")
    sh, sw = _hw(attrs["strides"], layout, "strides")
    padding = attrs["padding"]
    if padding not in ("VALID", "SAME") or min(kh, kw, sh, sw) < 1:
        raise bad(f"pool ksize {attrs['ksize']} strides {attrs['strides']} padding {padding!r}")
    if len(ins[0].shape) != 4:
        raise bad(f"pooling takes a 4-D x, got {ins[0].shape}")
    x = ins[0].shape
    h, w = (x[2], x[3]) if layout == "NCHW" else (x[1], x[2])
    if attrs.get("pads") is not None:
        return (layout, kh, kw, sh, sw, *_explicit(attrs["pads"], h, w, kh, kw, sh, sw))
    ho, pt, pb = _pads(h, kh, sh, padding == "SAME")
    wo, pl, pr = _pads(w, kw, sw, padding == "SAME")
    if ho < 1 or wo < 1:
        raise bad("pool output would be empty")
    return layout, kh, kw, sh, sw, (pt, pb, pl, pr), ho, wo


def _explicit(values: Any, h: int, w: int, kh: int, kw: int, sh: int,
              sw: int) -> tuple[tuple[int, int, int, int], int, int]:
    """``pads`` [top, bottom, left, right] (our attribute: ATC's ONNX pooling with pads) and
    the output size; every window must hold at least one element of x."""
    pads = tuple(int(p) for p in values)
    if len(pads) != 4 or min(pads) < 0:
        raise bad(f"pool pads {values} must be 4 values >= 0")
    pt, pb, pl, pr = pads
    ho, wo = (h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1
    if ho < 1 or wo < 1 or pt >= kh or pl >= kw or (ho - 1) * sh - pt >= h \
            or (wo - 1) * sw - pl >= w:
        raise bad(f"pool pads {values} leave a window without an element of x")
    return (pt, pb, pl, pr), ho, wo


def _pool_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    layout, *_r, ho, wo = _params(ins, attrs)
    x = ins[0].shape
    shape = (x[0], x[1], ho, wo) if layout == "NCHW" else (x[0], ho, wo, x[3])
    return [Spec(ins[0].dtype, shape, ins[0].format)]


def _pool_source(mode: str):
    def source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
        layout, kh, kw, sh, sw, pads, _ho, _wo = _params(ins, attrs)
        nhwc = layout == "NHWC"
        x = ins[0].shape
        h, w = (x[1], x[2]) if nhwc else (x[2], x[3])
        inv = "_INV" if mode == "avg" and any(pads) else "None"
        helpers = _POOL + (f"_INV = _inv_count({h}, {w}, {kh}, {kw}, {sh}, {sw}, {pads})\n"
                           if inv != "None" else "")  # once, when the kernel is compiled
        if nhwc:
            tile = (f"r_ = _pool(x0[s].transpose(0, 3, 1, 2), {kh}, {kw}, {sh}, {sw}, {pads}, "
                    f"{mode!r}, None, {inv})\ny0[s] = r_.transpose(0, 2, 3, 1)\n")
        else:
            tile = f"_pool(x0[s], {kh}, {kw}, {sh}, {sw}, {pads}, {mode!r}, y0[s], {inv})\n"
        return Body(tile, helpers=helpers)
    return source


_ATTRS = {"ksize": [1, 1, 1, 1], "strides": [1, 1, 1, 1], "padding": "VALID",
          "data_format": None, "pads": None}
for _name, _mode in (("MaxPool", "max"), ("AvgPool", "avg")):
    register(OpDef(_name, "aivector", ("x",), ("y",), FLOATS, _pool_infer, _pool_source(_mode),
                   attrs=dict(_ATTRS), linear=lambda i, o, a: [(0, 0), (len(i), 0)]))


def _gap_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    x = ins[0].shape
    if len(x) < 3:
        raise bad(f"GlobalAveragePool takes rank >= 3, got {x}")
    return [Spec(ins[0].dtype, (*x[:2], *(1,) * (len(x) - 2)), ins[0].format)]


def _gap_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    axes = tuple(range(2, len(ins[0].shape)))
    return Body(f"y0[s] = x0[s].mean(axis={axes}, keepdims=True)")


register(OpDef("GlobalAveragePool", "aivector", ("x",), ("y",), FLOATS, _gap_infer,
               _gap_source, linear=lambda i, o, a: [(0, 0), (len(i), 0)]))
