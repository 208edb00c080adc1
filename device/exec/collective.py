"""Collectives executed by the card: the ``COLLECTIVE`` task op and the communicator
segments the cards synchronise through (``COMM_ATTACH``).

A communicator lives in a shared-memory segment (``shared/layout.py``: COMM_HEADER,
COMM_RANK) created by the host that makes it; every rank's host writes its entry (card, pid)
and creates its semaphore, then attaches its card's worker (``attach``). The worker maps the
segment, maps every peer card's arenas (as for P2P copies) and opens every rank's semaphore.

One collective call is **one stream task** on the rank's stream. Its engine thread (one per
attached communicator, so a waiting collective never holds up the card's DMA engine, the
worker loop or other streams) publishes the rank's buffer addresses in the rank's entry,
then runs phases; between phases a rank bumps its ``step`` counter, posts the semaphore of
each peer that sleeps for a step all its awaited ranks have now reached (its ``waiting``
word), and blocks on its own semaphore until those it needs have reached the same step
(``Comm.sync``: no polling; every wake it checks the deadline and the peers' error and
state words, and after every ``_SLICE_S`` without progress their processes' liveness). A
sync of all ranks sleeps on the segment's futex word ``WAKE`` instead (``shared/futex.py``):
the rank that arrives last wakes every sleeper with one system call, not p - 1 semaphore
posts (each of which lets the woken card preempt the poster on a loaded machine).
Within a phase a rank may also wait for a piece of a peer's work: each rank publishes its
``PROGRESS`` word (``step at arrival << 24 | pieces done``) and posts the peers asleep on
it (``Comm.bump``, ``_Run.take``), so pipelined phases need no barrier. Data moves straight
between arenas: peers' inputs are read where they lie and reduced with numpy ufuncs
(``out=``) into the rank's own output, in ``CHUNK_BYTES`` pieces so the accumulator stays
in cache. No staging buffer, no host thread.

| kind                   | syncs | what a rank does between them                        |
|------------------------|-------|------------------------------------------------------|
| all_reduce, ≤ 4 KiB    | 1     | copies its input into its segment slot (parity of the |
|                        |       | call), then reduces every rank's slot in rank order  |
|                        |       | (in the loop thread when the engine is idle: below)  |
| all_reduce mesh        | 2     | reduces slice r of every input into its output, one  |
|                        |       | ``CHUNK_BYTES`` piece at a time (PROGRESS), and      |
|                        |       | copies each finished piece of slice j from rank j's  |
|                        |       | output as soon as it is published (pipelined)        |
| all_reduce ring        | 2(p-1)+2 | p-1 reduce-scatter + p-1 all-gather steps reading |
|                        |       | the left neighbour, synced with both neighbours only |
| all_reduce hier        | 2     | mesh reduce of slice i within the group; reduce of   |
|                        |       | sub-slice k with the same-place ranks of the other   |
|                        |       | groups; gather those; gather the group's slices      |
|                        |       | (each stage waits on PROGRESS of the ranks it reads) |
| all_gather, reduce_scatter, all_to_all, broadcast, reduce | 2 | copy/reduce from peers' inputs |
| all_to_allv            | 2     | checks every rank's counts against its peers' (the   |
|                        |       | COMM_PAIR table), then copies from peers' inputs     |
| barrier                | 1     | nothing                                              |

**send / recv** do not touch ``step`` (only two ranks take part): the sender publishes its
buffer in its COMM_PAIR entry for the receiver and bumps ``sent``; the receiver waits for
that, copies straight from the sender's arena into its own buffer and bumps ``taken``; the
sender's task ends when the receiver's ``taken`` reaches its send (so its buffer may be
reused), as HcclSend's stream waits for the matching HcclRecv. A receiver whose count or
dtype differs from the send fails with E_PARA and writes ``status``, so the sender fails
with it. A rank sleeping in either writes ``waiting`` = 1 and is posted by the peer.

The host chooses ``algo`` (mesh within one HCCS group, hier when the ranks span groups;
``NPUEMU_HCCL_ALGO`` overrides); hier needs groups of equal size (else ring); ring and hier
apply to all_reduce only, the other kinds are always mesh here.

Failure (the task's code; the rank's ``error`` entry gets the HCCL code, which
``HcclGetCommAsyncError`` reads): past the task's timeout (HCCL_EXEC_TIMEOUT), or a peer
that timed out, 107019 and HCCL_E_TIMEOUT; a peer card not running, a peer host gone or
left, or a peer that failed otherwise, 507057 and HCCL_E_REMOTE; ranks whose calls differ
(kind, dtype, op, algorithm, root, count) 107000 and
HCCL_E_PARA. A failed communicator stays failed (its ranks' step counters no longer
agree): every later collective on it fails at once with the same code, as HCCL asks for
a new communicator after an error. A cancelled task (stream destroyed or aborted, client
gone, communicator detached) stops at its next wake. A collective runs no user code; any
other failure of it (ours, even a BaseException) is an internal error (507000) that breaks
the communicator and wakes its peers, and the engine thread goes on.

Limits and the segment's size: a client attaches at most ``MAX_COMMS`` = 32 communicators
(past that ``COMM_ATTACH`` is 207012, ``ACL_ERROR_RT_OVER_LIMIT``), and the worker runs at
most ``MAX_COMM_ENGINES`` = 64 communicator engine threads for all its clients (a detached
communicator's thread is reused; past that 207005, ``ACL_ERROR_RT_RESOURCE_ALLOC_FAIL``: no
thread left to give). The host's HCCL layer reports either as ``HCCL_E_RUNTIME`` naming the
ACL code. A segment is checked at attach (``fstat`` of the descriptor against
``layout.COMM_SIZE`` before it is read; a smaller one is 107000) and before each use where
another process may have truncated it since: by the loop thread before a task is accepted
and before ``_fail`` writes the rank's error word, and by the engine thread at the start of
a task and after every wake in ``block`` (``Comm.intact``). A truncated segment fails the
task with 107000 and the rank's communicator stays broken (HCCL_E_MEMORY, kept in the
worker only: there is no segment to write it to). Size checks before each use, not a mapping
that cannot fault: a POSIX shared-memory segment cannot be sealed against ``ftruncate``
(tmpfs files refuse seals) and Python cannot recover from a SIGBUS, so a truncation that
lands in the middle of one phase, between two checks, can still kill the worker; the checks
leave that window at one phase of one task.

One-shot all_reduce in the loop thread (``_inline``): a card's part of a small all_reduce
is a few microseconds of work, and on a loaded machine each hand-over between the loop and
the engine thread (the task to the engine, its report back) costs a wake-up of a thread that
waits for a core. So when the communicator's engine has no task (``Engine.running`` is 0),
``prepare`` itself posts the input, advances the step and waits on ``WAKE`` for the peers,
at most ``INLINE_WAIT_S``; if they all arrived the task completes in the loop. Else the
engine thread takes over the wait where the loop left it (``_small_rest``), so a late peer
holds up the loop for at most that long, and the loop never spins meanwhile.

Threading model: ``attach`` (and detach), ``prepare`` and ``release`` run in the worker's
loop thread and own ``Client.comms``. Each ``Comm`` has one engine thread (an
``engines.Engine`` of the DMA class, registered in the scheduler's engine table under the
key ``Comm.engine``, reused by later communicators of this worker) that runs ``_run`` and
alone touches ``Comm.step``, ``calls``, ``watches`` (the pidfds of peers' processes) and
the slot views (``slots``), except that the loop thread does too in ``_inline``, only while
the engine has no task of this communicator (the loop's ``Engine.running`` count: a task is
reported to the loop only after its body returned); ``broken`` is set once, by that thread
or by
``prepare`` when a peer is already gone (a single assignment; the engine only reads it at
the start of a task). ``Comm.closed`` is set by the loop and read by the engine thread.
``_free_engines`` and the count of engines started (``_engines``) are the loop thread's.
The segment's words are shared with other processes: each field has one writer (see the
layout table); ``step`` and ``waiting`` are each written before a full fence (``_fence``)
and the reads of the peers' words that follow it.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable
from os import fstat
from typing import Any, Protocol

from npuemu.device import contracts, engines
from npuemu.device.contracts import Card, Job, Peer
from npuemu.device.exec.kernels import is_array
from npuemu.shared import address, errors, futex, layout, liveness, protocol, shm
from npuemu.shared.layout import COMM_HEADER, COMM_PAIR, COMM_RANK, COMM_RANKS, CommRankState
from npuemu.shared.protocol import BadFrame, u64

CHUNK_BYTES = 256 * 1024
"""Piece of a reduction: the accumulator and one input stay in L2."""
_SLICE_S = 0.05
_SLOT_SHAPES = 32
"""Shapes (parity, count, dtype) of small-message slot views a communicator keeps."""
INLINE_WAIT_S = 0.002
"""Longest the loop thread waits for the peers of a one-shot all_reduce (``_inline``)
before it hands the rest of the call to the communicator's engine thread."""
_KINDS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all",
          "barrier", "all_to_allv", "send", "recv")
_P2P = ("send", "recv")
"""Kinds between two ranks (``root`` is the peer): no step, no call number."""
_ALGOS = ("mesh", "ring", "hier")
_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "float32", "float64", "bfloat16")
"""``bfloat16`` travels as uint16 bits and is reduced through float32 (``shared/bf16.py``)."""
_OPS = ("sum", "prod", "max", "min")
np: Any = None
"""numpy, imported by the first collective task (``_numpy``): a worker that runs none never
loads it (its start-up is then ~60 ms shorter)."""
bf16: Any = None  # npuemu.shared.bf16 (it imports numpy), likewise
_UFUNCS: dict[str, Any] = {}
_NP_DTYPES: dict[str, Any] = {}  # dtype name -> the numpy dtype its elements have here
_IDS = {name: i for names in (_KINDS, _DTYPES, _OPS, _ALGOS) for i, name in enumerate(names)}
"""Index of each kind, dtype, op and algorithm name in its tuple (the call's ``desc``)."""
def _numpy() -> None:
    global np, bf16
    if np is None:
        import numpy

        from npuemu.shared import bf16 as bf16_module

        _UFUNCS.update(zip(_OPS, (numpy.add, numpy.multiply, numpy.maximum, numpy.minimum),
                           strict=True))
        _NP_DTYPES.update({name: numpy.dtype(numpy.uint16 if name == "bfloat16" else name)
                           for name in _DTYPES})
        bf16, np = bf16_module, numpy
_E_PARA, _E_MEMORY, _E_TIMEOUT, _E_REMOTE = 1, 3, 9, 21  # HcclResult values (host/hccl)
MAX_COMMS = 32
"""Communicators one client may have attached on this card."""
MAX_COMM_ENGINES = 64
"""Engine threads of communicators in this worker, all clients together."""
_R = COMM_RANK
_P = COMM_PAIR
_WORD_WAIT = 1
"""``waiting`` of a rank asleep on a peer's pair word (a send or recv) or ``PROGRESS`` word
(a pipelined phase); a step sync's is 2 * step >= 2."""
_PIECE_BITS = 24
"""``PROGRESS`` is ``step at the call's arrival << _PIECE_BITS | pieces done`` (monotonic
over calls; a piece is at least ``CHUNK_BYTES``, so far fewer than 2**24 of them)."""
_PRESENT = frozenset((int(CommRankState.JOINED), int(CommRankState.ATTACHED)))
_free_engines: list[str] = []  # scheduler keys of engines of detached communicators
_engines = [0]  # communicator engine threads started by this worker (loop thread)


class CommClient(contracts.Client, Protocol):
    """A client as its collectives see it (``worker.Client``): its attached communicators."""

    comms: dict[int, Comm]


class CollectiveError(Exception):
    def __init__(self, code: int, hccl: int, detail: str) -> None:
        super().__init__(detail)
        self.code, self.hccl = code, hccl


class Comm:
    """One rank of a communicator, attached to this card."""

    def __init__(self, worker: Card, name: str, rank: int) -> None:
        self.worker, self.name, self.rank = worker, name, rank
        self.seg = shm.Segment(name)  # refuses a segment of another user
        try:
            if not self.intact():
                raise _invalid(f"{name} is smaller than a communicator segment "
                               f"({self.seg.size} < {layout.COMM_SIZE} bytes)")
            self.words = self.seg.buf.cast("Q")
            self._check()
            n = self.n = self.field(rank, _R.N_RANKS)
            self.devs = [self.field(j, _R.DEV) for j in range(n)]
            self.pids = [self.field(j, _R.PID) for j in range(n)]
            self.groups = _hccs_groups([self.field(j, _R.GROUP) for j in range(n)])
            self.peers: dict[int, Peer] = {d: worker.peer(d) for d in set(self.devs)
                                           if d != worker.dev}
            self.sems = [shm.semaphore(shm.comm_semaphore(name, j, self.pids[j]))
                         for j in range(n)]
        except BaseException:
            self.seg.close()
            raise
        self.step = self.field(rank, _R.STEP)
        first = COMM_RANKS + _R.STEP
        self.steps = slice(first, first + n * _R.words, _R.words)  # every rank's STEP word
        self.wake_at = self.seg.address + COMM_HEADER.WAKE * 8  # the futex word
        self.calls = 0
        self.sent: dict[int, int] = {}  # peer -> sends to it (from the segment at first)
        self.taken: dict[int, int] = {}  # peer -> its sends this rank received (likewise)
        self.broken: CollectiveError | None = None
        self.closed = False
        self.engine = _free_engines.pop() if _free_engines else ""  # scheduler key
        self.watches: dict[int, liveness.ProcessWatch] = {}  # pid -> its pidfd (engine thread)
        self._slots: dict[tuple[int, int, Any], list[np.ndarray]] = {}  # ``slots`` (likewise)

    def intact(self) -> bool:
        """The segment still has its whole size (no process truncated it since the last
        look); reading or writing past a truncation would SIGBUS this process."""
        try:
            size = fstat(self.seg.fd).st_size
        except OSError:
            return False
        whole: bool = min(size, self.seg.size) >= layout.COMM_SIZE
        return whole

    def check_intact(self) -> None:
        """CollectiveError (107000, HCCL_E_MEMORY) if the segment was truncated."""
        if not self.intact():
            raise CollectiveError(errors.ACL_ERROR_RT_PARAM_INVALID, _E_MEMORY,
                                  f"communicator segment {self.name} was truncated")

    def _check(self) -> None:
        w, rank = self.words, self.rank
        if w[COMM_HEADER.MAGIC] != layout.MAGIC_COMM or \
                w[COMM_HEADER.VERSION] != protocol.PROTOCOL_VERSION:
            raise _invalid(f"{self.name} is not a communicator segment of this version")
        if not 0 <= rank < layout.COMM_MAX_RANKS:
            raise _invalid(f"rank {rank} out of range")
        n = self.field(rank, _R.N_RANKS)
        if self.field(rank, _R.DEV) != self.worker.dev or not 0 < n <= layout.COMM_MAX_RANKS:
            raise _invalid(f"rank {rank} of {self.name} is not on device {self.worker.dev}")
        for j in range(n):
            if self.field(j, _R.STATE) not in _PRESENT or self.field(j, _R.N_RANKS) != n:
                raise _invalid(f"rank {j} of {self.name} has not joined")

    # segment fields ----------------------------------------------------------------------
    def field(self, rank: int, name: int) -> int:
        return self.words[COMM_RANKS + rank * _R.words + name]

    def put(self, name: int, value: int) -> None:
        self.words[COMM_RANKS + self.rank * _R.words + name] = value

    def pair(self, rank: int, peer: int, name: int) -> int:
        return self.words[layout.comm_pair(rank, peer) + name]

    def put_pair(self, peer: int, name: int, value: int) -> None:
        self.words[layout.comm_pair(self.rank, peer) + name] = value

    # synchronisation (engine thread) -------------------------------------------------------
    def sync(self, task: Job, ranks: range | tuple[int, ...], deadline: float) -> None:
        """Advance this rank's step, wake the peers that sleep for it and block until each
        of ``ranks`` (all, or the two ring neighbours) reached the same step. Raises
        CollectiveError (timeout, peer lost or failed, cancelled)."""
        target = self.advance(ranks)
        if len(ranks) == self.n:
            self.wait_all(task, target, deadline)
        else:
            self.block(task, ranks, lambda: self._reached(ranks, target), 2 * target + 1,
                       deadline)

    def advance(self, ranks: range | tuple[int, ...]) -> int:
        """The first half of ``sync`` (does not block): this rank's step + 1, published;
        the peers of ``ranks`` that sleep for it posted and, when every rank has now
        reached it (a sync of all), every sleeper on ``WAKE`` woken. Returns the step."""
        self.step += 1
        target = self.step
        self.put(_R.STEP, target)
        _fence()
        self._wake_peers(target, ranks)
        if len(ranks) == self.n and self.all_reached(target):
            self.words[COMM_HEADER.WAKE] = target
            futex.wake(self.wake_at)
        return target

    def wait_all(self, task: Job, target: int, deadline: float,
                 until: float = float("inf")) -> bool:
        """The second half of a sync of every rank, on the futex word ``WAKE``: the rank
        that arrives last (``advance``) writes ``target`` there and wakes all the sleepers
        in one call (one trip through the scheduler, not one semaphore post per peer); the
        others sleep while the word is what they read before they checked the steps (the
        checks of ``block``). False if ``until`` (monotonic) passed first."""
        ranks, words, at = range(self.n), self.words, self.wake_at
        alive_at = 0.0
        while True:
            seen = words[COMM_HEADER.WAKE]
            if self.all_reached(target):
                return True
            alive_at, now = self._checks(task, ranks, deadline, alive_at)
            if now >= until:
                return False
            futex.wait(at, seen, max(0.0, min(_SLICE_S, deadline - now, until - now)))
            self.check_intact()

    def nudge(self) -> None:
        """Wake every rank asleep in ``_sync_all`` so it checks the words again (a failure,
        a detach): the word changes, so one that read it just before does not sleep."""
        self.words[COMM_HEADER.WAKE] += 1
        futex.wake(self.wake_at)

    def _checks(self, task: Job, ranks: range | tuple[int, ...] | list[int], deadline: float,
                alive_at: float) -> tuple[float, float]:
        """The checks before a sleep (see ``block``); returns the next liveness check's time
        and now. The segment's size is checked at the task's start and after every wake,
        not here again (the words this reads were read before, by the wait's test)."""
        now = time.monotonic()
        if not alive_at:
            alive_at = now + _SLICE_S
        elif now >= alive_at:
            self._check_alive(ranks)
            alive_at = now + _SLICE_S
        self._check_waiting(task, ranks, deadline, now)
        return alive_at, now

    def block(self, task: Job, ranks: range | tuple[int, ...] | list[int],
              ready: Callable[[], bool], waiting: int, deadline: float) -> None:
        """Sleep on this rank's semaphore until ``ready()``, with ``waiting`` published so
        the peer that makes it true posts it. Every wake checks the cancel flag, the
        deadline and the ``STATE`` / ``ERROR`` words of ``ranks``; their processes' liveness
        (system calls) once a slice of ``_SLICE_S`` went by without ``ready()`` (a dead
        peer posts nothing, so it is found within one slice). Raises CollectiveError."""
        alive_at = 0.0
        while not ready():
            alive_at, now = self._checks(task, ranks, deadline, alive_at)
            self.put(_R.WAITING, waiting)
            _fence()
            if not ready():  # a peer that came meanwhile saw WAITING
                shm.wait(self.sems[self.rank], max(0.0, min(_SLICE_S, deadline - now)))
            self.check_intact()
            self.put(_R.WAITING, 0)

    def bump(self, value: int, ranks: range | list[int]) -> None:
        """Publish this rank's ``PROGRESS`` and post those of ``ranks`` asleep on a word."""
        self.put(_R.PROGRESS, value)
        _fence()
        words, base, stride, me = self.words, COMM_RANKS + _R.WAITING, _R.words, self.rank
        for j in ranks:
            if j != me and words[base + j * stride] == _WORD_WAIT:
                self.sems[j].release()

    def progress(self, rank: int) -> int:
        return self.words[COMM_RANKS + rank * _R.words + _R.PROGRESS]

    def wait_progress(self, task: Job, ranks: list[int], target: int, deadline: float) -> None:
        """Block until every rank of ``ranks`` published ``PROGRESS`` >= ``target``."""
        words, base, stride = self.words, COMM_RANKS + _R.PROGRESS, _R.words
        self.block(task, ranks, lambda: all(words[base + j * stride] >= target for j in ranks),
                   _WORD_WAIT, deadline)

    def poke(self, peer: int) -> None:
        """Wake ``peer`` if it sleeps in a send or recv (after a pair word was written)."""
        _fence()
        if self.field(peer, _R.WAITING) == _WORD_WAIT:
            self.sems[peer].release()

    def all_reached(self, target: int) -> bool:
        """Every rank's step is at least ``target`` (one slice of the segment's words)."""
        reached: bool = min(self.words[self.steps]) >= target
        return reached

    def _reached(self, ranks: range | tuple[int, ...], target: int) -> bool:
        words, base, stride = self.words, COMM_RANKS + _R.STEP, _R.words
        return all(words[base + j * stride] >= target for j in ranks)

    def _wake_peers(self, step: int, ranks: range | tuple[int, ...]) -> None:
        """Post the semaphore of each peer of ``ranks`` that sleeps for a step every rank
        it waits for has now reached (normally only the last rank to arrive posts)."""
        words, base, stride, n = self.words, COMM_RANKS + _R.WAITING, _R.words, self.n
        for j in ranks:
            if j == self.rank:
                continue
            waiting = words[base + j * stride]
            if not waiting or waiting // 2 > step:
                continue
            theirs = ((j - 1) % n, j, (j + 1) % n) if waiting & 1 else range(n)
            if self._reached(theirs, waiting // 2):
                self.sems[j].release()

    def _check_waiting(self, task: Job, ranks: range | tuple[int, ...] | list[int],
                       deadline: float, now: float) -> None:
        """The cheap checks of a wait: cancelled, past ``deadline``, a rank of ``ranks``
        gone from the segment or failed (its words)."""
        if self.closed or task.cancelled:
            raise CollectiveError(errors.ACL_ERROR_RT_PARAM_INVALID, _E_PARA,
                                  "collective cancelled")
        words, stride = self.words, _R.words
        for j in ranks:
            if j == self.rank:
                continue
            at = COMM_RANKS + j * stride
            if words[at + _R.STATE] not in _PRESENT:
                raise CollectiveError(errors.ACL_ERROR_RT_SUSPECT_REMOTE_ERROR, _E_REMOTE,
                                      f"rank {j} left the communicator")
            failed = words[at + _R.ERROR]
            if failed == _E_TIMEOUT:  # the collective timed out: say so on every rank
                raise CollectiveError(errors.ACL_ERROR_RT_WAIT_TIMEOUT, _E_TIMEOUT,
                                      f"rank {j} timed out waiting for its peers")
            if failed:
                raise CollectiveError(errors.ACL_ERROR_RT_SUSPECT_REMOTE_ERROR, _E_REMOTE,
                                      f"rank {j} failed ({failed})")
        if now >= deadline:
            raise CollectiveError(errors.ACL_ERROR_RT_WAIT_TIMEOUT, _E_TIMEOUT,
                                  "peers did not arrive within HCCL_EXEC_TIMEOUT")

    def _check_alive(self, ranks: range | tuple[int, ...] | list[int]) -> None:
        """CollectiveError (507057) if a card or host process of ``ranks`` is gone."""
        for j in ranks:
            if j == self.rank:
                continue
            peer = self.peers.get(self.devs[j])
            if peer is not None and not self.card_alive(peer):
                raise CollectiveError(errors.ACL_ERROR_RT_SUSPECT_REMOTE_ERROR, _E_REMOTE,
                                      f"rank {j}: device {self.devs[j]} is not running")
            if not self.pid_alive(self.pids[j]):
                raise CollectiveError(errors.ACL_ERROR_RT_SUSPECT_REMOTE_ERROR, _E_REMOTE,
                                      f"rank {j}: host process {self.pids[j]} is gone")

    def card_alive(self, peer: Peer) -> bool:
        return peer.alive() and self.pid_alive(peer.ctl[layout.DEVICE_CTL.PID])

    def pid_alive(self, pid: int) -> bool:
        """False once process ``pid`` (a rank's host, a peer card's worker) has exited, a
        zombie included (a pidfd, opened at the first look; ``os.kill(pid, 0)`` would count a
        killed but unreaped rank as alive until the timeout)."""
        if not pid:
            return True
        watch = self.watches.get(pid)
        if watch is None:
            watch = self.watches[pid] = liveness.ProcessWatch(pid)
        return watch.alive()

    # memory ------------------------------------------------------------------------------
    def view(self, ptr: int, count: int, dt: np.dtype) -> np.ndarray:
        """``count`` elements at device pointer ``ptr`` of this card or a peer card of the
        communicator, as an array over the arena (no copy)."""
        nbytes = count * dt.itemsize
        if not nbytes:
            return np.empty(0, dt)
        dev, kind, offset = address.decode(ptr)
        if dev == self.worker.dev:
            arena = self.worker.memory.arenas[kind]
            if offset + nbytes > arena.seg.size:  # far pages: only those published
                try:
                    if arena.pages is None:  # an arena of pure bookkeeping: nothing mapped
                        raise _invalid(f"device {dev} maps no far pages")
                    arena.pages.ensure_range(offset, nbytes)
                except errors.AclError:
                    raise CollectiveError(errors.ACL_ERROR_RT_PARAM_INVALID, _E_PARA,
                                          f"0x{ptr:x}+{nbytes} is outside device {dev}'s "
                                          "memory") from None
            at = arena.seg.address + offset
        else:
            peer = self.peers.get(dev)
            if peer is None:
                raise CollectiveError(errors.ACL_ERROR_RT_PARAM_INVALID, _E_PARA,
                                      f"0x{ptr:x} is on no card of the communicator")
            try:
                at = peer.address(kind, offset, nbytes, ptr)
            except errors.AclError as err:
                raise CollectiveError(err.code, _E_PARA, str(err)) from None
        raw = (ctypes.c_char * nbytes).from_address(at)
        return np.frombuffer(raw, dt)

    def slots(self, parity: int, count: int, dt: np.dtype) -> list[np.ndarray]:
        """Every rank's small-message slot ``parity`` of the segment, as ``count`` elements
        of ``dt`` (made once per shape and kept: at most ``_SLOT_SHAPES`` of them)."""
        key = (parity, count, dt)
        views = self._slots.get(key)
        if views is None:
            if len(self._slots) >= _SLOT_SHAPES:
                self._slots.clear()
            buf = self.seg.buf
            views = self._slots[key] = [
                np.frombuffer(buf, dt, count, layout.comm_small_offset(j, parity))
                for j in range(self.n)]
        return views


_fence_lock = threading.Lock()


def _fence() -> None:
    """A full memory barrier (a locked instruction): a rank's store of ``step`` or
    ``waiting`` is visible before its next load of a peer's, so a sleeper and the peer
    that arrives last never both miss each other (and ``_SLICE_S`` bounds it anyway)."""
    with _fence_lock:
        pass


def _hccs_groups(group_of: list[int]) -> list[list[int]] | None:
    """The ranks of each HCCS group (in rank order), or None unless there are several
    groups of equal size (what the hierarchical algorithm needs)."""
    groups: dict[int, list[int]] = {}
    for rank, g in enumerate(group_of):
        groups.setdefault(g, []).append(rank)
    members = list(groups.values())
    if len(members) < 2 or len({len(m) for m in members}) != 1:
        return None
    return members


def _invalid(detail: str) -> errors.AclError:
    return errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, detail)


# control requests (loop thread) --------------------------------------------------------------
def attach(worker: Card, client: CommClient, name: str, rank: int) -> tuple[()] | tuple[int]:
    """``COMM_ATTACH``: ``(segment name, rank)`` maps a communicator for this client and
    returns its id; ``("", id)`` detaches it (a running collective of it stops)."""
    if not isinstance(name, str):
        raise BadFrame("COMM_ATTACH takes a segment name")
    rank = u64(rank)
    if not name:
        comm = client.comms.pop(rank, None)
        if comm is None:
            raise _invalid(f"no communicator {rank}")
        _close(comm)
        return ()
    if not name.startswith(shm.name(worker.node, "hccl") + "."):
        raise BadFrame(f"{name!r:.80} is not a communicator segment of this node")
    if len(client.comms) >= MAX_COMMS:
        raise errors.error_for(errors.ACL_ERROR_RT_OVER_LIMIT,
                               f"COMM_ATTACH: {MAX_COMMS} communicators attached already")
    if not _free_engines and _engines[0] >= MAX_COMM_ENGINES:
        raise errors.error_for(errors.ACL_ERROR_RT_RESOURCE_ALLOC_FAIL,
                               f"COMM_ATTACH: the card runs {MAX_COMM_ENGINES} communicator "
                               "threads, none free")
    comm = Comm(worker, name, rank)
    if not comm.engine:  # a DMA-class engine (its failure code) under a key of its own
        comm.engine = f"hccl{len(worker.scheduler.engines)}"
        worker.scheduler.engines[comm.engine] = engines.Engine(
            engines.DMA, worker.scheduler.done, worker.wake)
        _engines[0] += 1
    cid = 1 + max(client.comms, default=0)
    client.comms[cid] = comm
    return (cid,)


def _close(comm: Comm) -> None:
    """Forget a communicator: a running task sees ``closed``; the engine goes back to the
    pool; the mappings are dropped with the last reference (a running task holds one)."""
    comm.closed = True
    for sem in comm.sems:
        sem.release()  # wake a waiter of this rank so it sees ``closed``
    if comm.intact():
        comm.nudge()
    if comm.engine:
        _free_engines.append(comm.engine)
        comm.engine = ""


def release(client: CommClient) -> None:
    """The client detached: close its communicators."""
    for comm in client.comms.values():
        _close(comm)
    client.comms.clear()


# the task ----------------------------------------------------------------------------------
def _string(choices: tuple[str, ...]) -> Callable[[object], None]:
    def check(value: object) -> None:
        if value not in choices or type(value) is not str:
            raise BadFrame(f"{value!r:.40} not in {choices}")
    return check


def _counts(value: object) -> None:
    if not is_array(value) or len(value) > 4 * layout.COMM_MAX_RANKS:
        raise BadFrame("counts must be an array of at most 4 x COMM_MAX_RANKS u64")
    for v in value:
        u64(v)


TASK_ARGS = (u64, _string(_KINDS), _string(_ALGOS), _string(_DTYPES), _string(_OPS), u64,
             u64, u64, u64, u64, _counts)
"""COLLECTIVE: comm id, kind, algo, dtype, op, root (the peer of send/recv), count, send,
recv, timeout ms, counts (all_to_allv: send_counts, sdispls, recv_counts, rdispls; else [])."""


def _ranges(kind: str, count: int, p: int, rank: int, root: int, send: int, recv: int,
            counts: list[int], itemsize: int) -> list[tuple[int, int]]:
    """(pointer, elements) of this rank's buffers the call touches."""
    if kind == "all_to_allv":
        if len(counts) != 4 * p:
            raise _invalid(f"all_to_allv takes 4 x {p} counts, got {len(counts)}")
        sc, sd, rc, rd = (counts[k * p:(k + 1) * p] for k in range(4))
        return [(send + sd[j] * itemsize, sc[j]) for j in range(p)] + \
            [(recv + rd[j] * itemsize, rc[j]) for j in range(p)]
    if kind in _P2P and root == rank:
        raise _invalid(f"rank {rank} {kind}s to itself")
    return list(zip((send, recv), _extents(kind, count, p, rank, root), strict=True))


def _extents(kind: str, count: int, p: int, rank: int, root: int) -> tuple[int, int]:
    """Elements of (send, recv) this rank's buffers must hold."""
    if kind == "send":
        return count, 0
    if kind == "recv":
        return 0, count
    if kind == "all_gather":
        return count, count * p
    if kind == "reduce_scatter":
        return count * p, count
    if kind == "all_to_all":
        return count * p, count * p
    if kind == "barrier":
        return 0, 0
    if kind == "reduce" and rank != root:
        return count, 0
    return count, count


def prepare(worker: Card, client: CommClient,
            task: Job) -> tuple[str | None, Callable[[Job], int]]:
    """Check the task's buffers (this rank's own, on this card) in the loop thread; returns
    the communicator's engine and the body, or None and the code of a one-shot all_reduce
    done here (``_inline``)."""
    cid, kind, algo, dtype, op, root, count, send, recv, timeout_ms, counts = task.args
    _numpy()
    comm = client.comms.get(cid)
    if comm is None:
        raise _invalid(f"no communicator {cid}")
    try:
        comm.check_intact()
    except CollectiveError as err:
        _fail(comm, err)
        raise _invalid(str(err)) from None
    if not 0 <= root < comm.n:
        raise _invalid(f"root {root} not in [0, {comm.n})")
    dt = _NP_DTYPES[dtype]
    for ptr, n in _ranges(kind, count, comm.n, comm.rank, root, send, recv, counts,
                          dt.itemsize):
        if n:
            if not address.is_device_ptr(ptr) or address.decode(ptr)[0] != worker.dev:
                raise _invalid(f"0x{ptr:x} is not memory of device {worker.dev}")
            worker.resolve(client, ptr, n * dt.itemsize)
            worker.faults.check_ranges((ptr, n * dt.itemsize))
    try:
        worker.faults.check_copy(tuple(comm.peers))  # a dead peer or a faulty link
    except errors.AclError as err:
        _fail(comm, CollectiveError(err.code, _E_REMOTE, str(err)))
        raise
    task.args = (comm, kind, algo, dtype, op, root, count, send, recv, timeout_ms / 1000,
                 counts)
    if kind == "all_reduce" and count * dt.itemsize <= layout.COMM_SMALL_BYTES and \
            not worker.scheduler.engines[comm.engine].running:
        return _inline(task)
    return comm.engine, _run


def _run(task: Job) -> int:
    """The engine thread's body of a COLLECTIVE task (blocks until the call is done on
    every rank, or fails). Returns 0 or the task's ACL code."""
    return _guarded(task, _body)


def _body(task: Job) -> None:
    args = task.args
    run = _begin(task)
    _BODIES[args[1]](run, args[2], args[7], args[8], args[5])


def _begin(task: Job, checked: bool = False) -> _Run:
    """The call's ``_Run``, its description published (engine thread, or the loop thread
    when the engine is idle: ``_inline``). ``checked``: ``prepare`` has just checked the
    segment's size in this thread."""
    comm, kind, algo, dtype, op, root, count, send, recv, timeout_s, counts = task.args
    if comm.broken is not None:
        raise comm.broken
    if not checked:
        comm.check_intact()
    deadline = time.monotonic() + timeout_s
    ids = _IDS
    desc = ids[kind] | ids[dtype] << 8 | ids[op] << 16 | ids[algo] << 24 | root << 32
    uf = _bf16_ufunc(op) if dtype == "bfloat16" else _UFUNCS[op]
    run = _Run(comm, task, deadline, _NP_DTYPES[dtype], uf, count)
    run.dtype, run.counts = ids[dtype], counts
    if kind not in _P2P:
        run.parity = comm.calls & 1
        run.publish(send, recv, desc)
        comm.calls += 1
    return run


def _guarded(task: Job, body: Callable[[Job], object]) -> int:
    """``body(task)`` (``task.args`` begin with the communicator and the kind); 0, or the
    code of its failure (the communicator is then broken and its peers woken: ``_fail``)."""
    comm: Comm = task.args[0]
    try:
        body(task)
        return 0
    except CollectiveError as err:
        return _fail(comm, err)
    except errors.AclError as err:
        return _fail(comm, CollectiveError(err.code, _E_REMOTE, str(err)))
    except BaseException:  # a bug of ours (no user code runs here): fail it, wake the peers
        comm.worker.internal_error(f"collective {task.args[1]}")
        return _fail(comm, CollectiveError(errors.ACL_ERROR_RT_INTERNAL_ERROR, 4, "internal"))


def _inline(task: Job) -> tuple[str | None, Callable[[Job], int]]:
    """A one-shot all_reduce whose engine is idle starts in the loop thread (``prepare``,
    does not block longer than ``INLINE_WAIT_S``): it posts its input and waits for its
    peers that long at most. Done by then, the task completes in the loop: no hand-over to
    the engine thread and back, two wake-ups of this card's threads fewer. Else the engine
    thread waits for the rest (``_small_rest``)."""
    code = _guarded(task, _small_start)
    if code or task.args[4]:
        task.args = (code,)
        return None, _result
    return task.args[0].engine, _small_rest


def _small_start(task: Job) -> None:
    """``_inline``'s part; leaves ``task.args`` = (comm, kind, run, step, done)."""
    comm, kind, recv = task.args[0], task.args[1], task.args[8]
    run = _begin(task, checked=True)
    target = _small_post(run, task.args[7])
    task.args = (comm, kind, run, target, False, recv)
    done = _small_reduce(run, target, recv, time.monotonic() + INLINE_WAIT_S)
    task.args = (comm, kind, run, target, done, recv)


def _small_rest(task: Job) -> int:
    """Engine thread: the rest of a one-shot all_reduce the loop thread started
    (``_inline``): the wait for the peers and the reduction."""
    return _guarded(task, _small_finish)


def _small_finish(task: Job) -> None:
    _comm, _kind, run, target, _done, recv = task.args
    _small_reduce(run, target, recv)


def _result(task: Job) -> int:
    """The code of a call the loop thread finished in ``prepare`` (``_inline``)."""
    code: int = task.args[0]
    return code


def _fail(comm: Comm, err: CollectiveError) -> int:
    if comm.broken is None:
        comm.broken = err
        if not comm.closed and comm.intact():
            comm.put(_R.ERROR, err.hccl)
            for sem in comm.sems:  # wake every waiting peer: it fails at once
                sem.release()
            comm.nudge()
        comm.worker.log("ERROR", f"collective of rank {comm.rank} failed, ret={err.code}: "
                                 f"{err}", module="HCCL")
    return err.code


def _bf16_ufunc(op: str) -> Callable[..., object]:
    """A ufunc-shaped reduction of bfloat16 bits (``uf(a, b, out=o)``)."""
    return lambda a, b, out: bf16.bf16_reduce(op, a, b, out=out)


class _Run:
    """One rank's part of one collective, on the engine thread."""

    def __init__(self, comm: Comm, task: Job, deadline: float, dt: np.dtype,
                 ufunc: Callable[..., object], count: int) -> None:
        self.c, self.task, self.deadline, self.dt = comm, task, deadline, dt
        self.uf, self.count = ufunc, count
        self.r, self.p = comm.rank, comm.n
        self.all = range(comm.n)
        self.dtype = 0  # index in _DTYPES
        self.parity = 0  # of the collective's number on this communicator (publish)
        self.counts: list[int] = []  # all_to_allv's four count lists
        self.base = 0  # this call's PROGRESS base: step after ``arrive`` << _PIECE_BITS

    def publish(self, send: int, recv: int, desc: int) -> None:
        """The call's buffers and what it is. ``desc``/``count`` go to the words of the
        call's parity: after a one-phase call (one sync) a fast rank may already publish
        its next call while a slow one still checks this one."""
        c, p = self.c, self.parity
        c.put(_R.SEND, send)
        c.put(_R.RECV, recv)
        c.put(_R.DESC + p, desc)
        c.put(_R.COUNT + p, self.count)

    def sync(self, ranks: range | tuple[int, ...] | None = None) -> None:
        self.c.sync(self.task, self.all if ranks is None else ranks, self.deadline)

    def arrive(self) -> None:
        """The first phase: every rank published; their calls must agree. Sets ``base``
        (every rank's step is the same now, and greater than at any earlier call)."""
        self.sync()
        self.agree()

    def agree(self) -> None:
        """After the first sync: every rank's call is this rank's (else E_PARA); ``base``."""
        c = self.c
        self.base = c.step << _PIECE_BITS
        p, words, stride = self.parity, c.words, _R.words
        desc, count = COMM_RANKS + _R.DESC + p, COMM_RANKS + _R.COUNT + p
        mine = (words[desc + self.r * stride], self.count)
        for j in self.all:
            if words[desc + j * stride] != mine[0] or words[count + j * stride] != mine[1]:
                theirs = (c.field(j, _R.DESC + p), c.field(j, _R.COUNT + p))
                raise CollectiveError(
                    errors.ACL_ERROR_RT_PARAM_INVALID, _E_PARA,
                    f"rank {j} called another collective than rank {self.r} (desc, count "
                    f"{theirs[0]:#x}, {theirs[1]} against {mine[0]:#x}, {mine[1]}; steps "
                    f"{c.field(j, _R.STEP)} and {c.step})")

    def take(self, parts: dict[int, tuple[np.ndarray, np.ndarray]], first: int,
             step: int) -> None:
        """Copy each ``parts[j] = (src, dst)`` as its owner ``j`` finishes it: piece k
        (``step`` elements) of ``src`` is final once j's ``PROGRESS`` >= first + k + 1.
        Takes what any owner has ready, in turn; sleeps only while no owner has a piece
        not yet taken (a late owner holds up only its own parts)."""
        c = self.c
        taken = {j: 0 for j, (src, _dst) in parts.items() if src.size}  # pieces copied
        while taken:
            moved = False
            for j in tuple(taken):
                src, dst = parts[j]
                have = min(c.progress(j) - first, -(-src.size // step))
                if have > taken[j]:
                    a, b = taken[j] * step, min(have * step, src.size)
                    np.copyto(dst[a:b], src[a:b])
                    moved = True
                    if b == src.size:
                        del taken[j]
                    else:
                        taken[j] = have
            if taken and not moved:
                c.block(self.task, list(taken), lambda: any(
                    c.progress(j) - first > done for j, done in taken.items()),
                    _WORD_WAIT, self.deadline)

    def ptr(self, rank: int, which: int) -> int:
        return self.c.field(rank, which)

    def view(self, ptr: int, elems_off: int, count: int) -> np.ndarray:
        return self.c.view(ptr + elems_off * self.dt.itemsize, count, self.dt)

    def reduce_into(self, out: np.ndarray, ins: list[np.ndarray]) -> None:
        """``out = ins[0] op ins[1] op ...`` in cache-sized pieces (``out`` may be one of
        the inputs only if it is ``ins[0]``)."""
        if len(ins) == 1:
            if ins[0].ctypes.data != out.ctypes.data:
                np.copyto(out, ins[0])
            return
        uf = self.uf
        if len(ins) == 2:  # one pass: nothing to keep in cache between passes
            uf(ins[0], ins[1], out=out)
            return
        step = max(1, CHUNK_BYTES // self.dt.itemsize)
        if out.size <= step:  # one piece (a small message): no slicing
            uf(ins[0], ins[1], out=out)
            for x in ins[2:]:
                uf(out, x, out=out)
            return
        for c0 in range(0, out.size, step):
            o = out[c0:c0 + step]
            uf(ins[0][c0:c0 + step], ins[1][c0:c0 + step], out=o)
            for x in ins[2:]:
                uf(o, x[c0:c0 + step], out=o)


def _blocks(m: int, p: int) -> list[tuple[int, int]]:
    return [(k * m // p, (k + 1) * m // p - k * m // p) for k in range(p)]


def _all_reduce(run: _Run, algo: str, send: int, recv: int, root: int) -> None:
    p, n = run.p, run.count
    if n * run.dt.itemsize <= layout.COMM_SMALL_BYTES:
        _all_reduce_small(run, send, recv)
    elif algo == "hier" and run.c.groups is not None:
        _all_reduce_hier(run, run.c.groups)
    elif algo in ("ring", "hier") and p > 2:
        _all_reduce_ring(run)
    else:
        _all_reduce_mesh(run, recv)


def _all_reduce_mesh(run: _Run, recv: int) -> None:
    """Reduce-scatter + all-gather, pipelined: rank r reduces slice r of every input into
    its output piece by piece (``CHUNK_BYTES``), publishing each finished piece in its
    ``PROGRESS`` word; meanwhile it copies every finished piece of the other slices from
    their owners' outputs, whichever owner is ahead, sleeping only when no owner has a
    piece it has not taken. 2 syncs (arrive, leave) instead of a barrier between the
    phases: an early rank gathers while a late one still reduces. Piece k of slice j is
    read only once rank j has finished reading every input's piece k (so writing it into
    an in-place output, where it is the input too, harms no reader)."""
    r, p, n, c = run.r, run.p, run.count, run.c
    run.arrive()
    blocks = _blocks(n, p)
    step = max(1, CHUNK_BYTES // run.dt.itemsize)
    base = run.base
    lo, ln = blocks[r]
    ins = [run.view(run.ptr((r + k) % p, _R.SEND), lo, ln) for k in range(p)]
    out = run.view(recv, lo, ln)
    for k, c0 in enumerate(range(0, ln, step), 1):
        run.reduce_into(out[c0:c0 + step], [x[c0:c0 + step] for x in ins])
        c.bump(base + k, run.all)
    run.take({j: (run.view(run.ptr(j, _R.RECV), *blocks[j]), run.view(recv, *blocks[j]))
              for j in run.all if j != r}, base, step)
    run.sync()


def _all_reduce_small(run: _Run, send: int, recv: int) -> None:
    """One phase: inputs go through the segment's slots (double-buffered by the call's
    parity: a peer still reading slot q of call k-2 has arrived at call k-1 first)."""
    _small_reduce(run, _small_post(run, send), recv)


def _small_post(run: _Run, send: int) -> int:
    """The one-shot all_reduce up to its sync (does not block): the input copied into this
    rank's slot of the call's parity, the step advanced. Returns the step to wait for."""
    c, n = run.c, run.count
    np.copyto(c.slots(run.parity, n, run.dt)[run.r], run.view(send, 0, n))
    return c.advance(run.all)


def _small_reduce(run: _Run, target: int, recv: int, until: float = float("inf")) -> bool:
    """The rest of the one-shot all_reduce: wait for every rank's step ``target`` (False if
    ``until`` passed first: nothing else is done), check the calls agree, reduce every slot
    in rank order into ``recv``."""
    c, n = run.c, run.count
    if not c.wait_all(run.task, target, run.deadline, until):
        return False
    run.agree()
    run.reduce_into(run.view(recv, 0, n), c.slots(run.parity, n, run.dt))
    return True


def _all_reduce_ring(run: _Run) -> None:
    """Reduce-scatter then all-gather around the ring, each step synced with the two
    neighbours only: at step k rank r writes a block it did not write at step k-1, and its
    right neighbour (at most one step behind) reads only what r wrote at step k-1."""
    r, p = run.r, run.p
    left, right = (r - 1) % p, (r + 1) % p
    run.arrive()
    blocks = _blocks(run.count, p)
    send, recv = run.ptr(r, _R.SEND), run.ptr(r, _R.RECV)
    near = (left, r, right)
    for k in range(p - 1):
        lo, ln = blocks[(r - k - 1) % p]
        src = run.ptr(left, _R.SEND if k == 0 else _R.RECV)
        out = run.view(recv, lo, ln)
        run.reduce_into(out, [run.view(send, lo, ln), run.view(src, lo, ln)])
        run.sync(near)
    lrecv = run.ptr(left, _R.RECV)
    for k in range(p - 1):
        lo, ln = blocks[(r - k) % p]
        np.copyto(run.view(recv, lo, ln), run.view(lrecv, lo, ln))
        run.sync(near)
    run.sync()


def _all_reduce_hier(run: _Run, groups: list[list[int]]) -> None:
    """Mesh within each HCCS group, then across groups only between the ranks of the same
    place in their groups (``counterparts``), then mesh again within the group; only 1/L
    of the message crosses between groups per rank (L ranks per group). 2 syncs: between
    the stages a rank waits only for the ``PROGRESS`` (stage done) of the ranks it reads
    next, whose stage also means they finished reading what it overwrites."""
    r, n = run.r, run.count
    group = next(g for g in groups if r in g)
    i = group.index(r)
    mates = [g[i] for g in groups]  # this rank's counterparts, one per group
    gi = mates.index(r)
    recv = run.ptr(r, _R.RECV)
    c = run.c
    run.arrive()
    base, whole = run.base, max(1, run.count)  # whole: a part is one piece here
    slices = _blocks(n, len(group))
    lo, ln = slices[i]
    ins = [run.view(run.ptr(m, _R.SEND), lo, ln) for m in group[i:] + group[:i]]
    run.reduce_into(run.view(recv, lo, ln), ins)  # the group's partial of slice i
    c.bump(base + 1, mates)
    others = [m for m in mates if m != r]
    c.wait_progress(run.task, others, base + 1, run.deadline)
    subs = _blocks(ln, len(mates))
    slo, sln = subs[gi]
    ins = [run.view(run.ptr(m, _R.RECV), lo + slo, sln) for m in mates[gi:] + mates[:gi]]
    run.reduce_into(run.view(recv, lo + slo, sln), ins)  # final sub-slice gi of slice i
    c.bump(base + 2, mates)
    run.take({m: (run.view(run.ptr(m, _R.RECV), lo + subs[k][0], subs[k][1]),
                  run.view(recv, lo + subs[k][0], subs[k][1]))
              for k, m in enumerate(mates) if m != r}, base + 1, whole)
    c.bump(base + 3, group)
    run.take({m: (run.view(run.ptr(m, _R.RECV), *slices[k]), run.view(recv, *slices[k]))
              for k, m in enumerate(group) if m != r}, base + 2, whole)
    run.sync()


def _all_gather(run: _Run, algo: str, send: int, recv: int, root: int) -> None:
    n = run.count
    run.arrive()
    for k in range(run.p):
        j = (run.r + k) % run.p
        np.copyto(run.view(recv, j * n, n), run.view(run.ptr(j, _R.SEND), 0, n))
    run.sync()


def _reduce_scatter(run: _Run, algo: str, send: int, recv: int, root: int) -> None:
    n, r, p = run.count, run.r, run.p
    run.arrive()
    ins = [run.view(run.ptr((r + k) % p, _R.SEND), r * n, n) for k in range(p)]
    run.reduce_into(run.view(recv, 0, n), ins)
    run.sync()


def _broadcast(run: _Run, algo: str, send: int, recv: int, root: int) -> None:
    run.arrive()
    if run.r != root:
        np.copyto(run.view(recv, 0, run.count), run.view(run.ptr(root, _R.SEND), 0, run.count))
    run.sync()


def _reduce(run: _Run, algo: str, send: int, recv: int, root: int) -> None:
    run.arrive()
    if run.r == root:
        ins = [run.view(run.ptr((root + k) % run.p, _R.SEND), 0, run.count)
               for k in range(run.p)]
        run.reduce_into(run.view(recv, 0, run.count), ins)
    run.sync()


def _all_to_all(run: _Run, algo: str, send: int, recv: int, root: int) -> None:
    n, r, p = run.count, run.r, run.p
    run.arrive()
    for k in range(p):
        j = (r + k) % p
        np.copyto(run.view(recv, j * n, n), run.view(run.ptr(j, _R.SEND), r * n, n))
    run.sync()


def _all_to_allv(run: _Run, algo: str, send: int, recv: int, root: int) -> None:
    c, r, p = run.c, run.r, run.p
    sc, sd, rc, rd = (run.counts[k * p:(k + 1) * p] for k in range(4))
    for j in run.all:
        c.put_pair(j, _P.V_DISPL, sd[j])
        c.put_pair(j, _P.V_SEND, sc[j])
        c.put_pair(j, _P.V_RECV, rc[j])
    run.arrive()
    for i in run.all:  # every rank checks every pair: all of them fail alike, or none
        for j in run.all:
            if c.pair(i, j, _P.V_SEND) != c.pair(j, i, _P.V_RECV):
                raise CollectiveError(
                    errors.ACL_ERROR_RT_PARAM_INVALID, _E_PARA,
                    f"all_to_allv: rank {i} sends {c.pair(i, j, _P.V_SEND)} elements to rank "
                    f"{j}, which receives {c.pair(j, i, _P.V_RECV)}")
    for k in range(p):
        j = (r + k) % p
        if rc[j]:
            src = run.view(run.ptr(j, _R.SEND), c.pair(j, r, _P.V_DISPL), rc[j])
            np.copyto(run.view(recv, rd[j], rc[j]), src)
    run.sync()


def _send(run: _Run, algo: str, send: int, recv: int, peer: int) -> None:
    c = run.c
    n = c.sent[peer] = c.sent.get(peer, c.pair(c.rank, peer, _P.SENT)) + 1
    c.put_pair(peer, _P.PTR, send)
    c.put_pair(peer, _P.COUNT, run.count)
    c.put_pair(peer, _P.DTYPE, run.dtype)
    c.put_pair(peer, _P.SENT, n)
    c.poke(peer)
    c.block(run.task, (peer,), lambda: c.pair(peer, c.rank, _P.TAKEN) >= n, _WORD_WAIT,
            run.deadline)
    if c.pair(peer, c.rank, _P.STATUS):
        raise CollectiveError(errors.ACL_ERROR_RT_PARAM_INVALID, _E_PARA,
                              f"rank {peer}'s recv differs from this send (count or dtype)")


def _recv(run: _Run, algo: str, send: int, recv: int, peer: int) -> None:
    c, me = run.c, run.r
    n = c.taken[peer] = c.taken.get(peer, c.pair(me, peer, _P.TAKEN)) + 1
    c.block(run.task, (peer,), lambda: c.pair(peer, me, _P.SENT) >= n, _WORD_WAIT,
            run.deadline)
    count, dtype = c.pair(peer, me, _P.COUNT), c.pair(peer, me, _P.DTYPE)
    ok = (count, dtype) == (run.count, run.dtype)
    if ok:
        np.copyto(run.view(recv, 0, count), run.view(c.pair(peer, me, _P.PTR), 0, count))
    c.put_pair(peer, _P.STATUS, 0 if ok else _E_PARA)
    c.put_pair(peer, _P.TAKEN, n)
    c.poke(peer)
    if not ok:
        raise CollectiveError(errors.ACL_ERROR_RT_PARAM_INVALID, _E_PARA,
                              f"recv of {run.count} elements of dtype #{run.dtype} from rank "
                              f"{peer}, which sent {count} of dtype #{dtype}")


def _barrier(run: _Run, algo: str, send: int, recv: int, root: int) -> None:
    run.arrive()


_BODIES = {"all_reduce": _all_reduce, "all_gather": _all_gather,
           "reduce_scatter": _reduce_scatter, "broadcast": _broadcast, "reduce": _reduce,
           "all_to_all": _all_to_all, "barrier": _barrier, "all_to_allv": _all_to_allv,
           "send": _send, "recv": _recv}
