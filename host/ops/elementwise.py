"""Elementwise ops (AI Vector): binary arithmetic with numpy broadcasting, unary math,
Cast, Where, Fill and Identity.

Each kernel tiles output 0 by rows of axis 0; inputs are broadcast views of the output's
shape, so a tile reads only its rows. Axis 0 is linear (a batch change re-tiles).
Choices: ``Div`` of integers floors (TF ``Div``); ``Gelu`` uses the tanh approximation of
the TBE kernel; binary inputs must share one dtype (100026 otherwise). ``Add`` takes
``fused_relu`` (our attribute, set by ATC when a Relu is its only reader, e.g. a residual
sum: ``host/models/fold.py``): ``max(., 0)`` applied to each tile in place.

bfloat16 (the arithmetic ops, Cast, Identity, Where, Fill): a tile widens its inputs' bits
to float32 (``_bf.to_float32``), computes the op's float32 tile and rounds the result to
nearest even once on store (``_bf.from_float32``), as the cards' vector units compute bf16
through fp32. Cast to bfloat16 goes through float32 (a float64 or a large integer is rounded
twice).
"""

from __future__ import annotations

from typing import Any

from npuemu.host.ops import types as T
from npuemu.host.ops.registry import (
    BF16,
    FLOATS,
    MOVES,
    NUMERIC,
    Body,
    OpDef,
    Spec,
    axis0,
    bad,
    broadcast,
    register,
)

_PREP = "o0 = y0 if y0.ndim else y0.reshape(1)\n"


def _views(n: int) -> str:
    return _PREP + "".join(f"b{i} = x{i} if x{i}.shape == o0.shape else "
                           f"np.broadcast_to(x{i}, o0.shape)\n" for i in range(n))


def _same_dtype(op: str, ins: list[Spec]) -> str:
    dtypes = {s.dtype for s in ins}
    if len(dtypes) != 1:
        raise bad(f"{op}: inputs have different dtypes {sorted(dtypes)}",
                  T.ACL_ERROR_UNSUPPORTED_DATA_TYPE)
    return ins[0].dtype


def through_f32(tile: str, n: int) -> str:
    """The bfloat16 form of an elementwise tile over ``b0[s]..`` into ``o0[s]``: the inputs
    widened to float32 (``f0..``), the tile run into a float32 ``r_``, one rounding store."""
    head = "".join(f"f{i} = _bf.to_float32(b{i}[s])\n" for i in range(n))
    for i in range(n):
        tile = tile.replace(f"b{i}[s]", f"f{i}")
    tile = tile.replace("o0[s]", "r_").replace("o0.dtype", "r_.dtype")
    return (head + "r_ = np.empty(o0[s].shape, np.float32)\n" + tile
            + "\n_bf.from_float32(r_, out=o0[s])")


def _fmt(ins: list[Spec]) -> int:
    return next((s.format for s in ins if s.format != T.ACL_FORMAT_ND), T.ACL_FORMAT_ND)


def _linear_all(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> list:
    return axis0(ins, outs, list(range(len(ins))))


# binary ----------------------------------------------------------------------------------------
_BINARY = {
    "Add": "np.add({a}, {b}, out=o0[s])",
    "Sub": "np.subtract({a}, {b}, out=o0[s])",
    "Mul": "np.multiply({a}, {b}, out=o0[s])",
    "Maximum": "np.maximum({a}, {b}, out=o0[s])",
    "Minimum": "np.minimum({a}, {b}, out=o0[s])",
    "Pow": "np.power({a}, {b}, out=o0[s])",
}


def _binary_infer(op: str):
    def infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
        dtype = _same_dtype(op, ins)
        return [Spec(dtype, broadcast([s.shape for s in ins]), _fmt(ins))]
    return infer


def _binary_source(expr: str | None):
    def source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
        tile = expr
        if tile is None:  # Div: true division for floats, floor division for integers
            fn = "np.true_divide" if ins[0].dtype in FLOATS | {BF16} else "np.floor_divide"
            tile = fn + "({a}, {b}, out=o0[s])"
        tile = tile.format(a="b0[s]", b="b1[s]")
        relu = bool(attrs.get("fused_relu"))
        if relu:  # Add only: a Relu fused by ATC, on the tile in cache
            tile += "\n_relu(o0[s], o0[s])"
        return Body(through_f32(tile, 2) if ins[0].dtype == BF16 else tile, _views(2),
                    helpers=RELU if relu else "")
    return source


for _name, _expr in [*_BINARY.items(), ("Div", None)]:
    register(OpDef(_name, "aivector", ("x1", "x2"), ("y",), NUMERIC | {BF16},
                   _binary_infer(_name),
                   _binary_source(_expr), linear=_linear_all,
                   attrs={"fused_relu": False} if _name == "Add" else {}))

# unary -----------------------------------------------------------------------------------------
_ERF = "_erf = np.frompyfunc(math.erf, 1, 1)\n"
RELU = "from npuemu.shared.relu import relu as _relu\n"
"""The kernels' ``max(x, 0)`` (``shared/relu.py``: numpy's array-array loop, not the slower
array-scalar one); the Relu op's and every fused Relu's."""
_UNARY = {
    "Sqrt": ("np.sqrt(b0[s], out=o0[s])", FLOATS, ""),
    "Exp": ("np.exp(b0[s], out=o0[s])", FLOATS, ""),
    "Log": ("np.log(b0[s], out=o0[s])", FLOATS, ""),
    "Abs": ("np.abs(b0[s], out=o0[s])", NUMERIC, ""),
    "Neg": ("np.negative(b0[s], out=o0[s])", NUMERIC, ""),
    "Relu": ("_relu(b0[s], o0[s])", NUMERIC, RELU),
    "Sigmoid": ("o0[s] = 1 / (1 + np.exp(-b0[s]))", FLOATS, ""),
    "Tanh": ("np.tanh(b0[s], out=o0[s])", FLOATS, ""),
    "Gelu": ("v = b0[s]\n"
             "o0[s] = 0.5 * v * (1 + np.tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))",
             FLOATS, ""),
    "Erf": ("o0[s] = _erf(b0[s]).astype(o0.dtype)", FLOATS, _ERF),
}


def _unary_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    return [Spec(ins[0].dtype, ins[0].shape, ins[0].format)]


def _unary_source(tile: str, helpers: str):
    def source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
        code = through_f32(tile, 1) if ins[0].dtype == BF16 else tile
        return Body(code, _views(1), helpers=helpers)
    return source


for _name, (_tile, _dtypes, _helpers) in _UNARY.items():
    register(OpDef(_name, "aivector", ("x",), ("y",), _dtypes | {BF16}, _unary_infer,
                   _unary_source(_tile, _helpers), linear=_linear_all))


# Identity, Cast, Where, Fill -------------------------------------------------------------------
def _copy_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    return Body("o0[s] = b0[s]", _views(1))


register(OpDef("Identity", "aivector", ("x",), ("y",), MOVES, _unary_infer, _copy_source,
               linear=_linear_all))


def _cast_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    dst = attrs.get("dst_type")
    if dst is None:
        if not hint:
            raise bad("Cast needs attribute dst_type or an output descriptor")
        dtype = hint[0].dtype
    else:
        dtype = T.numpy_dtype(int(dst))
    if dtype not in MOVES:
        raise bad(f"Cast to {dtype} is not supported", T.ACL_ERROR_UNSUPPORTED_DATA_TYPE)
    return [Spec(dtype, ins[0].shape, ins[0].format)]


def _cast_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    src, dst = ins[0].dtype, outs[0].dtype
    if src == dst or BF16 not in (src, dst):
        return _copy_source(ins, outs, attrs)
    if src == BF16:
        return Body("o0[s] = _bf.to_float32(b0[s])", _views(1))
    return Body("_bf.from_float32(b0[s].astype(np.float32), out=o0[s])", _views(1))


register(OpDef("Cast", "aivector", ("x",), ("y",), MOVES, _cast_infer, _cast_source,
               attrs={"dst_type": None, "truncate": False}, linear=_linear_all))


def _where_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    dtype = _same_dtype("Where", ins[1:])
    return [Spec(dtype, broadcast([s.shape for s in ins]), _fmt(ins))]


def _where_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    return Body("o0[s] = np.where(b0[s], b1[s], b2[s])", _views(3))


register(OpDef("Where", "aivector", ("condition", "x1", "x2"), ("y",), MOVES, _where_infer,
               _where_source, linear=_linear_all))


def _fill_infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    dims = ins[0].const_array()
    if dims is not None:
        shape = tuple(int(d) for d in dims.reshape(-1))
    elif attrs.get("dims") is not None:
        shape = tuple(int(d) for d in attrs["dims"])
    elif hint:
        shape = hint[0].shape
    else:
        raise bad("Fill needs const dims, attribute dims or an output descriptor")
    if ins[1].size != 1:
        raise bad("Fill value must hold one element")
    return [Spec(ins[1].dtype, shape, ins[1].format)]


def _fill_source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    return Body("o0[s] = value", _PREP + "value = x1.reshape(-1)[0]\n")


def _fill_linear(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> list:
    return [(len(ins), 0)] if outs[0].shape and ins[0].const is None else []


register(OpDef("Fill", "aivector", ("dims", "value"), ("y",), MOVES, _fill_infer, _fill_source,
               attrs={"dims": None}, linear=_fill_linear))
