"""GEMM (AI Core): ``y = alpha * op(a) @ op(b) + beta * c``, tiled by rows of ``y``.

Inputs ``a`` (M, K), ``b`` (K, N) (transposed by ``transpose_a`` / ``transpose_b``), ``c``
(M, N), and the one-element tensors ``alpha`` and ``beta`` (read on the card at run time).
float16 and float32 inputs give ``y`` of their dtype (float16 accumulates in float32 and
rounds once, as the cube unit does); int8 ``a`` and ``b`` take int32 ``c``, ``alpha`` and
``beta`` and give int32 ``y`` (exact integer accumulation).
"""

from __future__ import annotations

from typing import Any

from npuemu.host.ops import types as T
from npuemu.host.ops.cube import _mm_dims
from npuemu.host.ops.registry import Body, OpDef, Spec, bad, register

_PAIRS = {"float16": "float16", "float32": "float32", "int8": "int32"}


def _infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    a, b, c, alpha, beta = ins
    if a.dtype != b.dtype or a.dtype not in _PAIRS:
        raise bad(f"GEMM a and b must share float16, float32 or int8, not {a.dtype} {b.dtype}",
                  T.ACL_ERROR_UNSUPPORTED_DATA_TYPE)
    out = _PAIRS[a.dtype]
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise bad(f"GEMM takes 2-D a and b, got {a.shape} {b.shape}")
    m, _k, n = _mm_dims(a.shape, b.shape, bool(attrs["transpose_a"]),
                        bool(attrs["transpose_b"]))
    if c.shape != (m, n) or alpha.size != 1 or beta.size != 1:
        raise bad(f"GEMM c {c.shape} must be ({m}, {n}); alpha and beta one element each")
    if {c.dtype, alpha.dtype, beta.dtype} != {out}:
        raise bad(f"GEMM c, alpha and beta must be {out} for {a.dtype} a and b",
                  T.ACL_ERROR_UNSUPPORTED_DATA_TYPE)
    return [Spec(out, (m, n), a.format)]


def _source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    acc = "np.int64" if ins[0].dtype == "int8" else "np.float32"
    prep = (f"a_ = (x0.T if {bool(attrs['transpose_a'])} else x0).astype({acc})\n"
            f"b_ = (x1.T if {bool(attrs['transpose_b'])} else x1).astype({acc})\n"
            f"al_ = x3.reshape(-1)[0].astype({acc}); be_ = x4.reshape(-1)[0].astype({acc})\n")
    tile = "y0[s] = (al_ * (a_[s] @ b_) + be_ * x2[s].astype(a_.dtype)).astype(y0.dtype)"
    return Body(tile, prep)


register(OpDef("GEMM", "aicore", ("a", "b", "c", "alpha", "beta"), ("y",),
               frozenset({"float16", "float32", "int8", "int32"}), _infer, _source,
               attrs={"transpose_a": False, "transpose_b": False},
               linear=lambda i, o, a: [(0, 1 if a["transpose_a"] else 0), (2, 0), (len(i), 0)]))
