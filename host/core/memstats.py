"""Memory statistics of this process and its cards: page pools, torch-style counters, and a
snapshot in the format of ``torch.cuda.memory._snapshot()``.

* :func:`pool_stats` -- the card's page pools (``device/pools.py``): one round trip
  (``Op.MEM_POOLS``); blocks for it. Frees queued earlier are counted.
* :func:`memory_stats` -- the caching allocator's counters under torch.npu / torch.cuda key
  names (``allocated_bytes.all.current``, ``reserved_bytes.all.peak``,
  ``num_alloc_retries``, ...). No round trip. Only the ``all`` pool is reported (the
  ``small_pool`` / ``large_pool`` split and the ``inactive_split*`` keys are 0 or absent:
  this allocator never splits a block).
* :func:`snapshot` -- ``{"segments": [...], "device_traces": [[], ...]}`` as
  ``torch.cuda.memory._snapshot()`` returns it, so PyTorch's memory viewer
  (``pytorch.org/memory_viz``) opens a pickle of it. Every device allocation of this process
  is one segment holding one block: blocks lent by the caching allocator are
  ``active_allocated``, cached ones ``inactive``, and ``acl.rt.malloc`` blocks (uncached)
  ``active_allocated``. Frames are filled when ``NPUEMU_TRACK_ALLOC=1``, and so are
  ``device_traces`` (the viewer's timeline): the caching allocator's events per card as
  torch records them -- ``segment_alloc`` (a device malloc), ``alloc``, ``free_requested``,
  ``free_completed`` (at once, or when the card's streams have passed the free point),
  ``segment_free`` (``empty_cache``, reset) -- each with ``addr``, ``size``, ``stream`` (0:
  blocks are not stream-ordered), ``time_us`` and ``frames``; at most ``TRACE_MAX`` per card.
  Blocks outside the cache (``acl.rt.malloc``, pools, physical handles) are traced as a
  segment of one block: ``segment_alloc`` + ``alloc`` at the malloc, ``free_requested`` +
  ``free_completed`` + ``segment_free`` at the free.
* :func:`leak_report` -- live blocks with the line that allocated each (to find
  what keeps HBM use growing across inferences).

Threading model: no threads; any thread may call in (the caching allocator and the runtime
have their own locks).
"""

from __future__ import annotations

import operator
import os
from typing import Any

from npuemu.host.core import caching, memory, runtime
from npuemu.host.core.runtime import Allocation
from npuemu.host.driver.interface import Link
from npuemu.shared import errors
from npuemu.shared.protocol import Op

__all__ = ["PoolRow", "leak_report", "memory_stats", "node_snapshot", "pool_stats", "snapshot"]

ARENAS = ("hbm", "ddr")
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(runtime.__file__))))
_OURS = tuple(os.path.join(_ROOT, d) + os.sep for d in ("host", "device", "shared", "tools"))


def _link(dev: object) -> tuple[int, Link]:
    """``(logical id, link)`` of ``dev`` (None: the calling thread's device); attaches this
    process to the card if needed (as ``aclrtGetMemUsageInfo`` does)."""
    rt = runtime.get()
    if dev is None:
        logical = rt.current().device
    else:
        logical = runtime.index(dev, errors.ACL_ERROR_INVALID_PARAM, "device")
    return logical, rt.open_device(logical).link


class PoolRow(dict[str, Any]):
    """One page pool: ``name, reserved, used, free, largest_free, fragmentation``."""


def pool_stats(dev: object = None) -> dict[str, list[PoolRow]]:
    """The card's page pools per arena (``{"hbm": [...], "ddr": [...]}``), each pool a dict
    with ``name`` (normal, huge, huge1g), ``reserved``, ``used``, ``free``,
    ``largest_free`` (bytes) and ``fragmentation`` (0..1). One round trip; blocks."""
    _logical, link = _link(dev)
    memory.flush_frees(link)
    (arenas,) = link.call(Op.MEM_POOLS)
    out = {}
    for name, rows in zip(ARENAS, arenas, strict=True):
        out[name] = [PoolRow(name=r[0], reserved=r[1], used=r[2], free=r[3],
                             largest_free=r[4], fragmentation=r[5] / 1e6) for r in rows]
    return out


def memory_stats(dev: object = None) -> dict[str, int]:
    """The caching allocator's counters of the card, torch's key names (module docstring)."""
    _logical, link = _link(dev)
    c = caching.get().counters(link)
    stats = {
        "allocated_bytes.all.current": c.allocated,
        "allocated_bytes.all.peak": c.allocated_peak,
        "allocated_bytes.all.allocated": c.allocated_total,
        "allocated_bytes.all.freed": c.freed_total,
        "requested_bytes.all.current": c.requested,
        "requested_bytes.all.peak": c.requested_peak,
        "reserved_bytes.all.current": c.reserved,
        "reserved_bytes.all.peak": c.reserved_peak,
        "active_bytes.all.current": c.allocated,
        "active_bytes.all.peak": c.allocated_peak,
        "inactive_split_bytes.all.current": 0,
        "allocation.all.current": c.active,
        "allocation.all.peak": c.active_peak,
        "allocation.all.allocated": c.alloc_count,
        "allocation.all.freed": c.free_count,
        "active.all.current": c.active,
        "active.all.peak": c.active_peak,
        "segment.all.current": c.segments,
        "segment.all.peak": c.segments_peak,
        "segment.all.allocated": c.segment_alloc,
        "segment.all.freed": c.segment_free,
        "inactive_split.all.current": 0,
        "num_alloc_retries": c.retries,
        "num_ooms": c.ooms,
        "num_device_alloc": c.segment_alloc,
        "num_device_free": c.segment_free,
        "num_cache_hits": c.hits,
    }
    return stats


def _frames(stack: object) -> list[dict[str, Any]]:
    """Viewer frames (innermost first, as torch records them) of a ``StackSummary`` or of
    an ``Allocation.stack`` string."""
    if isinstance(stack, str):
        return _stack_frames(stack)
    return [{"filename": f.filename, "line": f.lineno, "name": f.name}
            for f in reversed(list(stack or ()))]  # type: ignore[call-overload]


def _stack_frames(text: str) -> list[dict[str, Any]]:
    """Frames of an ``Allocation.stack`` string (``traceback.format_stack`` lines)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith('File "'):
            try:
                fname, rest = line[6:].split('", line ', 1)
                lineno, name = rest.split(", in ", 1)
                out.append({"filename": fname, "line": int(lineno), "name": name})
            except ValueError:
                continue
    return list(reversed(out))


def _segment(dev: int, alloc: Allocation, size: int, requested: int, state: str,
             frames: list[dict[str, Any]]) -> dict[str, Any]:
    active = state == "active_allocated"
    return {
        "device": dev, "address": alloc.ptr, "total_size": alloc.span,
        "allocated_size": size if active else 0, "active_size": size if active else 0,
        "requested_size": requested if active else 0, "stream": 0,
        "segment_type": "small" if alloc.span <= caching.SMALL_LIMIT else "large",
        "segment_pool_id": (0, 0), "is_expandable": False, "frames": frames,
        "blocks": [{"address": alloc.ptr, "size": alloc.span,
                    "requested_size": requested if active else 0, "state": state,
                    "frames": frames}],
    }


def snapshot() -> dict[str, Any]:
    """This process's device memory as ``torch.cuda.memory._snapshot()`` shapes it."""
    rt = runtime.get()
    with rt.lock:
        devices = dict(rt.devices)
        allocations = list(rt.allocations.values())
    cache = caching.get()
    segments, seen = [], set()
    for logical, od in sorted(devices.items()):
        lent, cached = cache.blocks(od.link)
        for block in lent:
            seen.add(block.alloc.ptr)
            segments.append(_segment(logical, block.alloc, block.key[1], block.requested,
                                     "active_allocated", _frames(block.stack)))
        for block in cached:
            seen.add(block.alloc.ptr)
            segments.append(_segment(logical, block.alloc, block.key[1], 0, "inactive", []))
    logical_of = {id(od.link): d for d, od in devices.items()}
    for alloc in allocations:
        if alloc.ptr not in seen and id(alloc.link) in logical_of:
            segments.append(_segment(logical_of[id(alloc.link)], alloc, alloc.size, alloc.size,
                                     "active_allocated", _stack_frames(alloc.stack)))
    segments.sort(key=operator.itemgetter("device", "address"))
    ndev = max(devices, default=-1) + 1
    traces: list[list[dict[str, Any]]] = [[] for _ in range(ndev)]
    for logical, od in devices.items():
        traces[logical] = [{**e, "frames": _frames(e["frames"])} for e in cache.traces(od.link)]
    return {"segments": segments, "device_traces": traces}


def node_snapshot() -> dict[str, Any]:
    """Every live block of every process on the node's cards (``Op.SNAPSHOT`` per card, one
    round trip each), in the snapshot format; blocks carry ``client`` (the device-side slot
    of the owning process) and no frames (other processes' stacks are not known here)."""
    rt = runtime.get()
    segments = []
    ndev = len(rt.visible())
    for dev in range(ndev):
        link = rt.open_device(dev).link
        memory.flush_frees(link)
        (blocks,) = link.call(Op.SNAPSHOT)
        for ptr, span, page_class, client in blocks:
            seg = _segment(dev, Allocation(ptr, span, span, page_class, 0, link), span, span,
                           "active_allocated", [])
            seg["client"] = seg["blocks"][0]["client"] = client
            segments.append(seg)
    return {"segments": segments, "device_traces": [[] for _ in range(ndev)]}


def leak_report() -> list[dict[str, Any]]:
    """Live blocks of this process (lent by the cache or from ``acl.rt.malloc``): device,
    ptr, size and, with ``NPUEMU_TRACK_ALLOC=1``, ``where`` -- ``file:line in function``
    of the program line that allocated it (the innermost frame outside npuemu)."""
    out = []
    for seg in snapshot()["segments"]:
        block = seg["blocks"][0]
        if block["state"] != "active_allocated":
            continue
        frames = [f for f in block["frames"] if not f["filename"].startswith(_OURS)]
        where = (f"{frames[0]['filename']}:{frames[0]['line']} in {frames[0]['name']}"
                 if frames else "")
        out.append({"device": seg["device"], "ptr": block["address"],
                    "size": block["requested_size"], "where": where})
    return out
