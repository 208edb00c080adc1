"""Image resizing (AI Core): ResizeBilinearV2 and ResizeNearestNeighborV2, tiled over N.

``size`` is a const input (``aclSetTensorConst``) of two values, the output height and
width, or, with the input absent, the attribute ``size`` (the ``...V2D`` form). The layout
is NHWC when ``x``'s format is NHWC, else NCHW. Source coordinates follow
TensorFlow's rules: the scale is ``in / out``, or ``(in - 1) / (out - 1)`` with
``align_corners``; with ``half_pixel_centers`` a destination pixel ``d`` samples
``(d + 0.5) * scale - 0.5`` (bilinear) or ``floor((d + 0.5) * scale)`` (nearest), otherwise
``d * scale`` (nearest rounds it with ``align_corners``, else floors it); indices are clamped
to the input. ResizeBilinearV2 computes in float32 and returns float32 (its ``dtype``
attribute, aclDataType 0, the only value emulated); nearest keeps ``x``'s dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from npuemu.host.ops import types as T
from npuemu.host.ops.registry import FLOATS, NUMERIC, Body, OpDef, Spec, bad, register

_RESIZE = '''
def _src(n_in, n_out, align, half):
    if align and n_out > 1:
        scale = (n_in - 1) / (n_out - 1)
    else:
        scale = n_in / n_out
    d = np.arange(n_out, dtype=np.float64)
    return (d + 0.5) * scale if half else d * scale, scale


def _nearest_idx(n_in, n_out, align, half):
    pos, _ = _src(n_in, n_out, align, half)
    idx = np.floor(pos + 0.5) if align and not half else np.floor(pos)  # half away from 0
    return np.clip(idx.astype(np.int64), 0, n_in - 1)


def _linear(n_in, n_out, align, half):
    pos, _ = _src(n_in, n_out, align, half)
    if half:
        pos = pos - 0.5
    lo = np.floor(pos)
    frac = (pos - lo).astype(np.float32)
    lo_i = np.clip(lo.astype(np.int64), 0, n_in - 1)
    hi_i = np.clip(np.ceil(pos).astype(np.int64), 0, n_in - 1)
    return lo_i, hi_i, frac


def _bilinear(x, ho, wo, align, half):
    """x (N, C, H, W) -> (N, C, ho, wo), float32."""
    x = x.astype(np.float32)
    t, b, fy = _linear(x.shape[2], ho, align, half)
    l, r, fx = _linear(x.shape[3], wo, align, half)
    fy, fx = fy[:, None], fx[None, :]
    top = x[:, :, t][:, :, :, l] * (1 - fx) + x[:, :, t][:, :, :, r] * fx
    bot = x[:, :, b][:, :, :, l] * (1 - fx) + x[:, :, b][:, :, :, r] * fx
    return top * (1 - fy) + bot * fy
'''


def _size(ins: list[Spec], attrs: dict[str, Any], op: str) -> tuple[int, int]:
    data = ins[1].const_array() if len(ins) > 1 else np.array(attrs["size"] or [])
    if data is None:
        raise bad(f"{op} input size must be const (aclSetTensorConst)")
    values = [int(v) for v in data.reshape(-1)]
    if len(values) != 2 or min(values) < 1:
        raise bad(f"{op} size {values} must be two positive values")
    if len(ins[0].shape) != 4:
        raise bad(f"{op} takes a 4-D x, got {ins[0].shape}")
    return values[0], values[1]


def _infer(op: str, bilinear: bool):
    def infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
        ho, wo = _size(ins, attrs, op)
        x = ins[0]
        if bilinear and int(attrs["dtype"]) != T.ACL_FLOAT:
            raise bad(f"{op} dtype {attrs['dtype']}: only float32 (0) is emulated",
                      T.ACL_ERROR_UNSUPPORTED_DATA_TYPE)
        if attrs["align_corners"] and attrs["half_pixel_centers"]:
            raise bad(f"{op}: align_corners and half_pixel_centers cannot both be set")
        n, c = (x.shape[0], x.shape[3]) if x.format == T.ACL_FORMAT_NHWC else x.shape[:2]
        shape = (n, ho, wo, c) if x.format == T.ACL_FORMAT_NHWC else (n, c, ho, wo)
        return [Spec("float32" if bilinear else x.dtype, shape, x.format)]
    return infer


def _source(op: str, bilinear: bool):
    def source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
        ho, wo = _size(ins, attrs, op)
        nhwc = ins[0].format == T.ACL_FORMAT_NHWC
        align, half = bool(attrs["align_corners"]), bool(attrs["half_pixel_centers"])
        xin = "x0[s].transpose(0, 3, 1, 2)" if nhwc else "x0[s]"
        if bilinear:
            tile = f"r_ = _bilinear({xin}, {ho}, {wo}, {align}, {half})\n"
        else:
            tile = (f"v_ = {xin}\n"
                    f"iy_ = _nearest_idx(v_.shape[2], {ho}, {align}, {half})\n"
                    f"ix_ = _nearest_idx(v_.shape[3], {wo}, {align}, {half})\n"
                    "r_ = v_[:, :, iy_][:, :, :, ix_]\n")
        tile += f"y0[s] = r_.transpose(0, 2, 3, 1) if {nhwc} else r_\n"
        return Body(tile, helpers=_RESIZE)
    return source


_ATTRS = {"align_corners": False, "half_pixel_centers": False, "size": None}
register(OpDef("ResizeBilinearV2", "aicore", ("x", "size"), ("y",), FLOATS,
               _infer("ResizeBilinearV2", True), _source("ResizeBilinearV2", True),
               attrs={**_ATTRS, "dtype": T.ACL_FLOAT}, optional=1,
               linear=lambda i, o, a: [(0, 0), (len(i), 0)]))
register(OpDef("ResizeNearestNeighborV2", "aicore", ("x", "size"), ("y",), NUMERIC,
               _infer("ResizeNearestNeighborV2", False), _source("ResizeNearestNeighborV2",
                                                                 False),
               attrs=dict(_ATTRS), optional=1, linear=lambda i, o, a: [(0, 0), (len(i), 0)]))
