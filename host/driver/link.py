"""Driver layer: the host end of one (host process, device) link.

This and ``host/driver/node.py`` are the only host modules that touch rings, semaphores or shared
memory. A link owns:

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
``SLEEP_S`` of its death (the supervisor also wakes us at once). One request is in flight
per link at a time (a lock); requests without a reply (``post``) do not wait at all.
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil

from npuemu.shared import address, errors, layout, protocol, shm
from npuemu.shared.config import ATTACH_TIMEOUT_S
from npuemu.shared.layout import (
    CLIENT_ENTRY,
    CLIENT_HEADER,
    CTL_CLIENTS,
    DEVICE_CTL,
    ClientState,
    DeviceState,
)
from npuemu.shared.ring import Ring, RingFull, region_size

SUB_CAPACITY = 1 << 20
CPL_CAPACITY = 1 << 18
REP_CAPACITY = 1 << 18
SPIN_S = 100e-6
SLEEP_S = 0.05
_H = CLIENT_HEADER


@dataclass
class SlotPool:
    """Free slots of one of the link's tables (streams, events). A slot given back with
    ``give_when`` is reused only once ``done()`` says the worker no longer writes it."""

    size: int
    free: list[int] = field(default_factory=list)
    pending: list[tuple[Callable[[], bool], int]] = field(default_factory=list)
    next: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, code: int) -> int:
        """A free slot; AclError(``code``) when every slot is in use."""
        with self.lock:
            still = []
            for done, slot in self.pending:
                if done():
                    self.free.append(slot)
                else:
                    still.append((done, slot))
            self.pending = still
            if self.free:
                return self.free.pop()
            if self.next >= self.size:
                raise errors.error_for(code, f"all {self.size} slots of this device are in use")
            self.next += 1
            return self.next - 1

    def give(self, slot: int) -> None:
        with self.lock:
            self.free.append(slot)

    def give_when(self, done: Callable[[], bool], slot: int) -> None:
        with self.lock:
            self.pending.append((done, slot))


class DeviceLink:
    """Host end of the link to device ``dev`` of a node, using client slot ``slot``."""

    def __init__(self, node: str, dev: int, slot: int) -> None:
        self.node, self.dev, self.slot = node, dev, slot
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
        pid, ctime = self.ctl[DEVICE_CTL.PID], self.ctl[DEVICE_CTL.CTIME]
        self.pidfd = os.pidfd_open(pid)
        if abs(int(psutil.Process(pid).create_time() * 1e6) - ctime) > 1000:
            raise errors.error_for(errors.ACL_ERROR_RT_LOST_HEARTBEAT,
                                   f"device {self.dev}: worker pid {pid} was reused")
        self._poll = select.poll()
        self._poll.register(self.pidfd, select.POLLIN)
        self._poll_lock = threading.Lock()  # a poll object must not be polled concurrently
        self.bell = shm.semaphore(shm.name(n, d, "bell"))
        self.arenas = [shm.Segment(shm.name(n, d, name)) for name in address.ARENA_NAMES]
        self.arena_addr = [seg.address for seg in self.arenas]

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
            shm.wait(self.wake, 0.01)
        if state != ClientState.ACTIVE:
            raise errors.error_for(errors.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                                   f"device {self.dev} rejected the client (protocol "
                                   f"version {protocol.PROTOCOL_VERSION})")

    # liveness ------------------------------------------------------------------------------
    def alive(self) -> bool:
        """True while the worker process lives and the supervisor has not marked it lost."""
        if self.lost_detail:
            return False
        with self._poll_lock:
            exited = self._poll.poll(0)
        state = self.ctl[DEVICE_CTL.STATE]
        if state in (DeviceState.STOPPING, DeviceState.STOPPED):  # `npuemu stop --force`
            self.lost_code = errors.ACL_ERROR_RT_SOCKET_CLOSE
            self.lost_detail = f"device {self.dev}: node {self.node!r} was stopped"
            return False
        if exited or state == DeviceState.LOST:
            self.lost_detail = f"device {self.dev} lost: its worker process died"
            return False
        return True

    def check_alive(self) -> None:
        if not self.alive():
            raise errors.error_for(self.lost_code, self.lost_detail)

    # requests ------------------------------------------------------------------------------
    def post(self, op: int, *args: object) -> None:
        """Send a request that wants no reply (e.g. FREE). Does not block unless full."""
        with self.lock:
            self.submit_locked((op, 0, *args))

    def call(self, op: int, *args: object) -> tuple:
        """Send a request and block until its reply; returns the results or raises AclError."""
        with self.lock:
            if self.lost_detail:  # a death is otherwise noticed while waiting for the reply
                self.check_alive()
            self.seq += 1
            seq = self.seq
            self._push(protocol.pack((op, seq, *args)))
            while True:
                reply = self._wait_reply()
                if reply[0] == seq:
                    break
        if reply[1]:
            raise errors.error_for(reply[1], reply[2] if len(reply) > 2 else "")
        return reply[2:]

    def _push(self, payload: bytes) -> None:
        while True:
            try:
                self.sub.push(payload)
                break
            except RingFull:
                self.check_alive()
                time.sleep(0.0001)
        if self.ctl[DEVICE_CTL.SLEEPING]:
            self.bell.release()

    def _wait_reply(self) -> tuple:
        cpl = self.cpl
        end = time.perf_counter() + SPIN_S
        while (payload := cpl.pop()) is None:
            if time.perf_counter() < end:
                os.sched_yield()
                continue
            self.hdr[_H.HOST_SLEEPING] = 1
            if (payload := cpl.pop()) is None:
                shm.wait(self.wake, SLEEP_S)
                payload = cpl.pop()
            self.hdr[_H.HOST_SLEEPING] = 0
            if payload is not None:
                break
            self.check_alive()
        return protocol.unpack(payload)

    # stream tasks and waits -----------------------------------------------------------------
    def submit_locked(self, frame: tuple) -> None:
        """Queue one stream task (no reply; completion shows in the tables). The caller holds
        ``lock``, so task numbers and ring order agree."""
        if self.lost_detail or self.ctl[DEVICE_CTL.STATE] != DeviceState.READY:
            self.check_alive()
        if self.tracer is not None:  # profiled: the card records frames with a submit stamp
            frame = self.tracer.stamp(frame)
        self._push(protocol.pack(frame))

    def wait_until(self, done: Callable[[], bool], timeout_s: float | None,
                   spin_s: float = SPIN_S) -> bool:
        """Block until ``done()`` (a read of the stream/event tables) is true, sleeping on the
        ``.sync`` semaphore that the worker posts after completions. Returns False when
        ``timeout_s`` expires; raises DeviceLostError if the worker dies. Releases the GIL
        while asleep, so other Python threads run."""
        if done():
            return True
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        end_spin = time.perf_counter() + spin_s
        while time.perf_counter() < end_spin:
            os.sched_yield()
            if done():
                return True
        hdr = self.hdr
        while True:
            with self._waiters_lock:
                hdr[_H.SYNC_WAITERS] += 1
            try:
                if done():
                    return True
                slice_s = SLEEP_S if deadline is None else min(SLEEP_S, deadline - time.monotonic())
                if slice_s <= 0:
                    return False
                shm.wait(self.sync, slice_s)
            finally:
                with self._waiters_lock:
                    hdr[_H.SYNC_WAITERS] -= 1
            if done():
                return True
            self.check_alive()

    def pop_report(self, timeout_s: float) -> tuple | None:
        """Next exception/callback report from the worker, waiting at most ``timeout_s``.
        Only the link's report thread calls this."""
        payload = self.rep.pop()
        if payload is None:
            shm.wait(self.reports, timeout_s)
            payload = self.rep.pop()
        return None if payload is None else protocol.unpack(payload)

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
        for view in (self.streams, self.events, self.hdr):
            view.release()
        self.seg.unlink()
        self.seg.close()
        for sem, suffix in ((self.wake, ".wake"), (self.sync, ".sync"),
                            (self.reports, ".report")):
            sem.close()
            shm.unlink_semaphore(self.seg.name + suffix)
        for seg in self.arenas:
            seg.close()
        self.bell.close()
        self.ctl.release()
        self.ctl_seg.close()
        os.close(self.pidfd)
