"""The op registry: what an op type declares, and how a signature is checked and inferred.

An op definition (``OpDef``) names its inputs and outputs, the dtypes and formats it accepts,
its attributes with defaults, its shape inference, its engine (AI Core for cube work, AI
Vector for elementwise and reductions, AI CPU for the rest), how it tiles, and the numpy
source of one tile of its kernel.

A *signature* is the list of input ``Spec`` (numpy dtype name, shape, aclFormat) plus the
attribute values; ``check_inputs`` checks it against the definition and
``signature.outputs`` (``signature.py``) infers the outputs.

Op families
    Families live one per module (``elementwise.py``, ``cube.py``, ``pooling.py``,
    ``norm.py``, ``reduce.py``, ``shape.py``, ...) and register their ops on import with
    ``register(OpDef(...))``. ``families.py`` imports every family module, and the package
    (``host/ops/__init__.py``) imports ``families``, so every op is registered before any
    module of the package can call ``lookup``. To add a family: write its module, importing
    only this module, ``types`` and other families (never the executor, the caches or
    ``families``), and add its name to the import line of ``families.py``. This module
    imports no family (the families build on it).

Threading: ``REGISTRY`` is filled at import (under the import lock) and only read after.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from npuemu.host.ops import types as T

FLOATS = frozenset({"float16", "float32", "float64"})
INTS = frozenset({"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"})
NUMERIC = FLOATS | INTS
ALL = NUMERIC | {"bool"}
BF16 = T.BF16
"""bfloat16: kernels view it as uint16 bits (``T.storage``) and compute through float32."""
MOVES = ALL | {BF16}
"""What ops that only move or select elements take: every dtype, bfloat16's bits too."""


@dataclass(frozen=True)
class Spec:
    """One tensor of a signature: numpy dtype name, shape, aclFormat, and const bytes."""

    dtype: str
    shape: tuple[int, ...]
    format: int = T.ACL_FORMAT_ND
    const: bytes | None = None

    @property
    def size(self) -> int:
        return int(math.prod(self.shape))

    @property
    def nbytes(self) -> int:
        return self.size * T.itemsize(self.dtype)

    def const_array(self) -> np.ndarray | None:
        """The const data as an array of this spec's dtype and shape (None if not const)."""
        if self.const is None:
            return None
        return np.frombuffer(self.const, T.storage(self.dtype)).reshape(self.shape)


@dataclass
class Body:
    """Kernel source pieces for one signature: ``prep`` runs once per block (after the
    input views ``x0..`` and output views ``y0..`` exist), ``tile`` once per tile with the
    row slice ``s``; ``split`` says whether rows of output 0's axis 0 are split over blocks
    (else the kernel runs as one block and one tile). ``helpers`` is module-level source."""

    tile: str
    prep: str = ""
    split: bool = True
    helpers: str = ""


Workspace = Callable[[list[Spec], list[Spec], dict[str, Any]], int]
Infer = Callable[[list[Spec], dict[str, Any], list[Spec]], list[Spec]]
Source = Callable[[list[Spec], list[Spec], dict[str, Any]], Body]
Linear = Callable[[list[Spec], list[Spec], dict[str, Any]], list[tuple[int, int]]]


@dataclass
class OpDef:
    """What an op type declares (see the module docstring).

    ``inputs``/``outputs`` are names; ``variadic`` names the input (or, for Split, output)
    list whose length varies. ``linear(ins, outs, attrs)`` lists ``(tensor index, axis)``
    pairs (inputs first, then outputs) along which the kernel scales linearly: a signature
    differing only there re-tiles a cached binary instead of compiling (the op cache's
    re-tile rule)."""

    type: str
    engine: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    dtypes: frozenset[str]
    infer: Infer
    source: Source
    attrs: dict[str, Any] = field(default_factory=dict)
    formats: frozenset[int] = T.PLAIN_FORMATS
    optional: int = 0
    """How many trailing inputs may be absent."""
    variadic_inputs: bool = False
    variadic_outputs: bool = False
    linear: Linear | None = None
    workspace: Workspace | None = None
    """Bytes of scratch the kernel uses for these shapes (e.g. Conv2D's im2col matrix): a
    model gives it a planned block of its workspace (``host/models/planner.py``); a
    single-op launch passes none and the kernel allocates that scratch itself."""


REGISTRY: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    """Add a family's op definition (at the family module's import); ValueError for an op
    type registered twice."""
    if op.type in REGISTRY:
        raise ValueError(f"op {op.type} registered twice")
    REGISTRY[op.type] = op
    return op


def lookup(op_type: object) -> OpDef:
    """The definition of ``op_type``; ACL_ERROR_OP_TYPE_NOT_MATCH (100020) if unknown."""
    found = REGISTRY.get(op_type) if isinstance(op_type, str) else None
    if found is None:
        raise T.fail(T.ACL_ERROR_OP_TYPE_NOT_MATCH, f"unknown op type {op_type!r}")
    return found


def bad(detail: str, code: int = T.ACL_ERROR_INVALID_PARAM) -> Exception:
    return T.fail(code, detail)


def attrs_of(op: OpDef, given: dict[str, Any]) -> dict[str, Any]:
    """Defaults overlaid with the given attribute values (unknown names are kept too)."""
    return {**op.attrs, **given}


def check_inputs(op: OpDef, ins: list[Spec]) -> None:
    """Count, dtype and format of the inputs (100021 / 100026 / 100027)."""
    n = len(op.inputs)
    if op.variadic_inputs:
        if len(ins) < 1:
            raise bad(f"{op.type} needs at least one input", T.ACL_ERROR_OP_INPUT_NOT_MATCH)
    elif not n - op.optional <= len(ins) <= n:
        raise bad(f"{op.type} takes {n - op.optional}..{n} inputs, got {len(ins)}",
                  T.ACL_ERROR_OP_INPUT_NOT_MATCH)
    for i, spec in enumerate(ins):
        if spec.dtype not in op.dtypes and not _index_input(op, i):
            raise bad(f"{op.type} input {i}: dtype {spec.dtype} not in {sorted(op.dtypes)}",
                      T.ACL_ERROR_UNSUPPORTED_DATA_TYPE)
        if spec.format not in op.formats:
            raise bad(f"{op.type} input {i}: format {T.FORMATS.get(spec.format, spec.format)}"
                      " is not supported", T.ACL_ERROR_FORMAT_NOT_MATCH)


INDEX_INPUTS = {"axes", "perm", "shape", "dims", "indices", "paddings", "condition", "size"}


def _index_input(op: OpDef, i: int) -> bool:
    """Inputs carrying indices or masks accept integer/bool dtypes whatever ``dtypes`` says."""
    return not op.variadic_inputs and i < len(op.inputs) and op.inputs[i] in INDEX_INPUTS


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    if not -max(rank, 1) <= axis < max(rank, 1):
        raise bad(f"{what} {axis} out of range for rank {rank}")
    return axis % max(rank, 1)


def broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError as err:
        raise bad(f"shapes {shapes} do not broadcast") from err


def axis0(ins: list[Spec], outs: list[Spec], which: list[int]) -> list[tuple[int, int]]:
    """Linear pairs: axis 0 of output 0 and of the inputs in ``which`` that have the same
    rank and the same axis-0 size (inputs broadcast along axis 0 are not linear)."""
    out = outs[0]
    if not out.shape:
        return []
    pairs = [(len(ins), 0)]
    for i in which:
        if ins[i].shape and len(ins[i].shape) == len(out.shape) \
                and ins[i].shape[0] == out.shape[0]:
            pairs.append((i, 0))
    return pairs
