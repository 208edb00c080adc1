"""Single operators from the Pythonic face: ``run_op``, ``op_cache_stats``,
``set_max_op_queue_num``.

    >>> from npuemu.host import DeviceArray
    >>> from npuemu.host.api.ops import run_op
    >>> x = DeviceArray.from_numpy(np.ones((8, 16), np.float32))
    >>> (y,) = run_op("Add", [x, x])                      # compile (or hit) + execute + sync
    >>> (s,) = run_op("ReduceSum", [x, np.array([1])], {"keep_dims": True})

Inputs are ``DeviceArray`` objects, or numpy arrays that become const inputs (uploaded, and
their bytes marked const as ``aclSetTensorConst`` does: axes, perm, shapes...). Attribute
types follow the Python values (bool, int, float, str, lists of those, a list of int lists).
``run_op`` compiles through the card's op map (``aclopCompileAndExecuteV2``), allocates the
outputs, queues the op on ``stream`` (the device's default stream if None) and, unless
``sync=False``, waits for it (raising the op's failure, e.g. 507018 for an AI CPU error).
Errors raise ``AclError`` subclasses carrying ``.code``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from npuemu.host.api.arrays import DeviceArray
from npuemu.host.api.devices import device_or_current
from npuemu.host.api.streams import Stream
from npuemu.host.core import stream as _stream
from npuemu.host.ops import cache as _cache
from npuemu.host.ops import desc as D
from npuemu.host.ops import executor, registry, signature
from npuemu.host.ops import types as T


def _attr(values: dict[str, Any] | None) -> D.OpAttr | None:
    if not values:
        return None
    attr = D.OpAttr()
    for name, v in values.items():
        attr.set(_kind(v), name, v)
    return attr


def _kind(v: Any) -> str:
    if isinstance(v, bool | np.bool_):
        return "bool"
    if isinstance(v, int | np.integer):
        return "int"
    if isinstance(v, float | np.floating):
        return "float"
    if isinstance(v, str):
        return "string"
    items = list(v)
    if items and all(isinstance(i, list | tuple) for i in items):
        return "list_list_int"
    if items and all(isinstance(i, str) for i in items):
        return "list_string"
    if items and all(isinstance(i, bool) for i in items):
        return "list_bool"
    if items and any(isinstance(i, float) for i in items):
        return "list_float"
    return "list_int"


def run_op(op_type: str, inputs: list[Any], attrs: dict[str, Any] | None = None, *,
           stream: Stream | None = None, fmt: int = T.ACL_FORMAT_ND,
           sync: bool = True) -> list[DeviceArray]:
    """Compile (or reuse) and execute one op; returns its outputs (see the module doc)."""
    arrays = [x for x in inputs if isinstance(x, DeviceArray)]
    device = stream.device if stream is not None else device_or_current(
        arrays[0].device if arrays else None)
    with device._current():
        descs, bufs, keep = [], [], []
        for x in inputs:
            const = not isinstance(x, DeviceArray)
            arr = DeviceArray.from_numpy(np.ascontiguousarray(x), device) if const else x
            keep.append(arr)
            d = D.TensorDesc(T.acl_dtype(arr.dtype), tuple(arr.shape), fmt)
            if const:
                d.const = np.ascontiguousarray(x).tobytes()
            descs.append(d)
            bufs.append(D.create_data_buffer(arr.ptr, arr.nbytes).handle)
        attr = _attr(attrs)
        op = registry.lookup(op_type)
        specs = [signature.spec(d) for d in descs]
        outs = signature.outputs(op, specs, [], registry.attrs_of(op, dict(attrs or {})))
        results = [DeviceArray(s.shape, T.user_dtype(s.dtype), device) for s in outs]
        out_descs = [D.TensorDesc(T.acl_dtype(r.dtype), tuple(r.shape), fmt) for r in results]
        out_bufs = [D.create_data_buffer(r.ptr, max(r.nbytes, 0)).handle for r in results]
        handle = stream.handle if stream is not None else 0
        try:
            executor.execute(op_type, descs, bufs, out_descs, out_bufs, attr, handle,
                             compile=True, remember=False)
            if sync:
                _stream.synchronize_stream(handle)
        finally:
            for b in (*bufs, *out_bufs):
                D.destroy_data_buffer(b)
    return results


def op_cache_stats(device: int | None = None) -> dict[str, int]:
    """Op cache statistics of this process (every card, or one): memory hits, disk hits,
    misses, re-tiles, dynamic tiles, evictions, compiles, compile/re-tile time (ns),
    entries, static entries, HBM bytes of loaded kernels, capacity, disk reads/writes/
    corrupt files/aged files."""
    return _cache.stats(device)


def set_max_op_queue_num(n: int) -> None:
    """``aclopSetMaxOpQueueNum``: LRU capacity (entries) of every card's op map."""
    _cache.set_capacity(n)
