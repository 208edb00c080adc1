"""ONNX op handlers beyond :mod:`.lowering`'s own table: the N-D and less common ops of the
onnx package's small models, lowered onto the op library (``host/ops``: ``volume``,
``slicing``, ``activation``).

Each handler is ``handler(lowerer, node, attrs)`` and emits library nodes through the
lowerer, as :mod:`.lowering`'s methods do:

* ``Conv`` with a 5-D filter -> ``Conv3D``; ``ConvTranspose`` (2-D) -> ``Conv2DTransposeD``
  (pads from ``pads``, or from ``output_shape`` / ``auto_pad``);
* 3-D pooling, and 1-D / 2-D pooling with dilations -> ``MaxPool3D`` / ``AvgPool3D`` (lower
  ranks get unit leading spatial axes through Reshape);
* 5-D ``BatchNormalization`` -> ``BatchNorm3D``; ``InstanceNormalization`` ->
  ``InstanceNorm``; ``LogSoftmax`` -> ``LogSoftmaxV2`` (before opset 13 over the flattened
  trailing axes, as Softmax); ``Softplus``, ``Sign``, ``Shrink`` by the same names;
* ``Slice`` with constant starts/ends/axes/steps -> ``StridedSliceD``; ``Tile`` with
  constant repeats -> ``TileD``; ``Pad`` in ``reflect`` / ``edge`` mode -> ``PadV3D``;
  ``Split`` into unequal parts -> ``SplitVD``; ``Expand`` to a computed shape -> ``Expand``
  with its shape input (the static output shape fixed at conversion, checked at run time);
* ``ArgMax`` -> ``ArgMaxV2`` (+ Reshape for ``keepdims``); ``TopK`` (constant ``k``) ->
  ``TopK`` + a Cast of its int32 indices to int64; ``Resize`` / ``Upsample`` of H and W (4-D)
  -> ``ResizeNearestNeighborV2`` or ``ResizeBilinearV2`` (+ a Cast back from float32) for the
  coordinate modes with TensorFlow's rules: linear asymmetric / align_corners / half_pixel
  (pytorch_half_pixel when no output dim is 1), nearest asymmetric+floor,
  align_corners+round_prefer_ceil, tf_half_pixel_for_nn+floor; other modes (ONNX's default
  nearest half_pixel+round_prefer_floor, cubic) are refused by name.

Refused by name (UnsupportedOpsError): ConvTranspose other than 2-D, Slice / Tile with
computed indices, and whatever the library's checks refuse; ``REFUSED`` adds the reason for
the op types of the onnx package's small models that are not converted (StringNormalizer:
no string tensors; Gradient: a training op).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx

from npuemu.host.models.codes import UnsupportedOpsError
from npuemu.host.models.graph import ACL_DTYPES

Handler = Callable[[Any, onnx.NodeProto, dict], None]


def _refuse(what: str, n: onnx.NodeProto) -> UnsupportedOpsError:
    return UnsupportedOpsError([(what, n.name or n.output[0])])


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _onnx_pads(low: Any, n: onnx.NodeProto, a: dict, ks: list[int], strides: list[int],
               dil: list[int]) -> list[tuple[int, int]]:
    """Per-axis (begin, end) pads of an ONNX conv or pool, resolving ``auto_pad``."""
    nd = len(ks)
    auto = _text(a.get("auto_pad", "NOTSET"))
    if auto == "VALID":
        return [(0, 0)] * nd
    if auto == "NOTSET":
        p = list(a.get("pads", [0] * 2 * nd))
        return [(int(p[i]), int(p[i + nd])) for i in range(nd)]
    pairs = []
    for size, k, s, d in zip(low.t(n.input[0]).shape[2:], ks, strides, dil, strict=True):
        total = max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        pairs.append((small, big) if auto == "SAME_UPPER" else (big, small))
    return pairs


def _flat(pairs: list[tuple[int, int]]) -> list[int]:
    return [v for p in pairs for v in p]


def _to_rank(low: Any, n: onnx.NodeProto, name: str, rank: int) -> str:
    """``name`` with unit axes inserted after N, C up to ``rank`` (a Reshape or a weight)."""
    shape = low.t(name).shape
    if len(shape) == rank:
        return name
    return low._reshaped(n, name, (*shape[:2], *(1,) * (rank - len(shape)), *shape[2:]))


# convolutions ----------------------------------------------------------------------------------
def conv3d(low: Any, n: onnx.NodeProto, a: dict) -> None:
    """ONNX Conv with a 5-D filter as Conv3D."""
    ks = list(low.t(n.input[1]).shape[2:])
    strides, dil = list(a.get("strides", [1] * 3)), list(a.get("dilations", [1] * 3))
    pads = _onnx_pads(low, n, a, ks, strides, dil)
    low.emit(n, "Conv3D", list(n.input), [n.output[0]], strides=[1, 1, *strides],
             dilations=[1, 1, *dil], pads=_flat(pads), groups=a.get("group", 1),
             data_format="NCDHW")


def conv_transpose(low: Any, n: onnx.NodeProto, a: dict) -> None:
    w = low.t(n.input[1]).shape
    if len(w) != 4:
        raise _refuse(f"ConvTranspose{len(w) - 2}D", n)
    ks = list(a.get("kernel_shape", w[2:]))
    strides, dil = list(a.get("strides", [1, 1])), list(a.get("dilations", [1, 1]))
    out_pad = list(a.get("output_padding", [0, 0]))
    auto = _text(a.get("auto_pad", "NOTSET"))
    if "pads" in a and auto == "NOTSET":
        p = list(a["pads"])
        pads = [(p[0], p[2]), (p[1], p[3])]
    else:  # from the inferred output shape (output_shape, auto_pad SAME_*), ONNX's split
        x, y = low.t(n.input[0]).shape, low.t(n.output[0]).shape
        pads = []
        for m, o, k, s, d, op in zip(x[2:], y[2:], ks, strides, dil, out_pad, strict=True):
            total = s * (m - 1) + op + (k - 1) * d + 1 - o
            half = total // 2
            pads.append((half, total - half) if auto == "SAME_UPPER" else (total - half, half))
    low.emit(n, "Conv2DTransposeD", list(n.input), [n.output[0]],
             input_size=list(low.t(n.output[0]).shape), strides=[1, 1, *strides],
             pads=_flat(pads), dilations=[1, 1, *dil], groups=a.get("group", 1),
             data_format="NCHW", output_padding=[0, 0, *out_pad])


# pooling ---------------------------------------------------------------------------------------
def pool_nd(low: Any, n: onnx.NodeProto, a: dict, op: str) -> None:
    """ONNX MaxPool / AveragePool of 1 to 3 spatial axes as MaxPool3D / AvgPool3D."""
    ks = list(a["kernel_shape"])
    nd = len(ks)
    if nd > 3:
        raise _refuse(f"{n.op_type}{nd}D", n)
    strides, dil = list(a.get("strides", [1] * nd)), list(a.get("dilations", [1] * nd))
    pads = _onnx_pads(low, n, a, ks, strides, dil)
    if op == "AvgPool3D" and any(d != 1 for d in dil):
        raise _refuse("AveragePool with dilations", n)
    lead = 3 - nd
    x5 = _to_rank(low, n, n.input[0], 5)
    out = n.output[0]
    y_shape = low.t(out).shape
    y5 = out if lead == 0 else low.new_tensor(out, (*y_shape[:2], *(1,) * lead, *y_shape[2:]))
    attrs: dict[str, Any] = dict(
        ksize=[1, 1, *(1,) * lead, *ks], strides=[1, 1, *(1,) * lead, *strides],
        pads=[0, 0] * lead + _flat(pads), ceil_mode=bool(a.get("ceil_mode", 0)),
        data_format="NCDHW")
    if op == "MaxPool3D":
        attrs["dilation"] = [1, 1, *(1,) * lead, *dil]
    else:
        attrs["count_include_pad"] = bool(a.get("count_include_pad", 0))
    low.emit(n, op, [x5], [y5], **attrs)
    if y5 != out:
        low.emit(n, "Reshape", [y5], [out], shape=list(y_shape))


# normalisation, activations --------------------------------------------------------------------
def batch_norm_3d(low: Any, n: onnx.NodeProto, a: dict) -> None:
    low.emit(n, "BatchNorm3D", list(n.input[:5]), [n.output[0]],
             epsilon=a.get("epsilon", 1e-5), data_format="NCDHW")


def _instance_norm(low: Any, n: onnx.NodeProto, a: dict) -> None:
    low.emit(n, "InstanceNorm", list(n.input), [n.output[0]], epsilon=a.get("epsilon", 1e-5),
             data_format="NCHW" if len(low.t(n.input[0]).shape) == 4 else "ND")


def _log_softmax(low: Any, n: onnx.NodeProto, a: dict) -> None:
    x = low.t(n.input[0])
    rank = max(len(x.shape), 1)
    axis = a.get("axis", -1 if low.opset >= 13 else 1) % rank
    if low.opset >= 13 or axis == rank - 1:
        low.emit(n, "LogSoftmaxV2", [n.input[0]], [n.output[0]], axes=[axis])
        return
    flat = (int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:])))
    r2 = low._reshaped(n, n.input[0], flat)
    s2 = low.new_tensor(n.output[0], flat)
    low.emit(n, "LogSoftmaxV2", [r2], [s2], axes=[1])
    low.emit(n, "Reshape", [s2], [n.output[0]], shape=list(x.shape))


def _same(op: str, **fixed: Any) -> Handler:
    def handler(low: Any, n: onnx.NodeProto, a: dict) -> None:
        attrs = {k: a.get(k, v) for k, v in fixed.items()}
        low.emit(n, op, [n.input[0]], [n.output[0]], **attrs)
    return handler


# slicing ---------------------------------------------------------------------------------------
def _const_list(low: Any, n: onnx.NodeProto, k: int, what: str) -> list[int] | None:
    if len(n.input) <= k or not n.input[k]:
        return None
    value = low.const(n.input[k])
    if value is None:
        raise _refuse(f"{n.op_type} with computed {what}", n)
    return [int(v) for v in value.reshape(-1)]


def _slice(low: Any, n: onnx.NodeProto, a: dict) -> None:
    rank = len(low.t(n.input[0]).shape)
    if low.opset < 10:
        starts, ends, axes, steps = list(a["starts"]), list(a["ends"]), a.get("axes"), None
    else:
        starts = _const_list(low, n, 1, "starts") or []
        ends = _const_list(low, n, 2, "ends") or []
        axes, steps = _const_list(low, n, 3, "axes"), _const_list(low, n, 4, "steps")
    axes = [x % rank for x in (axes if axes is not None else range(len(starts)))]
    steps = steps or [1] * len(axes)
    top = max(axes, default=-1) + 1
    begin, end, stride = [0] * top, [0] * top, [1] * top
    mask = (1 << top) - 1
    for ax, b, e, s in zip(axes, starts, ends, steps, strict=True):
        begin[ax], end[ax], stride[ax] = b, e, s
        mask &= ~(1 << ax)
    low.emit(n, "StridedSliceD", [n.input[0]], [n.output[0]], begin=begin, end=end,
             strides=stride, begin_mask=mask, end_mask=mask)


def _tile(low: Any, n: onnx.NodeProto, a: dict) -> None:
    reps = _const_list(low, n, 1, "repeats")
    low.emit(n, "TileD", [n.input[0]], [n.output[0]], multiples=reps)


def pad_v3(low: Any, n: onnx.NodeProto, a: dict, mode: str, pads: list[int]) -> None:
    """ONNX Pad in reflect / edge mode (``pads`` in ONNX order: all begins, then ends)."""
    rank = len(pads) // 2
    pairs = [(int(pads[i]), int(pads[i + rank])) for i in range(rank)]
    low.emit(n, "PadV3D", [n.input[0]], [n.output[0]], paddings=_flat(pairs), mode=mode,
             paddings_contiguous=True)


def split_v(low: Any, n: onnx.NodeProto, a: dict) -> None:
    axis = a.get("axis", 0)
    sizes = [low.t(o).shape[axis] for o in n.output]
    low.emit(n, "SplitVD", [n.input[0]], list(n.output), size_splits=sizes, split_dim=axis,
             num_split=len(sizes))


def expand(low: Any, n: onnx.NodeProto, a: dict) -> None:
    low.emit(n, "Expand", [n.input[0], n.input[1]], [n.output[0]],
             shape=list(low.t(n.output[0]).shape))


# selection and resizing ------------------------------------------------------------------------
def _argmax(low: Any, n: onnx.NodeProto, a: dict) -> None:
    """ONNX ArgMax as ArgMaxV2 (int64), then a Reshape for ``keepdims``."""
    if a.get("select_last_index", 0):
        raise _refuse("ArgMax with select_last_index", n)
    x, out = low.t(n.input[0]), n.output[0]
    axis = a.get("axis", 0) % max(len(x.shape), 1)
    flat = tuple(d for k, d in enumerate(x.shape) if k != axis)
    y = out if not a.get("keepdims", 1) else low.new_tensor(out, flat, "int64")
    low.emit(n, "ArgMaxV2", [n.input[0]], [y], dimension=axis, dtype=9)
    if y != out:
        low.emit(n, "Reshape", [y], [out], shape=list(low.t(out).shape))


def _topk(low: Any, n: onnx.NodeProto, a: dict) -> None:
    """ONNX TopK as TopK (int32 indices), then a Cast of the indices to int64."""
    given = [a["k"]] if low.opset < 10 else _const_list(low, n, 1, "k")
    if not given:
        raise _refuse("TopK without k", n)
    k = int(given[0])
    values, indices = n.output[0], n.output[1]
    idx32 = low.new_tensor(indices, low.t(indices).shape, "int32")
    low.emit(n, "TopK", [n.input[0]], [values, idx32], k=k, dim=a.get("axis", -1),
             largest=bool(a.get("largest", 1)), sorted=bool(a.get("sorted", 1)))
    low.emit(n, "Cast", [idx32], [indices], dst_type=9)


_RESIZE_MODES = {
    ("linear", "asymmetric"): {},
    ("linear", "align_corners"): {"align_corners": True},
    ("linear", "half_pixel"): {"half_pixel_centers": True},
    ("nearest", "asymmetric", "floor"): {},
    ("nearest", "align_corners", "round_prefer_ceil"): {"align_corners": True},
    ("nearest", "tf_half_pixel_for_nn", "floor"): {"half_pixel_centers": True},
}
"""ONNX Resize modes that have TensorFlow's (the Resize ops') coordinate rules."""


def _resize(low: Any, n: onnx.NodeProto, a: dict) -> None:
    """ONNX Resize / Upsample of H and W of an NCHW tensor as ResizeBilinearV2 (then a Cast
    back for non-float32) or ResizeNearestNeighborV2."""
    x, out = low.t(n.input[0]), n.output[0]
    y = low.t(out)
    mode = _text(a.get("mode", "nearest"))
    default = "asymmetric" if n.op_type == "Upsample" or low.opset < 11 else "half_pixel"
    coord = _text(a.get("coordinate_transformation_mode", default))
    if coord == "pytorch_half_pixel" and min(y.shape[2:]) > 1:
        coord = "half_pixel"
    key = (mode, coord) if mode == "linear" else (
        mode, coord, _text(a.get("nearest_mode", "floor" if low.opset < 11
                                 else "round_prefer_floor")))
    if len(x.shape) != 4 or x.shape[:2] != y.shape[:2] or key not in _RESIZE_MODES:
        raise _refuse(f"Resize {'/'.join(key)} of shape {x.shape} to {y.shape}", n)
    flags = dict(_RESIZE_MODES[key], size=list(y.shape[2:]))
    if mode == "nearest":
        low.emit(n, "ResizeNearestNeighborV2", [n.input[0]], [out], **flags)
        return
    y32 = out if y.dtype == "float32" else low.new_tensor(out, y.shape, "float32")
    low.emit(n, "ResizeBilinearV2", [n.input[0]], [y32], **flags)
    if y32 != out:
        low.emit(n, "Cast", [y32], [out], dst_type=ACL_DTYPES[y.dtype])


REFUSED: dict[str, str] = {
    "StringNormalizer": "string tensors (ACL_STRING) are not emulated",
    "Gradient": "a training op (domain ai.onnx.preview.training); models are converted for "
                "inference",
}
"""Why an ONNX op type with no handler is refused, where there is more to say than its name."""


def refusal(node: onnx.NodeProto) -> str:
    """The op type of a refused node, with the reason from ``REFUSED`` when there is one."""
    reason = REFUSED.get(node.op_type)
    return f"{node.op_type}: {reason}" if reason else node.op_type


HANDLERS: dict[str, Handler] = {
    "ConvTranspose": conv_transpose,
    "InstanceNormalization": _instance_norm,
    "LogSoftmax": _log_softmax,
    "Softplus": _same("Softplus"),
    "Sign": _same("Sign"),
    "Shrink": _same("Shrink", lambd=0.5, bias=0.0),
    "Slice": _slice,
    "Tile": _tile,
    "ArgMax": _argmax,
    "TopK": _topk,
    "Resize": _resize,
    "Upsample": _resize,
}
"""ONNX op type -> handler, for the op types :mod:`.lowering` has no method for."""
