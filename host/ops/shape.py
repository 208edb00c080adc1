"""Data-movement ops (AI CPU, one block): Transpose, Reshape, Concat, Split, Gather, Pad.

Index-like inputs (``perm``, ``shape``, ``paddings``) must be const
(``aclSetTensorConst``) or given as the attribute of the same name (the ``...D`` form).
Concat takes ``fused_relu`` (our attribute, set by ATC when a Relu is its only reader,
``host/models/fold.py``): ``max(., 0)`` on y in place after the copy.
Reshape also takes its shape from the output descriptor, and accepts one -1. Concat
(``concat_dim``, default 0) takes any number of inputs; Split (``split_dim``, ``num_split``)
gives ``num_split`` equal outputs. Gather takes ``axis`` (default 0); an index out of range
fails the task (AI CPU exception, 507018). Pad pads with ``constant_values`` (default 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from npuemu.host.ops.elementwise import RELU
from npuemu.host.ops.registry import ALL, MOVES, Body, OpDef, Spec, bad, normalize_axis, register


def _ints(ins: list[Spec], i: int, attrs: dict[str, Any], name: str) -> list | None:
    if len(ins) > i:
        data = ins[i].const_array()
        if data is None:
            raise bad(f"input {name} must be const (aclSetTensorConst)")
        return data.tolist()
    value = attrs.get(name)
    return None if value is None else [list(v) if isinstance(v, tuple | list) else int(v)
                                       for v in value]


def _single(tile: str) -> Body:
    return Body(tile, split=False)


# Transpose -----------------------------------------------------------------------------------
def _perm(ins: list[Spec], attrs: dict[str, Any]) -> tuple[int, ...]:
    perm = _ints(ins, 1, attrs, "perm")
    rank = len(ins[0].shape)
    if perm is None:
        perm = list(reversed(range(rank)))
    if sorted(normalize_axis(p, rank) for p in perm) != list(range(rank)):
        raise bad(f"perm {perm} is not a permutation of rank {rank}")
    return tuple(normalize_axis(p, rank) for p in perm)


register(OpDef(
    "Transpose", "aicpu", ("x", "perm"), ("y",), MOVES,
    lambda i, a, h: [Spec(i[0].dtype, tuple(i[0].shape[p] for p in _perm(i, a)), i[0].format)],
    lambda i, o, a: _single(f"y0[...] = np.transpose(x0, {_perm(i, a)})"),
    attrs={"perm": None}, optional=1))


# Reshape -------------------------------------------------------------------------------------
def _reshape_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    shape = _ints(ins, 1, attrs, "shape")
    if shape is None:
        if not hint or any(d < 0 for d in hint[0].shape):
            raise bad("Reshape needs a const shape, attribute shape or an output descriptor")
        shape = list(hint[0].shape)
    size = ins[0].size
    if shape.count(-1) > 1:
        raise bad(f"Reshape shape {shape} has more than one -1")
    if -1 in shape:
        rest = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if rest == 0 or size % rest:
            raise bad(f"cannot reshape {ins[0].shape} to {shape}")
        shape[shape.index(-1)] = size // rest
    if int(np.prod(shape, dtype=np.int64)) != size:
        raise bad(f"cannot reshape {ins[0].shape} to {shape}")
    return [Spec(ins[0].dtype, tuple(int(d) for d in shape), ins[0].format)]


register(OpDef("Reshape", "aicpu", ("x", "shape"), ("y",), MOVES, _reshape_infer,
               lambda i, o, a: _single("y0[...] = x0.reshape(y0.shape)"),
               attrs={"shape": None}, optional=1))


# Concat / Split ------------------------------------------------------------------------------
def _concat_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    rank = len(ins[0].shape)
    axis = normalize_axis(int(attrs["concat_dim"]), rank, "concat_dim")
    for s in ins[1:]:
        if s.dtype != ins[0].dtype or len(s.shape) != rank or any(
                a != b for k, (a, b) in enumerate(zip(s.shape, ins[0].shape, strict=True))
                if k != axis):
            raise bad(f"Concat inputs {[x.shape for x in ins]} do not match along {axis}")
    shape = list(ins[0].shape)
    shape[axis] = sum(s.shape[axis] for s in ins)
    return [Spec(ins[0].dtype, tuple(shape), ins[0].format)]


def _concat_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    axis = normalize_axis(int(attrs["concat_dim"]), len(ins[0].shape))
    xs = ", ".join(f"x{i}" for i in range(len(ins)))
    tile = f"np.concatenate(({xs},), axis={axis}, out=y0)"
    if not attrs.get("fused_relu"):
        return _single(tile)
    return Body(tile + "\n_relu(y0, y0)", split=False, helpers=RELU)


register(OpDef("Concat", "aicpu", ("x",), ("y",), MOVES, _concat_infer, _concat_source,
               attrs={"concat_dim": 0, "fused_relu": False}, variadic_inputs=True))


MAX_SPLIT = 1 << 16
"""Most outputs of one Split (a larger num_split, e.g. from a crafted model file, would
otherwise build that many output descriptions before anything refuses it)."""


def _split_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    x = ins[0]
    axis = normalize_axis(int(attrs["split_dim"]), len(x.shape), "split_dim")
    n = int(attrs["num_split"] or len(hint) or 0)
    if not 1 <= n <= MAX_SPLIT or x.shape[axis] % n:
        raise bad(f"cannot split {x.shape} along {axis} into {n}")
    shape = list(x.shape)
    shape[axis] //= n
    return [Spec(x.dtype, tuple(shape), x.format) for _ in range(n)]


def _split_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    axis = normalize_axis(int(attrs["split_dim"]), len(ins[0].shape))
    lines = [f"parts_ = np.split(x0, {len(outs)}, axis={axis})"]
    lines += [f"y{j}[...] = parts_[{j}]" for j in range(len(outs))]
    return _single("\n".join(lines))


register(OpDef("Split", "aicpu", ("x",), ("y",), MOVES, _split_infer, _split_source,
               attrs={"split_dim": 0, "num_split": 0}, variadic_outputs=True))


# Gather / Pad --------------------------------------------------------------------------------
def _gather_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    x, idx = ins
    if idx.dtype not in ("int32", "int64"):
        raise bad(f"Gather indices must be int32/int64, not {idx.dtype}")
    axis = normalize_axis(int(attrs["axis"]), len(x.shape))
    return [Spec(x.dtype, (*x.shape[:axis], *idx.shape, *x.shape[axis + 1:]), x.format)]


register(OpDef(
    "Gather", "aicpu", ("x", "indices"), ("y",), MOVES, _gather_infer,
    lambda i, o, a: _single(
        f"y0[...] = np.take(x0, x1, axis={normalize_axis(int(a['axis']), len(i[0].shape))})"),
    attrs={"axis": 0}))


def _paddings(ins: list[Spec], attrs: dict[str, Any]) -> tuple[tuple[int, int], ...]:
    pads = _ints(ins, 1, attrs, "paddings")
    rank = len(ins[0].shape)
    try:
        out = tuple((int(lo), int(hi)) for lo, hi in (pads or ()))
    except (TypeError, ValueError) as err:
        raise bad(f"paddings {pads} must be [[lo, hi], ...]") from err
    if len(out) != rank or min((v for p in out for v in p), default=0) < 0:
        raise bad(f"paddings {pads} do not fit rank {rank}")
    return out


def _pad_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    pads = _paddings(ins, attrs)
    shape = tuple(d + lo + hi for d, (lo, hi) in zip(ins[0].shape, pads, strict=True))
    return [Spec(ins[0].dtype, shape, ins[0].format)]


def _pad_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    """x copied into the middle of y, and only the border slabs filled (np.pad would build
    the padded array apart and copy it once more)."""
    pads = _paddings(ins, attrs)
    inner = ", ".join(f"{lo}:{lo + d}" for d, (lo, _hi) in zip(ins[0].shape, pads, strict=True))
    lines = [f"y0[{inner}] = x0"] if ins[0].shape else ["y0[...] = x0"]
    for axis, (lo, hi) in enumerate(pads):
        head = ":, " * axis
        if lo:
            lines.append(f"y0[{head}:{lo}] = value_")
        if hi:
            lines.append(f"y0[{head}{lo + ins[0].shape[axis]}:] = value_")
    return Body("\n".join(lines), f"value_ = y0.dtype.type({attrs['constant_values']!r})\n",
                split=False)


register(OpDef("Pad", "aicpu", ("x", "paddings"), ("y",), ALL, _pad_infer, _pad_source,
               attrs={"paddings": None, "constant_values": 0}, optional=1))
