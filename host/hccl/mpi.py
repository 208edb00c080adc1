"""The MPI transport: ranks in different host processes (one node per process, on one host
or several), joined by MPI (mpi4py; the ``mpi`` extra installs it with the ``mpich`` wheel).

**When it is used.** ``comm_init_root_info(n, root_info, rank)`` takes this path when mpi4py
is initialised in the process and ``MPI.COMM_WORLD`` has exactly ``n`` ranks (the hccl_test
call sequence: MPI init, root info broadcast over MPI, ``HcclCommInitRootInfo``). The MPI
rank must equal the HCCL rank. Each process drives one card: its rank's.

**How a collective runs.** Device → host → MPI → host → device, all as tasks of the user's
stream: a DMA copy of the rank's data into a pinned host staging buffer (``malloc_host``,
async), a host function that calls MPI's own collective on the staging buffers
(``Allreduce``, ``Allgather``, ``Reduce_scatter_block``, ``Bcast``, ``Reduce``,
``Alltoall(v)``, ``Send``/``Recv``, ``Barrier``), and a DMA copy back. Messages larger than
the staging buffers (``HCCL_BUFFSIZE``) run in chunks. float16 reductions are done in
float32 by MPI (MPI has no half type) and rounded once.

Missing: ranks of one node in one process joined to ranks elsewhere (a process holds one rank
here); a bound on a peer's death (MPI itself decides: MPICH aborts the job); the host
functions cannot fail the stream, so an MPI error is recorded as the communicator's async
error (``HCCL_E_REMOTE``) and printed.

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
from npuemu.host.hccl.types import HcclError, HcclResult, buffer_bytes

_D2H, _H2D = 2, 1


def active(n_ranks: int) -> bool:
    """mpi4py is initialised here and its world has ``n_ranks`` ranks."""
    mod = sys.modules.get("mpi4py.MPI")
    if mod is None or not mod.Is_initialized() or mod.Is_finalized():
        return False
    return mod.COMM_WORLD.Get_size() == n_ranks and n_ranks > 1


@dataclass(eq=False)
class MpiLink:
    """The MPI side of one rank: its MPI communicator and pinned staging buffers."""

    world: object
    hin: int
    hout: int
    cap: int

    def view(self, ptr: int, nbytes: int, dtype: np.dtype) -> np.ndarray:
        raw = (ctypes.c_char * nbytes).from_address(ptr)
        return np.frombuffer(raw, dtype=dtype, count=nbytes // dtype.itemsize)


def connect(rank: int, n_ranks: int) -> MpiLink:
    """Check the MPI world against the HCCL rank and allocate the staging buffers (on the
    calling thread's current device's node)."""
    from mpi4py import MPI

    world = MPI.COMM_WORLD.Dup()
    if world.Get_rank() != rank:
        raise HcclError(HcclResult.HCCL_E_PARA,
                        f"HCCL rank {rank} differs from the MPI rank {world.Get_rank()}")
    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        raise HcclError(HcclResult.HCCL_E_NOT_SUPPORT, "MPI must be initialised with "
                        "MPI_THREAD_MULTIPLE (mpi4py's default)")
    cap = buffer_bytes()
    return MpiLink(world, memory.malloc_host(cap), memory.malloc_host(cap), cap)


def close(link: MpiLink) -> None:
    for ptr in (link.hin, link.hout):
        memory.free_host(ptr)
    link.world.Free()


def _mpi_op(name: str) -> object:
    from mpi4py import MPI

    return {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}[name]


class Plan:
    """Queue the device→host, MPI, host→device tasks of one rank on one stream."""

    def __init__(self, comm: object, stream: object, dtype: np.dtype) -> None:
        self.c, self.s, self.dt = comm, stream, dtype
        self.m: MpiLink = comm.mpi
        self.e, self.p, self.r = dtype.itemsize, comm.size, comm.rank

    def down(self, host_off: int, dev: int, elems: int) -> None:
        n = elems * self.e
        if n:
            memory.memcpy_async(self.m.hin + host_off * self.e, n, dev, n, _D2H, self.s.handle)

    def up(self, dev: int, host_off: int, elems: int) -> None:
        n = elems * self.e
        if n:
            memory.memcpy_async(dev, n, self.m.hout + host_off * self.e, n, _H2D, self.s.handle)

    def host(self, fn: Callable[[np.ndarray, np.ndarray], None], n_in: int,
             n_out: int) -> None:
        m, dt, comm = self.m, self.dt, self.c

        def run(_: object) -> None:
            try:
                fn(m.view(m.hin, max(n_in, 1) * dt.itemsize, dt)[:n_in],
                   m.view(m.hout, max(n_out, 1) * dt.itemsize, dt)[:n_out])
            except Exception:
                comm.async_error = int(HcclResult.HCCL_E_REMOTE)
                traceback.print_exc()

        callbacks.launch_host_func(self.s.handle, run, None)

    def chunk(self, divisor: int) -> int:
        return max(1, self.m.cap // (divisor * self.e))


def _reduce_fn(world: object, dt: np.dtype, op: str, kind: str,
               root: int = 0) -> Callable[[np.ndarray, np.ndarray], None]:
    mop = _mpi_op(op)

    def call(src: np.ndarray, dst: np.ndarray) -> None:
        a, b = src, dst
        if dt == np.float16:  # MPI has no half type: reduce in float32, round once
            a, b = src.astype(np.float32), np.empty(dst.size, np.float32)
        if kind == "all":
            world.Allreduce(a, b, op=mop)
        elif kind == "scatter":
            world.Reduce_scatter_block(a, b, op=mop)
        else:
            world.Reduce(a, b, op=mop, root=root)
        if b is not dst and (kind != "root" or world.Get_rank() == root):
            dst[:] = b
    return call


def all_reduce(comm: object, stream: object, dt: np.dtype, send: int, recv: int, count: int,
               op: str) -> None:
    plan = Plan(comm, stream, dt)
    m = plan.chunk(1)
    for c0 in range(0, count, m):
        n = min(m, count - c0)
        plan.down(0, send + c0 * plan.e, n)
        plan.host(_reduce_fn(plan.m.world, dt, op, "all"), n, n)
        plan.up(recv + c0 * plan.e, 0, n)


def reduce(comm: object, stream: object, dt: np.dtype, send: int, recv: int, count: int,
           op: str, root: int) -> None:
    plan = Plan(comm, stream, dt)
    m = plan.chunk(1)
    for c0 in range(0, count, m):
        n = min(m, count - c0)
        plan.down(0, send + c0 * plan.e, n)
        plan.host(_reduce_fn(plan.m.world, dt, op, "root", root), n, n)
        if plan.r == root:
            plan.up(recv + c0 * plan.e, 0, n)


def broadcast(comm: object, stream: object, dt: np.dtype, buf: int, count: int,
              root: int) -> None:
    plan = Plan(comm, stream, dt)
    m, world, me = plan.chunk(1), plan.m.world, plan.r

    def bcast(src: np.ndarray, dst: np.ndarray) -> None:
        world.Bcast(src.view(np.uint8), root=root)
        if me != root:
            dst[:] = src

    for c0 in range(0, count, m):
        n = min(m, count - c0)
        if me == root:
            plan.down(0, buf + c0 * plan.e, n)
        plan.host(bcast, n, n)
        if me != root:
            plan.up(buf + c0 * plan.e, 0, n)


def all_gather(comm: object, stream: object, dt: np.dtype, send: int, recv: int,
               count: int) -> None:
    plan = Plan(comm, stream, dt)
    p, e, world = plan.p, plan.e, plan.m.world
    m = plan.chunk(p)
    for c0 in range(0, count, m):
        n = min(m, count - c0)
        plan.down(0, send + c0 * e, n)
        plan.host(lambda src, dst: world.Allgather(src.view(np.uint8), dst.view(np.uint8)),
                  n, n * p)
        for j in range(p):
            plan.up(recv + (j * count + c0) * e, j * n, n)


def _blocks_down(plan: Plan, send: int, count: int, c0: int, n: int) -> None:
    for j in range(plan.p):
        plan.down(j * n, send + (j * count + c0) * plan.e, n)


def reduce_scatter(comm: object, stream: object, dt: np.dtype, send: int, recv: int,
                   count: int, op: str) -> None:
    plan = Plan(comm, stream, dt)
    m = plan.chunk(plan.p)
    for c0 in range(0, count, m):
        n = min(m, count - c0)
        _blocks_down(plan, send, count, c0, n)
        plan.host(_reduce_fn(plan.m.world, dt, op, "scatter"), n * plan.p, n)
        plan.up(recv + c0 * plan.e, 0, n)


def all_to_all(comm: object, stream: object, dt: np.dtype, send: int, recv: int,
               count: int) -> None:
    plan = Plan(comm, stream, dt)
    p, e, world = plan.p, plan.e, plan.m.world
    m = plan.chunk(p)
    for c0 in range(0, count, m):
        n = min(m, count - c0)
        _blocks_down(plan, send, count, c0, n)
        plan.host(lambda src, dst: world.Alltoall(src.view(np.uint8), dst.view(np.uint8)),
                  n * p, n * p)
        for j in range(p):
            plan.up(recv + (j * count + c0) * e, j * n, n)


def all_to_allv(comm: object, stream: object, dt: np.dtype, send: int, sc: list[int],
                sd: list[int], recv: int, rc: list[int], rd: list[int]) -> None:
    """Packed into the staging buffers (E_NOT_SUPPORT if either side exceeds them)."""
    plan = Plan(comm, stream, dt)
    e, world = plan.e, plan.m.world
    if max(sum(sc), sum(rc)) * e > plan.m.cap:
        raise HcclError(HcclResult.HCCL_E_NOT_SUPPORT,
                        "all_to_allv over MPI: more than HCCL_BUFFSIZE in or out")
    soff = np.cumsum([0, *sc[:-1]]).tolist()
    roff = np.cumsum([0, *rc[:-1]]).tolist()
    for j in range(plan.p):
        plan.down(soff[j], send + sd[j] * e, sc[j])
    plan.host(lambda src, dst: world.Alltoallv(
        [src.view(np.uint8), [x * e for x in sc], [x * e for x in soff], _byte()],
        [dst.view(np.uint8), [x * e for x in rc], [x * e for x in roff], _byte()]),
        sum(sc), sum(rc))
    for j in range(plan.p):
        plan.up(recv + rd[j] * e, roff[j], rc[j])


def _byte() -> object:
    from mpi4py import MPI

    return MPI.BYTE


def send(comm: object, stream: object, dt: np.dtype, buf: int, count: int, dest: int) -> None:
    plan = Plan(comm, stream, dt)
    m, world = plan.chunk(1), plan.m.world
    for c0 in range(0, count, m):
        n = min(m, count - c0)
        plan.down(0, buf + c0 * plan.e, n)
        plan.host(lambda src, dst: world.Send(src.view(np.uint8), dest=dest, tag=7), n, 0)


def recv(comm: object, stream: object, dt: np.dtype, buf: int, count: int, src: int) -> None:
    plan = Plan(comm, stream, dt)
    m, world = plan.chunk(1), plan.m.world
    for c0 in range(0, count, m):
        n = min(m, count - c0)
        plan.host(lambda _s, dst: world.Recv(dst.view(np.uint8), source=src, tag=7), 0, n)
        plan.up(buf + c0 * plan.e, 0, n)


def barrier(comm: object, stream: object, dt: np.dtype) -> None:
    plan = Plan(comm, stream, dt)
    plan.host(lambda _s, _d: plan.m.world.Barrier(), 0, 0)

