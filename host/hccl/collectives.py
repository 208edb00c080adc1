"""The collectives (``HcclAllReduce`` and friends), queued on the caller's stream.

Every call is **asynchronous**: it checks its arguments (HCCL's codes: E_PTR for a null
buffer, E_PARA for a bad count, dtype, op, root, stream or a call that differs from a
peer's), then queues this rank's whole part on the stream and returns; it runs in stream
order with the user's other work, so events before and after a collective order it like
any task.

**Card-executed** (all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all,
all_to_allv, send/recv, barrier): one ``COLLECTIVE`` task per call, so ranks may live in
different host processes. The card reads its peers' buffers directly from
their arenas, reduces with numpy ufuncs into its own output and synchronises with its peers
through the communicator segment, without the host (``device/exec/collective.py`` has the
phases of each kind). Algorithm of all_reduce: the one-shot path for messages of at most
4 KiB; else mesh (reduce-scatter + all-gather) when every rank's card is in one HCCS group;
across groups ``hier`` (mesh within each group, then only the ranks at the same place in
their groups exchange, then mesh again: 1/L of the data crosses groups), or ring when the
groups differ in size; ``NPUEMU_HCCL_ALGO=mesh|ring|hier`` or ``algo=`` of the Pythonic face
overrides (ring is slower here: 2(p-1) steps, each a hand-off between processes). The other
kinds are mesh (every rank reads from all) whatever the choice.

**Host-staged** (only as ``algo="staged-mesh"|"staged-ring"`` of the Pythonic face, for
comparison in the benchmarks; every rank must be in this process, else E_NOT_SUPPORT): DMA
copies into the CCL buffers, P2P pulls, AI Vector ``reduce`` tasks and host rendezvous
points (``comm.py``); across HCCS groups a pull reads the peer's pinned host mirror
(``_Run.pull``/``publish``).

Pipelining: mesh and hier all_reduce publish each finished piece (mesh: every
``CHUNK_BYTES`` of a rank's slice; hier: each stage) in the rank's ``PROGRESS`` word, and
peers take it from there at once, so the ranks meet only at arrival and at the end.
Missing (stated, not emulated): ring and hier are used for all_reduce only; the algorithm
does not depend on the size beyond the one-shot path (mesh measured fastest at every size
here). The card runs one collective (or send/recv) of a communicator at a time, in the
order they reach its engine, so calls on two streams of one communicator are serialised
where a card might overlap them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from npuemu.host.core import memory
from npuemu.host.core import stream as streams
from npuemu.host.hccl import comm as comms
from npuemu.host.hccl.comm import Communicator
from npuemu.host.hccl.types import (
    HcclError,
    HcclResult,
    exec_timeout_s,
    kernel_dtype,
    numpy_dtype,
    reduce_name,
)
from npuemu.shared import errors
from npuemu.shared.protocol import Op

ALGOS = ("mesh", "ring", "hier", "staged-mesh", "staged-ring")
_H2D, _D2H = 1, 2


def _blocks(m: int, p: int) -> list[tuple[int, int]]:
    """Split ``m`` elements into ``p`` contiguous blocks (start, length)."""
    return [(k * m // p, (k + 1) * m // p - k * m // p) for k in range(p)]


def _count(value: object, what: str = "count") -> int:
    if type(value) is not int or value < 0:
        raise HcclError(HcclResult.HCCL_E_PARA, f"{what} {value!r} must be an int >= 0")
    return value


def _root(value: object, comm: Communicator) -> int:
    if type(value) is not int or not 0 <= value < comm.size:
        raise HcclError(HcclResult.HCCL_E_PARA, f"root {value!r} not in [0, {comm.size})")
    return value


def _stream(handle: object, comm: Communicator) -> streams.Stream:
    try:
        if not handle:  # the default stream of the rank's card
            with comms.on_device(comm):
                return streams.resolve(0)
        stream = streams.resolve(handle)
    except errors.AclError as err:
        raise HcclError(HcclResult.HCCL_E_PARA, f"stream: {err}") from err
    if stream.device != comm.device:
        raise HcclError(HcclResult.HCCL_E_PARA,
                        f"stream of device {stream.device} given to rank {comm.rank} on "
                        f"device {comm.device}")
    return stream


def _algo(comm: Communicator, algo: str | None) -> str:
    choice = algo or comm.algo or ("mesh" if comm.mesh_ok else "hier")
    if choice not in ALGOS:
        raise HcclError(HcclResult.HCCL_E_PARA, f"algorithm {choice!r} not in {ALGOS}")
    if choice.startswith("staged-") and not comm.local:
        raise HcclError(HcclResult.HCCL_E_NOT_SUPPORT,
                        "the host-staged path needs every rank in this process")
    return choice


def _card(comm_handle: object, stream_handle: object, dtype: object, desc: tuple | None,
          kind: str, algo: str, op: str, root: int, count: int, send: int,
          recv: int, counts: list[int] | tuple = ()) -> None:
    """Queue one ``COLLECTIVE`` task (the card-executed path). ``desc`` None: a send or
    recv (two ranks take part: no call number)."""
    comm = comms.get(comm_handle)
    dt = numpy_dtype(dtype)
    stream = _stream(stream_handle, comm)
    if desc is not None:
        if comm.local:  # peers in this process: a differing call is E_PARA now, not later
            comm.group.post(comm.seq, comm.rank, desc)
        comm.seq += 1
    timeout_ms = max(1, int(exec_timeout_s() * 1000))
    with comms.on_device(comm):
        memory.flush_frees(stream.link, only_if_waiting=True)
        streams.submit(stream, Op.COLLECTIVE, comm.cid, kind, algo, kernel_dtype(dt), op, root,
                       count, send or 0, recv or 0, timeout_ms, list(counts))


def _staged(how: str) -> str | None:
    """The host-staged algorithm behind ``how``, or None for the card-executed path."""
    return how[len("staged-"):] if how.startswith("staged-") else None


class _Run:
    """One rank's part of one collective: the helpers its algorithm is written with."""

    def __init__(self, comm: Communicator, stream: streams.Stream, dtype: np.dtype,
                 seq: int) -> None:
        self.c, self.s, self.dt, self.seq = comm, stream, dtype, seq
        self.r, self.p, self.e = comm.rank, comm.size, dtype.itemsize
        self.step = 0
        self.all = tuple(range(self.p))

    def peer(self, rank: int) -> Communicator:
        return self.c.group.comm(rank % self.p)

    def copy(self, dst: int, src: int, elems: int) -> None:
        self.c.copy(self.s, dst, src, elems * self.e)

    def pull(self, dst: int, peer: Communicator, region: str, elems_off: int,
             elems: int) -> None:
        """Copy ``elems`` from a peer's ``in``/``out`` buffer at ``elems_off``: by P2P from
        its card, or from its pinned host mirror when it is in another HCCS group."""
        off = elems_off * self.e
        if peer.rank in self.c.far:
            src = (peer.hin if region == "in" else peer.hout) + off
            self.c.copy(self.s, dst, src, elems * self.e, _H2D)
        else:
            src = (peer.in_ptr if region == "in" else peer.out_ptr) + off
            self.c.copy(self.s, dst, src, elems * self.e)

    def publish(self, region: str, elems_off: int, elems: int) -> None:
        """Mirror a region of this rank's buffer to its pinned host copy (only when a peer
        is in another HCCS group)."""
        if self.c.hin:
            off = elems_off * self.e
            host = (self.c.hin if region == "in" else self.c.hout) + off
            dev = (self.c.in_ptr if region == "in" else self.c.out_ptr) + off
            self.c.copy(self.s, host, dev, elems * self.e, _D2H)

    def reduce(self, acc: int, src: int, elems: int, op: str) -> None:
        self.c.reduce(self.s, acc, src, elems, op, kernel_dtype(self.dt))

    def meet(self, parties: tuple[int, ...] | None = None, key: tuple | None = None) -> None:
        self.step += 1
        self.c.meet(self.s, key or ("coll", self.seq, self.step), parties or self.all)

    def chunk(self, divisor: int) -> int:
        """Elements per chunk so that ``divisor`` chunks fit in half a buffer."""
        return max(1, self.c.cap // (2 * divisor * self.e))


def _over_mpi(c: Communicator, stream_handle: object, dtype: object, fn_name: str,
              *args: object) -> bool:
    """Run the collective over MPI if the rank's peers are other processes (``mpi.py``)."""
    if c.mpi is None:
        return False
    from npuemu.host.hccl import mpi

    stream = _stream(stream_handle, c)
    with comms.on_device(c):
        getattr(mpi, fn_name)(c, stream, numpy_dtype(dtype), *args)
    return True


def _local(comm: Communicator, what: str) -> None:
    """The host-staged path: every rank must be in this process; its resources are made on
    first use."""
    if not comm.local:
        raise HcclError(HcclResult.HCCL_E_NOT_SUPPORT,
                        f"{what} runs host-staged: it needs every rank in this process")
    comms.staged(comm)


def _call(comm_handle: object, stream_handle: object, dtype: object, desc: tuple,
          body: Callable[[_Run], None]) -> None:
    comm = comms.get(comm_handle)
    _local(comm, desc[0])
    dt = numpy_dtype(dtype)
    stream = _stream(stream_handle, comm)
    comm.group.post(comm.seq, comm.rank, desc)
    run = _Run(comm, stream, dt, comm.seq)
    comm.seq += 1
    with comms.on_device(comm):
        body(run)


# all_reduce ------------------------------------------------------------------------------
def all_reduce(send: int, recv: int, count: int, dtype: int, op: int, comm: object,
               stream: object, algo: str | None = None) -> None:
    """Mirrors ``HcclAllReduce`` (async on ``stream``)."""
    c = comms.get(comm)
    count, opname, dt = _count(count), reduce_name(op), numpy_dtype(dtype)
    comms.element_pointer(send, count, dt, c, "send")
    comms.element_pointer(recv, count, dt, c, "recv")
    how = _algo(c, algo)
    if _over_mpi(c, stream, dtype, "all_reduce", send, recv, count, opname):
        return
    desc = ("all_reduce", count, int(dtype), opname, how)
    if (staged := _staged(how)) is None:
        _card(comm, stream, dtype, desc, "all_reduce", how, opname, 0, count, send, recv)
        return
    _call(comm, stream, dtype, desc,
          lambda run: _all_reduce(run, send, recv, count, opname, staged))


def _all_reduce(run: _Run, send: int, recv: int, count: int, op: str, how: str) -> None:
    c, e, r, p = run.c, run.e, run.r, run.p
    if p == 1:
        run.copy(recv, send, count)
        return
    m = run.chunk(1)
    for c0 in range(0, count, m):
        n = min(m, count - c0)
        blocks = _blocks(n, p)
        run.copy(c.in_ptr, send + c0 * e, n)
        run.publish("in", 0, n)
        run.meet()
        if how == "mesh":
            lo, ln = blocks[r]
            acc, scratch = c.out_ptr, c.out_ptr + c.cap // 2
            run.copy(acc, c.in_ptr + lo * e, ln)
            for j in range(1, p):
                run.pull(scratch, run.peer(r + j), "in", lo, ln)
                run.reduce(acc, scratch, ln, op)
            run.publish("out", 0, ln)
            run.meet()
            for j in range(p):
                jlo, jln = blocks[(r + j) % p]
                if j:
                    run.pull(recv + (c0 + jlo) * e, run.peer(r + j), "out", 0, jln)
                else:
                    run.copy(recv + (c0 + jlo) * e, c.out_ptr, jln)
            run.meet()
        else:
            _ring_reduce_scatter(run, blocks, op)
            _ring_all_gather(run, blocks)
            run.copy(recv + c0 * e, c.in_ptr, n)


def _ring_reduce_scatter(run: _Run, blocks: list[tuple[int, int]], op: str) -> None:
    """After it, rank r's input buffer holds the reduced block r (blocks in elements)."""
    c, e, r, p = run.c, run.e, run.r, run.p
    left = run.peer(r - 1)
    scratch = c.out_ptr
    for k in range(p - 1):
        lo, ln = blocks[(r - k - 2) % p]
        run.pull(scratch, left, "in", lo, ln)
        run.reduce(c.in_ptr + lo * e, scratch, ln, op)
        run.publish("in", lo, ln)
        run.meet()


def _ring_all_gather(run: _Run, blocks: list[tuple[int, int]]) -> None:
    """From rank r holding block r, every rank's input buffer holds every block."""
    c, e, r, p = run.c, run.e, run.r, run.p
    left = run.peer(r - 1)
    for k in range(p - 1):
        lo, ln = blocks[(r - 1 - k) % p]
        run.pull(c.in_ptr + lo * e, left, "in", lo, ln)
        run.publish("in", lo, ln)
        run.meet()


# all_gather / reduce_scatter ---------------------------------------------------------------
def all_gather(send: int, recv: int, send_count: int, dtype: int, comm: object,
               stream: object, algo: str | None = None) -> None:
    """Mirrors ``HcclAllGather``: recv holds ``send_count * rank_size`` elements, in rank
    order (async)."""
    c = comms.get(comm)
    count, dt = _count(send_count, "send_count"), numpy_dtype(dtype)
    comms.element_pointer(send, count, dt, c, "send")
    comms.element_pointer(recv, count * c.size, dt, c, "recv")
    how = _algo(c, algo)
    if _over_mpi(c, stream, dtype, "all_gather", send, recv, count):
        return
    desc = ("all_gather", count, int(dtype), how)
    if (staged := _staged(how)) is None:
        _card(comm, stream, dtype, desc, "all_gather", how, "sum", 0, count, send, recv)
        return
    _call(comm, stream, dtype, desc,
          lambda run: _all_gather(run, send, recv, count, staged))


def _all_gather(run: _Run, send: int, recv: int, count: int, how: str) -> None:
    c, e, r, p = run.c, run.e, run.r, run.p
    m = run.chunk(p)
    for c0 in range(0, count, m):
        n = min(m, count - c0)
        blocks = [(k * n, n) for k in range(p)]
        run.copy(c.in_ptr + blocks[r][0] * e, send + c0 * e, n)
        run.publish("in", blocks[r][0], n)
        run.meet()
        if how == "mesh":
            for j in range(p):
                src = run.peer(r + j)
                dst = recv + (src.rank * count + c0) * e
                if j:
                    run.pull(dst, src, "in", blocks[src.rank][0], n)
                else:
                    run.copy(dst, c.in_ptr + blocks[r][0] * e, n)
            run.meet()
        else:
            _ring_all_gather(run, blocks)
            for j in range(p):
                run.copy(recv + (j * count + c0) * e, c.in_ptr + blocks[j][0] * e, n)


def reduce_scatter(send: int, recv: int, recv_count: int, dtype: int, op: int, comm: object,
                   stream: object, algo: str | None = None) -> None:
    """Mirrors ``HcclReduceScatter``: send holds ``recv_count * rank_size`` elements; rank
    i receives the reduced block i (async)."""
    c = comms.get(comm)
    count, opname, dt = _count(recv_count, "recv_count"), reduce_name(op), numpy_dtype(dtype)
    comms.element_pointer(send, count * c.size, dt, c, "send")
    comms.element_pointer(recv, count, dt, c, "recv")
    how = _algo(c, algo)
    if _over_mpi(c, stream, dtype, "reduce_scatter", send, recv, count, opname):
        return
    desc = ("reduce_scatter", count, int(dtype), opname, how)
    if (staged := _staged(how)) is None:
        _card(comm, stream, dtype, desc, "reduce_scatter", how, opname, 0, count, send, recv)
        return
    _call(comm, stream, dtype, desc,
          lambda run: _reduce_scatter(run, send, recv, count, opname, staged))


def _reduce_scatter(run: _Run, send: int, recv: int, count: int, op: str, how: str) -> None:
    c, e, r, p = run.c, run.e, run.r, run.p
    m = run.chunk(p)
    for c0 in range(0, count, m):
        n = min(m, count - c0)
        blocks = [(k * n, n) for k in range(p)]
        for j in range(p):
            run.copy(c.in_ptr + blocks[j][0] * e, send + (j * count + c0) * e, n)
        run.publish("in", 0, n * p)
        if p > 1:
            run.meet()
        if how == "mesh" or p == 1:
            acc, scratch = c.out_ptr, c.out_ptr + c.cap // 2
            run.copy(acc, c.in_ptr + blocks[r][0] * e, n)
            for j in range(1, p):
                run.pull(scratch, run.peer(r + j), "in", blocks[r][0], n)
                run.reduce(acc, scratch, n, op)
            run.copy(recv + c0 * e, acc, n)
        else:
            _ring_reduce_scatter(run, blocks, op)
            run.copy(recv + c0 * e, c.in_ptr + blocks[r][0] * e, n)
        if p > 1:
            run.meet()


# broadcast / reduce ----------------------------------------------------------------------
def broadcast(buf: int, count: int, dtype: int, root: int, comm: object, stream: object,
              algo: str | None = None) -> None:
    """Mirrors ``HcclBroadcast``: in place, from ``root`` (async)."""
    c = comms.get(comm)
    count, dt, root = _count(count), numpy_dtype(dtype), _root(root, c)
    comms.element_pointer(buf, count, dt, c, "buf")
    how = _algo(c, algo)
    if _over_mpi(c, stream, dtype, "broadcast", buf, count, root):
        return
    desc = ("broadcast", count, int(dtype), root, how)
    if (staged := _staged(how)) is None:
        _card(comm, stream, dtype, desc, "broadcast", how, "sum", root, count, buf, buf)
        return
    _call(comm, stream, dtype, desc,
          lambda run: _broadcast(run, buf, count, root, staged))


def _broadcast(run: _Run, buf: int, count: int, root: int, how: str) -> None:
    c, e, r, p = run.c, run.e, run.r, run.p
    if p == 1:
        return
    m = run.chunk(1)
    for c0 in range(0, count, m):
        n = min(m, count - c0)
        if r == root:
            run.copy(c.in_ptr, buf + c0 * e, n)
            run.publish("in", 0, n)
        run.meet()
        if how == "mesh":
            if r != root:
                run.pull(buf + c0 * e, run.peer(root), "in", 0, n)
        else:  # a chain: step k, rank root+k pulls from rank root+k-1
            for k in range(1, p):
                if r == (root + k) % p:
                    run.pull(c.in_ptr, run.peer(r - 1), "in", 0, n)
                    run.publish("in", 0, n)
                run.meet()
            if r != root:
                run.copy(buf + c0 * e, c.in_ptr, n)
        run.meet()


def reduce(send: int, recv: int, count: int, dtype: int, op: int, root: int, comm: object,
           stream: object) -> None:
    """Mirrors ``HcclReduce``: the result only on ``root`` (recv of others untouched;
    async)."""
    c = comms.get(comm)
    count, opname, dt, root = _count(count), reduce_name(op), numpy_dtype(dtype), _root(root, c)
    comms.element_pointer(send, count, dt, c, "send")
    if c.rank == root:
        comms.element_pointer(recv, count, dt, c, "recv")
    if _over_mpi(c, stream, dtype, "reduce", send, recv, count, opname, root):
        return
    desc = ("reduce", count, int(dtype), opname, root)
    _card(comm, stream, dtype, desc, "reduce", "mesh", opname, root, count, send,
          recv if c.rank == root else 0)


# all_to_all(v) ---------------------------------------------------------------------------
def all_to_all(send: int, send_count: int, send_type: int, recv: int, recv_count: int,
               recv_type: int, comm: object, stream: object) -> None:
    """Mirrors ``HcclAlltoAll``: ``send_count`` elements to each peer, in rank order; the
    counts and types must match and send must differ from recv (E_PARA; async)."""
    c = comms.get(comm)
    count = _count(send_count, "send_count")
    if recv_count != send_count or send_type != recv_type:
        raise HcclError(HcclResult.HCCL_E_PARA, "all_to_all: recv count and type must equal "
                        "the send count and type")
    dt = numpy_dtype(send_type)
    if send == recv and count:
        raise HcclError(HcclResult.HCCL_E_PARA, "all_to_all: send and recv must differ")
    comms.element_pointer(send, count * c.size, dt, c, "send")
    comms.element_pointer(recv, count * c.size, dt, c, "recv")
    if _over_mpi(c, stream, send_type, "all_to_all", send, recv, count):
        return
    _card(comm, stream, send_type, ("all_to_all", count, int(send_type)), "all_to_all",
          "mesh", "sum", 0, count, send, recv)


def _counts(values: object, p: int, what: str) -> list[int]:
    if not isinstance(values, list | tuple) or len(values) != p:
        raise HcclError(HcclResult.HCCL_E_PARA, f"{what} must be a list of {p} ints")
    return [_count(v, what) for v in values]


def all_to_allv(send: int, send_counts: list[int], sdispls: list[int], send_type: int,
                recv: int, recv_counts: list[int], rdispls: list[int], recv_type: int,
                comm: object, stream: object) -> None:
    """Mirrors ``HcclAlltoAllV``: ``send_counts[i]`` elements from ``send + sdispls[i]`` go
    to rank i, which stores them at ``recv + rdispls[r]``; counts in elements (async).
    Counts that do not pair up (rank i's ``send_counts[j]`` against rank j's
    ``recv_counts[i]``) fail on every rank's card with E_PARA."""
    c = comms.get(comm)
    p = c.size
    if send_type != recv_type:
        raise HcclError(HcclResult.HCCL_E_PARA, "all_to_allv: send and recv types differ")
    dt = numpy_dtype(send_type)
    sc, sd = _counts(send_counts, p, "send_counts"), _counts(sdispls, p, "sdispls")
    rc, rd = _counts(recv_counts, p, "recv_counts"), _counts(rdispls, p, "rdispls")
    if _over_mpi(c, stream, send_type, "all_to_allv", send, sc, sd, recv, rc, rd):
        return
    for j in range(p):
        if sc[j]:
            comms.element_pointer(send + sd[j] * dt.itemsize, sc[j], dt, c, "send")
        if rc[j]:
            comms.element_pointer(recv + rd[j] * dt.itemsize, rc[j], dt, c, "recv")
    _card(comm, stream, send_type, ("all_to_allv", int(send_type)), "all_to_allv", "mesh",
          "sum", 0, 0, send, recv, sc + sd + rc + rd)


# send / recv / barrier -------------------------------------------------------------------
def _peer(value: object, c: Communicator, what: str) -> int:
    if type(value) is not int or not 0 <= value < c.size or value == c.rank:
        raise HcclError(HcclResult.HCCL_E_PARA, f"{what} rank {value!r}")
    return value


def send(buf: int, count: int, dtype: int, dest: int, comm: object, stream: object) -> None:
    """Mirrors ``HcclSend``: pairs with the peer's ``recv`` of the same count and dtype;
    the stream goes on once the peer has received (async)."""
    c = comms.get(comm)
    count, dt, dest = _count(count), numpy_dtype(dtype), _peer(dest, c, "destination")
    comms.element_pointer(buf, count, dt, c, "send")
    if _over_mpi(c, stream, dtype, "send", buf, count, dest):
        return
    _card(comm, stream, dtype, None, "send", "mesh", "sum", dest, count, buf, 0)


def recv(buf: int, count: int, dtype: int, src: int, comm: object, stream: object) -> None:
    """Mirrors ``HcclRecv``: pairs with the peer's ``send`` of the same count (async)."""
    c = comms.get(comm)
    count, dt, src = _count(count), numpy_dtype(dtype), _peer(src, c, "source")
    comms.element_pointer(buf, count, dt, c, "recv")
    if _over_mpi(c, stream, dtype, "recv", buf, count, src):
        return
    _card(comm, stream, dtype, None, "recv", "mesh", "sum", src, count, 0, buf)


def barrier(comm: object, stream: object) -> None:
    """Mirrors ``HcclBarrier``: the stream goes on once every rank's stream reached it."""
    if _over_mpi(comms.get(comm), stream, 4, "barrier"):
        return
    _card(comm, stream, 4, ("barrier",), "barrier", "mesh", "sum", 0, 0, 0, 0)
