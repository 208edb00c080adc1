"""Communicators (``HcclCommInitAll``, ``HcclCommInitRootInfo``, ``HcclCommInitClusterInfo``)
and the two mechanisms every collective is built from: stream steps and rendezvous points.

**Where ranks live.** All ranks of a communicator live in **one host process** (several
cards driven by one program with ``comm_init_all``, or one thread per card with
``comm_init_root_info`` / ``comm_init_cluster_info``, as HCCL allows). Ranks in different
host processes are **not implemented**: the emulated runtime refuses a device pointer of
another process, and there are no IPC memory handles yet, so a root info used by another
process never sees its peers and init fails with ``HCCL_E_TIMEOUT`` after
``HCCL_CONNECT_TIMEOUT``. Across hosts (MPI) is not implemented either.

**Buffers.** Each rank owns an input and an output buffer of ``HCCL_BUFFSIZE`` MB on its
card (HCCL's "CCL buffers"), allocated at init. Their addresses are known to every rank, so
a rank can queue its whole part of a collective on its stream at call time: it stages its
data into its own input buffer, and pulls peers' data from their buffers with its own DMA
engine (P2P copies, peer access enabled at init between the ranks' cards of one HCCS group;
from a peer in another group it reads that peer's pinned host mirror) into its output
buffer or the user's buffer; reductions run as the ``reduce`` kernel (``kernels.py``) on its
AI Vector engine. Messages larger than the buffers are processed in chunks.

**Rendezvous.** A card cannot wait on another card's event, so ranks meet on the host: at a
meeting point the rank's stream records event A; the communicator's helper stream waits A,
runs a host function that waits until every party has arrived (``Group.meet``), then
records event G; the user stream waits G **with a timeout of HCCL_EXEC_TIMEOUT**. If the
meeting fails (a party's card died, or it never arrived before the timeout) the host
function holds the helper stream past that timeout, so the user stream's wait fails with
``ACL_ERROR_RT_WAIT_TIMEOUT`` (107019) at its next synchronize and the communicator's async
error (``get_comm_async_error``) becomes ``HCCL_E_REMOTE`` or ``HCCL_E_TIMEOUT``. A P2P
pull from a dead card fails sooner with the DMA's own code (507057).

Threading model: a ``Group`` is shared by the threads that call collectives and by the
runtime's host-function threads (one per helper stream); ``Group.cond`` (its lock) guards
``joined``, ``posted`` and ``meetings``. A ``Communicator`` is used by one thread at a time
(HCCL's rule: one thread per card); its ``seq``/``p2p`` counters are touched only by that
thread; ``async_error`` is written by host-function threads (a single int assignment).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from npuemu.host.core import callbacks, kernel, memory, p2p, runtime
from npuemu.host.core import stream as streams
from npuemu.host.hccl.types import (
    HCCL_ROOT_INFO_BYTES,
    HcclError,
    HcclResult,
    buffer_bytes,
    connect_timeout_s,
    exec_timeout_s,
)
from npuemu.shared import errors

_D2D = 3  # ACL_MEMCPY_DEVICE_TO_DEVICE
_KERNELS = os.path.join(os.path.dirname(__file__), "kernels.py")
_ROOT_MAGIC = b"NPUEMU-HCCL-ROOT"
_POLL_S = 0.05
_STALL_MARGIN_S = 2.0
"""A failed meeting holds the helper stream this long past HCCL_EXEC_TIMEOUT, so the user
stream's timed wait has surely expired (and failed) before the helper records its event."""


class _Meeting:
    __slots__ = ("arrived", "broken", "done", "parties")

    def __init__(self, parties: tuple[int, ...]) -> None:
        self.parties, self.arrived = parties, 0
        self.done, self.broken = False, 0


@dataclass(eq=False)
class Group:
    """The ranks of one communicator that live in this process."""

    key: str
    size: int
    ranks: dict[int, Communicator] = field(default_factory=dict)
    posted: dict[int, dict[int, tuple]] = field(default_factory=dict)
    meetings: dict[tuple, _Meeting] = field(default_factory=dict)
    cond: threading.Condition = field(default_factory=threading.Condition)
    ready: bool = False

    def comm(self, rank: int) -> Communicator:
        return self.ranks[rank]

    def post(self, seq: int, rank: int, desc: tuple) -> None:
        """Record rank's call number ``seq``; E_PARA if a peer already posted a different
        call (count, dtype, op or root) under the same number."""
        with self.cond:
            calls = self.posted.setdefault(seq, {})
            for peer, other in calls.items():
                if other != desc:
                    raise HcclError(HcclResult.HCCL_E_PARA,
                                    f"call {seq} of rank {rank} is {desc}, but rank {peer} "
                                    f"called {other}")
            calls[rank] = desc
            if len(calls) == self.size:
                del self.posted[seq]

    def meet(self, key: tuple, parties: tuple[int, ...], rank: int, timeout_s: float) -> int:
        """Block until every rank in ``parties`` arrived at ``key`` (0), a party's card is
        lost (E_REMOTE) or ``timeout_s`` passed (E_TIMEOUT). Runs on a host-func thread."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            m = self.meetings.get(key)
            if m is None:
                m = self.meetings[key] = _Meeting(parties)
            m.arrived += 1
            if m.arrived == len(parties):
                m.done = True
                del self.meetings[key]
                self.cond.notify_all()
            while not m.done and not m.broken:
                if time.monotonic() > deadline or rank not in self.ranks:  # or destroyed
                    m.broken = HcclResult.HCCL_E_TIMEOUT
                elif any(not self.ranks[p].link.alive() for p in parties if p in self.ranks):
                    m.broken = HcclResult.HCCL_E_REMOTE
                else:
                    self.cond.wait(_POLL_S)
            if m.broken and self.meetings.get(key) is m:
                del self.meetings[key]
                self.cond.notify_all()
            return 0 if m.done else int(m.broken)


_groups: dict[str, Group] = {}
_groups_lock = threading.Lock()
_handles = itertools.count(0x4CC10000)
_comms: dict[int, Communicator] = {}


@dataclass(eq=False)
class Communicator:
    """One rank of a communicator (an ``HcclComm``): its card, buffers, helper stream."""

    handle: int
    group: Group
    rank: int
    device: int
    ctx: object
    link: object
    cap: int
    in_ptr: int = 0
    out_ptr: int = 0
    binary: object = None
    func: object = None
    helper: object = None
    ev_a: object = None
    ev_g: object = None
    seq: int = 0
    p2p: dict[tuple[int, int], int] = field(default_factory=dict)
    async_error: int = 0
    destroyed: bool = False
    algo: str | None = None
    mpi: object = None  # an mpi.MpiLink when the peers are other processes (mpi.py)
    hin: int = 0  # pinned host mirrors of in/out, when a peer is in another HCCS group
    hout: int = 0
    far: frozenset[int] = frozenset()  # ranks this rank's card cannot reach by P2P

    @property
    def size(self) -> int:
        return self.group.size

    # the steps a collective is made of (queued on a user stream; caller holds the ctx) ---
    def copy(self, stream: object, dst: int, src: int, nbytes: int, kind: int = _D2D) -> None:
        """One DMA task on ``stream`` (a P2P pull when ``src`` is a peer's)."""
        if nbytes:
            memory.memcpy_async(dst, nbytes, src, nbytes, kind, stream.handle)

    def reduce(self, stream: object, acc: int, src: int, count: int, op: str,
               dtype: str) -> None:
        """One AI Vector task: ``acc = op(acc, src)`` over ``count`` elements."""
        if count:
            kernel.launch_kernel(self.func.handle, 1, [acc, src, count, op, dtype],
                                 stream.handle)

    def meet(self, stream: object, key: tuple, parties: tuple[int, ...]) -> None:
        """A rendezvous point on ``stream`` (see the module docstring)."""
        timeout = exec_timeout_s()
        streams.record_event(self.ev_a.handle, stream.handle)
        streams.stream_wait_event(self.helper.handle, self.ev_a.handle)
        callbacks.launch_host_func(self.helper.handle, _meet_host,
                                   (self, key, parties, timeout))
        streams.record_event(self.ev_g.handle, self.helper.handle)
        streams.stream_wait_event(stream.handle, self.ev_g.handle, int(timeout * 1000))


def _meet_host(args: tuple) -> None:
    comm, key, parties, timeout = args
    started = time.monotonic()
    code = comm.group.meet(key, parties, comm.rank, timeout)
    if code:
        comm.async_error = code
        runtime_plog(f"HCCL rank {comm.rank}: meeting {key} failed with {code}")
        hold = started + timeout + _STALL_MARGIN_S
        while time.monotonic() < hold and not comm.destroyed:
            time.sleep(_POLL_S)


def runtime_plog(text: str) -> None:
    from npuemu.host.core import plog
    from npuemu.shared import logring

    plog.log(logring.ERROR, text)


# lookup and context ----------------------------------------------------------------------
def get(handle: object) -> Communicator:
    """The live communicator behind ``handle`` (E_PARA otherwise)."""
    comm = _comms.get(handle) if type(handle) is int else None
    if comm is None and isinstance(handle, Communicator) and not handle.destroyed:
        comm = handle
    if comm is None or comm.destroyed:
        raise HcclError(HcclResult.HCCL_E_PARA, f"{handle!r} is not a live communicator")
    return comm


@contextlib.contextmanager
def on_device(comm: Communicator) -> Iterator[None]:
    """Run with the communicator's card as the calling thread's current context."""
    rt = runtime.get()
    prev = getattr(rt.local, "ctx", None)
    rt.local.ctx = comm.ctx
    try:
        yield
    except errors.AclError as err:
        raise HcclError(HcclResult.HCCL_E_RUNTIME, f"{err.name} ({err.code}): {err}") from err
    finally:
        rt.local.ctx = prev


# init ------------------------------------------------------------------------------------
def _open(dev: int) -> tuple[object, object]:
    rt = runtime.get()
    od = rt.devices.get(dev)
    if od is None:
        raise HcclError(HcclResult.HCCL_E_RUNTIME,
                        f"device {dev} is not set in this process (aclrtSetDevice first)")
    return od.primary, od.link


def _new_rank(group: Group, rank: int, dev: int) -> Communicator:
    ctx, link = _open(dev)
    comm = Communicator(next(_handles), group, rank, dev, ctx, link, buffer_bytes())
    comm.algo = os.environ.get("NPUEMU_HCCL_ALGO") or None
    with on_device(comm):
        comm.in_ptr = memory.malloc(comm.cap, 0)
        comm.out_ptr = memory.malloc(comm.cap, 0)
        comm.binary = kernel.binary_load_from_file(_KERNELS)
        comm.func = kernel.binary_get_function(comm.binary.handle, "reduce")
        comm.helper = streams.create_stream()
        comm.ev_a, comm.ev_g = streams.create_event(0), streams.create_event(0)
    _comms[comm.handle] = comm
    return comm


def _connect(group: Group) -> None:
    """Enable peer access between every pair of ranks' cards of one HCCS group. Cards of
    different groups exchange through the host: each such rank gets pinned host mirrors of
    its buffers (``malloc_host``), which it publishes to by DMA and its far peers read."""
    rt = runtime.get()
    comms = [group.ranks[r] for r in range(group.size)]
    for a in comms:
        far = set()
        for b in comms:
            if a is b or (a.device, b.device) in rt.peer_access:
                continue
            if p2p.can_access_peer(a.device, b.device):
                with rt.lock:
                    rt.peer_access.add((a.device, b.device))
            else:
                far.add(b.rank)
        a.far = frozenset(far)
    if any(c.far for c in comms):
        for c in comms:
            c.hin, c.hout = memory.malloc_host(c.cap), memory.malloc_host(c.cap)


def comm_init_all(devices: list[int]) -> list[Communicator]:
    """Mirrors ``HcclCommInitAll``: one communicator per card of ``devices`` (rank i on
    ``devices[i]``), all in this process; the caller has set each device. Blocks while the
    buffers are allocated (one round trip per card)."""
    devs = list(devices) if isinstance(devices, list | tuple) else None
    if not devs or not all(type(d) is int for d in devs):
        raise HcclError(HcclResult.HCCL_E_PARA, f"devices {devices!r} must be a list of ints")
    if len(set(devs)) != len(devs):
        raise HcclError(HcclResult.HCCL_E_PARA, f"duplicate device ids in {devs}")
    group = Group(f"all-{uuid.uuid4().hex}", len(devs))
    made: list[Communicator] = []
    try:
        for rank, dev in enumerate(devs):
            made.append(_new_rank(group, rank, dev))
            group.ranks[rank] = made[-1]
        _connect(group)
    except BaseException:
        for comm in made:
            comm_destroy(comm.handle)
        raise
    group.ready = True
    return made


def get_root_info() -> bytes:
    """Mirrors ``HcclGetRootInfo`` (on the root rank): ``HCCL_ROOT_INFO_BYTES`` bytes naming
    a fresh rendezvous. The application hands them to every rank."""
    ident = f"{os.getpid()}-{uuid.uuid4().hex}".encode()
    body = _ROOT_MAGIC + len(ident).to_bytes(2, "little") + ident
    return body.ljust(HCCL_ROOT_INFO_BYTES, b"\0")


def _root_key(root_info: object) -> str:
    data = bytes(root_info) if isinstance(root_info, bytes | bytearray | memoryview) else b""
    n = len(_ROOT_MAGIC)
    if len(data) != HCCL_ROOT_INFO_BYTES or data[:n] != _ROOT_MAGIC:
        raise HcclError(HcclResult.HCCL_E_PARA, "root info is not from get_root_info")
    size = int.from_bytes(data[n:n + 2], "little")
    return "root-" + data[n + 2:n + 2 + size].decode(errors="replace")


def _join(key: str, n_ranks: object, rank: object, dev: int) -> Communicator:
    if type(n_ranks) is not int or n_ranks < 1:
        raise HcclError(HcclResult.HCCL_E_PARA, f"rank count {n_ranks!r}")
    if type(rank) is not int or not 0 <= rank < n_ranks:
        raise HcclError(HcclResult.HCCL_E_PARA, f"rank {rank!r} not in [0, {n_ranks})")
    with _groups_lock:
        group = _groups.setdefault(key, Group(key, n_ranks))
    if group.size != n_ranks:
        raise HcclError(HcclResult.HCCL_E_PARA,
                        f"rank count {n_ranks} differs from the other ranks' {group.size}")
    with group.cond:
        if rank in group.ranks or any(c.device == dev for c in group.ranks.values()):
            raise HcclError(HcclResult.HCCL_E_PARA, f"rank {rank} or device {dev} joined twice")
    comm = _new_rank(group, rank, dev)
    deadline = time.monotonic() + connect_timeout_s()
    with group.cond:
        group.ranks[rank] = comm
        if len(group.ranks) == n_ranks:
            try:
                _connect(group)
            finally:
                group.ready = True
                group.cond.notify_all()
        while not group.ready and time.monotonic() < deadline:
            group.cond.wait(_POLL_S)
        if not group.ready:
            group.ranks.pop(rank, None)
    if not group.ready:
        comm_destroy(comm.handle)
        raise HcclError(HcclResult.HCCL_E_TIMEOUT,
                        f"only {len(group.ranks) + 1} of {n_ranks} ranks joined within "
                        "HCCL_CONNECT_TIMEOUT (ranks in other processes are not supported)")
    with _groups_lock:
        if len(group.ranks) == n_ranks and _groups.get(key) is group:
            del _groups[key]
    return comm


def comm_init_root_info(n_ranks: int, root_info: bytes, rank: int) -> Communicator:
    """Mirrors ``HcclCommInitRootInfo``: join the rendezvous as ``rank`` on the calling
    thread's current device; blocks until all ``n_ranks`` joined (HCCL_CONNECT_TIMEOUT,
    then E_TIMEOUT). Ranks must be threads of this process (see the module docstring)."""
    key = _root_key(root_info)
    try:
        dev = runtime.get().current().device
    except errors.AclError as err:
        raise HcclError(HcclResult.HCCL_E_RUNTIME, str(err)) from err
    from npuemu.host.hccl import mpi

    if type(n_ranks) is int and mpi.active(n_ranks):
        return _join_mpi(key, n_ranks, rank, dev)
    return _join(key, n_ranks, rank, dev)


def _join_mpi(key: str, n_ranks: int, rank: object, dev: int) -> Communicator:
    """A rank whose peers are other processes, joined by MPI (``mpi.py``)."""
    from npuemu.host.hccl import mpi

    if type(rank) is not int or not 0 <= rank < n_ranks:
        raise HcclError(HcclResult.HCCL_E_PARA, f"rank {rank!r} not in [0, {n_ranks})")
    ctx, link = _open(dev)
    comm = Communicator(next(_handles), Group(key, n_ranks), rank, dev, ctx, link,
                        buffer_bytes())
    comm.group.ranks[rank] = comm
    comm.mpi = mpi.connect(rank, n_ranks)
    comm.group.ready = True
    _comms[comm.handle] = comm
    return comm


def comm_init_cluster_info(rank_table_file: str, rank: int) -> Communicator:
    """Mirrors ``HcclCommInitClusterInfo``: the rank's card comes from the rank table's
    ``device_id``; blocks like ``comm_init_root_info``. Under MPI with one process per rank
    (``mpi.active``) the ranks join over MPI, whatever the servers; otherwise a table of
    several servers is E_NOT_SUPPORT (ranks of other servers live in other processes)."""
    from npuemu.host.hccl import mpi, ranktable

    table = ranktable.load(rank_table_file)
    entry = table.locate(rank)
    key = "table-" + table.digest
    if mpi.active(table.size):
        return _join_mpi(key, table.size, rank, entry.device_id)
    if table.servers != 1:
        raise HcclError(HcclResult.HCCL_E_NOT_SUPPORT,
                        f"{table.servers} servers: run one process per rank under mpiexec "
                        f"(-n {table.size})")
    return _join(key, table.size, rank, entry.device_id)


def comm_destroy(handle: object) -> None:
    """Mirrors ``HcclCommDestroy``: frees the rank's buffers and helper stream (a rank
    whose meeting failed is released at once). Blocks for its card's round trips."""
    comm = get(handle)
    comm.destroyed = True
    _comms.pop(comm.handle, None)
    with comm.group.cond:
        if comm.group.ranks.get(comm.rank) is comm and comm.group.ready:
            comm.group.ranks.pop(comm.rank)
    rt = runtime.get()
    prev = getattr(rt.local, "ctx", None)
    rt.local.ctx = comm.ctx
    try:
        if comm.mpi is not None:
            from npuemu.host.hccl import mpi

            mpi.close(comm.mpi)
        alive = comm.link.alive()
        if comm.helper is not None and not comm.helper.destroyed:
            with contextlib.suppress(errors.AclError):
                streams.destroy_stream(comm.helper.handle, force=not alive)
        for ev in (comm.ev_a, comm.ev_g):
            if ev is not None:
                with contextlib.suppress(errors.AclError):
                    streams.destroy_event(ev.handle)
        if comm.binary is not None and alive:
            with contextlib.suppress(errors.AclError):
                kernel.binary_unload(comm.binary.handle)
        for ptr in (comm.in_ptr, comm.out_ptr):
            if ptr:
                with contextlib.suppress(errors.AclError):
                    memory.free(ptr)
        for ptr in (comm.hin, comm.hout):
            if ptr:
                with contextlib.suppress(errors.AclError):
                    memory.free_host(ptr)
    finally:
        rt.local.ctx = prev


def element_pointer(ptr: object, count: int, dtype: np.dtype, comm: Communicator,
                    what: str) -> int:
    """Check a user buffer of ``count`` elements: E_PTR if null, E_PARA if it is not live
    memory of the rank's card or not aligned to the element size."""
    if type(ptr) is not int or ptr == 0:
        raise HcclError(HcclResult.HCCL_E_PTR, f"{what} buffer {ptr!r} is null")
    if ptr % dtype.itemsize:
        raise HcclError(HcclResult.HCCL_E_PARA,
                        f"{what} buffer 0x{ptr:x} is not aligned to {dtype.itemsize} bytes")
    if count:
        try:
            alloc = memory.find(ptr, count * dtype.itemsize)
        except errors.AclError as err:
            raise HcclError(HcclResult.HCCL_E_PARA, f"{what} buffer: {err}") from err
        if alloc.link is not comm.link:
            raise HcclError(HcclResult.HCCL_E_PARA,
                            f"{what} buffer 0x{ptr:x} is not on device {comm.device}")
    return ptr
