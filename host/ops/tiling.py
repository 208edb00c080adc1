"""Tiling: how one signature of an op is split across the card's cores (the block_dim an
``aclopCompile``d kernel is launched with).

Ops tile by rows of output 0's axis 0 (batch for elementwise, M for MatMul, N for Conv2D
and pooling, the kept leading axis for norms and reductions). From the shapes the tiler
computes a small struct the kernel receives: ``block_dim`` blocks (at most the engine's core
count, and fewer when each block would get less than ``MIN_BLOCK_BYTES``), ``tile`` rows per
tile (so that one tile of every tensor fits the core's unified buffer, ``UB_BYTES``) and the
``loops`` each block runs. Ops that do not split (AI CPU ops, reductions over axis 0) run as
one block and one tile.

The core count is the one of the node's SoC (``host/core/device.py`` ``soc_profile``: what the
node's supervisor reported), not this process's ``NPUEMU_SOC``: a program attached to a shared
node started with another SoC tiles for the node's cores.
"""

from __future__ import annotations

from dataclasses import dataclass

from npuemu.host.core import device

UB_BYTES = 192 * 1024
"""Unified buffer of one AI Core / vector core (Ascend 910B: 192 KiB)."""
MIN_BLOCK_BYTES = 64 * 1024
"""A block gets at least this much data (else fewer blocks are used)."""


@dataclass(frozen=True)
class Tiling:
    """What a kernel launch receives besides its tensors."""

    block_dim: int
    rows: int
    tile: int
    loops: int

    def args(self) -> tuple[int, int]:
        return self.rows, self.tile


def core_count(engine: str) -> int:
    """Cores of ``engine`` on the node's SoC (``shared/config.py`` profiles; 1 for AI CPU)."""
    if engine not in ("aicore", "aivector"):
        return 1
    prof = device.soc_profile()
    return prof.ai_core_num if engine == "aicore" else prof.vector_core_num


def rows_tiling(rows: int, row_bytes: int, engine: str) -> Tiling:
    """Split ``rows`` rows of ``row_bytes`` bytes (all tensors together) over ``engine``."""
    rows = max(rows, 1)
    row_bytes = max(row_bytes, 1)
    tile = max(1, UB_BYTES // row_bytes)
    per_block_min = max(1, MIN_BLOCK_BYTES // row_bytes)
    block_dim = max(1, min(core_count(engine), -(-rows // per_block_min)))
    per_block = -(-rows // block_dim)
    return Tiling(block_dim, rows, tile, -(-per_block // tile))


def single() -> Tiling:
    """One block, one tile (ops that do not split)."""
    return Tiling(1, 1, 1, 1)
