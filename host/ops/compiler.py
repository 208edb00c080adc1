"""The kernel compiler: one op signature -> a self-contained kernel binary (seed §2.2).

``build`` generates the Python source of a kernel specialised for the signature: dtypes,
attribute values and the op's tile code are written into the source, and the shapes and
tiling are baked in as the defaults of the kernel's parameters, so a launch of that exact
signature passes only its tensor pointers. The source is byte-compiled (``compile`` +
``marshal``): the bytes are what is placed in the card's HBM and what the worker executes
(``device/exec/opbin.py``); the worker never imports the op library. A re-tile (a signature that
differs along a linear dimension) or a dynamic-shape launch passes shapes and tiling
explicitly to the same binary.

Kernel layout (``p0..`` are device pointers, inputs then outputs)::

    @kernel(engine)
    def k_Add(ctx, p0, p1, p2, shapes=((8, 16), (16,), (8, 16)), rows=8, tile=8):
        x0 = ctx.tensor(p0, 'float32', _n(shapes[0])).reshape(shapes[0])   # views
        ...                                                                 # prep

An op that declares a workspace (``OpDef.workspace``) gets a last parameter ``pw=0``: the
device pointer of its scratch (a model passes a planned block of its workspace, with the
shapes and tiling spelled out before it); the kernel sees it as ``ws`` (uint8 view, or
``None`` when ``pw`` is 0, and then allocates its scratch itself).
        lo, hi = ctx.split(rows)
        for r in range(lo, hi, tile):                                       # this block's tiles
            s = slice(r, min(r + tile, hi))
            y0[s] = np.add(b0[s], b1[s])                                    # one tile

Compile cost is whatever generating and byte-compiling really costs (nothing sleeps).
"""

from __future__ import annotations

import hashlib
import marshal
import time
from dataclasses import dataclass
from typing import Any

from npuemu.host.ops.registry import OpDef, Spec
from npuemu.host.ops.tiling import Tiling, rows_tiling, single

_PRELUDE = """import math
import numpy as np
from npuemu.shared.kernel import kernel

def _n(shape):
    return math.prod(shape)
"""


@dataclass
class KernelBinary:
    """A compiled kernel: marshalled code, the kernel's name and engine, and the tiling baked
    in. ``compile_ns`` is what building it cost."""

    op_type: str
    name: str
    engine: str
    code: bytes
    source: str
    tiling: Tiling
    shapes: tuple[tuple[int, ...], ...]
    compile_ns: int
    digest: str
    workspace: int = 0
    """Bytes of scratch the kernel takes through its last parameter ``pw`` (0: none)."""


def tiling_for(op: OpDef, ins: list[Spec], outs: list[Spec], split: bool) -> Tiling:
    """The op's tiling for these shapes: rows of output 0 (see ``tiling.py``)."""
    if not split or not outs[0].shape:
        return single()
    rows = outs[0].shape[0]
    row_bytes = sum(s.nbytes for s in (*ins, *outs)) // max(rows, 1)
    return rows_tiling(rows, row_bytes, op.engine)


def generate(op: OpDef, ins: list[Spec], outs: list[Spec], attrs: dict[str, Any],
             tiling: Tiling) -> tuple[str, str]:
    """``(kernel name, source)`` for one signature."""
    body = op.source(ins, outs, attrs)
    name = f"k_{op.type}"
    ptrs = [f"p{i}" for i in range(len(ins) + len(outs))]
    shapes = tuple(s.shape for s in (*ins, *outs))
    need = workspace_of(op, ins, outs, attrs)
    lines = [_PRELUDE, body.helpers, "", f"@kernel({op.engine!r})",
             f"def {name}(ctx, {', '.join(ptrs)}, shapes={shapes!r}, rows={tiling.rows}, "
             f"tile={tiling.tile}{', pw=0' if need else ''}):"]
    if op.workspace is not None:
        lines.append(f"    ws = ctx.tensor(pw, 'uint8', {need}) if pw else None" if need
                     else "    ws = None")
    for i, spec in enumerate(ins):
        lines.append(f"    x{i} = ctx.tensor(p{i}, {spec.dtype!r}, _n(shapes[{i}]))"
                     f".reshape(shapes[{i}])")
    for j, spec in enumerate(outs):
        k = len(ins) + j
        lines.append(f"    y{j} = ctx.tensor(p{k}, {spec.dtype!r}, _n(shapes[{k}]))"
                     f".reshape(shapes[{k}])")
    lines += _indent(body.prep, 4)
    lines += ["    lo, hi = ctx.split(rows)", "    for r in range(lo, hi, tile):",
              "        s = slice(r, min(r + tile, hi))"]
    lines += _indent(body.tile, 8)
    return name, "\n".join(lines) + "\n"


def workspace_of(op: OpDef, ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> int:
    """Bytes of scratch ``op`` declares for this signature (0 if it declares none)."""
    return int(op.workspace(ins, outs, attrs)) if op.workspace is not None else 0


def _indent(code: str, n: int) -> list[str]:
    return [" " * n + line for line in code.strip("\n").splitlines() if line.strip()]


def build(op: OpDef, ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> KernelBinary:
    """Compile one signature: tiling, source, byte code."""
    start = time.perf_counter_ns()
    split = op.source(ins, outs, attrs).split
    tiling = tiling_for(op, ins, outs, split)
    name, source = generate(op, ins, outs, attrs, tiling)
    code = marshal.dumps(compile(source, f"<npuemu op {op.type}>", "exec"))
    digest = hashlib.sha256(code).hexdigest()[:16]
    return KernelBinary(op.type, name, op.engine, code, source, tiling,
                        tuple(s.shape for s in (*ins, *outs)),
                        time.perf_counter_ns() - start, digest,
                        workspace_of(op, ins, outs, attrs))


def retile(op: OpDef, ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Tiling:
    """Only the tiling of a signature (the incremental-compile path)."""
    return tiling_for(op, ins, outs, op.source(ins, outs, attrs).split)
