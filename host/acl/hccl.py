"""npuemu's ``pyhccl``-compatible module (the Python bindings of HCCL): ``import pyhccl``
resolves here under ``npuemu run``, and it is importable as ``npuemu.host.acl.hccl``.

As pyhccl: function names are HCCL's C names; pointers, communicators and streams are ints;
**a function with outputs returns ``(ret, out…)``** (the opposite of pyACL's ``(…, ret)``);
collectives return ``ret``. Enum values are module constants and enum classes. Root info is
a ``bytes`` of ``HCCL_ROOT_INFO_BYTES`` (pyhccl wraps it in an ``HcclRootInfo`` struct whose
``internal`` field holds them; ``HcclRootInfo`` here is that struct, and the functions take
either). Every call blocks only for argument checks and queueing; collectives are async on
their stream.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from npuemu.host import hccl as _h
from npuemu.host.hccl import comm as _comm
from npuemu.host.hccl.types import (
    HcclDataType,
    HcclError,
    HcclReduceOp,
    HcclResult,
    HcclSendRecvType,
    error_string,
)
from npuemu.shared import errors as _errors

globals().update({m.name: int(m) for e in (HcclResult, HcclDataType, HcclReduceOp,
                                           HcclSendRecvType) for m in e})


class HcclRootInfo:
    """pyhccl's struct: ``internal`` holds the root info bytes."""

    def __init__(self, internal: bytes = b"") -> None:
        self.internal = bytes(internal)


def _code(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn HcclError / AclError into HCCL's return code."""
    @functools.wraps(fn)
    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        except HcclError as err:
            return err.code if fn.__annotations__.get("return") == "int" else (err.code, None)
        except _errors.AclError:
            code = int(HcclResult.HCCL_E_RUNTIME)
            return code if fn.__annotations__.get("return") == "int" else (code, None)
    return call


def _root(root: object) -> bytes:
    return root.internal if isinstance(root, HcclRootInfo) else root  # type: ignore[return-value]


@_code
def HcclGetRootInfo() -> tuple:
    return 0, HcclRootInfo(_h.get_root_info())


@_code
def HcclCommInitRootInfo(n_ranks: int, root_info: object, rank: int) -> tuple:
    return 0, _h.comm_init_root_info(n_ranks, _root(root_info), rank).handle


@_code
def HcclCommInitClusterInfo(rank_table: str, rank: int) -> tuple:
    return 0, _h.comm_init_cluster_info(rank_table, rank).handle


@_code
def HcclCommInitAll(devices: list[int]) -> tuple:
    return 0, [c.handle for c in _h.comm_init_all(devices)]


@_code
def HcclGetRankSize(comm: int) -> tuple:
    return 0, _comm.get(comm).size


@_code
def HcclGetRankId(comm: int) -> tuple:
    return 0, _comm.get(comm).rank


@_code
def HcclGetCommAsyncError(comm: int) -> tuple:
    return 0, _comm.get(comm).async_error


@_code
def HcclCommDestroy(comm: int) -> int:
    _h.comm_destroy(comm)
    return 0


def HcclGetErrorString(code: int) -> str:
    return error_string(code)


def get_error_string(code: int) -> str:
    return error_string(code)


@_code
def HcclAllReduce(send: int, recv: int, count: int, dtype: int, op: int, comm: int,
                  stream: int) -> int:
    _h.all_reduce(send, recv, count, dtype, op, comm, stream)
    return 0


@_code
def HcclAllGather(send: int, recv: int, send_count: int, dtype: int, comm: int,
                  stream: int) -> int:
    _h.all_gather(send, recv, send_count, dtype, comm, stream)
    return 0


@_code
def HcclReduceScatter(send: int, recv: int, recv_count: int, dtype: int, op: int, comm: int,
                      stream: int) -> int:
    _h.reduce_scatter(send, recv, recv_count, dtype, op, comm, stream)
    return 0


@_code
def HcclBroadcast(buf: int, count: int, dtype: int, root: int, comm: int, stream: int) -> int:
    _h.broadcast(buf, count, dtype, root, comm, stream)
    return 0


@_code
def HcclReduce(send: int, recv: int, count: int, dtype: int, op: int, root: int, comm: int,
               stream: int) -> int:
    _h.reduce(send, recv, count, dtype, op, root, comm, stream)
    return 0


@_code
def HcclAlltoAll(send: int, send_count: int, send_type: int, recv: int, recv_count: int,
                 recv_type: int, comm: int, stream: int) -> int:
    _h.all_to_all(send, send_count, send_type, recv, recv_count, recv_type, comm, stream)
    return 0


@_code
def HcclAlltoAllV(send: int, send_counts: list, sdispls: list, send_type: int, recv: int,
                  recv_counts: list, rdispls: list, recv_type: int, comm: int,
                  stream: int) -> int:
    _h.all_to_allv(send, send_counts, sdispls, send_type, recv, recv_counts, rdispls,
                   recv_type, comm, stream)
    return 0


@_code
def HcclSend(send: int, count: int, dtype: int, dest: int, comm: int, stream: int) -> int:
    _h.send(send, count, dtype, dest, comm, stream)
    return 0


@_code
def HcclRecv(recv: int, count: int, dtype: int, src: int, comm: int, stream: int) -> int:
    _h.recv(recv, count, dtype, src, comm, stream)
    return 0


@_code
def HcclBarrier(comm: int, stream: int) -> int:
    _h.barrier(comm, stream)
    return 0


def data_type_size(dtype: int) -> int:
    from npuemu.host.hccl.types import numpy_dtype

    return numpy_dtype(dtype).itemsize


__all__ = [name for name in dir() if name.startswith(("Hccl", "HCCL_"))] + [
    "data_type_size", "get_error_string"]
