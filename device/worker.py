"""The device worker: one OS process per emulated NPU (its "hardware and firmware").

Started by the node supervisor as ``python -m npuemu.device --node N --dev D ...``. It owns
the device's control block, arenas and doorbell, serves every attached host client's
submission ring, answers on that client's completion ring, and sleeps when idle.

Main loop, one pass:
  1. drain each ACTIVE client's submission ring, dispatching every frame (``dispatch.py``);
     stream tasks go to the scheduler (``scheduler.py``), which then starts runnable tasks
     and publishes completions;
  2. if nothing was there and no task is runnable: spin with ``sched_yield`` for a while
     after the last work (``shared/spin.py``: between ``SPIN_MIN_S`` and ``SPIN_S``, longer
     while work comes back within ``QUIET_S`` of the loop falling asleep, shorter while
     it does not), then set ``sleeping``, re-check the rings and block on the doorbell
     semaphore (a timed wait: 10 ms within ``RECENT_S`` of the last work, covering the rare
     missed-wake race of the flag handshake; ``HEARTBEAT_S`` when long idle, so an idle
     node costs well under 1 % CPU). No spin at all while any engine thread has a task
     (``Scheduler.on_engines``: a copy, a kernel, a model, AI CPU, DVPP, a collective):
     that thread needs the GIL between its library calls, which a spinning loop takes
     from it at every pass (a 1080p resize started 0.4 to 0.9 ms late and ran at half
     speed; a copy stream beside a compute stream overlapped worse), and on two cores the
     spin takes the other core from it; the loop sleeps instead and wakes on the engine's
     post when the task is done, or on the host's when a frame comes. Such a sleep says
     nothing of the host's pace: the spin budget does not learn from it;
  3. housekeeping (at most every few ms): heartbeat, the loop's CPU counters
     (``loopcpu.py``), new or closing client slots, supervisor liveness, a stop request.
A malformed frame is counted in ``bad_frames`` and answered with an error when it carries a
sequence number; it never stops the loop (``dispatch.py`` classifies every exception). A
client whose ring is corrupt (head behind tail, a length beyond the maximum frame) is
detached. A client that detaches while one of its tasks still runs on an engine is
*retired*: its slot, memory and mappings are released only once the engine has reported
(``Client.inflight`` back to 0), so no engine writes into unmapped memory and no completion
lands in a reused slot.

Stop: a node's worker stops when its control block says ``STOPPING`` (the supervisor's
stop) or its supervisor is gone, and the supervisor kills one that has not stopped within
3 s; SIGINT is ignored (inherited from the supervisor). A worker run by hand stops on
SIGINT: ``main`` installs ``containment.install_sigint``, whose KeyboardInterrupt is the one
exception the loop lets through. Whatever else reaches the loop, a ``SystemExit`` a kernel
raised included, is logged as an internal error and the card stays up, in serving the
rings, in the scheduler's pass and in housekeeping alike (user code is contained where it
is called: ``containment.py``).

Heartbeat: the loop thread alone writes it, at each housekeeping pass and, through
``beat``, between the steps of a handler that can run for seconds (the 2 MiB chunks a malloc
commits, the 64 MiB steps of a synchronous copy or memset). No other thread beats for the
loop, so a loop that is stuck (a kernel run inline that never returns, a deadlock, a
SIGSTOP) looks hung after ``DEVICE_LOST_TIMEOUT_S`` as it should, and a loop that works
through a long request never does.

Threading model: one loop thread owns everything here (clients, slots, peers, the control
block's counters, the heartbeat, its spin budget and CPU counters) except: engine threads (``engines.py``) run task bodies and append to the
scheduler's ``done`` deque, call ``wake`` (a semaphore post) and ``log``; kernels on engine
threads reach the allocator through ``DeviceMemory.resolve`` (``memory.lock``); engine
threads map a peer's far pages (``Peer.address`` -> ``FarPages.ensure``, its own lock,
``shared/pages.py``) while the loop thread publishes this card's. ``log`` is called from
every thread: ``_log_lock`` serialises writes to the log ring (and stdout).
"""

from __future__ import annotations

import argparse
import os
import select
import sys
import threading
import time
import traceback
from types import ModuleType
from typing import Any

import psutil

from npuemu.device import containment, contracts, dispatch, engines
from npuemu.device.exec import collective
from npuemu.device.exec.kernels import Ranges
from npuemu.device.exec.model import ModelRecord
from npuemu.device.faults import Faults
from npuemu.device.loopcpu import LoopCpu
from npuemu.device.memory.arenas import Arena, DeviceMemory, Tag
from npuemu.device.memory.windows import Windows
from npuemu.device.scheduler import Scheduler
from npuemu.device.trace import TraceWriter
from npuemu.shared import address, errors, layout, logring, pages, protocol, shm
from npuemu.shared.config import HEARTBEAT_S, WorkerSettings
from npuemu.shared.layout import (
    CLIENT_ENTRY,
    CLIENT_HEADER,
    CTL_CLIENTS,
    DEVICE_CTL,
    ClientState,
    DeviceState,
)
from npuemu.shared.ring import Ring, RingCorrupt, RingFull
from npuemu.shared.spin import AdaptiveSpin

SPIN_S = 1e-3
"""Longest the idle loop spins after its last work before it sleeps (``AdaptiveSpin``)."""
SPIN_MIN_S = 50e-6
"""Shortest spin: what the loop keeps while work keeps arriving long after it fell asleep."""
QUIET_S = 0.02
"""A gap between two pieces of work longer than this (a host with nothing to send)
shortens the loop's spin (``AdaptiveSpin.long_s``)."""
RECENT_S = 1.0
"""Within this long of its last work the sleeping loop wakes every 10 ms at least (the
flag handshake's rare missed wake costs no more); after it, every ``HEARTBEAT_S``."""
HOUSEKEEPING_S = 0.005
_C = DEVICE_CTL
_HOST_SLEEPING = CLIENT_HEADER.HOST_SLEEPING
_pack = protocol.pack
_ARENA_FIELDS = {address.HBM: (_C.HBM_USED, _C.HBM_PEAK), address.DDR: (_C.DDR_USED, _C.DDR_PEAK)}
_CLASS_FIELDS = (_C.USED_NORMAL, _C.USED_HUGE, _C.USED_HUGE1G)
_MODULE_INDEX = {name: i for i, name in enumerate(logring.MODULES)}
_BUSY_FIELDS = ((_C.BUSY_DMA, engines.DMA), (_C.BUSY_AICORE, engines.AICORE),
                (_C.BUSY_AIVECTOR, engines.AIVECTOR), (_C.BUSY_AICPU, engines.AICPU))


class Client:
    """One attached host process: its rings, tables, semaphores and device-side state."""

    def __init__(self, node: str, dev: int, slot: int) -> None:
        self.slot = slot
        name = shm.name(node, f"d{dev}", f"c{slot}")
        self.seg = shm.Segment(name)
        hdr = self.hdr = self.seg.buf[: CLIENT_HEADER.size].cast("Q")
        sizes = (hdr[CLIENT_HEADER.SUB_BYTES], hdr[CLIENT_HEADER.CPL_BYTES],
                 hdr[CLIENT_HEADER.REP_BYTES])
        if layout.client_size(*sizes) > self.seg.size:
            raise ValueError(f"client segment {name} is smaller than its header says")
        sub, cpl, rep, streams, events = layout.client_regions(*sizes)
        buf = self.seg.buf
        self.sub, self.cpl = Ring(buf[sub:cpl]), Ring(buf[cpl:rep])
        self.rep = Ring(buf[rep:streams])
        self.streams = buf[streams:events].cast("Q")
        self.events = buf[events : events + layout.MAX_EVENTS * layout.EVENT_ENTRY.size].cast("Q")
        self.wake = shm.semaphore(name + ".wake")
        self.sync = shm.semaphore(name + ".sync")
        self.reports = shm.semaphore(name + ".report")
        self.pinned: dict[int, shm.Segment] = {}
        self.unpinned: list[shm.Segment] = []
        self.binaries: dict[int, ModuleType] = {}  # kernel files and op binaries by bin id
        self.next_binary = 0
        self.op_bins: dict[int, int] = {}  # OP_LOAD bin id -> its HBM ptr (exec/opbin.py)
        self.models: dict[int, ModelRecord] = {}  # registered task lists (exec/model.py)
        self.inflight = 0  # tasks handed to engines and not yet reaped (loop thread only)
        self.departed = False  # detached: nothing may be written into its tables any more
        self.peers_ok: set[int] = set()  # peer cards this client's process has open
        self.op_timeout_s = 0.0  # aclrtSetOpExecuteTimeOut of this process; 0 = defaults
        self.comms: dict[int, collective.Comm] = {}  # attached communicators (exec/collective)
        self.windows = Windows()  # its reserved ranges mapped on this card (memory/windows.py)
        self.ranges = Ranges()  # tensor views its kernels resolved (exec/kernels.py)
        self.report_lock = threading.Lock()  # the loop and a replay's callback steps report

    def reply(self, frame: tuple[Any, ...] | list[Any]) -> None:
        try:
            self.cpl.push(_pack(frame))
        except RingFull:  # the host has one request in flight per link: cannot happen
            print(f"npuemu worker: completion ring of slot {self.slot} full", file=sys.stderr)
            return
        if self.hdr[_HOST_SLEEPING]:
            self.wake.release()

    def report(self, frame: tuple[Any, ...]) -> None:
        """An exception or a host callback, for the host's report thread."""
        try:
            with self.report_lock:
                self.rep.push(protocol.pack(frame))
        except RingFull:
            print(f"npuemu worker: report ring of slot {self.slot} full", file=sys.stderr)
            return
        self.reports.release()

    def notify_sync(self) -> None:
        """Wake every host thread sleeping in a stream or event synchronize."""
        for _ in range(self.hdr[CLIENT_HEADER.SYNC_WAITERS]):
            self.sync.release()

    def close(self) -> None:
        for seg in [*self.pinned.values(), *self.unpinned]:
            seg.close()
        self.pinned.clear()
        for ring in (self.sub, self.cpl, self.rep):
            ring.release()
        for view in (self.streams, self.events, self.hdr):
            view.release()
        self.seg.close()
        for sem in (self.wake, self.sync, self.reports):
            sem.close()


class Peer:
    """Another card of the node, as this card's DMA engine sees it: its arenas mapped here
    (P2P copies go arena to arena) and its control block (to notice that it died)."""

    def __init__(self, node: str, dev: int) -> None:
        d, self.dev = f"d{dev}", dev
        self.ctl_seg = shm.Segment(shm.name(node, d, "ctl"))
        self.ctl = self.ctl_seg.buf.cast("Q")
        self.maps = [shm.open_arena(node, dev, kind) for kind in (address.HBM, address.DDR)]
        self.arenas = [seg for seg, _table, _far in self.maps]
        self.far = [far for _seg, _table, far in self.maps]

    def alive(self) -> bool:
        return self.ctl[_C.STATE] == DeviceState.READY

    def address(self, kind: int, offset: int, count: int, ptr: int) -> int:
        """This process's address of ``count`` bytes at ``offset`` of the peer's arena
        ``kind`` (its far pages mapped first); 107000 outside the arena."""
        seg = self.arenas[kind]
        if offset + count > seg.size:
            try:
                self.far[kind].ensure_range(offset, count)
            except errors.AclError:
                raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                       f"0x{ptr:x}+{count} is outside device {self.dev}'s "
                                       "memory") from None
        return seg.address + offset

    def serves(self, pid: int, ctime: int) -> bool:
        """True if the host process ``(pid, ctime)`` is an ACTIVE client of this card."""
        ctl = self.ctl
        for slot in range(layout.MAX_CLIENTS):
            base = CTL_CLIENTS + slot * CLIENT_ENTRY.words
            if (ctl[base + CLIENT_ENTRY.STATE] == ClientState.ACTIVE
                    and ctl[base + CLIENT_ENTRY.PID] == pid
                    and ctl[base + CLIENT_ENTRY.CTIME] == ctime):
                return True
        return False

    def close(self) -> None:
        self.ctl.release()
        for _seg, table, far in self.maps:
            far.close()
            table.close()
        for seg in (self.ctl_seg, *self.arenas):
            seg.close()


class Worker:
    """State of one device worker process."""

    def __init__(self, node: str, dev: int, hbm: int, ddr: int, supervisor: int) -> None:
        self.node, self.dev = node, dev
        self.ctl_seg = shm.Segment(shm.name(node, f"d{dev}", "ctl"), layout.DEVICE_CTL_SIZE,
                                   create=True)
        self.ctl = self.ctl_seg.buf.cast("Q")
        self.bell = shm.semaphore(shm.name(node, f"d{dev}", "bell"), create=True)
        arenas, self.page_tables = [], []
        for kind, size in ((address.HBM, hbm), (address.DDR, ddr)):
            seg, table, far = shm.open_arena(node, dev, kind, size, create=True)
            self.page_tables.append(table)
            arenas.append(Arena(seg, kind, pages.far_size(seg.size), far))
        self.alloc_changes = 0  # mallocs, frees, mappings, unpins (kept checks compare it)
        self.memory = DeviceMemory(dev, arenas, self._account, self._pool_changed)
        for arena in arenas:
            arena.progress = self.beat  # a malloc of many GiB beats per committed chunk
        self.log_seg = _open_log(node, dev)
        self.log_ring = logring.LogRing(self.log_seg.buf)
        self._init_log_levels()
        self.faults = Faults(self)
        self.boot_ns = time.monotonic_ns()
        self.trace = TraceWriter(node, dev, self.boot_ns)
        self.scheduler = Scheduler(self)
        self.clients: dict[int, Client] = {}
        self.active: list[Client] = []
        self.peers: dict[int, Peer] = {}
        self.dead_peers: list[Peer] = []
        self.links = self.ctl[layout.CTL_LINKS :]
        self.retired: list[Client] = []  # detached while an engine still runs their task
        self.supervisor_fd = os.pidfd_open(supervisor)
        self.running = True
        self.spin = AdaptiveSpin(SPIN_MIN_S, SPIN_S, QUIET_S)  # the loop's, made anew by run
        self.loop_cpu = LoopCpu()  # likewise (a thread's clock: made in the loop thread)
        self._write_identity(hbm, ddr)

    # control block -------------------------------------------------------------------------
    def _write_identity(self, hbm: int, ddr: int) -> None:
        ctl, me = self.ctl, psutil.Process()
        ctl[_C.VERSION] = protocol.PROTOCOL_VERSION
        ctl[_C.DEV] = self.dev
        ctl[_C.PID] = me.pid
        ctl[_C.CTIME] = int(me.create_time() * 1e6)
        ctl[_C.HBM_TOTAL], ctl[_C.DDR_TOTAL] = hbm, ddr
        # the firmware's share counts as used, as npu-smi shows it on an idle card (and as
        # aclrtGetMemInfo's free leaves it out); per-process figures never include it
        for arena in self.memory.arenas:
            used_field, peak_field = _ARENA_FIELDS[arena.kind]
            ctl[used_field] = ctl[peak_field] = arena.reserved
        ctl[_C.HBM_LARGEST_FREE], ctl[_C.HBM_FREE_BLOCKS] = hbm, 1 if hbm else 0
        ctl[_C.BOOT_NS] = self.boot_ns
        ctl[_C.HEARTBEAT] = time.monotonic_ns()
        ctl[_C.MAGIC] = layout.MAGIC_DEVICE
        ctl[_C.STATE] = DeviceState.READY

    def _account(self, slot: int, arena: int, tag: Tag, delta: int) -> None:
        """Apply one malloc (+span) or free (-span) to the published counters."""
        ctl, count = self.ctl, 1 if delta > 0 else -1
        self.alloc_changes += 1
        base = CTL_CLIENTS + slot * CLIENT_ENTRY.words
        used = ctl[base + CLIENT_ENTRY.USED] + delta
        ctl[base + CLIENT_ENTRY.USED] = used
        ctl[base + CLIENT_ENTRY.ALLOCS] += count
        if used > ctl[base + CLIENT_ENTRY.PEAK]:
            ctl[base + CLIENT_ENTRY.PEAK] = used
        used_field, peak_field = _ARENA_FIELDS[arena]
        used = ctl[used_field] + delta
        ctl[used_field] = used
        if used > ctl[peak_field]:
            ctl[peak_field] = used
        ctl[_CLASS_FIELDS[tag.page_class]] += delta
        if tag.p2p:
            ctl[_C.USED_P2P] += delta
        ctl[_C.LIVE_ALLOCS] += count
        if arena == address.HBM:
            hbm = self.memory.arenas[arena]
            ctl[_C.HBM_FREE_BLOCKS] = hbm.alloc.free_block_count
            ctl[_C.HBM_LARGEST_FREE] = hbm.largest_block()

    def _pool_changed(self, arena: Arena, delta: int) -> None:
        """The normal-page pool of ``arena`` grew or shrank by ``delta`` bytes."""
        if arena.kind == address.HBM:
            self.ctl[_C.HBM_NORMAL_POOL] = arena.normal.reserved
        if self.debug:
            verb = "grows" if delta > 0 else "shrinks"
            self.log("DEBUG", f"{address.ARENA_NAMES[arena.kind]} normal-page pool {verb} by "
                              f"{abs(delta) >> 20} MiB to {arena.normal.reserved >> 20} MiB",
                     module="DEVMM")

    # client slots --------------------------------------------------------------------------
    def client_pid(self, slot: int) -> int:
        """Host pid of the client in ``slot`` (IPC imports check it)."""
        return self._slot(slot, CLIENT_ENTRY.PID)

    def _slot(self, slot: int, field: int) -> int:
        return self.ctl[CTL_CLIENTS + slot * CLIENT_ENTRY.words + field]

    def _set_slot(self, slot: int, field: int, value: int) -> None:
        self.ctl[CTL_CLIENTS + slot * CLIENT_ENTRY.words + field] = value

    def scan_slots(self) -> None:
        for slot in range(layout.MAX_CLIENTS):
            state = self._slot(slot, CLIENT_ENTRY.STATE)
            if state == ClientState.REQUEST and slot not in self.clients:
                self._attach(slot)
            elif state == ClientState.CLOSING:
                self._detach(slot)

    def _attach(self, slot: int) -> None:
        try:
            client = Client(self.node, self.dev, slot)
        except (FileNotFoundError, ValueError) as err:
            print(f"npuemu worker {self.dev}: attach slot {slot}: {err}", file=sys.stderr)
            self._set_slot(slot, CLIENT_ENTRY.STATE, ClientState.REJECTED)
            return
        if client.hdr[CLIENT_HEADER.VERSION] != protocol.PROTOCOL_VERSION:
            self._set_slot(slot, CLIENT_ENTRY.STATE, ClientState.REJECTED)
            client.wake.release()
            client.close()
            return
        self.clients[slot] = client
        self.active = list(self.clients.values())
        for field in (CLIENT_ENTRY.USED, CLIENT_ENTRY.PEAK, CLIENT_ENTRY.ALLOCS):
            self._set_slot(slot, field, 0)
        self.ctl[_C.CLIENTS] = len(self.clients)
        self._set_slot(slot, CLIENT_ENTRY.STATE, ClientState.ACTIVE)
        client.wake.release()

    def _detach(self, slot: int) -> None:
        """Stop serving a client that detached or died; its running tasks are cancelled.
        Its memory, mappings and slot are released now, or once its engine tasks have
        reported (``retire``)."""
        client = self.clients.pop(slot, None)
        if client is None:
            if not any(c.slot == slot for c in self.retired):
                self._release(slot, None)
            return
        self.active = list(self.clients.values())
        client.departed = True
        self.scheduler.drop_client(client)
        if client.inflight:
            self.retired.append(client)
            self._set_slot(slot, CLIENT_ENTRY.STATE, ClientState.CLOSING)
        else:
            self._release(slot, client)

    def retire(self) -> None:
        """Release the retired clients whose engine tasks have all reported."""
        for client in [c for c in self.retired if not c.inflight]:
            self.retired.remove(client)
            self._release(client.slot, client)

    def _release(self, slot: int, client: Client | None) -> None:
        self.memory.reclaim(slot)
        if client is not None:
            collective.release(client)
            client.windows.release()
            client.close()
        shm.unlink_all(self.node, f"d{self.dev}.c{slot}.")
        shm.unlink_segment(shm.name(self.node, f"d{self.dev}", f"c{slot}"))
        self.active = list(self.clients.values())
        self.ctl[_C.CLIENTS] = len(self.clients)
        self._set_slot(slot, CLIENT_ENTRY.PID, 0)
        self._set_slot(slot, CLIENT_ENTRY.STATE, ClientState.FREE)

    # main loop -----------------------------------------------------------------------------
    def serve(self) -> int:
        """Drain every client's submission ring once; returns the number of frames handled."""
        handled, handle = 0, dispatch.handle
        for client in self.active:
            pop = client.sub.pop
            try:
                while (payload := pop()) is not None:
                    handled += 1
                    handle(self, client, payload)
            except RingCorrupt as err:
                self.ctl[_C.BAD_FRAMES] += 1
                self.log("ERROR", f"client slot {client.slot} detached: {err}")
                self._detach(client.slot)
        if handled:
            self.ctl[_C.REQUESTS] += handled
        return handled

    def run(self) -> None:
        last_work = last_house = time.monotonic()
        scheduler, slept, engine_slept = self.scheduler, False, False
        spin = self.spin = AdaptiveSpin(SPIN_MIN_S, SPIN_S, QUIET_S)
        cpu = self.loop_cpu = LoopCpu()
        while self.running:
            now = time.monotonic()
            cpu.begin()
            try:
                served = self.serve()
                until = scheduler.pump()
            except BaseException as err:  # a bug of ours: keep the card up, say where
                self._contain(err, "main loop")
                served, until = 0, 0.01
            worked = bool(served) or scheduler.progressed  # frames served, tasks moved
            cpu.end(worked)
            if worked or scheduler.done:  # an engine reported since: reap it next pass
                if slept and not engine_slept:  # a wait for the host, not for an engine
                    spin.learn(now - last_work, True)
                slept = engine_slept = False
                last_work = now
            elif now - last_work < spin.budget and not scheduler.on_engines:
                os.sched_yield()
            else:
                slice_s = HEARTBEAT_S if now - last_work > RECENT_S else 0.01
                engine_slept = engine_slept or scheduler.on_engines > 0
                cpu.pause()
                self._sleep(min(slice_s, until))
                slept = True
                now = time.monotonic()
            if now - last_house > HOUSEKEEPING_S:
                last_house = now
                try:
                    self.housekeeping()
                except BaseException as err:  # likewise: the next pass tries again
                    self._contain(err, "housekeeping")

    def _contain(self, err: BaseException, where: str) -> None:
        """A failure of the loop's own code (``where``): logged as an internal error, and the
        card stays up; only the worker's own stop (``containment.is_stop``) is raised on."""
        if containment.is_stop(err):
            raise err
        self.internal_error(where)

    def stop(self) -> None:
        """End the loop after its current pass (the SIGINT handler of a hand-run worker)."""
        self.running = False

    def _sleep(self, timeout: float) -> None:
        self.ctl[_C.SLEEPING] = 1
        if self.scheduler.idle() and all(c.sub.empty() for c in self.active):
            shm.wait(self.bell, max(timeout, 0.0005))
        self.ctl[_C.SLEEPING] = 0

    def wake(self) -> None:
        """Called by engine threads when a task is done: wake the loop if it sleeps (the
        first caller to see ``sleeping`` clears it and posts, as the host does)."""
        ctl = self.ctl
        if ctl[_C.SLEEPING]:
            ctl[_C.SLEEPING] = 0
            self.bell.release()

    def beat(self) -> None:
        """Publish a heartbeat now (loop thread only). The loop beats at every housekeeping
        pass; a handler that can run for seconds (a malloc committing many GiB, a
        synchronous copy of many GiB) calls this between its steps, so a healthy card never
        looks hung. A loop stuck for good beats no more, and the host and the supervisor
        call it hung after ``DEVICE_LOST_TIMEOUT_S``."""
        self.ctl[_C.HEARTBEAT] = time.monotonic_ns()

    def resolve(self, client: contracts.Client, addr: int, count: int) -> int:
        """Address in this process of ``[addr, addr+count)``: a device pointer of the client
        (on this card: inside one of its live blocks; on a peer card: inside that card's
        arena, and only if the client's process is itself attached to the peer card), or an
        address inside one of the client's pinned host blocks. Raises AclError: 107000 for a
        bad range, 507057 if the peer card is gone.

        Partial: on a peer card the worker cannot see which process owns a block (the peer's
        allocator lives in the peer worker), so a raw frame of a process attached to both
        cards can still name another process's block there; the host runtime refuses such
        pointers before any frame is sent."""
        if not address.is_device_ptr(addr):
            for base, seg in tuple(client.pinned.items()):  # engines resolve too
                if base <= addr and addr + count <= base + seg.size:
                    return seg.address + (addr - base)
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"0x{addr:x}+{count} is neither device memory nor pinned "
                                   "host memory of this process")
        dev, kind, offset = address.decode(addr)
        if dev == self.dev:
            arena, offset = self.memory.resolve(client.slot, addr, count)
            return arena.seg.address + offset
        peer = self.peer(dev)
        if dev not in client.peers_ok:  # the frame may not come from the host runtime
            if not peer.serves(self._slot(client.slot, CLIENT_ENTRY.PID),
                               self._slot(client.slot, CLIENT_ENTRY.CTIME)):
                raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                       f"0x{addr:x}: this process has not opened device {dev}")
            client.peers_ok.add(dev)
        return peer.address(kind, offset, count, addr)

    def peer(self, dev: int) -> Peer:
        """The mapped peer card ``dev``; 507057 if it is not (or no longer) running."""
        peer = self.peers.get(dev)
        if peer is not None and not peer.alive():  # it died; maybe a fresh worker is up
            # keep the old mapping until shutdown: an engine may still be copying through it
            self.dead_peers.append(self.peers.pop(dev))
            peer = None
        if peer is None:
            try:
                peer = self.peers[dev] = Peer(self.node, dev)
            except FileNotFoundError:
                peer = None
        if peer is None or not peer.alive():
            raise errors.error_for(errors.ACL_ERROR_RT_SUSPECT_REMOTE_ERROR,
                                   f"peer device {dev} is not running")
        return peer

    def count_p2p(self, dst: int, src: int, count: int) -> tuple[int, ...]:
        """Count a copy in the link counters; returns the peer cards involved."""
        peers = []
        for ptr, field_bytes in ((dst, layout.LINK_ENTRY.TX_BYTES),
                                 (src, layout.LINK_ENTRY.RX_BYTES)):
            if address.is_device_ptr(ptr):
                dev = address.decode(ptr)[0]
                if dev != self.dev:
                    base = dev * layout.LINK_ENTRY.words
                    self.links[base + field_bytes] += count
                    self.links[base + field_bytes + 1] += 1
                    peers.append(dev)
        return tuple(peers)

    # device log ----------------------------------------------------------------------------
    def _init_log_levels(self) -> None:
        self._log_lock = threading.Lock()
        ctl = self.ctl
        ctl[_C.LOG_LEVEL] = logring.parse_global_level()
        ctl[_C.EVENT_ENABLE] = int(logring.parse_event_enable())
        modules = logring.parse_module_levels()
        for i, module in enumerate(logring.MODULES):
            ctl[layout.CTL_MODULE_LEVELS + i] = modules.get(module, 0xFF)
        self.debug = self._any_debug()
        self.proc = f"npuemu-dev{self.dev}"
        self.to_stdout = WorkerSettings.from_env().log_to_stdout

    def _any_debug(self) -> bool:
        """True if some module logs at DEBUG (callers test it before formatting a line)."""
        return any(self._enabled(logring.DEBUG, m) for m in logring.MODULES)

    def _enabled(self, level: int, module: str) -> bool:
        ctl = self.ctl
        if level == logring.EVENT:
            return bool(ctl[_C.EVENT_ENABLE])
        own = ctl[layout.CTL_MODULE_LEVELS + _MODULE_INDEX.get(module, 0)]
        return level >= (ctl[_C.LOG_LEVEL] if own == 0xFF else own)

    def log(self, level: str, message: str, module: str = "TS") -> None:
        """Write one line to this device's log ring (``shared/logring.py``) if its level is
        enabled for ``module``. Any thread; writes are serialised by ``_log_lock``."""
        number = logring.EVENT if level == "EVENT" else logring.LEVELS.index(level)
        if not self._enabled(number, module):
            return
        line = logring.format_line(number, module, os.getpid(), self.proc, message)
        with self._log_lock:
            self.log_ring.write(line)
            if self.to_stdout:
                sys.stdout.write(line)
                sys.stdout.flush()

    def internal_error(self, where: str) -> None:
        """Log the exception being handled, with its traceback, as an internal error (the
        ERROR level is on by default) and count it in ``LAST_ERROR``."""
        self.ctl[_C.LAST_ERROR] = errors.ACL_ERROR_RT_INTERNAL_ERROR
        self.log("ERROR", f"internal error in {where}, ret={errors.ACL_ERROR_RT_INTERNAL_ERROR}"
                          f":\n{traceback.format_exc(limit=-6)}")

    def housekeeping(self) -> None:
        ctl = self.ctl
        ctl[_C.HEARTBEAT] = time.monotonic_ns()
        self.loop_cpu.settle()
        ctl[_C.LOOP_WORK_CPU_NS] = self.loop_cpu.work_ns
        ctl[_C.LOOP_IDLE_CPU_NS] = self.loop_cpu.idle_ns
        ctl[_C.PROCESS_CPU_NS] = time.process_time_ns()
        for field, engine in _BUSY_FIELDS:
            eng = self.scheduler.engines[engine]
            ctl[field] = eng.busy_ns + eng.inline_ns
        ctl[_C.COMMITTED] = sum(a.committed_bytes for a in self.memory.arenas)
        self.debug = self._any_debug()
        self.scan_slots()
        if self.retired:
            self.retire()
        if ctl[_C.STATE] == DeviceState.STOPPING:
            self.running = False
        elif select.select([self.supervisor_fd], [], [], 0)[0]:
            print(f"npuemu worker {self.dev}: supervisor gone, exiting", file=sys.stderr)
            self.running = False

    def shutdown(self) -> None:
        """Orderly stop: close every mapping and remove this device's names."""
        for slot in list(self.clients):
            self._detach(slot)
        for engine in self.scheduler.engines.values():
            engine.stop()
        self.scheduler.pump()  # reap what the engines reported while stopping
        self.retire()  # a client still retired keeps its mappings until the process exits
        for peer in [*self.peers.values(), *self.dead_peers]:
            peer.close()
        self.links.release()
        self.log_ring.release()
        self.log_seg.close()  # the log stays for msnpureport until the node stops
        self.trace.close()
        self.ctl[_C.STATE] = DeviceState.STOPPED
        for arena, table in zip(self.memory.arenas, self.page_tables, strict=True):
            if arena.pages is not None:
                arena.pages.close()
            for seg in (arena.seg, table):
                seg.unlink()
                seg.close()
        self.bell.close()
        shm.unlink_semaphore(shm.name(self.node, f"d{self.dev}", "bell"))
        self.ctl.release()
        self.ctl_seg.unlink()
        self.ctl_seg.close()


def _open_log(node: str, dev: int) -> shm.Segment:
    """The device's log ring; a restarted worker continues the log of the card."""
    name = shm.name(node, f"d{dev}", "log")
    try:
        return shm.Segment(name, logring.HEADER + logring.DEFAULT_CAPACITY, create=True)
    except FileExistsError:
        return shm.Segment(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m npuemu.device")
    parser.add_argument("--node", required=True)
    parser.add_argument("--dev", type=int, required=True)
    parser.add_argument("--hbm", type=int, required=True)
    parser.add_argument("--ddr", type=int, required=True)
    parser.add_argument("--supervisor", type=int, required=True)
    args = parser.parse_args(argv)
    worker = Worker(args.node, args.dev, args.hbm, args.ddr, args.supervisor)
    containment.install_sigint(worker.stop)
    try:
        worker.run()
    finally:
        worker.shutdown()
    return 0

