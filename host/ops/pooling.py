"""Pooling ops (AI Vector): MaxPool, AvgPool, GlobalAveragePool; tiled over the batch N.

``ksize``/``strides`` are 4 values in the data format's order (2 are taken as H, W);
``padding`` is ``VALID`` or ``SAME`` (TensorFlow rules: SAME pads so the output is
ceil(in / stride), and AvgPool averages over the real elements only). GlobalAveragePool
averages every axis after the channel (ONNX), keeping them as 1.

A pooling tile folds the kh*kw strided slices of the (padded) input with ``np.maximum`` or
``np.add`` in place, instead of reducing a six-axis window view (an order of magnitude
slower in numpy).
"""

from __future__ import annotations

from typing import Any

from npuemu.host.ops.cube import _hw, _layout
from npuemu.host.ops.registry import FLOATS, Body, OpDef, Spec, bad, register

_POOL = '''
_win = np.lib.stride_tricks.sliding_window_view

def _pool(x, kh, kw, sh, sw, pads, mode):
    pt, pb, pl, pr = pads
    xp = x if mode == "max" else x.astype(np.float64)
    if any(pads):
        xp = np.pad(xp, ((0, 0), (0, 0), (pt, pb), (pl, pr)),
                    constant_values=-np.inf if mode == "max" else 0)
    ho = (xp.shape[2] - kh) // sh + 1
    wo = (xp.shape[3] - kw) // sw + 1
    fold = np.maximum if mode == "max" else np.add
    acc = None
    for i in range(kh):
        for j in range(kw):
            part = xp[:, :, i:i + (ho - 1) * sh + 1:sh, j:j + (wo - 1) * sw + 1:sw]
            acc = part.copy() if acc is None else fold(acc, part, out=acc)
    if mode == "max":
        return acc
    ones = np.pad(np.ones(x.shape[2:]), ((pt, pb), (pl, pr)))
    count = _win(ones, (kh, kw))[::sh, ::sw].sum(axis=(-1, -2))
    return acc / count
'''


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
    ho, pt, pb = _pads(h, kh, sh, padding == "SAME")
    wo, pl, pr = _pads(w, kw, sw, padding == "SAME")
    if ho < 1 or wo < 1:
        raise bad("pool output would be empty")
    return layout, kh, kw, sh, sw, (pt, pb, pl, pr), ho, wo


def _pool_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    layout, *_r, ho, wo = _params(ins, attrs)
    x = ins[0].shape
    shape = (x[0], x[1], ho, wo) if layout == "NCHW" else (x[0], ho, wo, x[3])
    return [Spec(ins[0].dtype, shape, ins[0].format)]


def _pool_source(mode: str):
    def source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
        layout, kh, kw, sh, sw, pads, _ho, _wo = _params(ins, attrs)
        nhwc = layout == "NHWC"
        xin = "x0[s].transpose(0, 3, 1, 2)" if nhwc else "x0[s]"
        tile = (f"r_ = _pool({xin}, {kh}, {kw}, {sh}, {sw}, {pads}, {mode!r})\n"
                f"y0[s] = r_.transpose(0, 2, 3, 1) if {nhwc} else r_\n")
        return Body(tile, helpers=_POOL)
    return source


_ATTRS = {"ksize": [1, 1, 1, 1], "strides": [1, 1, 1, 1], "padding": "VALID",
          "data_format": None}
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
