"""The kernel compiler: one op signature -> a self-contained kernel binary.

``build`` generates the Python source of a kernel specialised for the signature: dtypes,
attribute values and the op's tile code are written into the source, and the shapes and
tiling are baked in as the defaults of the kernel's parameters, so a launch of that exact
signature passes only its tensor pointers. The binary *is* that source (UTF-8 text, no byte
code): ``OP_LOAD`` carries it to the card, which places it in HBM and compiles it there with
CPython's own compiler (``device/exec/opbin.py``); the worker never imports the op library and
never runs marshalled code. A re-tile (a signature that differs along a linear dimension) or a
dynamic-shape launch passes shapes and tiling explicitly to the same binary.

A bfloat16 tensor is viewed as its uint16 bits and the kernel imports ``npuemu.shared.bf16``
as ``_bf`` (the families' bf16 tiles widen with ``_bf.to_float32`` and store with
``_bf.from_float32``, round to nearest even).

Kernel layout (``p0..`` are device pointers, inputs then outputs)::

    @kernel(engine)
    def k_Add(ctx, p0, p1, p2, shapes=((8, 16), (16,), (8, 16)), rows=8, tile=8):
        x0, x1, y0, = _tensors(ctx, shapes, ('float32', 'float32', 'float32'), p0, p1, p2)
        ...                                                                 # prep
        for s in _tiles(ctx, rows, tile):                                   # this block's tiles
            y0[s] = np.add(b0[s], b1[s])                                    # one tile

(``_tensors`` and ``_tiles`` are ``shared/kernel.py``'s ``tensors`` and ``tiles``: the views and
the loop as calls rather than lines of their own, since the card's ``compile()`` costs about
as much per line as the whole call: a Conv2D kernel of 13 lines compiles in ~0.3 ms where the
20 lines it had took ~0.6.)

A signature baked as one block and one tile whose tile code touches rows only as ``o0[s]``
and ``b<i>[s]`` (the elementwise families: arrays of output 0's shape, so the one tile is all
of each) also gets a first branch, taken when a launch passes no shapes (``shapes is
_SHAPES``, the module constant of its defaults) on one block: views kept by the card between
launches (``ctx.view``), the prep, and the tile over the whole arrays (``whole_tile``), with no
split, loop or slice; any other launch of it runs the general loop above::

    _SHAPES = ((256,), (256,), (256,))

    def k_Add(ctx, p0, p1, p2, shapes=_SHAPES, rows=256, tile=16384):
        if shapes is _SHAPES and ctx.block_num == 1:
            x0 = ctx.view(p0, 'float32', (256,))                            # kept views
            ...
            np.add(b0, b1, out=o0)
            return
        ...                                                                 # the general loop

An op that declares a workspace (``OpDef.workspace``) gets a last parameter ``pw=0``: the
device pointer of its scratch (a model passes a planned block of its workspace, with the
shapes and tiling spelled out before it); the kernel sees it as ``ws`` (uint8 view, or
``None`` when ``pw`` is 0, and then allocates its scratch itself).

``from_record`` rebuilds a binary from what the disk cache stored (source and metadata) and
refuses metadata that is not what ``build`` writes (``check_tiling``: four ints in range).

Compile cost is whatever generating the source really costs (nothing sleeps); the card's
``compile()`` of it is part of the load.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from typing import Any

from npuemu.host.ops import types as T
from npuemu.host.ops.registry import Body, OpDef, Spec
from npuemu.host.ops.tiling import Tiling, rows_tiling, single
from npuemu.shared.kernel import MAX_BLOCKS
from npuemu.shared.protocol import OP_SOURCE_MAX

_PRELUDE = """import math
import numpy as np
from npuemu.shared.kernel import kernel, tensors as _tensors, tiles as _tiles
"""
_BF16 = "from npuemu.shared import bf16 as _bf\n"
"""Kernels with a bfloat16 tensor: views of it are its uint16 bits; ``_bf.to_float32`` widens
them, ``_bf.from_float32`` rounds float32 results to nearest even on store."""


TILING_MAX = 1 << 48
"""Largest ``rows``, ``tile`` or ``loops`` a tiling read back from a file may hold."""
WORKSPACE_MAX = 1 << 40
"""Largest workspace (bytes) a binary read back from the disk cache may declare."""


@dataclass
class KernelBinary:
    """A compiled kernel: its Python source, the kernel's name and engine, and the tiling
    baked in. ``compile_ns`` is what building it cost."""

    op_type: str
    name: str
    engine: str
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
    bf16 = any(s.dtype == T.BF16 for s in (*ins, *outs))
    whole = whole_tile(body, outs, tiling)
    default = _BAKED if whole is not None else repr(shapes)
    lines = [_PRELUDE + (_BF16 if bf16 else ""), body.helpers, "",
             *([f"{_BAKED} = {shapes!r}", ""] if whole is not None else []),
             f"@kernel({op.engine!r})",
             f"def {name}(ctx, {', '.join(ptrs)}, shapes={default}, rows={tiling.rows}, "
             f"tile={tiling.tile}{', pw=0' if need else ''}):"]
    if op.workspace is not None:
        lines.append(f"    ws = ctx.tensor(pw, 'uint8', {need}) if pw else None" if need
                     else "    ws = None")
    if whole is not None:
        lines += _one_tile(body, ins, outs, whole)
    names = [f"x{i}" for i in range(len(ins))] + [f"y{j}" for j in range(len(outs))]
    dtypes = tuple(T.storage(spec.dtype) for spec in (*ins, *outs))
    lines.append(f"    {', '.join(names)}, = _tensors(ctx, shapes, {dtypes!r}, {', '.join(ptrs)})")
    lines += _indent(body.prep, 4)
    lines.append("    for s in _tiles(ctx, rows, tile):")
    lines += _indent(body.tile, 8)
    return name, "\n".join(lines) + "\n"


_BAKED = "_SHAPES"
"""Module constant of a one-tile kernel's baked shapes: ``shapes is _SHAPES`` says a launch
passed none, so rows and tiling are the baked ones too (they follow ``shapes``)."""
_SLICED = re.compile(r"\b(o0|b\d+)\[s\]")
_STORED = re.compile(r"\b(o0|b\d+)\[s\](?=\s*(?:\*\*|//|<<|>>|[-+*/%&|^@])?=(?!=))")
_BOUND_NAMES = re.compile(r"^\s*(o0|b\d+)\s*(?:\*\*|//|<<|>>|[-+*/%&|^@])?=(?!=)", re.M)
_LOOP_NAMES = re.compile(r"\bs\b")


def _whole_array_line(name: str) -> str:
    """The prep line (``elementwise._views``) that makes ``name`` an array of output 0's
    shape: ``o0`` itself, or input ``b<i>`` broadcast to it."""
    if name == "o0":
        return "o0 = y0 if y0.ndim else y0.reshape(1)"
    i = name[1:]
    return f"{name} = x{i} if x{i}.shape == o0.shape else np.broadcast_to(x{i}, o0.shape)"


def whole_tile(body: Body, outs: list[Spec], tiling: Tiling) -> str | None:
    """The tile code of a signature baked as one block and one tile, with the whole arrays
    in place of their row slices (``o0[s] = v`` as ``o0[...] = v``), or None when that is
    not exactly the same: the tile touches rows only as ``o0[s]`` and ``b<i>[s]``, arrays
    the prep makes of output 0's shape (so the one tile's ``s``, ``slice(0, rows)``, is
    all of each), no other use of the slice ``s`` remains, and the prep binds them nowhere
    else."""
    rows = outs[0].shape[0] if outs[0].shape else 1
    if tiling.block_dim != 1 or not 0 < tiling.rows == rows <= tiling.tile:
        return None
    prep = [line.strip() for line in body.prep.splitlines()]
    names = {m.group(1) for m in _SLICED.finditer(body.tile)}
    for name in names:
        bound = [line for line in prep
                 if (m := _BOUND_NAMES.match(line)) is not None and m.group(1) == name]
        if bound != [_whole_array_line(name)]:
            return None
    if _BOUND_NAMES.search(body.tile):
        return None
    whole = _SLICED.sub(r"\1", _STORED.sub(r"\1[...]", body.tile))
    return None if _LOOP_NAMES.search(whole) else whole


def _one_tile(body: Body, ins: list[Spec], outs: list[Spec], whole: str) -> list[str]:
    """The branch of a one-tile kernel that runs its baked signature on one block: views
    kept by the card between launches (``ctx.view``), the prep, the whole-array tile."""
    lines = [f"    if shapes is {_BAKED} and ctx.block_num == 1:  # baked, one block: one tile"]
    for k, spec in enumerate((*ins, *outs)):
        var = f"x{k}" if k < len(ins) else f"y{k - len(ins)}"
        lines.append(f"        {var} = ctx.view(p{k}, {T.storage(spec.dtype)!r}, "
                     f"{spec.shape!r})")
    return [*lines, *_indent(_baked_prep(body.prep, ins, outs), 8), *_indent(whole, 8),
            "        return"]


def _baked_prep(prep: str, ins: list[Spec], outs: list[Spec]) -> str:
    """The prep with its ``_whole_array_line`` lines decided for the baked shapes: output 0
    as it is (or as one element), an input of that shape as it is and any other broadcast to
    it (no shape test left for the launch to run)."""
    shape = outs[0].shape or (1,)
    decided = {_whole_array_line("o0"): "o0 = y0" if outs[0].shape else "o0 = y0.reshape(1)"}
    for i, spec in enumerate(ins):
        decided[_whole_array_line(f"b{i}")] = f"b{i} = x{i}" if spec.shape == shape else \
            f"b{i} = np.broadcast_to(x{i}, o0.shape)"
    return "\n".join(line.replace(line.strip(), decided.get(line.strip(), line.strip()))
                     for line in prep.splitlines())


def workspace_of(op: OpDef, ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> int:
    """Bytes of scratch ``op`` declares for this signature (0 if it declares none)."""
    return int(op.workspace(ins, outs, attrs)) if op.workspace is not None else 0


def _indent(code: str, n: int) -> list[str]:
    return [" " * n + line for line in code.strip("\n").splitlines() if line.strip()]


def build(op: OpDef, ins: list[Spec], outs: list[Spec], attrs: dict[str, Any],
          tiling: Tiling | None = None) -> KernelBinary:
    """Compile one signature: tiling (computed unless given, e.g. by a single-op model),
    source. Ops whose source exceeds what ``OP_LOAD`` carries raise ValueError (a bug)."""
    start = time.perf_counter_ns()
    if tiling is None:
        tiling = tiling_for(op, ins, outs, op.source(ins, outs, attrs).split)
    name, source = generate(op, ins, outs, attrs, tiling)
    if len(source.encode()) > OP_SOURCE_MAX:
        raise ValueError(f"{op.type} kernel source exceeds {OP_SOURCE_MAX} bytes")
    return KernelBinary(op.type, name, op.engine, source, tiling,
                        tuple(s.shape for s in (*ins, *outs)),
                        time.perf_counter_ns() - start, source_digest(source),
                        workspace_of(op, ins, outs, attrs))


def source_digest(source: str) -> str:
    """The short SHA-256 of a kernel source that names its binary on the card."""
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def check_tiling(values: object) -> Tiling:
    """A Tiling from ``[block_dim, rows, tile, loops]`` read from a file; ValueError unless
    these are four ints (not bools) with ``1 <= block_dim <= MAX_BLOCKS`` and the others in
    ``[1, TILING_MAX]``."""
    if not isinstance(values, list | tuple) or len(values) != 4:
        raise ValueError(f"tiling must be 4 integers, not {values!r:.80}")
    if not all(type(v) is int for v in values):
        raise ValueError(f"tiling {values!r:.80} holds a value that is not an integer")
    block_dim, rows, tile, loops = values
    if not 1 <= block_dim <= MAX_BLOCKS:
        raise ValueError(f"tiling block_dim {block_dim} outside [1, {MAX_BLOCKS}]")
    if not all(1 <= v <= TILING_MAX for v in (rows, tile, loops)):
        raise ValueError(f"tiling {values!r:.80}: rows/tile/loops outside [1, 2**48]")
    return Tiling(block_dim, rows, tile, loops)


def tiling_list(tiling: Tiling) -> list[int]:
    """``[block_dim, rows, tile, loops]`` as files store it."""
    return [tiling.block_dim, tiling.rows, tiling.tile, tiling.loops]


def from_record(op: OpDef, meta: object, source: str,
                shapes: tuple[tuple[int, ...], ...]) -> KernelBinary:
    """A binary from the disk cache's ``(meta, source)``; ValueError unless ``meta`` is what
    ``executor`` stores for ``op``: the kernel name ``k_<type>``, the source's digest, a
    valid tiling and a workspace in ``[0, WORKSPACE_MAX]``."""
    if not isinstance(meta, dict):
        raise ValueError("metadata is not a map")
    name, digest, workspace = meta.get("name"), meta.get("digest"), meta.get("workspace", 0)
    if name != f"k_{op.type}":
        raise ValueError(f"kernel name {name!r:.80} is not k_{op.type}")
    if digest != source_digest(source):
        raise ValueError("digest does not match the source")
    if type(workspace) is not int or not 0 <= workspace <= WORKSPACE_MAX:
        raise ValueError(f"workspace {workspace!r:.80} out of range")
    return KernelBinary(op.type, name, op.engine, source, check_tiling(meta.get("tiling")),
                        shapes, 0, digest, workspace)


def retile(op: OpDef, ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Tiling:
    """Only the tiling of a signature (the incremental-compile path)."""
    return tiling_for(op, ins, outs, op.source(ins, outs, attrs).split)
