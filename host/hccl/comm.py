"""Communicators (``HcclCommInitAll``, ``HcclCommInitRootInfo``, ``HcclCommInitClusterInfo``)
and what their collectives are built from.

**The card-executed path** (every collective, send/recv included): a communicator is a
shared-memory segment (``host/driver/commseg.py``; layout in ``shared/layout.py``) created
by the host that makes it (``comm_init_all``), or by the first rank to join (its name comes
from the root info's token, or from a rank table's digest); the last local rank of the
creating process removes its name. Every rank's host writes its entry (card, pid) and
creates its semaphore, waits until all ranks joined (``HCCL_CONNECT_TIMEOUT``, then
E_TIMEOUT), and attaches its card's worker (``COMM_ATTACH``). A collective is then one
``COLLECTIVE`` task on the caller's stream: the cards exchange buffer addresses and wait for
each other through the segment and read each other's arenas directly
(``device/exec/collective.py``). So **ranks may live in different host processes of one
node** (``get_root_info`` in one, ``comm_init_root_info`` in the others).
``get_comm_async_error`` reads the rank's error word, written by its card when a collective
failed.

**The host-staged path** (``algo="staged-*"``, kept for comparison): each rank owns an input
and an output buffer of ``HCCL_BUFFSIZE`` MB on its card (HCCL's "CCL buffers", made with
the rest of this path's resources on the group's first staged call, ``staged``); a rank
stages its data there and pulls its peers' with its own DMA engine (peer access enabled at
init within an HCCS group; across groups via pinned host mirrors), and the ranks meet at
host rendezvous points: the rank's stream records event A, a helper stream waits A and runs
a host function that waits until every party arrived (``Group.meet``), then records event
G, which the user stream waits with a timeout of HCCL_EXEC_TIMEOUT (a failed meeting holds
the helper stream past it: 107019 at the next synchronize, async error E_REMOTE or
E_TIMEOUT). This path needs every rank in this process: with ranks in other processes
it gives E_NOT_SUPPORT.

Threading model: a ``Group`` is shared by the threads that call collectives and by the
runtime's host-function threads (one per helper stream); ``Group.cond`` (its lock) guards
``joined``, ``posted`` and ``meetings``. ``_segs_lock`` guards ``_segs`` (the segments this
process has open, with their count of local ranks). A ``Communicator`` is used by one
thread at a time (HCCL's rule: one thread per card); its ``seq`` counter is
touched only by that thread; ``host_error`` is written by host-function threads (a single
int assignment).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from npuemu.host.core import callbacks, kernel, memory, p2p, plog, runtime
from npuemu.host.core import stream as streams
from npuemu.host.driver.commseg import ATTACHED, MAX_RANKS, PRESENT, CommSegment
from npuemu.host.driver.interface import Link
from npuemu.host.hccl import mpi, ranktable
from npuemu.host.hccl.types import (
    HCCL_ROOT_INFO_BYTES,
    HcclError,
    HcclResult,
    buffer_bytes,
    connect_timeout_s,
    exec_timeout_s,
)
from npuemu.shared import errors, logring, shm, topology
from npuemu.shared.protocol import Op

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
    staged: bool = False  # the host-staged path's resources exist (``staged``)

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
    ctx: runtime.Context
    link: Link
    cap: int
    in_ptr: int = 0
    out_ptr: int = 0
    binary: kernel.Binary | None = None  # the host-staged path's (``staged``)
    func: kernel.Function | None = None
    helper: streams.Stream | None = None
    ev_a: streams.Event | None = None
    ev_g: streams.Event | None = None
    seq: int = 0
    host_error: int = 0  # set by the host-staged path (and mpi.py) through async_error
    destroyed: bool = False
    algo: str | None = None
    mpi: mpi.MpiLink | None = None  # when the peers are other processes (mpi.py)
    hin: int = 0  # pinned host mirrors of in/out, when a peer is in another HCCS group
    hout: int = 0
    far: frozenset[int] = frozenset()  # ranks this rank's card cannot reach by P2P
    seg: CommSegment | None = None  # the communicator segment (card-executed path)
    cid: int = 0  # the communicator's id in the card's worker (COMM_ATTACH)
    mesh_ok: bool = True  # every rank's card is in one HCCS group

    @property
    def size(self) -> int:
        return self.group.size

    @property
    def local(self) -> bool:
        """Every rank lives in this process (the host-staged path needs it)."""
        return len(self.group.ranks) == self.group.size and self.group.ready

    @property
    def async_error(self) -> int:
        """``HcclGetCommAsyncError``: the host-staged path's error, else the one the card
        wrote in the communicator segment."""
        if self.host_error or self.seg is None or self.destroyed:
            return self.host_error
        return self.seg.error(self.rank)

    @async_error.setter
    def async_error(self, value: int) -> None:
        self.host_error = value

    # the steps a collective is made of (queued on a user stream; caller holds the ctx) ---
    def copy(self, stream: streams.Stream, dst: int, src: int, nbytes: int,
             kind: int = _D2D) -> None:
        """One DMA task on ``stream`` (a P2P pull when ``src`` is a peer's)."""
        if nbytes:
            memory.memcpy_async(dst, nbytes, src, nbytes, kind, stream.handle)

    def reduce(self, stream: streams.Stream, acc: int, src: int, count: int, op: str,
               dtype: str) -> None:
        """One AI Vector task: ``acc = op(acc, src)`` over ``count`` elements."""
        assert self.func is not None  # made by ``staged``, before any staged step
        if count:
            kernel.launch_kernel(self.func.handle, 1, [acc, src, count, op, dtype],
                                 stream.handle)

    def meet(self, stream: streams.Stream, key: tuple, parties: tuple[int, ...]) -> None:
        """A rendezvous point on ``stream`` (see the module docstring)."""
        assert self.ev_a is not None and self.ev_g is not None and self.helper is not None
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
        comm.host_error = code
        runtime_plog(f"HCCL rank {comm.rank}: meeting {key} failed with {code}")
        hold = started + timeout + _STALL_MARGIN_S
        while time.monotonic() < hold and not comm.destroyed:
            time.sleep(_POLL_S)


def runtime_plog(text: str) -> None:
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
def _open(dev: int) -> tuple[runtime.Context, Link]:
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
    _comms[comm.handle] = comm
    return comm


def staged(comm: Communicator) -> None:
    """Make the host-staged path's resources of every rank of ``comm``'s group (all in this
    process), once, on its first staged call: each rank's two ``HCCL_BUFFSIZE`` buffers,
    reduce kernel, helper stream and events, and the peer access / host mirrors between
    them (``_connect``). Blocks for the round trips (one thread does it for every rank)."""
    group = comm.group
    with group.cond:
        if group.staged:
            return
        for c in group.ranks.values():
            if c.in_ptr:
                continue
            with on_device(c):
                c.in_ptr = memory.malloc(c.cap, 0)
                c.out_ptr = memory.malloc(c.cap, 0)
                c.binary = kernel.binary_load_from_file(_KERNELS)
                c.func = kernel.binary_get_function(c.binary.handle, "reduce")
                c.helper = streams.create_stream()
                c.ev_a, c.ev_g = streams.create_event(0), streams.create_event(0)
        _connect(group)
        group.staged = True


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


# the communicator segment ------------------------------------------------------------------
@dataclass(eq=False)
class _SegUse:
    """A communicator segment this process has open, and its local ranks using it."""

    seg: CommSegment
    users: int


_segs: dict[str, _SegUse] = {}  # name -> its use
_segs_lock = threading.Lock()


def _node_name() -> str:
    return runtime.get().ensure_node().name


def _use_segment(name: str, deadline: float, create: bool = False) -> CommSegment:
    """The segment ``name`` for one more local rank: this process's mapping if it has one,
    else created (``create``: if nobody made it yet) or opened (waiting for it to appear
    until ``deadline``; E_TIMEOUT after)."""
    with _segs_lock:
        entry = _segs.get(name)
        if entry is not None:
            entry.users += 1
            return entry.seg
    seg = None
    if create:
        with contextlib.suppress(FileExistsError):
            seg = CommSegment(name, create=True)
    if seg is None:
        try:
            seg = CommSegment.open(name, deadline)
        except FileNotFoundError as err:
            raise HcclError(HcclResult.HCCL_E_TIMEOUT, str(err)) from None
        except PermissionError as err:
            raise HcclError(HcclResult.HCCL_E_PARA, str(err)) from None
    with _segs_lock:
        entry = _segs.setdefault(name, _SegUse(seg, 0))
        entry.users += 1
    if entry.seg is not seg:  # another thread of this process opened it meanwhile
        if seg.owner:  # we created it: the mapping kept removes the name at the end
            entry.seg.owner, seg.owner = True, False
        seg.close()
    return entry.seg


def _drop_segment(seg: CommSegment, rank: int) -> None:
    """One local rank is done with ``seg`` (the last one closes it; its creator unlinks)."""
    seg.leave(rank)
    with _segs_lock:
        entry = _segs.get(seg.name)
        if entry is None:
            return
        entry.users -= 1
        if entry.users > 0:
            return
        del _segs[seg.name]
    seg.close()


@atexit.register
def _close_segments() -> None:
    """Segments of communicators not destroyed at exit."""
    with _segs_lock:
        entries = list(_segs.values())
        _segs.clear()
    for entry in entries:
        with contextlib.suppress(Exception):
            entry.seg.close()


def _hccs_group(dev: int) -> int:
    groups = runtime.get().ensure_node().groups
    return groups[dev] if 0 <= dev < len(groups) else 0


def _attach(comm: Communicator, seg: CommSegment) -> None:
    """Attach the rank's card to the segment (its peers have all joined)."""
    devs = [seg.rank_info(j)[0] for j in range(comm.size)]
    groups = runtime.get().ensure_node().groups
    comm.mesh_ok = all(topology.can_access(groups, devs[0], d) for d in devs[1:])
    with on_device(comm):
        comm.cid = comm.link.call(Op.COMM_ATTACH, seg.name, comm.rank)[0]


def _detach(comm: Communicator) -> None:
    if comm.cid and comm.link.alive():
        with contextlib.suppress(errors.AclError):
            comm.link.call(Op.COMM_ATTACH, "", comm.cid)
    comm.cid = 0


# init ------------------------------------------------------------------------------------------
def comm_init_all(devices: list[int]) -> list[Communicator]:
    """Mirrors ``HcclCommInitAll``: one communicator per card of ``devices`` (rank i on
    ``devices[i]``), all in this process; the caller has set each device. Blocks while the
    buffers are allocated and the cards attached (round trips per card)."""
    devs = list(devices) if isinstance(devices, list | tuple) else None
    if not devs or not all(type(d) is int for d in devs):
        raise HcclError(HcclResult.HCCL_E_PARA, f"devices {devices!r} must be a list of ints")
    if len(set(devs)) != len(devs):
        raise HcclError(HcclResult.HCCL_E_PARA, f"duplicate device ids in {devs}")
    group = Group(f"all-{uuid.uuid4().hex}", len(devs))
    made: list[Communicator] = []
    seg = CommSegment.create(_node_name())
    entry = _SegUse(seg, 0)
    with _segs_lock:
        _segs[seg.name] = entry
    try:
        for rank, dev in enumerate(devs):
            made.append(_new_rank(group, rank, dev))
            group.ranks[rank] = made[-1]
            made[-1].seg = seg
            entry.users += 1
            seg.join(rank, len(devs), made[-1].link.dev, _hccs_group(made[-1].link.dev))
        for comm in made:
            _attach(comm, seg)
            seg.attached(comm.rank)
    except BaseException:
        for comm in made:
            comm_destroy(comm.handle)
        if not made:
            with _segs_lock:
                _segs.pop(seg.name, None)
            seg.close()
        raise
    group.ready = True
    return made


def get_root_info() -> bytes:
    """Mirrors ``HcclGetRootInfo`` (on the root rank): ``HCCL_ROOT_INFO_BYTES`` bytes naming
    a fresh communicator (a random token; the segment ``/npuemu.<node>.hccl.r<token>`` is
    created by the first rank that joins). Does not block. The application hands them to
    every rank."""
    ident = uuid.uuid4().hex.encode()
    body = _ROOT_MAGIC + len(ident).to_bytes(2, "little") + ident
    return body.ljust(HCCL_ROOT_INFO_BYTES, b"\0")


def _root_key(root_info: object) -> str:
    """The token carried by a root info (E_PARA if it is not one)."""
    data = bytes(root_info) if isinstance(root_info, bytes | bytearray | memoryview) else b""
    n = len(_ROOT_MAGIC)
    if len(data) != HCCL_ROOT_INFO_BYTES or data[:n] != _ROOT_MAGIC:
        raise HcclError(HcclResult.HCCL_E_PARA, "root info is not from get_root_info")
    size = int.from_bytes(data[n:n + 2], "little")
    token = data[n + 2:n + 2 + size].decode(errors="replace")
    if not token.isalnum():
        raise HcclError(HcclResult.HCCL_E_PARA, "root info names no communicator")
    return token


def _join(name: str, n_ranks: object, rank: object, dev: int,
          create: bool = False) -> Communicator:
    """Join the communicator of segment ``name`` as ``rank`` on card ``dev``."""
    if type(n_ranks) is not int or not 1 <= n_ranks <= MAX_RANKS:
        raise HcclError(HcclResult.HCCL_E_PARA, f"rank count {n_ranks!r}")
    if type(rank) is not int or not 0 <= rank < n_ranks:
        raise HcclError(HcclResult.HCCL_E_PARA, f"rank {rank!r} not in [0, {n_ranks})")
    deadline = time.monotonic() + connect_timeout_s()
    with _groups_lock:
        group = _groups.setdefault(name, Group(name, n_ranks))
    if group.size != n_ranks:
        raise HcclError(HcclResult.HCCL_E_PARA,
                        f"rank count {n_ranks} differs from the other ranks' {group.size}")
    with group.cond:
        if rank in group.ranks or any(c.device == dev for c in group.ranks.values()):
            raise HcclError(HcclResult.HCCL_E_PARA, f"rank {rank} or device {dev} joined twice")
    seg = _use_segment(name, deadline, create)
    try:
        comm = _new_rank(group, rank, dev)
    except BaseException:
        _drop_segment(seg, rank)
        raise
    comm.seg = seg
    with group.cond:
        group.ranks[rank] = comm
    try:
        if not seg.join(rank, n_ranks, comm.link.dev, _hccs_group(comm.link.dev)):
            raise HcclError(HcclResult.HCCL_E_PARA, f"rank {rank} joined twice")
        _wait_joined(seg, n_ranks, deadline)
        _attach(comm, seg)
        seg.attached(rank)
        _wait_joined(seg, n_ranks, deadline, attached=True)  # nobody may leave before
    except BaseException:
        with group.cond:
            group.ranks.pop(rank, None)
        comm_destroy(comm.handle)
        raise
    local = all(seg.rank_info(j)[1] == os.getpid() for j in range(n_ranks))
    with group.cond:
        if local and len(group.ranks) == n_ranks:
            group.ready = True  # the host-staged path may be used (algo="staged-*")
    with _groups_lock:
        if _groups.get(name) is group:
            del _groups[name]
    return comm


def _wait_joined(seg: CommSegment, n_ranks: int, deadline: float,
                 attached: bool = False) -> None:
    """Block until every rank joined the segment (``attached``: and its card attached it,
    so no rank can destroy the communicator, and its creator remove the name, before every
    card has it mapped); E_TIMEOUT past ``deadline`` (init's HCCL_CONNECT_TIMEOUT), E_PARA
    if a rank joined with another rank count."""
    states = ATTACHED if attached else PRESENT
    delay = 0.0005
    while (count := seg.joined(n_ranks, states)) != n_ranks:
        if count < 0:
            raise HcclError(HcclResult.HCCL_E_PARA, "ranks joined with different rank counts")
        if time.monotonic() > deadline:
            raise HcclError(HcclResult.HCCL_E_TIMEOUT,
                            f"only {count} of {n_ranks} ranks joined within "
                            "HCCL_CONNECT_TIMEOUT")
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


def comm_init_root_info(n_ranks: int, root_info: bytes, rank: int) -> Communicator:
    """Mirrors ``HcclCommInitRootInfo``: join the communicator named by ``root_info`` as
    ``rank`` on the calling thread's current device; blocks until all ``n_ranks`` joined
    (HCCL_CONNECT_TIMEOUT, then E_TIMEOUT). Ranks may be threads of one process or
    processes of one node (or, under MPI, of several nodes: ``mpi.py``)."""
    key = _root_key(root_info)
    try:
        dev = runtime.get().current().device
    except errors.AclError as err:
        raise HcclError(HcclResult.HCCL_E_RUNTIME, str(err)) from err

    if type(n_ranks) is int and mpi.active(n_ranks):
        return _join_mpi(key, n_ranks, rank, dev)

    return _join(shm.name(_node_name(), "hccl", "r" + key), n_ranks, rank, dev, create=True)


def _join_mpi(key: str, n_ranks: int, rank: object, dev: int) -> Communicator:
    """A rank whose peers are other processes, joined by MPI (``mpi.py``)."""

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
    several servers is E_NOT_SUPPORT (ranks of other servers live in other processes), and
    the first rank to arrive creates the segment (named after the table's digest)."""

    table = ranktable.load(rank_table_file)
    entry = table.locate(rank)
    key = "table-" + table.digest
    if mpi.active(table.size):
        return _join_mpi(key, table.size, rank, entry.device_id)
    if table.servers != 1:
        raise HcclError(HcclResult.HCCL_E_NOT_SUPPORT,
                        f"{table.servers} servers: run one process per rank under mpiexec "
                        f"(-n {table.size})")

    return _join(shm.name(_node_name(), "hccl", "t" + table.digest), table.size, rank,
                 entry.device_id, create=True)


def comm_destroy(handle: object) -> None:
    """Mirrors ``HcclCommDestroy``: detaches the rank's card from the communicator and
    frees its buffers and helper stream (a rank whose meeting failed is released at once).
    Blocks for its card's round trips."""
    comm = get(handle)
    comm.destroyed = True
    _comms.pop(comm.handle, None)
    with comm.group.cond:
        if comm.group.ranks.get(comm.rank) is comm:
            comm.group.ranks.pop(comm.rank)
    rt = runtime.get()
    prev = getattr(rt.local, "ctx", None)
    rt.local.ctx = comm.ctx
    try:
        if comm.mpi is not None:

            mpi.close(comm.mpi)
        if comm.seg is not None:
            _detach(comm)
            _drop_segment(comm.seg, comm.rank)
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
