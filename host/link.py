"""Driver layer: the host end of one (host process, device) link.

This and ``host/node.py`` are the only host modules that touch rings, semaphores or shared
memory. A link owns:

- the client segment ``d<id>.c<slot>`` (submission ring + completion ring, created here),
- the ``.wake`` semaphore the worker posts when this host sleeps waiting for a reply,
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

import psutil

from npuemu.shared import address, errors, layout, protocol, shm
from npuemu.shared.config import ATTACH_TIMEOUT_S
from npuemu.shared.layout import CLIENT_ENTRY, CLIENT_HEADER, CTL_CLIENTS, DEVICE_CTL
from npuemu.shared.layout import ClientState, DeviceState
from npuemu.shared.ring import Ring, RingFull, region_size

SUB_CAPACITY = 1 << 20
CPL_CAPACITY = 1 << 18
SPIN_S = 100e-6
SLEEP_S = 0.05
_H = CLIENT_HEADER


class DeviceLink:
    """Host end of the link to device ``dev`` of a node, using client slot ``slot``."""

    def __init__(self, node: str, dev: int, slot: int) -> None:
        self.node, self.dev, self.slot = node, dev, slot
        self.lock = threading.Lock()
        self.seq = 0
        self.lost_detail = ""
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
        self.bell = shm.semaphore(shm.name(n, d, "bell"))
        self.arenas = [shm.Segment(shm.name(n, d, name)) for name in address.ARENA_NAMES]
        self.arena_addr = [seg.address for seg in self.arenas]

    def _create_client(self) -> None:
        sub, cpl = region_size(SUB_CAPACITY), region_size(CPL_CAPACITY)
        name = shm.name(self.node, f"d{self.dev}", f"c{self.slot}")
        self.wake = shm.semaphore(name + ".wake", create=True)
        self.seg = shm.Segment(name, layout.CLIENT_SUB_OFFSET + sub + cpl, create=True)
        hdr = self.hdr = self.seg.buf[: _H.size].cast("Q")
        me = psutil.Process()
        hdr[_H.VERSION], hdr[_H.PID], hdr[_H.SLOT] = protocol.PROTOCOL_VERSION, me.pid, self.slot
        hdr[_H.SUB_BYTES], hdr[_H.CPL_BYTES] = sub, cpl
        base = layout.CLIENT_SUB_OFFSET
        self.sub = Ring(self.seg.buf[base : base + sub], SUB_CAPACITY, init=True)
        self.cpl = Ring(self.seg.buf[base + sub : base + sub + cpl], CPL_CAPACITY, init=True)
        hdr[_H.MAGIC] = layout.MAGIC_CLIENT
        entry = CTL_CLIENTS + self.slot * CLIENT_ENTRY.words
        self.ctl[entry + CLIENT_ENTRY.PID] = me.pid
        self.ctl[entry + CLIENT_ENTRY.CTIME] = int(me.create_time() * 1e6)
        self._state_index = entry + CLIENT_ENTRY.STATE

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
        if self._poll.poll(0) or self.ctl[DEVICE_CTL.STATE] == DeviceState.LOST:
            self.lost_detail = f"device {self.dev} lost: its worker process died"
            return False
        return True

    def check_alive(self) -> None:
        if not self.alive():
            raise errors.error_for(errors.ACL_ERROR_RT_LOST_HEARTBEAT, self.lost_detail)

    # requests ------------------------------------------------------------------------------
    def post(self, op: int, *args: object) -> None:
        """Send a request that wants no reply (e.g. FREE). Does not block unless full."""
        with self.lock:
            if self.lost_detail or self.ctl[DEVICE_CTL.STATE] == DeviceState.LOST:
                self.check_alive()
            self._push(protocol.pack((op, 0, *args)))

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

    # teardown ------------------------------------------------------------------------------
    def close(self) -> None:
        """Detach: the worker reclaims this client's memory and frees the slot."""
        if self.alive():
            self.ctl[self._state_index] = ClientState.CLOSING
            self.bell.release()
        for ring in (self.sub, self.cpl):
            ring.release()
        self.hdr.release()
        self.seg.unlink()
        self.seg.close()
        self.wake.close()
        shm.unlink_semaphore(self.seg.name + ".wake")
        for seg in self.arenas:
            seg.close()
        self.bell.close()
        self.ctl.release()
        self.ctl_seg.close()
        os.close(self.pidfd)
