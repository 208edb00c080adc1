"""N-D convolution and pooling (Conv3D, Conv2DTransposeD on AI Core; MaxPool3D, AvgPool3D,
BatchNorm3D on AI Vector), channels-first only (NCDHW, NCHW for the transpose), tiled over
the batch N (linear there).

Attributes are the TBE ones: ``strides`` / ``dilations`` (``dilation`` for MaxPool3D) and
``ksize`` with one value per axis of the data format (or only the spatial ones); ``pads``
as ``[front, back, top, bottom, left, right]`` (3-D) or ``[top, bottom, left, right]``
(2-D); ``groups``. Pooling has ``ceil_mode`` (the last window must start inside the input or
its front padding, as in TBE and ONNX) and AvgPool3D ``count_include_pad`` (else the
padding is not counted) and ``divisor_override`` (0: off). Conv2DTransposeD takes
``input_size`` (its output shape; [] or the inferred shape) and ``output_padding``, with a
filter of shape (Cin, Cout / groups, kh, kw). BatchNorm3D is BatchNorm (inference) on NCDHW.

Kernels: a convolution is an im2col (one strided copy per kernel offset) and one matmul per
group; the transpose scatters one matmul per kernel offset into the strided output
positions; pooling folds the kernel's strided windows with ``np.maximum`` / ``np.add``.
Not emulated: NDHWC layouts (100000), fp16 accumulation (numpy computes in the dtype; avg
pooling in float64), the statistics outputs of BatchNorm3D.
"""

from __future__ import annotations

from typing import Any

from npuemu.host.ops.norm import _bn_infer, _bn_source
from npuemu.host.ops.registry import FLOATS, Body, OpDef, Spec, bad, register

_ND = '''
def _win(off, dil, start_len, step):
    return tuple(slice(o * d, o * d + (n - 1) * s + 1, s)
                 for o, d, n, s in zip(off, dil, start_len, step))


def _convnd(x, w, strides, dil, pads, groups):
    """x (N, C, *sp) with filter (Cout, C / groups, *k): (N, Cout, *out)."""
    ks = w.shape[2:]
    x = np.pad(x, ((0, 0), (0, 0), *pads))
    outs = [(x.shape[2 + i] - (k - 1) * d - 1) // s + 1
            for i, (k, d, s) in enumerate(zip(ks, dil, strides))]
    n, c = x.shape[:2]
    cols = np.empty((n, c, *ks, *outs), x.dtype)
    for off in np.ndindex(*ks):
        cols[(slice(None), slice(None), *off)] = x[(slice(None), slice(None),
                                                    *_win(off, dil, outs, strides))]
    cout = w.shape[0]
    cols = cols.reshape(n, groups, c // groups * math.prod(ks), math.prod(outs))
    y = np.matmul(w.reshape(groups, cout // groups, -1), cols)
    return y.reshape(n, cout, *outs)


def _convtnd(x, w, strides, dil, pads, groups, out_pad):
    """x (N, Cin, *sp) with filter (Cin, Cout / groups, *k), the transposed convolution."""
    n, cin = x.shape[:2]
    sp, ks, og = x.shape[2:], w.shape[2:], w.shape[1]
    full = [(m - 1) * s + (k - 1) * d + 1 + p
            for m, s, k, d, p in zip(sp, strides, ks, dil, out_pad)]
    y = np.zeros((n, og * groups, *full), x.dtype)
    xg = x.reshape(n, groups, cin // groups, -1)
    wg = w.reshape(groups, cin // groups, og, *ks)
    for off in np.ndindex(*ks):
        wk = wg[(slice(None), slice(None), slice(None), *off)].transpose(0, 2, 1)
        part = np.matmul(wk, xg).reshape(n, og * groups, *sp)
        y[(slice(None), slice(None), *_win(off, dil, sp, strides))] += part
    crop = tuple(slice(lo, f - hi) for (lo, hi), f in zip(pads, full))
    return y[(slice(None), slice(None), *crop)]


def _poolnd(x, ks, strides, dil, pads, outs, mode, include_pad, divisor):
    """Max or average pooling of x (N, C, *sp) to the spatial sizes ``outs``."""
    sp = x.shape[2:]
    ends = [max(0, (o - 1) * s + (k - 1) * d + 1 - (m + lo + hi))
            for o, s, k, d, m, (lo, hi) in zip(outs, strides, ks, dil, sp, pads)]
    widths = [(lo, hi + e) for (lo, hi), e in zip(pads, ends)]
    avg = mode == "avg"
    xp = np.pad(x.astype(np.float64) if avg else x, ((0, 0), (0, 0), *widths),
                constant_values=0 if avg else -np.inf)
    fold = np.add if avg else np.maximum
    acc = None
    for off in np.ndindex(*ks):
        part = xp[(slice(None), slice(None), *_win(off, dil, outs, strides))]
        acc = part.copy() if acc is None else fold(acc, part, out=acc)
    if not avg:
        return acc
    if divisor:
        return acc / divisor
    if include_pad:
        ones = np.pad(np.ones([m + lo + hi for m, (lo, hi) in zip(sp, pads)]),
                      [(0, e) for e in ends])
    else:
        ones = np.pad(np.ones(sp), widths)
    count = None
    for off in np.ndindex(*ks):
        part = ones[_win(off, dil, outs, strides)]
        count = part.copy() if count is None else np.add(count, part, out=count)
    return acc / count
'''


def _spatial(values: object, nd: int, what: str, least: int = 1) -> list[int]:
    v = [int(x) for x in values]  # type: ignore[attr-defined]
    if len(v) == nd + 2:
        v = v[2:]
    if len(v) != nd or min(v, default=least) < least:
        raise bad(f"{what} {v} needs {nd} (or {nd + 2}) values of at least {least}")
    return v


def _pairs(values: object, nd: int) -> list[tuple[int, int]]:
    v = [int(x) for x in values]  # type: ignore[attr-defined]
    if len(v) != 2 * nd or min(v, default=0) < 0:
        raise bad(f"pads {v} needs {2 * nd} non-negative values")
    return [(v[2 * i], v[2 * i + 1]) for i in range(nd)]


def _channels_first(x: Spec, attrs: dict[str, Any], rank: int, layout: str, op: str) -> None:
    if len(x.shape) != rank:
        raise bad(f"{op} takes a {rank}-D x, got {x.shape}")
    if (attrs.get("data_format") or layout) != layout:
        raise bad(f"{op}: only data_format {layout} is emulated")


# Conv3D ----------------------------------------------------------------------------------------
def _conv3d_params(ins: list[Spec], attrs: dict[str, Any]):
    x, w = ins[0], ins[1]
    _channels_first(x, attrs, 5, "NCDHW", "Conv3D")
    groups = int(attrs["groups"])
    if len(w.shape) != 5 or x.dtype != w.dtype or groups < 1 or \
            x.shape[1] != w.shape[1] * groups or w.shape[0] % groups:
        raise bad(f"Conv3D x {x.shape}, filter {w.shape}, groups {groups} do not fit")
    return (_spatial(attrs["strides"], 3, "strides"), _spatial(attrs["dilations"], 3,
            "dilations"), _pairs(attrs["pads"], 3), groups)


def _conv3d_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    strides, dil, pads, _g = _conv3d_params(ins, attrs)
    x, w = ins[0].shape, ins[1].shape
    out = [(m + lo + hi - (k - 1) * d - 1) // s + 1
           for m, (lo, hi), k, d, s in zip(x[2:], pads, w[2:], dil, strides, strict=True)]
    if min(out) < 1:
        raise bad("Conv3D output would be empty")
    if len(ins) > 2 and ins[2].shape != (w[0],):
        raise bad(f"Conv3D bias shape {ins[2].shape} is not ({w[0]},)")
    return [Spec(ins[0].dtype, (x[0], w[0], *out), ins[0].format)]


def _conv3d_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    strides, dil, pads, groups = _conv3d_params(ins, attrs)
    tile = f"r_ = _convnd(x0[s], x1, {strides}, {dil}, {pads}, {groups})\n"
    if len(ins) > 2:
        tile += "r_ += x2.reshape(1, -1, 1, 1, 1)\n"
    return Body(tile + "y0[s] = r_\n", helpers=_ND)


def _batch(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> list[tuple[int, int]]:
    return [(0, 0), (len(ins), 0)]


register(OpDef("Conv3D", "aicore", ("x", "filter", "bias"), ("y",), FLOATS, _conv3d_infer,
               _conv3d_source, attrs={"strides": [1, 1, 1, 1, 1], "pads": [0] * 6,
                                      "dilations": [1, 1, 1, 1, 1], "groups": 1,
                                      "data_format": "NCDHW"}, optional=1, linear=_batch))


# Conv2DTransposeD ------------------------------------------------------------------------------
def _convt_params(ins: list[Spec], attrs: dict[str, Any]):
    x, w = ins[0], ins[1]
    _channels_first(x, attrs, 4, "NCHW", "Conv2DTransposeD")
    groups = int(attrs["groups"])
    if len(w.shape) != 4 or x.dtype != w.dtype or groups < 1 or w.shape[0] != x.shape[1] \
            or x.shape[1] % groups:
        raise bad(f"Conv2DTransposeD x {x.shape}, filter {w.shape}, groups {groups} "
                  "do not fit")
    out_pad = _spatial(attrs["output_padding"] or [0, 0], 2, "output_padding", least=0)
    return (_spatial(attrs["strides"], 2, "strides"), _spatial(attrs["dilations"], 2,
            "dilations"), _pairs(attrs["pads"], 2), groups, out_pad)


def _convt_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    strides, dil, pads, groups, out_pad = _convt_params(ins, attrs)
    x, w = ins[0].shape, ins[1].shape
    hw = [(m - 1) * s + (k - 1) * d + 1 + p - lo - hi for m, s, k, d, p, (lo, hi)
          in zip(x[2:], strides, w[2:], dil, out_pad, pads, strict=True)]
    shape = (x[0], w[1] * groups, *hw)
    if min(hw) < 1 or (attrs["input_size"] and tuple(attrs["input_size"]) != shape):
        raise bad(f"Conv2DTransposeD gives {shape}, input_size says {attrs['input_size']}")
    if len(ins) > 2 and ins[2].shape != (shape[1],):
        raise bad(f"Conv2DTransposeD bias shape {ins[2].shape} is not ({shape[1]},)")
    return [Spec(ins[0].dtype, shape, ins[0].format)]


def _convt_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    strides, dil, pads, groups, out_pad = _convt_params(ins, attrs)
    tile = f"r_ = _convtnd(x0[s], x1, {strides}, {dil}, {pads}, {groups}, {out_pad})\n"
    if len(ins) > 2:
        tile += "r_ += x2.reshape(1, -1, 1, 1)\n"
    return Body(tile + "y0[s] = r_\n", helpers=_ND)


register(OpDef("Conv2DTransposeD", "aicore", ("x", "filter", "bias"), ("y",), FLOATS,
               _convt_infer, _convt_source,
               attrs={"input_size": [], "strides": [1, 1, 1, 1], "pads": [0, 0, 0, 0],
                      "dilations": [1, 1, 1, 1], "groups": 1, "data_format": "NCHW",
                      "output_padding": [0, 0, 0, 0]}, optional=1, linear=_batch))


# MaxPool3D / AvgPool3D -------------------------------------------------------------------------
def _pool_params(ins: list[Spec], attrs: dict[str, Any], op: str):
    _channels_first(ins[0], attrs, 5, "NCDHW", op)
    ks = _spatial(attrs["ksize"], 3, "ksize")
    strides = _spatial(attrs["strides"], 3, "strides")
    dil = _spatial(attrs.get("dilation") or [1, 1, 1], 3, "dilation")
    pads = _pairs(attrs["pads"], 3)
    if any(max(lo, hi) * 2 > (k - 1) * d + 1 for (lo, hi), k, d in zip(pads, ks, dil,
                                                                        strict=True)):
        raise bad(f"{op} pads {attrs['pads']} exceed half the window {ks}")
    outs = []
    for m, k, s, d, (lo, hi) in zip(ins[0].shape[2:], ks, strides, dil, pads, strict=True):
        span = m + lo + hi - (k - 1) * d - 1
        o = (-(-span // s) if attrs["ceil_mode"] else span // s) + 1
        if attrs["ceil_mode"] and (o - 1) * s >= m + lo:
            o -= 1
        outs.append(o)
    if min(outs) < 1:
        raise bad(f"{op} output would be empty")
    return ks, strides, dil, pads, outs


def _pool_infer(op: str):
    def infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
        *_r, outs = _pool_params(ins, attrs, op)
        return [Spec(ins[0].dtype, (*ins[0].shape[:2], *outs), ins[0].format)]
    return infer


def _pool_source(op: str, mode: str):
    def source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
        ks, strides, dil, pads, sizes = _pool_params(ins, attrs, op)
        include = bool(attrs.get("count_include_pad"))
        divisor = int(attrs.get("divisor_override") or 0)
        tile = (f"y0[s] = _poolnd(x0[s], {ks}, {strides}, {dil}, {pads}, {sizes}, {mode!r}, "
                f"{include}, {divisor})\n")
        return Body(tile, helpers=_ND)
    return source


_POOL = {"ksize": [1, 1, 1, 1, 1], "strides": [1, 1, 1, 1, 1], "pads": [0] * 6,
         "ceil_mode": False, "data_format": "NCDHW"}
register(OpDef("MaxPool3D", "aivector", ("x",), ("y",), FLOATS, _pool_infer("MaxPool3D"),
               _pool_source("MaxPool3D", "max"),
               attrs={**_POOL, "padding": "CALCULATED", "dilation": [1, 1, 1, 1, 1]},
               linear=_batch))
register(OpDef("AvgPool3D", "aivector", ("x",), ("y",), FLOATS, _pool_infer("AvgPool3D"),
               _pool_source("AvgPool3D", "avg"),
               attrs={**_POOL, "count_include_pad": True, "divisor_override": 0}, linear=_batch))


def _bn3d_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    _channels_first(ins[0], attrs, 5, "NCDHW", "BatchNorm3D")
    return _bn_infer(ins, {**attrs, "data_format": "NCHW"}, hint)


register(OpDef("BatchNorm3D", "aivector", ("x", "scale", "offset", "mean", "variance"), ("y",),
               FLOATS, _bn3d_infer,
               lambda i, o, a: _bn_source(i, o, {**a, "data_format": "NCHW"}),
               attrs={"epsilon": 1e-4, "data_format": "NCDHW", "is_training": False},
               linear=_batch))
