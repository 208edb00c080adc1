"""Normalisation ops (AI Vector): BatchNorm (inference), LayerNorm, SoftmaxV2.

BatchNorm: ``y = (x - mean) / sqrt(variance + epsilon) * scale + offset`` over the channel
axis (1 for NCHW/ND, last for NHWC); only inference (``is_training`` true is 100000); one
output (the real op's four statistics outputs are not produced). The kernel computes the
per-channel factor and shift once per launch (float64, stored in x's dtype) and makes one
multiply and one add pass over x; ``fused_relu`` (our attribute, set by ATC when a Relu is
the only reader, ``host/models/fold.py``) adds ``max(., 0)`` on the tile in place.
LayerNorm normalises over the axes from ``begin_norm_axis`` (TBE default 0) and returns
only ``y``. SoftmaxV2 takes ``axes`` (default ``[-1]``). Each tiles rows of axis 0 when
axis 0 is not normalised.
"""

from __future__ import annotations

from typing import Any

from npuemu.host.ops import types as T
from npuemu.host.ops.elementwise import RELU
from npuemu.host.ops.registry import (
    FLOATS,
    Body,
    OpDef,
    Spec,
    bad,
    normalize_axis,
    register,
)


def _bn_axis(x: Spec, attrs: dict[str, Any]) -> int:
    fmt = attrs.get("data_format") or ("NHWC" if x.format == T.ACL_FORMAT_NHWC else "NCHW")
    return len(x.shape) - 1 if fmt == "NHWC" else 1


def _bn_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    x = ins[0]
    if attrs.get("is_training"):
        raise bad("BatchNorm: only inference (is_training=false) is supported")
    if len(x.shape) < 2:
        raise bad(f"BatchNorm takes rank >= 2, got {x.shape}")
    c = x.shape[_bn_axis(x, attrs)]
    for i, s in enumerate(ins[1:], 1):
        if s.shape != (c,):
            raise bad(f"BatchNorm input {i} shape {s.shape} is not ({c},)")
    return [Spec(x.dtype, x.shape, x.format)]


def _bn_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    axis = _bn_axis(ins[0], attrs)
    rank = len(ins[0].shape)
    shape = tuple(-1 if a == axis else 1 for a in range(rank))
    prep = (f"k_ = x1 / np.sqrt(x4.astype(np.float64) + {float(attrs['epsilon'])!r})\n"
            f"b_ = (x2 - x3 * k_).astype(x0.dtype).reshape({shape})\n"
            f"k_ = k_.astype(x0.dtype).reshape({shape})\n")
    tile = "np.multiply(x0[s], k_, out=y0[s])\nnp.add(y0[s], b_, out=y0[s])\n"
    relu = bool(attrs.get("fused_relu"))
    if relu:  # a Relu fused by ATC, in place on the tile
        tile += "_relu(y0[s], y0[s])\n"
    return Body(tile, prep, helpers=RELU if relu else "")


register(OpDef("BatchNorm", "aivector", ("x", "scale", "offset", "mean", "variance"), ("y",),
               FLOATS, _bn_infer, _bn_source,
               attrs={"epsilon": 1e-4, "data_format": None, "is_training": False,
                      "fused_relu": False},
               linear=lambda i, o, a: [(0, 0), (len(i), 0)]))


def _ln_axes(x: Spec, attrs: dict[str, Any]) -> tuple[int, int]:
    rank = len(x.shape)
    return (normalize_axis(int(attrs["begin_norm_axis"]), rank, "begin_norm_axis"),
            normalize_axis(int(attrs["begin_params_axis"]), rank, "begin_params_axis"))


def _ln_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    x = ins[0]
    _bna, bpa = _ln_axes(x, attrs)
    for i, s in enumerate(ins[1:], 1):
        if s.shape != x.shape[bpa:]:
            raise bad(f"LayerNorm input {i} shape {s.shape} is not {x.shape[bpa:]}")
    return [Spec(x.dtype, x.shape, x.format)]


def _ln_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    bna, _bpa = _ln_axes(ins[0], attrs)
    axes = tuple(range(bna, len(ins[0].shape)))
    tile = (f"v_ = x0[s] if {bna > 0} else x0\n"
            f"mu_ = v_.mean(axis={axes}, keepdims=True)\n"
            f"var_ = ((v_ - mu_) ** 2).mean(axis={axes}, keepdims=True)\n"
            f"r_ = (v_ - mu_) / np.sqrt(var_ + {float(attrs['epsilon'])!r}) * x1 + x2\n"
            f"if {bna > 0}:\n    y0[s] = r_\nelse:\n    y0[...] = r_\n")
    return Body(tile, split=bna > 0)


register(OpDef("LayerNorm", "aivector", ("x", "gamma", "beta"), ("y",), FLOATS, _ln_infer,
               _ln_source,
               attrs={"begin_norm_axis": 0, "begin_params_axis": 0, "epsilon": 1e-7},
               linear=lambda i, o, a: [(0, 0), (len(i), 0)]
               if _ln_axes(i[0], a)[0] > 0 and _ln_axes(i[0], a)[1] > 0 else []))


def _sm_axes(x: Spec, attrs: dict[str, Any]) -> tuple[int, ...]:
    return tuple(sorted({normalize_axis(int(a), len(x.shape)) for a in attrs["axes"]}))


def _sm_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    _sm_axes(ins[0], attrs)
    return [Spec(ins[0].dtype, ins[0].shape, ins[0].format)]


def _sm_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    axes = _sm_axes(ins[0], attrs)
    split = bool(ins[0].shape) and 0 not in axes
    bf16 = ins[0].dtype == T.BF16  # widened to float32, rounded once on store
    v, r = ("_bf.to_float32(x0[s])", "_bf.from_float32(r_)") if bf16 else ("x0[s]", "r_")
    tile = (f"v_ = {v} if {split} else {v.replace('[s]', '')}\n"
            f"e_ = np.exp(v_ - v_.max(axis={axes}, keepdims=True))\n"
            f"r_ = e_ / e_.sum(axis={axes}, keepdims=True)\n"
            f"if {split}:\n    y0[s] = {r}\nelse:\n    y0[...] = {r}\n")
    return Body(tile, split=split)


register(OpDef("SoftmaxV2", "aivector", ("x",), ("y",), FLOATS | {T.BF16}, _sm_infer, _sm_source,
               attrs={"axes": [-1]},
               linear=lambda i, o, a: [(0, 0), (len(i), 0)]
               if i[0].shape and 0 not in _sm_axes(i[0], a) else []))
