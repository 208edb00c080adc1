"""The MPI transport: ranks in different host processes (one node per process, on one host
or several), joined by MPI (mpi4py; the ``mpi`` extra installs it with the ``mpich`` wheel).

**When it is used.** ``comm_init_root_info(n, root_info, rank)`` (and
``comm_init_cluster_info``, see below) takes this path when mpi4py is initialised in the
process and ``MPI.COMM_WORLD`` has exactly ``n`` ranks (the hccl_test call sequence: MPI
init, root info broadcast over MPI, ``HcclCommInitRootInfo``). The MPI rank must equal the
HCCL rank. Each process drives one card: its rank's.

**How a collective runs.** Device → host → MPI → host → device as one task of the user's
stream: a host function (``aclrtLaunchHostFunc``) that, when the stream reaches it, calls
MPI's own collective (``Allreduce``, ``Allgather``, ``Reduce_scatter_block``, ``Bcast``,
``Reduce``, ``Alltoall(v)``, ``Send``/``Recv``, ``Barrier``) directly on the host's mapping
of the card's arena (``memory.host_view``: the mapping host↔device copies use; every
buffer was checked at call time and is checked again, poisoned pages included, when the
task runs). No staging copy, no chunking of our own (MPI pipelines large messages itself);
in-place all_reduce and reduce use ``MPI_IN_PLACE``. float16 and bfloat16 (no MPI type)
reduce through an MPI user op on their uint16 bits, pairwise and rounded at each step, as
the cards' reduce kernel does (``npuemu.shared.bf16.bf16_reduce`` for bfloat16).

**Cost** against MPI's own Allreduce (``tools/bench/hccl.py``, 2 processes): the same bytes
move through the same MPI call on the same memory, so what is added is the host-function
round trip that orders the call on the stream: about 3 ms per collective on the loaded
2-core test machine (8 B: ~3 ms against MPI's ~20-90 µs), a few % at 64 MiB (0.96x of MPI on
the same buffers in one run). MPI is ~10% slower on the arenas than on numpy buffers in any
case: arenas are POSIX shared memory (4 KiB pages when ``shmem_enabled`` is ``never``),
numpy's large buffers get transparent huge pages.

**Rank tables.** ``comm_init_cluster_info`` takes this path too when MPI is active with one
process per rank; each rank drives the card its ``device_id`` names on its own process's
node (``ranktable.py``).

Missing: ranks of one node in one process joined to ranks elsewhere (a process holds one
rank here); a bound on a peer's death (MPI itself decides: MPICH aborts the job); the host
functions cannot fail the stream, so an MPI error is recorded as the communicator's async
error (``HCCL_E_REMOTE``) and printed. Blocking: each host function blocks its stream (not
the caller) for the MPI call.

Threading model: MPI is called from the runtime's host-function thread of the user's stream
(MPI_THREAD_MULTIPLE is required and checked); a rank's MPI calls are issued in the order of
its stream, which is the order every rank must call its collectives in (as HCCL requires).
``_user_ops_lock`` guards the cache of MPI user ops (created on first use by any of those
threads, never freed before MPI finalises).
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

import numpy as np

from npuemu.host.core import callbacks, memory
from npuemu.host.core.stream import Stream
from npuemu.host.hccl.types import HcclError, HcclResult, bf16_reduce, is_bf16

if TYPE_CHECKING:  # mpi4py is imported when MPI is used, not with this module
    from mpi4py import MPI
    from mpi4py.typing import Buffer


def active(n_ranks: int) -> bool:
    """mpi4py is initialised here and its world has ``n_ranks`` ranks."""
    mod = sys.modules.get("mpi4py.MPI")
    if mod is None or not mod.Is_initialized() or mod.Is_finalized():
        return False
    return mod.COMM_WORLD.Get_size() == n_ranks and n_ranks > 1


@dataclass(eq=False)
class MpiLink:
    """The MPI side of one rank: its own duplicate of ``MPI.COMM_WORLD``."""

    world: MPI.Intracomm


class Rank(Protocol):
    """What this module uses of a rank: ``comm.py`` ``Communicator`` (which imports this
    module), joined over MPI."""

    rank: int
    mpi: MpiLink | None

    @property
    def size(self) -> int: ...
    @property
    def async_error(self) -> int: ...
    @async_error.setter
    def async_error(self, value: int) -> None: ...


def _world(comm: Rank) -> MPI.Intracomm:
    assert comm.mpi is not None  # collectives.py sends only ranks joined over MPI here
    return comm.mpi.world


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


def _mpi() -> ModuleType:
    from mpi4py import MPI

    return MPI


def view(ptr: int, elems: int, dt: np.dtype) -> np.ndarray:
    """The host's mapping of ``elems`` elements of device memory at ``ptr`` (checked by
    ``memory.host_view``; no copy)."""
    return np.frombuffer(memory.host_view(ptr, elems * dt.itemsize), dtype=np.dtype(dt.str))


def _on_stream(comm: Rank, stream: Stream, fn: Callable[[], None]) -> None:
    """Queue ``fn`` as a host function of ``stream``; a failure becomes the communicator's
    async error (HCCL_E_REMOTE) and is printed (a host function cannot fail its stream)."""
    def run(_: object) -> None:
        try:
            fn()
        except Exception:
            comm.async_error = int(HcclResult.HCCL_E_REMOTE)
            traceback.print_exc()

    callbacks.launch_host_func(stream.handle, run, None)


_user_ops: dict[tuple[str, str], MPI.Op] = {}
_user_ops_lock = threading.Lock()


def _half_op(kind: str, op: str) -> MPI.Op:
    """An MPI user op reducing 16-bit floats MPI has no type for (``float16``, or
    ``bfloat16`` bits through ``bf16_reduce``), pairwise and rounded at each step as the
    cards' reduce kernel does. Created once per (kind, op)."""
    key = (kind, op)
    with _user_ops_lock:
        if key not in _user_ops:
            _user_ops[key] = _make_half_op(kind, op)
        return _user_ops[key]


def _bits(buf: Buffer) -> np.ndarray:
    """The 16-bit words of a buffer MPI hands a user op (an ``MPI.buffer``, no copy)."""
    # numpy's stubs list no MPI.buffer, which has the buffer protocol frombuffer reads
    return np.frombuffer(buf, np.uint16)  # type: ignore[call-overload]


def _make_half_op(kind: str, op: str) -> MPI.Op:
    fn = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[op]

    def apply(inbuf: Buffer, inout: Buffer, _datatype: MPI.Datatype) -> None:
        a = _bits(inbuf)
        acc = _bits(inout)
        if kind == "bfloat16":
            bf16_reduce(op, acc, a)
        else:
            h = acc.view(np.float16)
            fn(h, a.view(np.float16), out=h)

    return _mpi().Op.Create(apply, commute=True)


def _reduce(world: MPI.Intracomm, dt: np.dtype, op: str, kind: str,
            src: np.ndarray | MPI.InPlaceType, dst: np.ndarray | None, root: int = 0) -> None:
    """MPI's reduction ``kind`` (all, scatter, root): predefined ops on MPI's own types, a
    user op on uint16 bits for float16 and bfloat16. ``src`` may be ``MPI.IN_PLACE``."""
    MPI = _mpi()
    half = "bfloat16" if is_bf16(dt) else ("float16" if dt == np.float16 else None)
    if half:
        mop = _half_op(half, op)
        src = src.view(np.uint16) if isinstance(src, np.ndarray) else src  # or IN_PLACE
        dst = None if dst is None else dst.view(np.uint16)
    else:
        mop = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}[op]
    if kind == "all":
        world.Allreduce(src, dst, op=mop)
    elif kind == "scatter":
        world.Reduce_scatter_block(src, dst, op=mop)
    else:
        world.Reduce(src, dst, op=mop, root=root)


def all_reduce(comm: Rank, stream: Stream, dt: np.dtype, send: int, recv: int, count: int,
               op: str) -> None:
    world = _world(comm)

    def fn() -> None:
        out = view(recv, count, dt)
        src = _mpi().IN_PLACE if send == recv else view(send, count, dt)
        _reduce(world, dt, op, "all", src, out)
    _on_stream(comm, stream, fn)


def reduce(comm: Rank, stream: Stream, dt: np.dtype, send: int, recv: int, count: int,
           op: str, root: int) -> None:
    world, me = _world(comm), comm.rank

    def fn() -> None:
        if me == root:
            src = _mpi().IN_PLACE if send == recv else view(send, count, dt)
            _reduce(world, dt, op, "root", src, view(recv, count, dt), root)
        else:
            _reduce(world, dt, op, "root", view(send, count, dt), None, root)
    _on_stream(comm, stream, fn)


def broadcast(comm: Rank, stream: Stream, dt: np.dtype, buf: int, count: int,
              root: int) -> None:
    world = _world(comm)
    _on_stream(comm, stream, lambda: world.Bcast(view(buf, count, dt).view(np.uint8),
                                                   root=root))


def all_gather(comm: Rank, stream: Stream, dt: np.dtype, send: int, recv: int,
               count: int) -> None:
    world, p = _world(comm), comm.size
    _on_stream(comm, stream, lambda: world.Allgather(view(send, count, dt).view(np.uint8),
                                                     view(recv, count * p, dt).view(np.uint8)))


def reduce_scatter(comm: Rank, stream: Stream, dt: np.dtype, send: int, recv: int,
                   count: int, op: str) -> None:
    world, p = _world(comm), comm.size
    _on_stream(comm, stream, lambda: _reduce(world, dt, op, "scatter",
                                             view(send, count * p, dt), view(recv, count, dt)))


def all_to_all(comm: Rank, stream: Stream, dt: np.dtype, send: int, recv: int,
               count: int) -> None:
    world, p = _world(comm), comm.size
    _on_stream(comm, stream, lambda: world.Alltoall(view(send, count * p, dt).view(np.uint8),
                                                    view(recv, count * p, dt).view(np.uint8)))


def all_to_allv(comm: Rank, stream: Stream, dt: np.dtype, send: int, sc: list[int],
                sd: list[int], recv: int, rc: list[int], rd: list[int]) -> None:
    world, e = _world(comm), dt.itemsize
    s_n = max((d + c for d, c in zip(sd, sc, strict=True) if c), default=0)
    r_n = max((d + c for d, c in zip(rd, rc, strict=True) if c), default=0)

    def fn() -> None:
        byte = _mpi().BYTE
        world.Alltoallv([view(send, s_n, dt).view(np.uint8), [c * e for c in sc],
                         [d * e for d in sd], byte],
                        [view(recv, r_n, dt).view(np.uint8), [c * e for c in rc],
                         [d * e for d in rd], byte])
    _on_stream(comm, stream, fn)


def send(comm: Rank, stream: Stream, dt: np.dtype, buf: int, count: int, dest: int) -> None:
    world = _world(comm)
    _on_stream(comm, stream, lambda: world.Send(view(buf, count, dt).view(np.uint8),
                                                dest=dest, tag=7))


def recv(comm: Rank, stream: Stream, dt: np.dtype, buf: int, count: int, src: int) -> None:
    world = _world(comm)
    _on_stream(comm, stream, lambda: world.Recv(view(buf, count, dt).view(np.uint8),
                                                source=src, tag=7))


def barrier(comm: Rank, stream: Stream, dt: np.dtype) -> None:
    world = _world(comm)
    _on_stream(comm, stream, world.Barrier)
