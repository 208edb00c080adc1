"""Slicing, tiling and padding ops (AI CPU, one block): StridedSliceD, SplitVD, TileD,
PadV3D and Expand (the attribute ``...D`` forms the ONNX parser produces for constant
indices).

``StridedSliceD`` takes ``begin``, ``end`` and ``strides`` (one value per leading axis,
numpy slice rules: negative values count from the end, out-of-range ends are clamped) and
the masks ``begin_mask`` / ``end_mask`` (bit i set: axis i starts at its first / ends at its
last element); ``ellipsis_mask``, ``new_axis_mask`` and ``shrink_axis_mask`` must be 0
(100000 otherwise: not emulated). ``SplitVD`` splits along ``split_dim`` into
``size_splits`` (one -1 allowed) with ``num_split`` outputs. ``TileD`` repeats by
``multiples``. ``PadV3D`` pads by ``paddings`` (flat, ``[lo0, hi0, lo1, hi1, ...]`` with
``paddings_contiguous`` true, else all lows then all highs) in ``mode`` ``constant`` (with
``constant_values``), ``reflect`` or ``edge``. ``Expand`` broadcasts ``x`` to the shape
given by its ``shape`` input; that input may be computed at run time, so the output shape
is fixed when the op is built (attribute ``shape``, as ATC fixes static shapes) and the
kernel checks the run-time shape broadcasts to it (the task fails, 507018, otherwise).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from npuemu.host.ops.registry import (
    ALL,
    MOVES,
    Body,
    OpDef,
    Spec,
    bad,
    broadcast,
    normalize_axis,
    register,
)


def _single(tile: str) -> Body:
    return Body(tile, split=False)


def _ints(value: object, what: str) -> list[int]:
    try:
        return [int(v) for v in value]  # type: ignore[attr-defined]
    except (TypeError, ValueError) as err:
        raise bad(f"{what} {value!r:.80} must be a list of integers") from err


# StridedSliceD -------------------------------------------------------------------------------
def _slices(ins: list[Spec], attrs: dict[str, Any]) -> tuple[slice, ...]:
    x = ins[0].shape
    begin, end = _ints(attrs["begin"], "begin"), _ints(attrs["end"], "end")
    strides = _ints(attrs["strides"] or [1] * len(begin), "strides")
    if not len(begin) == len(end) == len(strides) <= len(x):
        raise bad(f"StridedSliceD begin {begin} end {end} strides {strides} do not fit {x}")
    for mask in ("ellipsis_mask", "new_axis_mask", "shrink_axis_mask"):
        if int(attrs[mask]):
            raise bad(f"StridedSliceD {mask} is not emulated")
    if 0 in strides:
        raise bad("StridedSliceD strides must not be 0")
    bm, em = int(attrs["begin_mask"]), int(attrs["end_mask"])
    out = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides, strict=True)):
        out.append(slice(None if bm >> i & 1 else b, None if em >> i & 1 else e, s))
    return tuple(out)


def _ss_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    shape = np.empty(ins[0].shape, dtype=np.bool_)[_slices(ins, attrs)].shape
    return [Spec(ins[0].dtype, tuple(shape), ins[0].format)]


register(OpDef(
    "StridedSliceD", "aicpu", ("x",), ("y",), MOVES, _ss_infer,
    lambda i, o, a: _single(f"y0[...] = x0[{_slices(i, a)!r}]"),
    attrs={"begin": [], "end": [], "strides": None, "begin_mask": 0, "end_mask": 0,
           "ellipsis_mask": 0, "new_axis_mask": 0, "shrink_axis_mask": 0}))


# SplitVD -------------------------------------------------------------------------------------
def _sizes(ins: list[Spec], attrs: dict[str, Any]) -> tuple[int, list[int]]:
    x = ins[0].shape
    axis = normalize_axis(int(attrs["split_dim"]), len(x), "split_dim")
    sizes = _ints(attrs["size_splits"], "size_splits")
    if int(attrs["num_split"]) not in (0, len(sizes)) or sizes.count(-1) > 1:
        raise bad(f"SplitVD size_splits {sizes} and num_split {attrs['num_split']}")
    if -1 in sizes:
        sizes[sizes.index(-1)] = x[axis] - (sum(sizes) + 1)
    if min(sizes, default=-1) < 0 or sum(sizes) != x[axis]:
        raise bad(f"SplitVD size_splits {attrs['size_splits']} do not add up to {x[axis]}")
    return axis, sizes


def _splitv_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    axis, sizes = _sizes(ins, attrs)
    x = ins[0]
    return [Spec(x.dtype, (*x.shape[:axis], n, *x.shape[axis + 1:]), x.format) for n in sizes]


def _splitv_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    axis, sizes = _sizes(ins, attrs)
    cuts = list(np.cumsum(sizes)[:-1])
    lines = [f"parts_ = np.split(x0, {[int(c) for c in cuts]}, axis={axis})"]
    lines += [f"y{j}[...] = parts_[{j}]" for j in range(len(outs))]
    return _single("\n".join(lines))


register(OpDef("SplitVD", "aicpu", ("x",), ("y",), MOVES, _splitv_infer, _splitv_source,
               attrs={"size_splits": [], "split_dim": 0, "num_split": 0},
               variadic_outputs=True))


# TileD ---------------------------------------------------------------------------------------
def _multiples(ins: list[Spec], attrs: dict[str, Any]) -> list[int]:
    reps = _ints(attrs["multiples"], "multiples")
    if len(reps) < len(ins[0].shape) or min(reps, default=1) < 0:
        raise bad(f"TileD multiples {reps} do not fit {ins[0].shape}")
    return reps


def _tile_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    reps = _multiples(ins, attrs)
    x = (1,) * (len(reps) - len(ins[0].shape)) + ins[0].shape
    return [Spec(ins[0].dtype, tuple(d * r for d, r in zip(x, reps, strict=True)),
                 ins[0].format)]


register(OpDef("TileD", "aicpu", ("x",), ("y",), MOVES, _tile_infer,
               lambda i, o, a: _single(f"y0[...] = np.tile(x0, {_multiples(i, a)})"),
               attrs={"multiples": []}))


# PadV3D --------------------------------------------------------------------------------------
_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge"}


def _pairs(ins: list[Spec], attrs: dict[str, Any]) -> tuple[tuple[int, int], ...]:
    flat, rank = _ints(attrs["paddings"], "paddings"), len(ins[0].shape)
    if len(flat) != 2 * rank or min(flat, default=0) < 0:
        raise bad(f"PadV3D paddings {flat} do not fit rank {rank} (or are negative)")
    if attrs["paddings_contiguous"]:
        return tuple((flat[2 * i], flat[2 * i + 1]) for i in range(rank))
    return tuple((flat[i], flat[i + rank]) for i in range(rank))


def _pad_mode(ins: list[Spec], attrs: dict[str, Any]) -> str:
    mode = attrs["mode"]
    if mode not in _MODES:
        raise bad(f"PadV3D mode {mode!r} is not one of {sorted(_MODES)}")
    if mode == "reflect" and any(max(p) >= d for p, d in zip(_pairs(ins, attrs),
                                                              ins[0].shape, strict=True)):
        raise bad(f"PadV3D reflect paddings must be smaller than the dims {ins[0].shape}")
    return str(mode)


def _padv3_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    _pad_mode(ins, attrs)
    pairs = _pairs(ins, attrs)
    shape = tuple(d + lo + hi for d, (lo, hi) in zip(ins[0].shape, pairs, strict=True))
    return [Spec(ins[0].dtype, shape, ins[0].format)]


def _padv3_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    mode, pairs = _pad_mode(ins, attrs), _pairs(ins, attrs)
    extra = f", constant_values={attrs['constant_values']!r}" if mode == "constant" else ""
    return _single(f"y0[...] = np.pad(x0, {pairs}, mode={mode!r}{extra})")


register(OpDef("PadV3D", "aicpu", ("x",), ("y",), ALL, _padv3_infer, _padv3_source,
               attrs={"paddings": [], "constant_values": 0, "mode": "constant",
                      "paddings_contiguous": True}))


# Expand --------------------------------------------------------------------------------------
def _expand_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    given = ins[1].const_array() if len(ins) > 1 else None
    if given is not None:
        target = tuple(int(d) for d in given.reshape(-1))
    elif attrs.get("shape") is not None:
        target = tuple(_ints(attrs["shape"], "shape"))
    elif hint:
        target = hint[0].shape
    else:
        raise bad("Expand needs a const shape, attribute shape or an output descriptor")
    if len(ins) > 1 and ins[1].dtype not in ("int32", "int64"):
        raise bad(f"Expand shape must be int32/int64, not {ins[1].dtype}")
    return [Spec(ins[0].dtype, broadcast([ins[0].shape, target]), ins[0].format)]


def _expand_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    tile = "y0[...] = np.broadcast_to(x0, y0.shape)"
    if len(ins) > 1:
        tile = ("got_ = np.broadcast_shapes(x0.shape, tuple(int(d) for d in x1))\n"
                "if got_ != y0.shape:\n"
                "    raise ValueError(f'Expand: shape input gives {got_}, built for "
                "{y0.shape}')\n" + tile)
    return _single(tile)


register(OpDef("Expand", "aicpu", ("x", "shape"), ("y",), MOVES, _expand_infer, _expand_source,
               attrs={"shape": None}, optional=1))
