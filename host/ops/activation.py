"""Activations and log-softmax (AI Vector): Softplus, Sign, Shrink, LogSoftmaxV2, and
InstanceNorm. Each tiles rows of axis 0 (linear there) unless it normalises over axis 0.

``Softplus`` is ``log(1 + exp(x))`` (computed as ``logaddexp(0, x)``, no overflow);
``Sign`` gives -1, 0 or 1 in the input's dtype; ``Shrink`` (attributes ``lambd``, default
0.5, and ``bias``, default 0) gives ``x + bias`` below ``-lambd``, ``x - bias`` above
``lambd``, else 0. ``LogSoftmaxV2`` takes ``axes`` (default ``[-1]``) and computes
``x - max - log(sum(exp(x - max)))``. ``InstanceNorm`` (``epsilon``, default 1e-6; NCHW
or NCDHW) normalises every (n, c) plane with the scale ``gamma`` and offset ``beta`` of
shape (C,); it returns only ``y`` (the real op's ``mean`` and ``variance`` outputs are not
produced).
"""

from __future__ import annotations

from typing import Any

from npuemu.host.ops import types as T
from npuemu.host.ops.elementwise import _linear_all, _unary_infer, _views
from npuemu.host.ops.norm import _sm_axes
from npuemu.host.ops.registry import FLOATS, NUMERIC, Body, OpDef, Spec, bad, lookup, register

_TILES = {
    "Softplus": ("np.logaddexp(0, b0[s], out=o0[s])", FLOATS),
    "Sign": ("np.sign(b0[s], out=o0[s])", NUMERIC),
}


def _unary(tile: str):
    def source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
        return Body(tile, _views(1))
    return source


for _name, (_tile, _dtypes) in _TILES.items():
    register(OpDef(_name, "aivector", ("x",), ("y",), _dtypes, _unary_infer, _unary(_tile),
                   linear=_linear_all))


def _shrink_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    lambd, bias = float(attrs["lambd"]), float(attrs["bias"])
    if lambd < 0:
        raise bad(f"Shrink lambd {lambd} is negative")
    tile = (f"v_ = b0[s]\n"
            f"o0[s] = np.where(v_ < -{lambd!r}, v_ + {bias!r}, "
            f"np.where(v_ > {lambd!r}, v_ - {bias!r}, 0))")
    return Body(tile, _views(1))


register(OpDef("Shrink", "aivector", ("x",), ("y",), FLOATS, _unary_infer, _shrink_source,
               attrs={"lambd": 0.5, "bias": 0.0}, linear=_linear_all))


def _lsm_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    axes = _sm_axes(ins[0], attrs)
    split = bool(ins[0].shape) and 0 not in axes
    view = "s" if split else "..."
    r = f"m_ - np.log(np.exp(m_).sum(axis={axes}, keepdims=True))"
    v = f"x0[{view}]"
    if ins[0].dtype == T.BF16:  # widened to float32, rounded once on store
        v, r = f"_bf.to_float32({v})", f"_bf.from_float32({r})"
    tile = (f"v_ = {v}\n"
            f"m_ = v_ - v_.max(axis={axes}, keepdims=True)\n"
            f"y0[{view}] = {r}\n")
    return Body(tile, split=split)


_SOFTMAX = lookup("SoftmaxV2")
register(OpDef("LogSoftmaxV2", "aivector", ("x",), ("y",), FLOATS | {T.BF16}, _SOFTMAX.infer,
               _lsm_source,
               attrs={"axes": [-1]}, linear=_SOFTMAX.linear))


def _in_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    x = ins[0]
    if len(x.shape) < 3:
        raise bad(f"InstanceNorm takes rank >= 3 (N, C, spatial...), got {x.shape}")
    for i, s in enumerate(ins[1:], 1):
        if s.shape != (x.shape[1],):
            raise bad(f"InstanceNorm input {i} shape {s.shape} is not ({x.shape[1]},)")
    return [Spec(x.dtype, x.shape, x.format)]


def _in_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    rank = len(ins[0].shape)
    axes = tuple(range(2, rank))
    per_c = (1, -1, *(1,) * (rank - 2))
    tile = (f"v_ = x0[s].astype(np.float64)\n"
            f"mu_ = v_.mean(axis={axes}, keepdims=True)\n"
            f"var_ = ((v_ - mu_) ** 2).mean(axis={axes}, keepdims=True)\n"
            f"y0[s] = (v_ - mu_) / np.sqrt(var_ + {float(attrs['epsilon'])!r}) "
            f"* x1.reshape({per_c}) + x2.reshape({per_c})\n")
    return Body(tile)


register(OpDef("InstanceNorm", "aivector", ("x", "gamma", "beta"), ("y",), FLOATS, _in_infer,
               _in_source, attrs={"epsilon": 1e-6, "data_format": "NCHW"},
               linear=lambda i, o, a: [(0, 0), (len(i), 0)]))
