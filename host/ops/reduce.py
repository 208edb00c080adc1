"""Reductions (AI Vector): ReduceSum, ReduceMean, ReduceMax.

Axes come from the ``axes`` input (it must be const: ``aclSetTensorConst``) or the ``axes``
attribute (the ``...D`` form); empty axes reduce everything (TensorFlow). ``keep_dims``
defaults to false. Rows of axis 0 are tiled (and linear) when axis 0 is not reduced.
bfloat16 reduces in float32 (the bits widened) and rounds the result to nearest even once.
"""

from __future__ import annotations

from typing import Any

from npuemu.host.ops.registry import NUMERIC, Body, OpDef, Spec, bad, normalize_axis, register
from npuemu.host.ops.types import BF16


def _axes(ins: list[Spec], attrs: dict[str, Any]) -> tuple[int, ...]:
    rank = len(ins[0].shape)
    if len(ins) > 1:
        data = ins[1].const_array()
        if data is None:
            raise bad("the axes input of a reduction must be const (aclSetTensorConst)")
        values = [int(v) for v in data.reshape(-1)]
    else:
        values = [int(v) for v in attrs.get("axes") or ()]
    if not values:
        return tuple(range(rank))
    return tuple(sorted({normalize_axis(v, rank) for v in values}))


def _infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    axes = _axes(ins, attrs)
    x = ins[0].shape
    if attrs["keep_dims"]:
        shape = tuple(1 if a in axes else d for a, d in enumerate(x))
    else:
        shape = tuple(d for a, d in enumerate(x) if a not in axes)
    return [Spec(ins[0].dtype, shape, ins[0].format)]


def _source(fn: str):
    def source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
        axes = _axes(ins, attrs)
        kd = bool(attrs["keep_dims"])
        split = bool(outs[0].shape) and 0 not in axes
        x, dst = ("x0[s]", "y0[s]") if split else ("x0", "y0[...]")
        expr = f"np.{fn}({x}, axis={axes}, keepdims={kd})"
        if ins[0].dtype == BF16:
            expr = f"_bf.from_float32(np.{fn}(_bf.to_float32({x}), axis={axes}, keepdims={kd}))"
        return Body(f"{dst} = {expr}", split=split)
    return source


def _linear(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> list:
    return [(0, 0), (len(ins), 0)] if outs[0].shape and 0 not in _axes(ins, attrs) else []


for _name, _fn in (("ReduceSum", "sum"), ("ReduceMean", "mean"), ("ReduceMax", "max")):
    register(OpDef(_name, "aivector", ("x", "axes"), ("y",), NUMERIC | {BF16}, _infer,
                   _source(_fn),
                   attrs={"axes": None, "keep_dims": False}, optional=1, linear=_linear))
