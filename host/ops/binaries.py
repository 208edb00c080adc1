"""The kernel binary of a signature, from this user's disk cache (``diskcache.py``) or else
built by the op compiler (``compiler.py``) and stored there. Host work only: blocks for the
build (milliseconds) or the file read; no threads, no state of its own (the disk cache has
its own). Used by the executor (compiles) and the single-op model loader (``models.py``);
``DeviceOpCache.load_binary`` then places a binary on a card.
"""

from __future__ import annotations

from typing import Any

from npuemu.host.core import plog
from npuemu.host.ops import compiler, diskcache
from npuemu.host.ops.registry import OpDef, Spec
from npuemu.shared import logring

__all__ = ["build"]


def build(op: OpDef, ins: list[Spec], outs: list[Spec], attrs: dict[str, Any],
          key: tuple, tiling: compiler.Tiling | None = None,
          ) -> tuple[compiler.KernelBinary, bool]:
    """``(binary, from_disk)`` for the signature whose op-map key is ``key``: the disk
    cache's entry if it has a good one, else a real build (stored there). ``tiling`` (a
    single-op model's) is baked in instead of the computed one and is part of the disk
    cache's key."""
    disk_key = key if tiling is None else (key, tuple(compiler.tiling_list(tiling)))
    shapes = tuple(s.shape for s in (*ins, *outs))
    cached = diskcache.read(disk_key)
    if cached is not None:
        try:
            return compiler.from_record(op, cached[0], cached[1], shapes), True
        except ValueError as err:
            diskcache.invalid(disk_key, f"has bad metadata ({err})")
    binary = compiler.build(op, ins, outs, attrs, tiling)
    if plog.debug:
        plog.log(logring.DEBUG, f"op compile {op.type} {[s.shape for s in ins]} "
                                f"{[s.dtype for s in ins]}: {binary.compile_ns / 1e3:.0f} us, "
                                f"{len(binary.source)} characters, tiling {binary.tiling}")
    diskcache.write(disk_key, {"op": op.type, "name": binary.name, "digest": binary.digest,
                               "tiling": compiler.tiling_list(binary.tiling),
                               "workspace": binary.workspace}, binary.source)
    return binary, False
