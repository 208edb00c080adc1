"""Driver layer: the host end of one (host process, device) link.

This and ``host/driver/node.py`` are the only host modules that touch rings, semaphores or shared
memory; ``DeviceLink`` implements the seam ``host/driver/interface.py`` ``Link`` (typed
accessors for everything the runtime core reads). A link owns:

- the client segment ``d<id>.c<slot>`` (submission ring + completion ring, created here),
- the ``.wake`` semaphore the worker posts when this host sleeps waiting for a reply, the
  ``.sync`` semaphore it posts after task completions when a host thread sleeps in a
  synchronize, and the ``.report`` semaphore it posts with each exception/callback report,
- read access to the device's control block and doorbell,
- mappings of the device's HBM and DDR arenas (host<->device copies move bytes once, through
  these mappings),
- a pidfd of the worker, so liveness checks cost ~1 us and cannot be fooled by pid reuse.

``call`` sends one request and waits for its reply: it spins (yielding the CPU) for
``SPIN_S``, then sleeps on the wake semaphore in ``SLEEP_S`` slices, checking between slices
that the worker lives. A dead worker turns the call into ``DeviceLostError`` (507010) within
``SLEEP_S`` of its death (the supervisor also wakes us at once). A *hung* worker (alive but
its heartbeat older than ``hung_after_s``, by default ``shared/config.py``
``DEVICE_LOST_TIMEOUT_S`` = 5 s; e.g. a SIGSTOPped worker) is treated the same way: the
link is lost for good (507010, ``ACL_ERROR_RT_LOST_HEARTBEAT``: "the device stopped sending
heartbeats") and ``query_device_status`` says ABNORMAL. Our choice: CANN's documentation does not
say how long the runtime waits for a silent card; reset and set the device to attach again.
``call_many`` pipelines several requests (sent as they are produced) and waits once for all
their replies.

Signals: the link's sleeps hold asynchronous signals back and let them through between
slices (``_sleep``), so a SIGINT or SIGTERM during any blocking call ends the program as any
Python program (KeyboardInterrupt, or the runtime's SIGTERM handler's SystemExit) within one
slice, never with a ``posix_ipc.SignalError`` traceback.

Threading model: every thread of the process uses the link. ``lock`` serialises the
submission ring: one request in flight (``call``), fire-and-forget frames and stream tasks
pushed in the order their sequence numbers were given (``post``, ``submit_locked``). The
host writes one word of the worker's control block besides its client entry: a pusher that
sees ``sleeping`` set clears it and posts the doorbell (once per worker sleep, ``_push``).
``_poll_lock`` guards the pidfd poll object (it must not be polled concurrently); each
arena's ``FarPages`` (``far``) its own mapped list (any thread maps far pages before it
copies, ``shared/pages.py``);
``_waiters_lock`` the ``sync_waiters`` count. ``lost_detail`` only ever goes from "" to a
message (a racy read sees either); ``_beat``/``_beat_seen`` (the last heartbeat seen) are
written by whichever thread checks liveness, without a lock: every write is a true
observation, so a lost update can only delay the hang verdict by one check.
``pop_report`` is called by the link's report thread only.
The columns (``completed``, ``event_done``, ...) are written by the worker and read without
a lock; ``clear_event`` writes an event slot that the worker no longer writes (see
``SlotPool.give_when``). ``close`` runs once, after every other user of the link is done
(the runtime removes the link from its tables first).
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import posix_ipc
import psutil

from npuemu.host.driver.interface import ClientUsage, MemoryUsage, SlotPool
from npuemu.shared import address, errors, layout, protocol, shm
from npuemu.shared.config import ATTACH_TIMEOUT_S, DEVICE_LOST_TIMEOUT_S
from npuemu.shared.layout import (
    CLIENT_ENTRY,
    CLIENT_HEADER,
    CTL_CLIENTS,
    DEVICE_CTL,
    EVENT_ENTRY,
    STREAM_ENTRY,
    ClientState,
    DeviceState,
    Health,
)
from npuemu.shared.ring import Ring, RingFull, region_size

SUB_CAPACITY = 1 << 20
CPL_CAPACITY = 1 << 18
REP_CAPACITY = 1 << 18
SPIN_S = 100e-6
SLEEP_S = 0.05
ETA_AHEAD_MAX_NS = 2_000_000
"""A card's estimate of when a stream's task ends (``ETA_NS``) further ahead than this, and a
synchronize sleeps after ``SPIN_S`` as without one (``_await_eta``)."""
ETA_LEAD_NS = 150_000
"""A synchronize with an estimate sleeps until this long before it (a completion wakes it
earlier), then polls: a sleeping thread's wake-up costs tens of microseconds, more on a
virtual machine, and this lead absorbs it while the card still works."""
ETA_GRACE_NS = 200_000
"""It polls until this long past the estimate, then sleeps as without one."""
_H = CLIENT_HEADER
_C = DEVICE_CTL
_SE, _EE = STREAM_ENTRY, EVENT_ENTRY
_BUSY = (_C.BUSY_AICORE, _C.BUSY_AIVECTOR, _C.BUSY_AICPU)
_STATE, _SLEEPING, _READY = int(_C.STATE), int(_C.SLEEPING), int(DeviceState.READY)
_pack = protocol.pack


_ASYNC_SIGNALS = signal.valid_signals() - {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE,
                                            signal.SIGILL, signal.SIGTRAP, signal.SIGSYS,
                                            signal.SIGABRT}


class _SigSet(ctypes.Structure):
    """A C ``sigset_t`` (glibc's: 1024 bits)."""

    _fields_ = [("bits", ctypes.c_ulong * (1024 // (8 * ctypes.sizeof(ctypes.c_ulong))))]


_libc = ctypes.CDLL(None, use_errno=True)
_sigmask = _libc.pthread_sigmask
_sigmask.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_sigmask.restype = ctypes.c_int
_HELD = _SigSet()
for _sig in _ASYNC_SIGNALS:
    _libc.sigaddset(ctypes.byref(_HELD), int(_sig))
_HELD_REF = ctypes.byref(_HELD)


def _take(reply: protocol.Frame, pending: dict[int, int],
          results: list[protocol.Frame | errors.AclError | None]) -> None:
    """File one reply of a ``call_many`` under its request (a reply of no pending request,
    left by an earlier call, is dropped)."""
    index = pending.pop(reply[0], None)
    if index is not None:
        results[index] = _error_of(reply) if reply[1] else reply[2:]


def _sleep(sem: posix_ipc.Semaphore, timeout_s: float) -> bool:
    """``shm.wait`` with asynchronous signals held back until it returns. (posix_ipc runs
    Python's handler on EINTR but then replaces the handler's exception, KeyboardInterrupt
    or SystemExit, with ``SignalError``.) A signal that arrives meanwhile is delivered when
    the mask is restored, at most one sleep slice later, and its handler then runs as for
    any Python code. Costs three ``pthread_sigmask`` calls, on the sleeping path only.

    The mask is changed by libc's ``pthread_sigmask`` itself, not ``signal.pthread_sigmask``:
    that one runs pending handlers inside the call, after the mask has changed, and then
    Python code of its own, so a handler's exception raised there (a signal taken by
    another thread a moment before) left the thread with every asynchronous signal blocked
    for good: each later sleep then restored that mask, SIGINT and SIGTERM stayed pending
    for the rest of the program, and every process it started inherited the mask. Here the
    mask is read before anything changes, blocked inside the ``try`` and restored in its
    ``finally``, whatever is raised where; handlers run after the restore, as Python code."""
    old = _SigSet()
    _sigmask(signal.SIG_BLOCK, None, ctypes.byref(old))  # reads it; changes nothing
    try:
        _sigmask(signal.SIG_BLOCK, _HELD_REF, None)
        return shm.wait(sem, timeout_s)
    except posix_ipc.SignalError:  # a signal that cannot be blocked: like a spurious wake
        return False
    finally:
        _sigmask(signal.SIG_SETMASK, ctypes.byref(old), None)


def _error_of(reply: protocol.Frame) -> errors.AclError:
    """The AclError a reply ``[seq, code, message?]`` with a non-zero code carries."""
    return errors.error_for(reply[1], reply[2] if len(reply) > 2 else "")


def encode(frame: list[Any] | protocol.Frame) -> bytes:
    """One frame's bytes; an argument the wire cannot carry (an int outside the 64-bit
    range, an object of another type) is ``ACL_ERROR_RT_PARAM_INVALID`` (107000), raised
    before anything is queued or counted."""
    try:
        return _pack(frame)
    except (OverflowError, TypeError, ValueError) as err:
        raise _unsendable(err) from None


def _unsendable(err: Exception) -> errors.AclError:
    return errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                            f"an argument cannot be sent to the device: {err}")


class DeviceLink:
    """Host end of the link to device ``dev`` of a node, using client slot ``slot``."""

    def __init__(self, node: str, dev: int, slot: int, *,
                 hung_after_s: float = DEVICE_LOST_TIMEOUT_S) -> None:
        self.node, self.dev, self.slot = node, dev, slot
        self.hung_after_ns = int(hung_after_s * 1e9)
        self._hung = False
        self._beat = self._beat_seen = 0  # last heartbeat value seen, and when this link saw it
        self.lock = threading.Lock()
        self.seq = 0
        self.lost_detail = ""
        self.lost_code = errors.ACL_ERROR_RT_LOST_HEARTBEAT
        self.closing = False
        self.pinned: set[int] = set()  # pinned host blocks this device has mapped
        self.stream_slots = SlotPool(layout.MAX_STREAMS)
        self.event_slots = SlotPool(layout.MAX_EVENTS)
        self.reporter: threading.Thread | None = None  # started by host/core/callbacks.py
        self.host_func_queues: dict[int, Any] = {}  # stream slot -> its host-func queue
        self.logical = dev  # the id this process knows the device by (set by the runtime)
        self.tracer: Any = None  # while profiling: stamps task frames (host/driver/trace.py)
        self._open_device()
        self._create_client()
        self._handshake()

    # set-up --------------------------------------------------------------------------------
    def _open_device(self) -> None:
        n, d = self.node, f"d{self.dev}"
        self.ctl_seg = shm.Segment(shm.name(n, d, "ctl"))
        self.ctl = self.ctl_seg.buf.cast("Q")
        pid, ctime = self.ctl[_C.PID], self.ctl[_C.CTIME]
        self.worker_pid = pid
        self.pidfd = os.pidfd_open(pid)
        if abs(int(psutil.Process(pid).create_time() * 1e6) - ctime) > 1000:
            raise errors.error_for(errors.ACL_ERROR_RT_LOST_HEARTBEAT,
                                   f"device {self.dev}: worker pid {pid} was reused")
        self._poll = select.poll()
        self._poll.register(self.pidfd, select.POLLIN)
        self._poll_lock = threading.Lock()  # a poll object must not be polled concurrently
        self.bell = shm.semaphore(shm.name(n, d, "bell"))
        self.poison_word: tuple[Sequence[int], int] = (self.ctl, int(_C.POISONED))  # read first
        self._maps = [shm.open_arena(n, self.dev, kind) for kind in (address.HBM, address.DDR)]
        self.arenas = [seg for seg, _table, _far in self._maps]
        self.arena_addr = [seg.address for seg in self.arenas]
        self.arena_near = [seg.size for seg in self.arenas]
        self.far = [far for _seg, _table, far in self._maps]

    def _create_client(self) -> None:
        sizes = region_size(SUB_CAPACITY), region_size(CPL_CAPACITY), region_size(REP_CAPACITY)
        name = shm.name(self.node, f"d{self.dev}", f"c{self.slot}")
        self.wake = shm.semaphore(name + ".wake", create=True)
        self.sync = shm.semaphore(name + ".sync", create=True)
        self.reports = shm.semaphore(name + ".report", create=True)
        self.seg = shm.Segment(name, layout.client_size(*sizes), create=True)
        hdr = self.hdr = self.seg.buf[: _H.size].cast("Q")
        me = psutil.Process()
        hdr[_H.VERSION], hdr[_H.PID], hdr[_H.SLOT] = protocol.PROTOCOL_VERSION, me.pid, self.slot
        hdr[_H.SUB_BYTES], hdr[_H.CPL_BYTES], hdr[_H.REP_BYTES] = sizes
        sub, cpl, rep, streams, events = layout.client_regions(*sizes)
        buf = self.seg.buf
        self.sub = Ring(buf[sub:cpl], SUB_CAPACITY, init=True)
        self.cpl = Ring(buf[cpl:rep], CPL_CAPACITY, init=True)
        self.rep = Ring(buf[rep:streams], REP_CAPACITY, init=True)
        hdr[_H.TABLES] = streams
        self.streams = buf[streams:events].cast("Q")
        self.events = buf[events : events + layout.MAX_EVENTS * layout.EVENT_ENTRY.size].cast("Q")
        st, ev = self.streams, self.events  # columns: strided views, one word per slot
        self.completed = st[_SE.COMPLETED :: _SE.words]
        self.stream_hung = st[_SE.HUNG :: _SE.words]
        self.stream_eta = st[_SE.ETA_NS :: _SE.words]
        self.event_done = ev[_EE.DONE_GEN :: _EE.words]
        self.event_stamp = ev[_EE.TIMESTAMP :: _EE.words]
        self.event_error = ev[_EE.ERROR :: _EE.words]
        self._columns = (self.completed, self.stream_hung, self.stream_eta,
                         self.event_done, self.event_stamp, self.event_error)
        hdr[_H.MAGIC] = layout.MAGIC_CLIENT
        entry = CTL_CLIENTS + self.slot * CLIENT_ENTRY.words
        self.ctl[entry + CLIENT_ENTRY.PID] = me.pid
        self.ctl[entry + CLIENT_ENTRY.CTIME] = int(me.create_time() * 1e6)
        self._state_index = entry + CLIENT_ENTRY.STATE
        self._waiters_lock = threading.Lock()

    def _handshake(self) -> None:
        self.ctl[self._state_index] = ClientState.REQUEST
        self.bell.release()
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        while (state := self.ctl[self._state_index]) == ClientState.REQUEST:
            self.check_alive()
            if time.monotonic() > deadline:
                raise errors.error_for(errors.ACL_ERROR_RT_TIMEOUT,
                                       f"device {self.dev} did not accept the client")
            _sleep(self.wake, 0.01)
        if state != ClientState.ACTIVE:
            raise errors.error_for(errors.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                                   f"device {self.dev} rejected the client (protocol "
                                   f"version {protocol.PROTOCOL_VERSION})")

    # liveness ------------------------------------------------------------------------------
    def alive(self) -> bool:
        """True while the worker process lives, the supervisor has not marked it lost and its
        heartbeat moved within ``hung_after_s`` (older than that, and seen unchanged by this
        link for that long: a worker that was stopped and resumed a moment ago is not hung).
        Non-blocking (~1 us)."""
        if self.lost_detail:
            return False
        with self._poll_lock:
            exited = self._poll.poll(0)
        ctl = self.ctl
        state = ctl[_C.STATE]
        if state in (DeviceState.STOPPING, DeviceState.STOPPED):  # `npuemu stop --force`
            self.lost_code = errors.ACL_ERROR_RT_SOCKET_CLOSE
            self.lost_detail = f"device {self.dev}: node {self.node!r} was stopped"
            return False
        if exited or state == DeviceState.LOST:
            self.lost_detail = f"device {self.dev} lost: its worker process died"
            return False
        beat, now = ctl[_C.HEARTBEAT], time.monotonic_ns()
        if beat != self._beat:  # a new heartbeat: the worker runs
            self._beat, self._beat_seen = beat, now
            return True
        silent = now - beat
        if silent > self.hung_after_ns and now - self._beat_seen > self.hung_after_ns:
            self._hung = True
            self.lost_detail = (f"device {self.dev} hung: no heartbeat from its worker for "
                                f"{silent / 1e9:.1f} s (limit {self.hung_after_ns / 1e9:g} s)")
            return False
        return True

    def hung(self) -> bool:
        """True once the link gave the device up because its heartbeat stopped."""
        return self._hung

    def check_alive(self) -> None:
        if not self.alive():
            raise errors.error_for(self.lost_code, self.lost_detail)

    # requests ------------------------------------------------------------------------------
    def post(self, op: int, *args: object) -> None:
        """Send a request that wants no reply (e.g. FREE). Does not block unless full. Not
        a stream task, so never stamped by a profiling tracer (a stamp in its ``seq`` field
        would ask the worker for a reply)."""
        payload = encode((op, 0, *args))
        with self.lock:
            if self.lost_detail or self.ctl[_STATE] != _READY:
                self.check_alive()
            self._push(payload)

    def call(self, op: int, *args: object) -> protocol.Frame:
        """Send a request and block until its reply; returns the results or raises AclError."""
        with self.lock:
            if self.lost_detail:  # a death is otherwise noticed while waiting for the reply
                self.check_alive()
            payload = encode((op, self.seq + 1, *args))
            self.seq += 1
            seq = self.seq
            self._push(payload)
            while True:
                reply = self._wait_reply()
                if reply[0] == seq:
                    break
        if reply[1]:
            raise _error_of(reply)
        return reply[2:]

    def call_many(self, requests: Iterable[tuple[Any, ...]]
                  ) -> list[protocol.Frame | errors.AclError]:
        """Send requests ``(op, *args)`` one after another as ``requests`` yields them, then
        block until every reply (pipelined: the worker serves each as it arrives, so the
        work that produces the next request overlaps the card's work on the ones before,
        and the host waits once). Each result is the reply's results or the AclError it
        carries; a request that cannot be encoded is not sent, its result that error
        (107000). Replies that arrive while requests are still being sent are taken at
        once, so the completion ring never holds more than a batch's worth. ``requests``
        is consumed while the link's lock is held: it must not use the link."""
        results: list[protocol.Frame | errors.AclError | None] = []
        pending: dict[int, int] = {}  # seq -> index in results
        with self.lock:
            if self.lost_detail:
                self.check_alive()
            for op, *args in requests:
                try:
                    payload = encode((op, self.seq + 1, *args))
                except errors.AclError as err:
                    results.append(err)
                    continue
                self.seq += 1
                pending[self.seq] = len(results)
                results.append(None)
                self._push(payload)
                while (ready := self.cpl.pop()) is not None:
                    _take(protocol.unpack(ready), pending, results)
            while pending:
                _take(self._wait_reply(), pending, results)
        return results  # type: ignore[return-value]  # every None was replaced

    def _push(self, payload: bytes) -> None:
        """Push one frame (waiting while the ring is full) and ring the doorbell if the
        worker sleeps. The first pusher to see ``sleeping`` clears it and posts once: the
        tasks pushed until the worker is up again find it cleared and post nothing (one
        semaphore post per worker sleep, not one per frame). Two pushers that both see it
        set both post; an extra post only makes the worker's next sleep return at once."""
        try:
            self.sub.push(payload)
        except RingFull:
            while True:
                self.check_alive()
                time.sleep(0.0001)
                try:
                    self.sub.push(payload)
                    break
                except RingFull:
                    continue
        ctl = self.ctl
        if ctl[_SLEEPING]:
            ctl[_SLEEPING] = 0
            self.bell.release()

    def _wait_reply(self) -> protocol.Frame:
        cpl = self.cpl
        end = time.perf_counter() + SPIN_S
        while (payload := cpl.pop()) is None:
            if time.perf_counter() < end:
                os.sched_yield()
                continue
            self.hdr[_H.HOST_SLEEPING] = 1
            try:
                if (payload := cpl.pop()) is None:
                    _sleep(self.wake, SLEEP_S)
                    payload = cpl.pop()
            finally:
                self.hdr[_H.HOST_SLEEPING] = 0
            if payload is not None:
                break
            self.check_alive()
        return protocol.unpack(payload)

    # stream tasks and waits -----------------------------------------------------------------
    def submit_locked(self, frame: list[Any] | protocol.Frame) -> None:
        """Queue one stream task (no reply; completion shows in the tables). The caller holds
        ``lock``, so task numbers and ring order agree. Raises (107000 for an argument the
        wire cannot carry, 507010 for a lost device, 507901 for a stopped node) before
        anything is queued, so the caller counts the task only after this returns."""
        if self.tracer is not None:  # profiled: the card records frames with a submit stamp
            frame = self.tracer.stamp(frame)  # a list is stamped in place
        try:
            payload = _pack(frame)
        except (OverflowError, TypeError, ValueError) as err:
            raise _unsendable(err) from None
        if self.lost_detail or self.ctl[_STATE] != _READY:
            self.check_alive()
        self._push(payload)

    def wait_until(self, done: Callable[[], bool], timeout_s: float | None,
                   spin_s: float = SPIN_S, stream: int | None = None) -> bool:
        """Block until ``done()`` (a read of the stream/event tables) is true, sleeping on the
        ``.sync`` semaphore that the worker posts after completions. Returns False when
        ``timeout_s`` expires; raises DeviceLostError if the worker dies. Releases the GIL
        while asleep, so other Python threads run.

        It first spins (``sched_yield`` between reads) for ``spin_s``, then sleeps: a
        synchronize on a card busy for milliseconds costs the host that spin and one
        wake-up. A wait on ``stream`` (its slot) whose running task the card expects to end
        within ``ETA_AHEAD_MAX_NS`` sleeps only until shortly before that and then polls
        (``_await_eta``). (A spin learnt by the host from its past waits was tried and
        dropped: under load, the wake-up latency that sleeping adds made every wait look
        long, which kept the spin short and every tiny synchronize slow. The card's
        estimate comes from the task's own last run, which no wake-up inflates.)"""
        if done():
            return True
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        end_spin = time.perf_counter() + spin_s
        while time.perf_counter() < end_spin:
            os.sched_yield()
            if done():
                return True
        if stream is not None and self._await_eta(done, stream, deadline):
            return True
        return self._sleep_until(done, deadline, stream)

    def _await_eta(self, done: Callable[[], bool], stream: int,
                   deadline: float | None) -> bool:
        """With the card's estimate of when the stream's running task ends (``ETA_NS``, at
        most ``ETA_AHEAD_MAX_NS`` ahead): sleep on ``.sync`` until ``ETA_LEAD_NS`` before it
        (a completion wakes it sooner), then poll (``sched_yield`` between reads) until
        ``ETA_GRACE_NS`` past it; never past ``deadline``. True once ``done()``; False
        without an estimate or once it has passed (the caller sleeps as without one). The
        card writes the estimate when it starts a task whose last run of the same work it
        timed (``device/scheduler.py`` ``expect``) and leaves it: one in the past is none.
        Costs the host the lead and what the task runs past its estimate, not the wait."""
        column = self.stream_eta
        deadline_ns = (1 << 64) if deadline is None else int(deadline * 1e9)
        while True:
            now, eta = time.monotonic_ns(), column[stream]  # maybe a next task's by now
            if not now - ETA_GRACE_NS < eta <= now + ETA_AHEAD_MAX_NS or now >= deadline_ns:
                return False
            wake = min(eta - ETA_LEAD_NS, deadline_ns)
            if wake > now:
                if self._sleep_once(done, (wake - now) / 1e9):
                    return True
                continue
            os.sched_yield()
            if done():
                return True

    def _sleep_once(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """One sleep on ``.sync`` of at most ``timeout_s``, counted among its waiters (so
        that a completion posts it), unless ``done()`` already; returns ``done()``."""
        hdr = self.hdr
        with self._waiters_lock:
            hdr[_H.SYNC_WAITERS] += 1
        try:
            if done():
                return True
            _sleep(self.sync, timeout_s)
        finally:
            with self._waiters_lock:
                hdr[_H.SYNC_WAITERS] -= 1
        return done()

    def _sleep_until(self, done: Callable[[], bool], deadline: float | None,
                     stream: int | None = None) -> bool:
        """``wait_until`` past its spin: sleep on ``.sync`` in ``SLEEP_S`` slices, checking
        that the worker lives between them; after a wake-up that did not end the wait, an
        estimate for ``stream``'s next task is awaited as after the first spin."""
        while True:
            slice_s = SLEEP_S if deadline is None else min(SLEEP_S, deadline - time.monotonic())
            if slice_s <= 0:
                return done()
            if self._sleep_once(done, slice_s):
                return True
            self.check_alive()
            if stream is not None and self._await_eta(done, stream, deadline):
                return True

    def pop_report(self, timeout_s: float) -> protocol.Frame | None:
        """Next exception/callback report from the worker, waiting at most ``timeout_s``.
        Only the link's report thread calls this."""
        payload = self.rep.pop()
        if payload is None:
            _sleep(self.reports, timeout_s)
            payload = self.rep.pop()
        return None if payload is None else protocol.unpack(payload)

    # tables and telemetry (the seam's typed accessors) -------------------------------------
    def stream_failure(self, slot: int) -> tuple[int, int, int]:
        """A stream's ``(failures so far, code of the latest, its task sequence number)``."""
        base = slot * _SE.words
        st = self.streams
        return st[base + _SE.ERR_COUNT], st[base + _SE.ERR_CODE], st[base + _SE.ERR_TASK]

    def clear_event(self, slot: int) -> None:
        """Zero an event slot the worker no longer writes (a fresh event starts there)."""
        events, base = self.events, slot * _EE.words
        for word in range(base, base + _EE.words):
            events[word] = 0

    def health(self) -> int:
        """The device's npu-smi health (``layout.Health``)."""
        return self.ctl[_C.HEALTH]

    def abnormal(self) -> bool:
        """``aclrtQueryDeviceStatus`` ABNORMAL: lost, hung, or health Alarm or worse."""
        return not self.alive() or self.ctl[_C.HEALTH] >= Health.ALARM

    def busy_ns(self) -> tuple[int, int, int]:
        """Nanoseconds the AI Core, AI Vector and AI CPU engines spent on tasks."""
        ctl = self.ctl
        return ctl[_BUSY[0]], ctl[_BUSY[1]], ctl[_BUSY[2]]

    def boot_ns(self) -> int:
        """Monotonic ns at which the worker started."""
        return self.ctl[_C.BOOT_NS]

    def memory_usage(self) -> MemoryUsage:
        ctl = self.ctl
        return MemoryUsage(ctl[_C.HBM_USED], ctl[_C.HBM_TOTAL], ctl[_C.HBM_PEAK],
                           ctl[_C.DDR_USED], ctl[_C.DDR_PEAK])

    def client_usage(self) -> list[ClientUsage]:
        """Device memory of each host process attached to the device."""
        ctl, out = self.ctl, []
        for slot in range(layout.MAX_CLIENTS):
            base = CTL_CLIENTS + slot * CLIENT_ENTRY.words
            if ctl[base + CLIENT_ENTRY.STATE] == ClientState.ACTIVE:
                out.append(ClientUsage(ctl[base + CLIENT_ENTRY.PID], ctl[base + CLIENT_ENTRY.USED],
                                       ctl[base + CLIENT_ENTRY.PEAK]))
        return out

    def poisoned(self, ptr: int, count: int) -> int:
        """The start of an isolated (poisoned) page overlapping ``[ptr, ptr+count)``, or 0.
        One word read when no page is isolated."""
        ctl = self.ctl
        return layout.poisoned_overlap(ctl, ptr, count) if ctl[_C.POISONED] else 0

    def faults_injected(self) -> int:
        """How many faults were ever injected into the card (one word read)."""
        return self.ctl[_C.FAULTS]

    # teardown ------------------------------------------------------------------------------
    def close(self) -> None:
        """Detach: the worker reclaims this client's memory and frees the slot."""
        self.closing = True
        if self.reporter is not None and self.reporter is not threading.current_thread():
            self.reporter.join(timeout=1.0)
        if self.alive():
            self.ctl[self._state_index] = ClientState.CLOSING
            self.bell.release()
        for ring in (self.sub, self.cpl, self.rep):
            ring.release()
        for view in (*self._columns, self.streams, self.events, self.hdr):
            view.release()
        self.seg.unlink()
        self.seg.close()
        for sem, suffix in ((self.wake, ".wake"), (self.sync, ".sync"),
                            (self.reports, ".report")):
            sem.close()
            shm.unlink_semaphore(self.seg.name + suffix)
        for seg, table, far in self._maps:
            far.close()
            table.close()
            seg.close()
        self.bell.close()
        self.ctl.release()
        self.ctl_seg.close()
        os.close(self.pidfd)
