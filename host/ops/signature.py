"""An op call's signature: the ``Spec`` of each descriptor, the op-map keys, and the check of
the inputs with the inference of the outputs (what ``aclopCompile`` does before building).

Used by the executor, the single-op model loader (``models.py``), the model compiler
(``host/models``), the ``acl.op`` and Pythonic faces and ``npuemu atc``. Pure functions: no
state, no threads, nothing blocks.

    ins = [signature.spec(d) for d in present]          # TensorDesc -> Spec
    outs = signature.outputs(op, ins, hint, attrs)       # 100021 / 100026 / 100027 / 100000
    key = signature.full_key(op.type, present, out_descs, attr)   # the op map's key
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from npuemu.host.ops import desc as D
from npuemu.host.ops import types as T
from npuemu.host.ops.registry import OpDef, Spec, check_inputs

__all__ = ["attr_digest", "attr_values", "full_key", "linear_key", "outputs",
           "representative", "shapeless_key", "spec"]


def spec(desc: D.TensorDesc) -> Spec:
    """The signature entry of a descriptor: numpy dtype name, dims, format, const bytes."""
    return Spec(T.numpy_dtype(desc.dtype), desc.dims, desc.format, desc.const)


def attr_values(attr: D.OpAttr | None) -> dict[str, Any]:
    """The attribute values of an ``aclopAttr`` by name (none: empty)."""
    return {} if attr is None else {k: v for k, (_t, v) in attr.values.items()}


def attr_digest(attr: D.OpAttr | None) -> tuple:
    """The attributes' part of an op-map key."""
    return () if attr is None else attr.digest


def full_key(op_type: str, ins: Sequence[D.TensorDesc], outs: Sequence[D.TensorDesc],
             attr: D.OpAttr | None) -> tuple:
    """The op-map key: op type, every descriptor's key and the attribute digest, as the
    real runtime hashes a static op."""
    return (op_type, tuple(d.key for d in ins), tuple(d.key for d in outs), attr_digest(attr))


def shapeless_key(op_type: str, ins: Sequence[D.TensorDesc], outs: Sequence[D.TensorDesc],
                  attr: D.OpAttr | None) -> tuple:
    """The key of the dynamic-shape compiles a call may match: ``full_key`` without dims."""
    part = lambda d: (d.dtype, d.format, d.storage_format, d.memtype)  # noqa: E731
    return (op_type, tuple(map(part, ins)), tuple(map(part, outs)), attr_digest(attr))


def outputs(op: OpDef, ins: list[Spec], hint: list[Spec], attrs: dict[str, Any],
            ) -> list[Spec]:
    """Check the inputs and infer the outputs; the user's output descriptors (``hint``, may
    be empty) must agree: 100022 for another count, 100000 for another dtype or shape."""
    check_inputs(op, ins)
    outs = op.infer(ins, attrs, hint)
    if hint and len(hint) != len(outs):
        raise T.fail(T.ACL_ERROR_OP_OUTPUT_NOT_MATCH,
                     f"{op.type} has {len(outs)} outputs, {len(hint)} descriptors given")
    for i, (want, got) in enumerate(zip(outs, hint, strict=False)):
        concrete = all(d >= 0 for d in got.shape)
        if got.dtype != want.dtype or (concrete and got.shape != want.shape):
            raise T.fail(T.ACL_ERROR_INVALID_PARAM,
                         f"{op.type} output {i}: descriptor says {got.dtype}{list(got.shape)}"
                         f", inference gives {want.dtype}{list(want.shape)}")
    return [Spec(o.dtype, o.shape, h.format if hint else o.format)
            for o, h in zip(outs, hint or outs, strict=True)]


def linear_key(op: OpDef, ins: list[Spec], outs: list[Spec], attrs: dict[str, Any],
               digest: tuple) -> tuple | None:
    """The key shared by the signatures that differ from this one only along the op's linear
    dims (masked as -1), or None if the op has none here: a hit re-tiles instead of
    compiling."""
    if op.linear is None:
        return None
    pairs = sorted(op.linear(ins, outs, attrs))
    if not pairs:
        return None
    specs = [*ins, *outs]
    masked = []
    for i, s in enumerate(specs):
        shape = tuple(-1 if (i, a) in pairs else d for a, d in enumerate(s.shape))
        masked.append((s.dtype, s.format, shape, s.const))
    return (op.type, tuple(pairs), tuple(masked), digest)


def representative(desc: D.TensorDesc) -> D.TensorDesc:
    """A concrete stand-in for a dynamic descriptor (each -1 at its range's low end, ``{-2}``
    as one element): what a dynamic-shape compile builds for."""
    if desc.dims == (-2,):
        dims: tuple[int, ...] = (1,)
    else:
        ranges = desc.shape_range
        dims = tuple(d if d >= 0 else max(1, ranges[i][0] if i < len(ranges) else 1)
                     for i, d in enumerate(desc.dims))
    return D.TensorDesc(desc.dtype, dims, desc.format, const=desc.const)
