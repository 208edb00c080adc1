"""Cube ops (AI Core): MatMul, BatchMatMul, Conv2D.

MatMul tiles rows of M (its linear dim); BatchMatMul tiles the batch axis (rows of M when
the output is 2-D); Conv2D tiles the batch N. Conv2D takes the filter as ``(Cout, Cin/groups,
kh, kw)``; ``strides``/``dilations`` are 4 values in the data format's order, ``pads`` are
``[top, bottom, left, right]``; x may be NCHW or NHWC (``data_format`` attribute or the
descriptor's format). Results are computed in the inputs' dtype, except: int8 inputs
(MatMulV2, Conv2D) accumulate exactly in int32 and give int32 (an int32 bias), as the cube
does; bfloat16 inputs are widened to float32, multiplied there and rounded to nearest even
once on store (a float32 or bfloat16 bias is added before that rounding). The dtypes are
CANN's: MatMul float16/float32/int32/bfloat16, MatMulV2 those and int8, BatchMatMul
float16/float32/int32/bfloat16, Conv2D float16/float32/bfloat16/int8 (100026 otherwise).

Conv2D is one GEMM per image (``shared/conv.py``, which its kernels import): the filter as a
``(groups, Cout/groups, Cin/groups*kh*kw)`` matrix times the image's im2col matrix, so the
product is the NCHW output as laid out and the matmul writes it straight into y (NCHW,
not bfloat16: no copy after); the bias and, with ``fused_relu`` (set by ATC when a Relu
is the Conv's only reader, ``host/models/fold.py``; our attribute, CANN fuses in its own
graph passes), ``max(., 0)`` are applied in place on that output. With ``shuffle`` = groups
(our attribute, set by ATC when ShuffleNet's channel shuffle, Reshape -> Transpose ->
Reshape, is the only reader of a grouped Conv2D; float, NCHW, not depthwise) the GEMM writes
each group's channels through a strided view of y, so y holds the shuffled channels
(``shared/conv.py``) and the shuffle's three tasks are gone. The im2col matrix is built
without a padded copy (one strided copy per kernel offset, the padding's strips zeroed); a
1x1 window with stride 1 and no padding has none (x is the matrix). A depthwise Conv2D
(float32, or bfloat16 widened to it) is computed directly instead (``conv.depthwise``: its
taps summed by one ``np.einsum`` in channels-last scratch), not as one tiny GEMM per
channel. Conv2D declares a
workspace (``OpDef.workspace``): one image's im2col matrix; inside a model it is a planned
block of the model's workspace, reused by every image and every execute. Still numpy
temporaries: the result of an NHWC or bfloat16 Conv2D (copied or rounded into y), the
widened inputs of int8 and bfloat16, and the scratch of a single-op launch (which passes no
workspace).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from npuemu.host.ops import types as T
from npuemu.host.ops.registry import BF16, FLOATS, Body, OpDef, Spec, bad, broadcast, register
from npuemu.shared import conv

MM_DTYPES = frozenset({"float16", "float32", "int32", BF16})
"""MatMul's and BatchMatMul's input dtypes; MatMulV2 and Conv2D add int8 (int32 out)."""
_BIAS = {"float16": {"float16"}, "float32": {"float32"}, "int32": {"int32"},
         "int8": {"int32"}, BF16: {BF16, "float32"}}
"""The bias dtypes each input dtype takes."""


def _out_dtype(op: str, x: Spec, w: Spec, bias: Spec | None) -> str:
    """y's dtype for inputs of one dtype (int32 for int8); 100026 for another bias dtype."""
    if bias is not None and bias.dtype not in _BIAS.get(x.dtype, ()):
        raise bad(f"{op} bias dtype {bias.dtype} does not go with {x.dtype} inputs",
                  T.ACL_ERROR_UNSUPPORTED_DATA_TYPE)
    return "int32" if x.dtype == "int8" else x.dtype


def _widen(dtype: str, v: str) -> str:
    """Source of ``v`` in the dtype the cube computes ``dtype`` in (int8 -> int32, bfloat16
    -> float32; others as they are)."""
    if dtype == BF16:
        return f"_bf.to_float32({v})"
    return f"{v}.astype(np.int32)" if dtype == "int8" else v


def _mm_dims(a: tuple, b: tuple, ta: bool, tb: bool) -> tuple[int, int, int]:
    m, k = (a[-1], a[-2]) if ta else (a[-2], a[-1])
    k2, n = (b[-1], b[-2]) if tb else (b[-2], b[-1])
    if k != k2:
        raise bad(f"inner dims differ: {a} x {b} (transpose {ta}, {tb})")
    return m, k, n


def _matmul_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    a, b = ins[0], ins[1]
    if len(a.shape) != 2 or len(b.shape) != 2 or a.dtype != b.dtype:
        raise bad(f"MatMul takes two 2-D tensors of one dtype, got {a.shape} {b.shape}")
    m, _k, n = _mm_dims(a.shape, b.shape, bool(attrs["transpose_x1"]),
                        bool(attrs["transpose_x2"]))
    if len(ins) > 2 and ins[2].shape not in ((n,), (1, n), ()):
        raise bad(f"MatMul bias shape {ins[2].shape} is not ({n},)")
    return [Spec(_out_dtype("MatMul", a, b, ins[2] if len(ins) > 2 else None), (m, n),
                 a.format)]


def _matmul_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    dt = ins[0].dtype
    b = f"(x1.T if {bool(attrs['transpose_x2'])} else x1)"
    prep = f"a = x0.T if {bool(attrs['transpose_x1'])} else x0\nb = {_widen(dt, b)}\n"
    bias = _widen(ins[2].dtype, "x2.reshape(-1)") if len(ins) > 2 else ""
    if dt == BF16:
        tile = "r_ = np.matmul(_bf.to_float32(a[s]), b)\n"
        tile += f"r_ += {bias}\n" if bias else ""
        return Body(tile + "_bf.from_float32(r_, out=y0[s])", prep)
    tile = f"np.matmul({_widen(dt, 'a[s]')}, b, out=y0[s])\n"
    if bias:
        tile += f"y0[s] += {bias}\n"
    return Body(tile, prep)


def _matmul_linear(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> list:
    return [(0, 1 if attrs["transpose_x1"] else 0), (len(ins), 0)]


register(OpDef("MatMul", "aicore", ("x1", "x2", "bias"), ("y",), MM_DTYPES, _matmul_infer,
               _matmul_source, attrs={"transpose_x1": False, "transpose_x2": False},
               optional=1, linear=_matmul_linear))
register(OpDef("MatMulV2", "aicore", ("x1", "x2", "bias"), ("y",), MM_DTYPES | {"int8"},
               _matmul_infer, _matmul_source,
               attrs={"transpose_x1": False, "transpose_x2": False, "offset_x": 0},
               optional=1, linear=_matmul_linear))


def _bmm_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    a, b = ins
    if len(a.shape) < 2 or len(b.shape) < 2 or a.dtype != b.dtype:
        raise bad(f"BatchMatMul takes tensors of rank >= 2 of one dtype: {a.shape} {b.shape}")
    m, _k, n = _mm_dims(a.shape, b.shape, bool(attrs["adj_x1"]), bool(attrs["adj_x2"]))
    return [Spec(_out_dtype("BatchMatMul", a, b, None),
                 (*broadcast([a.shape[:-2], b.shape[:-2]]), m, n), a.format)]


def _bmm_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    prep = (f"a = np.swapaxes(x0, -1, -2) if {bool(attrs['adj_x1'])} else x0\n"
            f"b = np.swapaxes(x1, -1, -2) if {bool(attrs['adj_x2'])} else x1\n"
            "if y0.ndim > 2:\n"
            "    a = np.broadcast_to(a, y0.shape[:-2] + a.shape[-2:])\n"
            "    b = np.broadcast_to(b, y0.shape[:-2] + b.shape[-2:])\n"
            "    b_of = lambda s: b[s]\n"
            "else:\n"
            "    b_of = lambda s: b\n")
    if ins[0].dtype == BF16:
        return Body("_bf.from_float32(np.matmul(_bf.to_float32(a[s]), _bf.to_float32(b_of(s)))"
                    ", out=y0[s])", prep)
    return Body("np.matmul(a[s], b_of(s), out=y0[s])", prep)


def _bmm_linear(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> list:
    out = outs[0].shape
    if len(out) == 2:
        return [(0, 1 if attrs["adj_x1"] else 0), (len(ins), 0)]
    pairs = [(len(ins), 0)]
    pairs += [(i, 0) for i in (0, 1) if len(ins[i].shape) == len(out)
              and ins[i].shape[0] == out[0] and out[0] != 1]
    return pairs if len(pairs) == 3 else []


register(OpDef("BatchMatMul", "aicore", ("x1", "x2"), ("y",), MM_DTYPES, _bmm_infer, _bmm_source,
               attrs={"adj_x1": False, "adj_x2": False}, linear=_bmm_linear))

_CONV = "from npuemu.shared.conv import conv2d as _conv\n"
"""Conv2D's kernels import their body (``shared/conv.py``): a short source compiles fast."""


def _layout(spec: Spec, attrs: dict[str, Any]) -> str:
    fmt = attrs.get("data_format")
    if fmt is None:
        fmt = "NHWC" if spec.format == T.ACL_FORMAT_NHWC else "NCHW"
    if fmt not in ("NCHW", "NHWC"):
        raise bad(f"data_format {fmt!r}", T.ACL_ERROR_FORMAT_NOT_MATCH)
    return str(fmt)


def _hw(values: object, layout: str, what: str) -> tuple[int, int]:
    v = list(values)  # type: ignore[call-overload]
    if len(v) == 2:
        return int(v[0]), int(v[1])
    if len(v) != 4:
        raise bad(f"{what} needs 4 values, got {v}")
    return (int(v[2]), int(v[3])) if layout == "NCHW" else (int(v[1]), int(v[2]))


def _conv_params(ins: list[Spec], attrs: dict[str, Any]):
    layout = _layout(ins[0], attrs)
    sh, sw = _hw(attrs["strides"], layout, "strides")
    dh, dw = _hw(attrs["dilations"], layout, "dilations")
    pads = [int(p) for p in attrs["pads"]]
    if len(pads) != 4 or min(sh, sw, dh, dw) < 1 or min(pads) < 0:
        raise bad(f"Conv2D strides/dilations/pads {attrs['strides']} {attrs['dilations']} "
                  f"{attrs['pads']}")
    return layout, sh, sw, dh, dw, pads, int(attrs["groups"])


def _conv_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    x, w = ins[0], ins[1]
    if len(x.shape) != 4 or len(w.shape) != 4 or x.dtype != w.dtype:
        raise bad(f"Conv2D takes 4-D x and filter of one dtype: {x.shape} {w.shape}")
    if x.dtype not in CONV_DTYPES:
        raise bad(f"Conv2D x dtype {x.dtype} not in {sorted(CONV_DTYPES)}",
                  T.ACL_ERROR_UNSUPPORTED_DATA_TYPE)
    layout, sh, sw, dh, dw, pads, groups = _conv_params(ins, attrs)
    n, c, h, wd = x.shape if layout == "NCHW" else (x.shape[0], x.shape[3], *x.shape[1:3])
    cout, cin, kh, kw = w.shape
    if groups < 1 or c != cin * groups or cout % groups:
        raise bad(f"Conv2D channels: x has {c}, filter {w.shape}, groups {groups}")
    ho = (h + pads[0] + pads[1] - (kh - 1) * dh - 1) // sh + 1
    wo = (wd + pads[2] + pads[3] - (kw - 1) * dw - 1) // sw + 1
    if ho < 1 or wo < 1:
        raise bad("Conv2D output would be empty")
    shape = (n, cout, ho, wo) if layout == "NCHW" else (n, ho, wo, cout)
    return [Spec(_out_dtype("Conv2D", x, w, ins[2] if len(ins) > 2 else None), shape,
                 x.format)]


def _conv_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    layout, sh, sw, dh, dw, pads, groups = _conv_params(ins, attrs)
    nhwc = layout == "NHWC"
    dt = ins[0].dtype
    xin = _widen(dt, "x0[s].transpose(0, 3, 1, 2)" if nhwc else "x0[s]")
    out = "None" if nhwc or dt == BF16 else "o_"
    prep = f"w_ = {_widen(dt, 'x1')}\n"
    prep += f"b_ = {_widen(ins[2].dtype, 'x2.reshape(-1)')}\n" if len(ins) > 2 else "b_ = None\n"
    shuffle = _shuffle(ins, attrs, groups, nhwc)
    relu = f"{bool(attrs.get('fused_relu'))}{f', {shuffle}' if shuffle else ''}"
    if not nhwc and dt in FLOATS and (len(ins) < 3 or ins[2].dtype == dt):
        # the common case in one line (a short source compiles fast): conv2d writes into
        # y0[s], a C-contiguous tile of the product's dtype, and widens nothing
        bias = "x2" if len(ins) > 2 else "None"
        return Body(f"_conv(x0[s], x1, {sh}, {sw}, {dh}, {dw}, {pads}, {groups}, ws, y0[s], "
                    f"{bias}, {relu})\n", helpers=_CONV)
    tile = "o_ = y0[s]\n"
    tile += (f"r_ = _conv({xin}, w_, {sh}, {sw}, {dh}, {dw}, {pads}, {groups}, ws, {out}, b_, "
             f"{relu})\n")
    res = "r_.transpose(0, 2, 3, 1)" if nhwc else "r_"
    tile += (f"_bf.from_float32({res}, out=o_)\n" if dt == BF16 else
             f"if r_ is not o_:\n    o_[...] = {res}\n")
    return Body(tile, prep=prep, helpers=_CONV)


def _shuffle(ins: list[Spec], attrs: dict[str, Any], groups: int, nhwc: bool) -> int:
    """The ``shuffle`` attribute (0, or ``groups`` > 1 for a grouped NCHW float Conv2D that is
    not depthwise); 100000 otherwise."""
    shuffle = int(attrs.get("shuffle") or 0)
    depthwise = ins[1].shape[1] == 1 and ins[1].shape[0] == groups
    if shuffle and (shuffle != groups or groups < 2 or nhwc or ins[0].dtype not in FLOATS
                    or depthwise):
        raise bad(f"Conv2D shuffle {shuffle} needs a grouped NCHW float convolution of "
                  f"{shuffle} groups that is not depthwise (groups {groups})")
    return shuffle


def _conv_workspace(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> int:
    """Bytes of one image's im2col matrix, or of a depthwise one's channels-last scratch
    (``shared/conv.py``; images run one at a time)."""
    layout, sh, sw, _dh, _dw, pads, groups = _conv_params(ins, attrs)
    x, w, y = ins[0].shape, ins[1].shape, outs[0].shape
    c, h, wd = (x[1], x[2], x[3]) if layout == "NCHW" else (x[3], x[1], x[2])
    ho, wo = (y[2], y[3]) if layout == "NCHW" else (y[1], y[2])
    wide = "float32" if ins[0].dtype == BF16 else "int32" if ins[0].dtype == "int8" else None
    dtype = np.dtype(wide or ins[0].dtype)
    if conv.is_depthwise(c, w, groups, dtype):
        return conv.depthwise_bytes(c, h, wd, ho, wo, pads, dtype.itemsize)
    return conv.workspace_bytes(c, w[2], w[3], ho, wo, sh, sw, pads, dtype.itemsize)


CONV_DTYPES = FLOATS | {BF16, "int8"}
"""Conv2D's x and filter dtypes (an int8 one takes an int32 bias, hence int32 below)."""
register(OpDef("Conv2D", "aicore", ("x", "filter", "bias"), ("y",),
               CONV_DTYPES | {"int32"}, _conv_infer,
               _conv_source, attrs={"strides": [1, 1, 1, 1], "pads": [0, 0, 0, 0],
                                    "dilations": [1, 1, 1, 1], "groups": 1,
                                    "data_format": None, "fused_relu": False,
                                    "shuffle": 0},
               optional=1, linear=lambda i, o, a: [(0, 0), (len(i), 0)],
               workspace=_conv_workspace))
