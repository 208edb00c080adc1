"""The MPI transport: ranks in different host processes (one node per process, on one host
or several), joined by MPI (mpi4py; the ``mpi`` extra installs it with the ``mpich`` wheel).

**When it is used.** ``comm_init_root_info(n, root_info, rank)`` takes this path when mpi4py
is initialised in the process and ``MPI.COMM_WORLD`` has exactly ``n`` ranks (the hccl_test
call sequence: MPI init, root info broadcast over MPI, ``HcclCommInitRootInfo``). The MPI
rank must equal the HCCL rank. Each process drives one card: its rank's.

**How a collective runs.** Device → host → MPI → host → device as one task of the user's
stream: a host function (``aclrtLaunchHostFunc``) that, when the stream reaches it, calls
MPI's own collective (``Allreduce``, ``Allgather``, ``Reduce_scatter_block``, ``Bcast``,
``Reduce``, ``Alltoall(v)``, ``Send``/``Recv``, ``Barrier``) directly on the host's mapping
of the card's arena (the mapping host↔device copies use; every buffer was checked at call
time and is checked again, poisoned pages included, when the task runs). No staging copy,
no chunking. float16 reductions are done in float32 by MPI (MPI has no half type) and
rounded once.

Missing: ranks of one node in one process joined to ranks elsewhere (a process holds one
rank here); a bound on a peer's death (MPI itself decides: MPICH aborts the job); the host
functions cannot fail the stream, so an MPI error is recorded as the communicator's async
error (``HCCL_E_REMOTE``) and printed. Blocking: each host function blocks its stream (not
the caller) for the MPI call.

Threading model: MPI is called from the runtime's host-function thread of the user's stream
(MPI_THREAD_MULTIPLE is required and checked); a rank's MPI calls are issued in the order of
its stream, which is the order every rank must call its collectives in (as HCCL requires).
"""

from __future__ import annotations

import ctypes
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from npuemu.host.core import callbacks, memory
from npuemu.host.hccl.types import HcclError, HcclResult


def active(n_ranks: int) -> bool:
    """mpi4py is initialised here and its world has ``n_ranks`` ranks."""
    mod = sys.modules.get("mpi4py.MPI")
    if mod is None or not mod.Is_initialized() or mod.Is_finalized():
        return False
    return mod.COMM_WORLD.Get_size() == n_ranks and n_ranks > 1


@dataclass(eq=False)
class MpiLink:
    """The MPI side of one rank: its own duplicate of ``MPI.COMM_WORLD``."""

    world: object


def connect(rank: int, n_ranks: int) -> MpiLink:
    """Check the MPI world against the HCCL rank (collective over MPI: every rank calls it)."""
    from mpi4py import MPI

    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        raise HcclError(HcclResult.HCCL_E_NOT_SUPPORT, "MPI must be initialised with "
                        "MPI_THREAD_MULTIPLE (mpi4py's default)")
    world = MPI.COMM_WORLD.Dup()
    if world.Get_rank() != rank:
        world.Free()
        raise HcclError(HcclResult.HCCL_E_PARA,
                        f"HCCL rank {rank} differs from the MPI rank {MPI.COMM_WORLD.Get_rank()}")
    return MpiLink(world)


def close(link: MpiLink) -> None:
    link.world.Free()


def _mpi():
    from mpi4py import MPI

    return MPI


def view(ptr: int, elems: int, dt: np.dtype) -> np.ndarray:
    """The host's mapping of ``elems`` elements of device memory at ``ptr`` (checked)."""
    nbytes = elems * dt.itemsize
    if nbytes == 0:
        return np.empty(0, dt)
    _alloc, addr = memory._device_address(ptr, nbytes)
    return np.frombuffer((ctypes.c_char * nbytes).from_address(addr), dtype=dt)


def _on_stream(comm: object, stream: object, fn: Callable[[], None]) -> None:
    """Queue ``fn`` as a host function of ``stream``; a failure becomes the communicator's
    async error (HCCL_E_REMOTE) and is printed (a host function cannot fail its stream)."""
    def run(_: object) -> None:
        try:
            fn()
        except Exception:
            comm.async_error = int(HcclResult.HCCL_E_REMOTE)
            traceback.print_exc()

    callbacks.launch_host_func(stream.handle, run, None)


def _reduce(world: object, dt: np.dtype, op: str, kind: str, src: np.ndarray,
            dst: np.ndarray | None, root: int = 0) -> None:
    MPI = _mpi()
    mop = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}[op]
    a, b = src, dst
    if dt == np.float16:  # MPI has no half type: reduce in float32, round once
        a = src.astype(np.float32)
        b = None if dst is None else np.empty(dst.size, np.float32)
    if kind == "all":
        world.Allreduce(a, b, op=mop)
    elif kind == "scatter":
        world.Reduce_scatter_block(a, b, op=mop)
    else:
        world.Reduce(a, b, op=mop, root=root)
    if b is not dst and dst is not None:
        dst[:] = b


def all_reduce(comm: object, stream: object, dt: np.dtype, send: int, recv: int, count: int,
               op: str) -> None:
    world = comm.mpi.world
    if send == recv:
        def fn() -> None:
            buf = view(send, count, dt)
            _reduce(world, dt, op, "all", buf.copy(), buf)
    else:
        def fn() -> None:
            _reduce(world, dt, op, "all", view(send, count, dt), view(recv, count, dt))
    _on_stream(comm, stream, fn)


def reduce(comm: object, stream: object, dt: np.dtype, send: int, recv: int, count: int,
           op: str, root: int) -> None:
    world, me = comm.mpi.world, comm.rank

    def fn() -> None:
        src = view(send, count, dt)
        if me == root:
            _reduce(world, dt, op, "root", src.copy() if send == recv else src,
                    view(recv, count, dt), root)
        else:
            _reduce(world, dt, op, "root", src, None, root)
    _on_stream(comm, stream, fn)


def broadcast(comm: object, stream: object, dt: np.dtype, buf: int, count: int,
              root: int) -> None:
    world = comm.mpi.world
    _on_stream(comm, stream, lambda: world.Bcast(view(buf, count, dt).view(np.uint8),
                                                   root=root))


def all_gather(comm: object, stream: object, dt: np.dtype, send: int, recv: int,
               count: int) -> None:
    world, p = comm.mpi.world, comm.size
    _on_stream(comm, stream, lambda: world.Allgather(view(send, count, dt).view(np.uint8),
                                                     view(recv, count * p, dt).view(np.uint8)))


def reduce_scatter(comm: object, stream: object, dt: np.dtype, send: int, recv: int,
                   count: int, op: str) -> None:
    world, p = comm.mpi.world, comm.size
    _on_stream(comm, stream, lambda: _reduce(world, dt, op, "scatter",
                                             view(send, count * p, dt), view(recv, count, dt)))


def all_to_all(comm: object, stream: object, dt: np.dtype, send: int, recv: int,
               count: int) -> None:
    world, p = comm.mpi.world, comm.size
    _on_stream(comm, stream, lambda: world.Alltoall(view(send, count * p, dt).view(np.uint8),
                                                    view(recv, count * p, dt).view(np.uint8)))


def all_to_allv(comm: object, stream: object, dt: np.dtype, send: int, sc: list[int],
                sd: list[int], recv: int, rc: list[int], rd: list[int]) -> None:
    world, e = comm.mpi.world, dt.itemsize
    s_n = max((d + c for d, c in zip(sd, sc, strict=True) if c), default=0)
    r_n = max((d + c for d, c in zip(rd, rc, strict=True) if c), default=0)

    def fn() -> None:
        byte = _mpi().BYTE
        world.Alltoallv([view(send, s_n, dt).view(np.uint8), [c * e for c in sc],
                         [d * e for d in sd], byte],
                        [view(recv, r_n, dt).view(np.uint8), [c * e for c in rc],
                         [d * e for d in rd], byte])
    _on_stream(comm, stream, fn)


def send(comm: object, stream: object, dt: np.dtype, buf: int, count: int, dest: int) -> None:
    world = comm.mpi.world
    _on_stream(comm, stream, lambda: world.Send(view(buf, count, dt).view(np.uint8),
                                                dest=dest, tag=7))


def recv(comm: object, stream: object, dt: np.dtype, buf: int, count: int, src: int) -> None:
    world = comm.mpi.world
    _on_stream(comm, stream, lambda: world.Recv(view(buf, count, dt).view(np.uint8),
                                                source=src, tag=7))


def barrier(comm: object, stream: object, dt: np.dtype) -> None:
    world = comm.mpi.world
    _on_stream(comm, stream, world.Barrier)
