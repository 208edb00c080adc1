"""C bodies of ``hccl.h`` (``libhccl.so``): root info, communicators, every collective,
send/receive and barrier, through the same HCCL the ``pyhccl`` face uses
(``npuemu.host.acl.hccl``): the same communicators, codes and card-executed collectives.

Codes are ``HcclResult``: a NULL pointer is HCCL_E_PTR (2); a runtime failure underneath is
HCCL_E_RUNTIME (15); a call npuemu does not emulate (``HcclBatchSendRecv``, ``HcclScatter``)
is HCCL_E_NOT_SUPPORT (5) with a log line. ``HcclCommInitRootInfoConfig`` reads no field of the
configuration (the buffer size comes from ``HCCL_BUFFSIZE``, as for the other inits).
``HcclCommInit*`` block until every rank joined (with the GIL released, so one process may
init N ranks from N threads); collectives are asynchronous on their stream.

Threads: nothing here holds state but ``_ffi`` (set once by ``bind``) and ``_strings``
(error strings, made once per code under ``_lock``).
"""

from __future__ import annotations

import threading
from typing import Any

from npuemu.host.acl import hccl as face
from npuemu.host.capi.exports import export
from npuemu.host.hccl.types import HCCL_ROOT_INFO_BYTES, HcclResult

_ffi: Any = None
_lock = threading.Lock()
_strings: dict[int, Any] = {}
E_PTR = int(HcclResult.HCCL_E_PTR)
NOT_SUPPORT = int(HcclResult.HCCL_E_NOT_SUPPORT)


def bind(ffi: Any) -> None:
    """Called by ``boot.attach`` with libhccl's FFI before its first call runs."""
    global _ffi
    _ffi = ffi


def _addr(p: Any) -> int:
    return int(_ffi.cast("uintptr_t", p))


def _comm_out(out: Any, result: tuple) -> int:
    ret, comm = result
    if ret == 0:
        out[0] = _ffi.cast("void *", comm)
    return ret


@export
def HcclGetRootInfo(root: Any) -> int:
    """Mirrors ``HcclGetRootInfo``: the 4108 bytes rank 0 hands to every rank."""
    if root == _ffi.NULL:
        return E_PTR
    ret, info = face.HcclGetRootInfo()
    if ret == 0:
        _ffi.memmove(root.internal, info.internal, HCCL_ROOT_INFO_BYTES)
    return ret


def _root_bytes(root: Any) -> bytes:
    return bytes(_ffi.buffer(root.internal, HCCL_ROOT_INFO_BYTES))


@export
def HcclCommInitRootInfo(n_ranks: int, root: Any, rank: int, out: Any) -> int:
    if root == _ffi.NULL or out == _ffi.NULL:
        return E_PTR
    return _comm_out(out, face.HcclCommInitRootInfo(n_ranks, _root_bytes(root), rank))


@export
def HcclCommInitRootInfoConfig(n_ranks: int, root: Any, rank: int, config: Any,
                               out: Any) -> int:
    if root == _ffi.NULL or out == _ffi.NULL or config == _ffi.NULL:
        return E_PTR
    return _comm_out(out, face.HcclCommInitRootInfo(n_ranks, _root_bytes(root), rank))


@export
def HcclCommInitClusterInfo(cluster: Any, rank: int, out: Any) -> int:
    if cluster == _ffi.NULL or out == _ffi.NULL:
        return E_PTR
    path = _ffi.string(cluster).decode()
    return _comm_out(out, face.HcclCommInitClusterInfo(path, rank))


@export
def HcclCommInitAll(ndev: int, devices: Any, comms: Any) -> int:
    """Mirrors ``HcclCommInitAll``: one communicator per device, made by this thread."""
    if devices == _ffi.NULL or comms == _ffi.NULL:
        return E_PTR
    ret, handles = face.HcclCommInitAll(list(_ffi.unpack(devices, ndev)))
    if ret == 0:
        for i, handle in enumerate(handles):
            comms[i] = _ffi.cast("void *", handle)
    return ret


@export
def HcclCommDestroy(comm: Any) -> int:
    return face.HcclCommDestroy(_addr(comm))


def _int_out(out: Any, result: tuple) -> int:
    if out == _ffi.NULL:
        return E_PTR
    ret, value = result
    if ret == 0:
        out[0] = value
    return ret


@export
def HcclGetRankSize(comm: Any, out: Any) -> int:
    return _int_out(out, face.HcclGetRankSize(_addr(comm)))


@export
def HcclGetRankId(comm: Any, out: Any) -> int:
    return _int_out(out, face.HcclGetRankId(_addr(comm)))


@export
def HcclGetCommAsyncError(comm: Any, out: Any) -> int:
    return _int_out(out, face.HcclGetCommAsyncError(_addr(comm)))


@export
def HcclGetErrorString(code: int) -> Any:
    """Mirrors ``HcclGetErrorString`` (a string that lives as long as the process)."""
    with _lock:
        if code not in _strings:
            _strings[code] = _ffi.new("char[]", face.HcclGetErrorString(code).encode())
        return _strings[code]


@export
def HcclAllReduce(send: Any, recv: Any, count: int, dtype: int, op: int, comm: Any,
                  s: Any) -> int:
    return face.HcclAllReduce(_addr(send), _addr(recv), count, dtype, op, _addr(comm), _addr(s))


@export
def HcclBroadcast(buf: Any, count: int, dtype: int, root: int, comm: Any, s: Any) -> int:
    return face.HcclBroadcast(_addr(buf), count, dtype, root, _addr(comm), _addr(s))


@export
def HcclReduceScatter(send: Any, recv: Any, count: int, dtype: int, op: int, comm: Any,
                      s: Any) -> int:
    return face.HcclReduceScatter(_addr(send), _addr(recv), count, dtype, op, _addr(comm),
                                  _addr(s))


@export
def HcclAllGather(send: Any, recv: Any, count: int, dtype: int, comm: Any, s: Any) -> int:
    return face.HcclAllGather(_addr(send), _addr(recv), count, dtype, _addr(comm), _addr(s))


@export
def HcclReduce(send: Any, recv: Any, count: int, dtype: int, op: int, root: int, comm: Any,
               s: Any) -> int:
    return face.HcclReduce(_addr(send), _addr(recv), count, dtype, op, root, _addr(comm),
                           _addr(s))


@export
def HcclAlltoAll(send: Any, send_count: int, send_type: int, recv: Any, recv_count: int,
                 recv_type: int, comm: Any, s: Any) -> int:
    return face.HcclAlltoAll(_addr(send), send_count, send_type, _addr(recv), recv_count,
                             recv_type, _addr(comm), _addr(s))


def _counts(comm: Any, *arrays: Any) -> list[list[int]] | None:
    ret, size = face.HcclGetRankSize(_addr(comm))
    if ret or _ffi.NULL in arrays:
        return None
    return [list(_ffi.unpack(_ffi.cast("uint64_t *", a), size)) for a in arrays]


@export
def HcclAlltoAllV(send: Any, send_counts: Any, sdispls: Any, send_type: int, recv: Any,
                  recv_counts: Any, rdispls: Any, recv_type: int, comm: Any, s: Any) -> int:
    """Mirrors ``HcclAlltoAllV``: the four arrays hold rank-size ``uint64_t`` each."""
    lists = _counts(comm, send_counts, sdispls, recv_counts, rdispls)
    if lists is None:
        return face.HcclAlltoAllV(0, [], [], send_type, 0, [], [], recv_type, _addr(comm),
                                  _addr(s)) or E_PTR
    sc, sd, rc, rd = lists
    return face.HcclAlltoAllV(_addr(send), sc, sd, send_type, _addr(recv), rc, rd, recv_type,
                              _addr(comm), _addr(s))


@export
def HcclSend(send: Any, count: int, dtype: int, dest: int, comm: Any, s: Any) -> int:
    return face.HcclSend(_addr(send), count, dtype, dest, _addr(comm), _addr(s))


@export
def HcclRecv(recv: Any, count: int, dtype: int, src: int, comm: Any, s: Any) -> int:
    return face.HcclRecv(_addr(recv), count, dtype, src, _addr(comm), _addr(s))


@export
def HcclBarrier(comm: Any, s: Any) -> int:
    return face.HcclBarrier(_addr(comm), _addr(s))
