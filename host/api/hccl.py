"""The Pythonic face of the collectives: ``Communicator`` objects over ``DeviceArray``s,
raising ``HcclError`` (with ``.code``, an ``HcclResult``).

    comms = hccl.init_all([0, 1, 2, 3])            # HcclCommInitAll (devices set first)
    for c, x, y, s in zip(comms, xs, ys, streams):
        c.all_reduce(x, y, op="sum", stream=s)      # async on s
    ...
    for c in comms: c.destroy()

Every operation is asynchronous on its stream (default: the card's default stream) and
returns the output array. ``algo="mesh"|"ring"|"hier"`` overrides the algorithm
(``"staged-mesh"|"staged-ring"``: the older host-staged path, for comparison).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from npuemu.host import hccl as _h
from npuemu.host.api.arrays import DeviceArray
from npuemu.host.api.devices import Device
from npuemu.host.api.streams import Stream
from npuemu.host.hccl import comm as _comm
from npuemu.host.hccl.types import (
    BFLOAT16,
    NUMPY,
    HcclDataType,
    HcclError,
    HcclReduceOp,
    HcclResult,
    is_bf16,
)

_DTYPES = {np.dtype(name): int(code) for code, name in NUMPY.items()}
_OPS = {"sum": HcclReduceOp.HCCL_REDUCE_SUM, "prod": HcclReduceOp.HCCL_REDUCE_PROD,
        "max": HcclReduceOp.HCCL_REDUCE_MAX, "min": HcclReduceOp.HCCL_REDUCE_MIN}

get_root_info = _h.get_root_info
bfloat16 = BFLOAT16
"""The dtype of bfloat16 arrays (uint16 bits, tagged): ``DeviceArray.from_numpy(bits.view(
hccl.bfloat16), dev)`` is reduced as HCCL_DATA_TYPE_BFP16 (through float32, round to nearest
even; ``npuemu.shared.bf16`` converts)."""


def _dtype(arr: DeviceArray) -> int:
    if is_bf16(arr.dtype):
        return int(HcclDataType.HCCL_DATA_TYPE_BFP16)
    try:
        return _DTYPES[arr.dtype]
    except KeyError as err:
        raise HcclError(HcclResult.HCCL_E_NOT_SUPPORT, f"dtype {arr.dtype}") from err


def _op(op: str | int) -> int:
    if isinstance(op, str):
        if op not in _OPS:
            raise HcclError(HcclResult.HCCL_E_PARA, f"reduce op {op!r} not in {list(_OPS)}")
        return int(_OPS[op])
    return op


def _sh(stream: Stream | None) -> int:
    return 0 if stream is None else stream.handle


class Communicator:
    """One rank (an ``HcclComm``); use as a context manager to destroy it on exit."""

    def __init__(self, comm: _comm.Communicator) -> None:
        self._c = comm

    handle = property(lambda self: self._c.handle, doc="the int the pyhccl face uses")
    rank = property(lambda self: self._c.rank, doc="HcclGetRankId")
    size = property(lambda self: self._c.size, doc="HcclGetRankSize")
    device = property(lambda self: Device(self._c.device), doc="the rank's card")
    async_error = property(lambda self: self._c.async_error, doc="HcclGetCommAsyncError")

    def _out(self, like: DeviceArray, count: int) -> DeviceArray:
        return DeviceArray(count, like.dtype, self._c.device)

    def all_reduce(self, send: DeviceArray, recv: DeviceArray | None = None, op: str = "sum",
                   stream: Stream | None = None, algo: str | None = None) -> DeviceArray:
        recv = recv if recv is not None else self._out(send, send.size)
        _h.all_reduce(send.ptr, recv.ptr, send.size, _dtype(send), _op(op), self._c,
                      _sh(stream), algo=algo)
        return recv

    def all_gather(self, send: DeviceArray, recv: DeviceArray | None = None,
                   stream: Stream | None = None, algo: str | None = None) -> DeviceArray:
        recv = recv if recv is not None else self._out(send, send.size * self.size)
        _h.all_gather(send.ptr, recv.ptr, send.size, _dtype(send), self._c, _sh(stream),
                      algo=algo)
        return recv

    def reduce_scatter(self, send: DeviceArray, recv: DeviceArray | None = None,
                       op: str = "sum", stream: Stream | None = None,
                       algo: str | None = None) -> DeviceArray:
        count = send.size // self.size
        recv = recv if recv is not None else self._out(send, count)
        _h.reduce_scatter(send.ptr, recv.ptr, count, _dtype(send), _op(op), self._c,
                          _sh(stream), algo=algo)
        return recv

    def broadcast(self, buf: DeviceArray, root: int = 0, stream: Stream | None = None,
                  algo: str | None = None) -> DeviceArray:
        _h.broadcast(buf.ptr, buf.size, _dtype(buf), root, self._c, _sh(stream), algo=algo)
        return buf

    def reduce(self, send: DeviceArray, recv: DeviceArray, op: str = "sum", root: int = 0,
               stream: Stream | None = None) -> DeviceArray:
        _h.reduce(send.ptr, recv.ptr, send.size, _dtype(send), _op(op), root, self._c,
                  _sh(stream))
        return recv

    def all_to_all(self, send: DeviceArray, recv: DeviceArray | None = None,
                   stream: Stream | None = None) -> DeviceArray:
        recv = recv if recv is not None else self._out(send, send.size)
        count, dt = send.size // self.size, _dtype(send)
        _h.all_to_all(send.ptr, count, dt, recv.ptr, count, dt, self._c, _sh(stream))
        return recv

    def send(self, arr: DeviceArray, dest: int, stream: Stream | None = None) -> None:
        _h.send(arr.ptr, arr.size, _dtype(arr), dest, self._c, _sh(stream))

    def recv(self, arr: DeviceArray, src: int, stream: Stream | None = None) -> DeviceArray:
        _h.recv(arr.ptr, arr.size, _dtype(arr), src, self._c, _sh(stream))
        return arr

    def barrier(self, stream: Stream | None = None) -> None:
        _h.barrier(self._c, _sh(stream))

    def destroy(self) -> None:
        """``HcclCommDestroy`` (a second call is a no-op)."""
        if not self._c.destroyed:
            _h.comm_destroy(self._c)

    def __enter__(self) -> Communicator:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.destroy()


def init_all(devices: list[int | Device]) -> list[Communicator]:
    """``HcclCommInitAll``: one communicator per card, rank i on ``devices[i]`` (attached
    here if needed)."""
    devs = [d if isinstance(d, Device) else Device(d) for d in devices]
    for d in devs:
        d._open()
    return [Communicator(c) for c in _h.comm_init_all([d.id for d in devs])]


def init_root_info(n_ranks: int, root_info: bytes, rank: int) -> Communicator:
    """``HcclCommInitRootInfo`` on the calling thread's current device (blocks until all
    ranks joined)."""
    return Communicator(_h.comm_init_root_info(n_ranks, root_info, rank))


def init_cluster_info(rank_table_file: str, rank: int) -> Communicator:
    """``HcclCommInitClusterInfo``: the card comes from the rank table."""
    return Communicator(_h.comm_init_cluster_info(rank_table_file, rank))


__all__ = ["Communicator", "HcclError", "bfloat16", "get_root_info", "init_all",
           "init_cluster_info", "init_root_info"]
