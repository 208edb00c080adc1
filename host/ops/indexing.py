"""Index-selecting ops (AI CPU, one block) used by the single-op samples: ArgMaxV2, TopK,
Slice and SliceD.

``ArgMaxV2(x, dimension)`` gives the index of the first maximum along ``dimension`` (a
scalar input that must be const, ``aclSetTensorConst``, or, with the input absent, the
attribute of that name: the ``ArgMaxD`` form), that axis removed, as ``dtype``
(attribute, aclDataType: 3 int32 or 9 int64, the default). ``TopK(x, k)`` gives ``values``
and int32 ``indices`` of the ``k`` largest (``largest`` true, the default) or smallest
elements along ``dim`` (default -1), ``k`` const (or the attribute ``k`` with the input
absent); equal values keep their order (the lower
index first), and the result is sorted whatever ``sorted`` says (the real op leaves the
order unspecified when it is false). ``Slice(x, offsets, size)`` (both const) and
``SliceD`` (attributes ``offsets``, ``size``) take ``size[i]`` elements from ``offsets[i]``
on each axis, ``-1`` meaning to the end.
"""

from __future__ import annotations

from typing import Any

from npuemu.host.ops import registry
from npuemu.host.ops import types as T
from npuemu.host.ops.registry import NUMERIC, Body, OpDef, Spec, bad, normalize_axis, register


def _single(tile: str) -> Body:
    return Body(tile, split=False)


def _const_ints(ins: list[Spec], i: int, what: str) -> list[int]:
    data = ins[i].const_array()
    if data is None:
        raise bad(f"input {what} must be const (aclSetTensorConst)")
    return [int(v) for v in data.reshape(-1)]


# ArgMaxV2 --------------------------------------------------------------------------------------
def _argmax_axis(ins: list[Spec], attrs: dict[str, Any]) -> int:
    values = _const_ints(ins, 1, "dimension") if len(ins) > 1 else [int(attrs["dimension"])]
    if len(values) != 1:
        raise bad(f"ArgMaxV2 dimension must hold one value, got {values}")
    return normalize_axis(values[0], len(ins[0].shape), "dimension")


def _argmax_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    axis = _argmax_axis(ins, attrs)
    dtype = int(attrs["dtype"])
    if dtype not in (T.ACL_INT32, T.ACL_INT64):
        raise bad(f"ArgMaxV2 dtype {dtype} is not int32 (3) or int64 (9)",
                  T.ACL_ERROR_UNSUPPORTED_DATA_TYPE)
    shape = tuple(d for k, d in enumerate(ins[0].shape) if k != axis)
    return [Spec(T.numpy_dtype(dtype), shape, ins[0].format)]


register(OpDef("ArgMaxV2", "aicpu", ("x", "dimension"), ("y",), NUMERIC, _argmax_infer,
               lambda i, o, a: _single(f"y0[...] = np.argmax(x0, axis={_argmax_axis(i, a)})"),
               attrs={"dtype": T.ACL_INT64, "dimension": 0}, optional=1))


# TopK ------------------------------------------------------------------------------------------
def _topk_params(ins: list[Spec], attrs: dict[str, Any]) -> tuple[int, int]:
    x = ins[0].shape
    axis = normalize_axis(int(attrs["dim"]), len(x), "dim")
    (k,) = (_const_ints(ins, 1, "k") if len(ins) > 1 else [int(attrs["k"])])[:1] or [-1]
    if not 0 <= k <= (x[axis] if x else 1):
        raise bad(f"TopK k {k} outside [0, {x[axis] if x else 1}]")
    return axis, k


def _topk_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    axis, k = _topk_params(ins, attrs)
    shape = tuple(k if a == axis else d for a, d in enumerate(ins[0].shape))
    return [Spec(ins[0].dtype, shape, ins[0].format), Spec("int32", shape, ins[0].format)]


def _topk_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    axis, k = _topk_params(ins, attrs)
    n = ins[0].shape[axis]
    if attrs["largest"]:  # descending, equal values in index order: flip, stable sort, flip
        order = (f"o_ = np.flip(np.argsort(np.flip(x0, {axis}), axis={axis}, kind='stable'), "
                 f"{axis})\no_ = {n - 1} - o_\n")
    else:
        order = f"o_ = np.argsort(x0, axis={axis}, kind='stable')\n"
    tile = (order + f"o_ = np.take(o_, np.arange({k}), axis={axis})\n"
            f"y0[...] = np.take_along_axis(x0, o_, axis={axis})\ny1[...] = o_\n")
    return _single(tile)


register(OpDef("TopK", "aicpu", ("x", "k"), ("values", "indices"), NUMERIC, _topk_infer,
               _topk_source, attrs={"sorted": True, "largest": True, "dim": -1, "k": 0},
               optional=1))


# Slice / SliceD --------------------------------------------------------------------------------
def _slices(ins: list[Spec], attrs: dict[str, Any]) -> tuple[slice, ...]:
    if len(ins) > 1:
        offsets, size = _const_ints(ins, 1, "offsets"), _const_ints(ins, 2, "size")
    else:
        offsets, size = [int(v) for v in attrs["offsets"]], [int(v) for v in attrs["size"]]
    x = ins[0].shape
    if len(offsets) != len(x) or len(size) != len(x):
        raise bad(f"Slice offsets {offsets} and size {size} need {len(x)} values each")
    out = []
    for o, s, d in zip(offsets, size, x, strict=True):
        end = d if s == -1 else o + s
        if not 0 <= o <= end <= d or s < -1:
            raise bad(f"Slice offsets {offsets} size {size} do not fit {x}")
        out.append(slice(o, end))
    return tuple(out)


def _slice_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    shape = tuple(s.stop - s.start for s in _slices(ins, attrs))
    return [Spec(ins[0].dtype, shape, ins[0].format)]


def _slice_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    return _single(f"y0[...] = x0[{_slices(ins, attrs)!r}]")


register(OpDef("Slice", "aicpu", ("x", "offsets", "size"), ("y",), registry.MOVES, _slice_infer,
               _slice_source))
register(OpDef("SliceD", "aicpu", ("x",), ("y",), registry.MOVES, _slice_infer, _slice_source,
               attrs={"offsets": [], "size": []}))
