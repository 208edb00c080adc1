"""The node supervisor: one process per emulated server (its BMC and driver daemon).

``python -m npuemu.device.supervisor --node NAME --devices N --hbm B --ddr B [--owner PID]``

It creates the node registry, starts device workers (forked from itself with the worker's
modules imported once, ``device/start.py``; all at once with ``--eager``, else each on the
first attach to it), serves the control socket (``shared/control.py``), watches every
worker through a pidfd and every host through its control connection:

- a worker that dies is marked LOST in the registry and in its control block, every host
  waiting on it is woken at once (so calls fail with a device-lost code instead of waiting
  out a timeout), and its segments are unlinked;
- a host whose connection closes (exit or ``kill -9``) has its client slots set CLOSING so
  the workers reclaim its memory, its pinned host segments and communicator semaphores are
  unlinked, and so is every communicator segment none of whose ranks' processes is still
  there (the first rank to join creates it and may have ended without removing it);
- an embedded node (``--owner``) stops when its owner's connection closes;
- every loop pass (at most ``LOOP_S`` apart) reads each worker's heartbeat: one older than
  ``DEVICE_LOST_TIMEOUT_S`` (shared/config.py) marks the card HUNG in the registry (a stopped
  or wedged worker: its pidfd never fires); a fresh heartbeat marks it READY again. The
  worker is left running (a SIGCONT brings it back); tools show the state;
- on stop, every worker is asked to stop, killed if it does not within 3 s, and every name
  of the node is unlinked from /dev/shm. A ``stop`` request is refused while other programs
  are attached, unless it says ``force``; attached programs are woken and their calls fail
  with the "node stopped" code (507901, the host-device channel was closed).

Security (a node belongs to the user who started it): the control socket serves only peers
of the supervisor's own uid, identified by ``SO_PEERCRED`` (root only when the owner is root);
a peer's pid is the kernel's, never the one it announces; a malformed request closes that
connection only (``control.validate``); a connection holds at most one client slot per
device and a peer process at most ``MAX_CONNS_PER_PEER`` connections (``MAX_CONNS`` in all).

Segments it reads that others write (a communicator segment any process of the user may
have made, truncated or filled with garbage; a worker's control block) never stop it: a
communicator segment is read with ``pread`` from its descriptor, not mapped, so a
truncation at any moment gives a short read instead of a SIGBUS, and one that is too small,
short, garbage, not ours or unreadable is skipped with a log line (and kept); a control
block is mapped only once ``fstat`` says it has ``layout.DEVICE_CTL_SIZE`` bytes, and a
worker truncating its own is a worker failure the pidfd reports.

Single-threaded: one ``selectors`` loop, so slot reservations need no locks.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import selectors
import signal
import socket
import stat
import struct
import subprocess
import sys
import time
from typing import Any, NotRequired, TypedDict

import psutil

from npuemu.device import start
from npuemu.shared import control, errors, layout, liveness, protocol, shm, topology
from npuemu.shared.config import (
    ATTACH_TIMEOUT_S,
    DEVICE_LOST_TIMEOUT_S,
    WorkerSettings,
    soc_profile,
)
from npuemu.shared.layout import (
    CLIENT_ENTRY,
    CTL_CLIENTS,
    DEVICE_CTL,
    DEVICE_ENTRY,
    REG_DEVICES,
    REGISTRY,
    ClientState,
    DeviceState,
    NodeState,
)

STOP_GRACE_S = 3.0
LOOP_S = 0.5
MAX_CONNS = 256
"""Control connections served at once; more are refused at accept."""
MAX_CONNS_PER_PEER = 4
"""Control connections of one peer process (a host needs one; the CLI one at a time)."""


class Connection(TypedDict):
    """What the supervisor keeps of one control connection."""

    pid: int  # the peer's, from SO_PEERCRED (never the one it announces)
    slots: set[tuple[int, int]]  # (device, client slot) it holds
    reader: control.Reader
    owner: NotRequired[bool]  # it is the embedded node's owner and said so in its hello


class DeviceProc:
    """The supervisor's view of one device: its worker process and control block."""

    def __init__(self, dev: int) -> None:
        self.dev = dev
        self.proc: start.WorkerProc | None = None
        self.pidfd = -1
        self.ctl_seg: shm.Segment | None = None
        self.ctl: memoryview | None = None

    def slot_state(self, slot: int) -> int:
        assert self.ctl is not None
        return self.ctl[CTL_CLIENTS + slot * CLIENT_ENTRY.words + CLIENT_ENTRY.STATE]

    def set_slot(self, slot: int, state: int) -> None:
        assert self.ctl is not None
        self.ctl[CTL_CLIENTS + slot * CLIENT_ENTRY.words + CLIENT_ENTRY.STATE] = state

    def close_ctl(self) -> None:
        if self.ctl is not None:
            self.ctl.release()
            self.ctl = None
        if self.ctl_seg is not None:
            self.ctl_seg.close()
            self.ctl_seg = None


class Supervisor:
    def __init__(self, args: argparse.Namespace) -> None:
        self.node, self.args = args.node, args
        profile = soc_profile(args.soc)  # the default topology is the SoC's
        self.groups = topology.parse(WorkerSettings.from_env().topology, args.devices,
                                     profile.hccs_group if profile else topology.GROUP_SIZE)
        self.sel = selectors.DefaultSelector()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(control.address(self.node))  # EADDRINUSE: the node exists
        self.listener.listen(64)
        self.listener.setblocking(False)
        self.reg_seg = shm.Segment(shm.name(self.node, "reg"), layout.REGISTRY_SIZE,
                                   create=True)
        self.reg = self.reg_seg.buf.cast("Q")
        self.devices = [DeviceProc(d) for d in range(args.devices)]
        self.conns: dict[socket.socket, Connection] = {}
        self.owner_seen = False
        # the owner is watched from now on (a zombie is dead; a later process on its pid is
        # not taken for it)
        self.owner = liveness.ProcessWatch(args.owner) if args.owner else None
        self.refused = 0
        self.running = True
        self._write_registry()
        self.sel.register(self.listener, selectors.EVENT_READ, ("listen", None))

    # registry ------------------------------------------------------------------------------
    def _write_registry(self) -> None:
        reg, args, me = self.reg, self.args, psutil.Process()
        reg[REGISTRY.VERSION] = protocol.PROTOCOL_VERSION
        reg[REGISTRY.DEVICES] = args.devices
        reg[REGISTRY.SUP_PID] = me.pid
        reg[REGISTRY.SUP_CTIME] = int(me.create_time() * 1e6)
        reg[REGISTRY.OWNER_PID] = args.owner or 0
        reg[REGISTRY.HBM_BYTES], reg[REGISTRY.DDR_BYTES] = args.hbm, args.ddr
        for field, text in ((REGISTRY.SOC, args.soc), (REGISTRY.NODE, self.node)):
            for i, word in enumerate(layout.pack_str(text, 4)):
                reg[field + i] = word
        for dev, group in enumerate(self.groups):
            reg[self._entry(dev, DEVICE_ENTRY.HCCS_GROUP)] = group
        reg[REGISTRY.STATE] = NodeState.STARTING
        reg[REGISTRY.MAGIC] = layout.MAGIC_REGISTRY

    def _entry(self, dev: int, field: int) -> int:
        return REG_DEVICES + dev * DEVICE_ENTRY.words + field

    # workers -------------------------------------------------------------------------------
    def spawn(self, dp: DeviceProc) -> None:
        args = self.args
        dp.proc = start.fork_worker(["--node", self.node, "--dev", str(dp.dev), "--hbm",
                                     str(args.hbm), "--ddr", str(args.ddr),
                                     "--supervisor", str(os.getpid())])
        dp.pidfd = os.pidfd_open(dp.proc.pid)
        self.sel.register(dp.pidfd, selectors.EVENT_READ, ("worker", dp))
        reg = self.reg
        reg[self._entry(dp.dev, DEVICE_ENTRY.PID)] = dp.proc.pid
        reg[self._entry(dp.dev, DEVICE_ENTRY.STARTS)] += 1
        reg[self._entry(dp.dev, DEVICE_ENTRY.STATE)] = DeviceState.BOOTING

    def wait_ready(self, dps: list[DeviceProc]) -> None:
        """Block until each worker's control block says READY (bounded; raises AclError)."""
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        pending = [dp for dp in dps if dp.ctl is None]
        while pending:
            for dp in list(pending):
                assert dp.proc is not None
                code = dp.proc.poll()
                if code is not None:
                    self.lost(dp)
                    raise errors.error_for(errors.ACL_ERROR_RT_NO_DEVICE,
                                           f"device {dp.dev} worker exited at start ({code})")
                if self._map_ctl(dp):
                    pending.remove(dp)
            if pending and time.monotonic() > deadline:
                raise errors.error_for(errors.ACL_ERROR_RT_NO_DEVICE,
                                       f"device {pending[0].dev} did not start in time")
            if pending:
                time.sleep(0.002)

    def _map_ctl(self, dp: DeviceProc) -> bool:
        if dp.ctl_seg is None:
            name = shm.name(self.node, f"d{dp.dev}", "ctl")
            try:
                size = _segment_size(name)
                if size < layout.DEVICE_CTL_SIZE:  # not sized yet, or not the worker's
                    return False
                dp.ctl_seg = shm.Segment(name)
            except FileNotFoundError:
                return False
            except OSError as err:  # another user's, or unreadable: the worker fails to start
                print(f"npuemu supervisor: {name} skipped: {err}", file=sys.stderr)
                return False
        view = dp.ctl_seg.buf.cast("Q")
        if view[DEVICE_CTL.STATE] != DeviceState.READY:
            view.release()
            return False
        dp.ctl = view
        reg = self.reg
        reg[self._entry(dp.dev, DEVICE_ENTRY.CTIME)] = view[DEVICE_CTL.CTIME]
        reg[self._entry(dp.dev, DEVICE_ENTRY.STATE)] = DeviceState.READY
        return True

    def lost(self, dp: DeviceProc) -> None:
        """A worker died: record it, wake its clients, remove its names."""
        assert dp.proc is not None
        code = dp.proc.wait()
        self.sel.unregister(dp.pidfd)
        os.close(dp.pidfd)
        reg = self.reg
        reg[self._entry(dp.dev, DEVICE_ENTRY.EXIT_STATUS)] = layout.encode_exit(code)
        reg[self._entry(dp.dev, DEVICE_ENTRY.LOST_NS)] = time.monotonic_ns()
        stopping = reg[REGISTRY.STATE] == NodeState.STOPPING
        reg[self._entry(dp.dev, DEVICE_ENTRY.STATE)] = (
            DeviceState.STOPPED if stopping else DeviceState.LOST)
        if dp.ctl is not None and not stopping:
            dp.ctl[DEVICE_CTL.STATE] = DeviceState.LOST
            self.wake_clients(dp)
        dp.close_ctl()
        # everything of the card but its log (msnpureport reads it after a crash)
        shm.unlink_all(self.node, f"d{dp.dev}.", keep=shm.name(self.node, f"d{dp.dev}", "log"))
        dp.proc = None
        if not stopping:
            print(f"npuemu: device {dp.dev} worker died ({code})", file=sys.stderr)

    def check_heartbeats(self) -> None:
        """Mark a card HUNG when its heartbeat is older than DEVICE_LOST_TIMEOUT_S, READY
        again when it beats (the registry entry; the worker's own block is not written)."""
        now = time.monotonic_ns()
        limit = int(DEVICE_LOST_TIMEOUT_S * 1e9)
        for dp in self.devices:
            if dp.ctl is None or dp.proc is None:
                continue
            index = self._entry(dp.dev, DEVICE_ENTRY.STATE)
            age = now - dp.ctl[DEVICE_CTL.HEARTBEAT]
            if age > limit and self.reg[index] == DeviceState.READY:
                self.reg[index] = DeviceState.HUNG
                print(f"npuemu: device {dp.dev} worker (pid {dp.proc.pid}) sent no heartbeat "
                      f"for {age / 1e9:.1f} s: marked HUNG", file=sys.stderr)
            elif age <= limit and self.reg[index] == DeviceState.HUNG:
                self.reg[index] = DeviceState.READY
                print(f"npuemu: device {dp.dev} worker beats again: READY", file=sys.stderr)

    def wake_clients(self, dp: DeviceProc) -> None:
        """Post every attached client's reply and sync semaphores (a state change to see)."""
        for slot in range(layout.MAX_CLIENTS):
            if dp.slot_state(slot) in (ClientState.ACTIVE, ClientState.REQUEST):
                for sem in ("wake", "sync"):
                    self._post(shm.name(self.node, f"d{dp.dev}", f"c{slot}", sem))

    @staticmethod
    def _post(sem_name: str) -> None:
        with contextlib.suppress(FileNotFoundError, PermissionError):
            sem = shm.semaphore(sem_name)
            sem.release()
            sem.close()

    # control requests ----------------------------------------------------------------------
    def on_request(self, conn: socket.socket, msg: control.Message) -> list[Any]:
        """Serve one request (already checked by ``control.validate``)."""
        verb, info = msg[0], self.conns[conn]
        if verb == "hello":  # the announced pid (msg[1]) is not trusted: info["pid"] is
            if self.args.owner and info["pid"] == self.args.owner and msg[2]:
                info["owner"] = self.owner_seen = True
            a = self.args
            return [0, a.devices, a.hbm, a.ddr, a.soc, protocol.PROTOCOL_VERSION]
        if verb == "attach":
            return self.attach(conn, msg[1])
        if verb == "detach":
            self.detach(info, msg[1], msg[2])
            return [0]
        # stop
        attached = sorted({other["pid"] for c, other in self.conns.items()
                           if c is not conn and other["slots"]})
        if attached and not (len(msg) > 1 and msg[1]):
            return [errors.ACL_ERROR_RT_NO_PERMISSION,
                    f"node {self.node!r} is in use by pid {', '.join(map(str, attached))} "
                    "(stop it with force to end their sessions)", attached]
        self.running = False
        return [0]

    def detach(self, info: Connection, dev: int, slot: int) -> None:
        """Forget a client slot of this connection; one the host never took is freed."""
        if (dev, slot) not in info["slots"]:
            return
        info["slots"].discard((dev, slot))
        dp = self.devices[dev]
        if dp.ctl is not None and dp.slot_state(slot) == ClientState.RESERVED:
            dp.set_slot(slot, ClientState.FREE)

    def attach(self, conn: socket.socket, dev: object) -> list[Any]:
        if type(dev) is not int or not 0 <= dev < len(self.devices):
            return [errors.ACL_ERROR_RT_INVALID_DEVICEID, f"no device {dev!r} in this node"]
        dp = self.devices[dev]
        if any(d == dev for d, _ in self.conns[conn]["slots"]):
            return [errors.ACL_ERROR_RT_RESOURCE_ALLOC_FAIL,
                    f"this connection holds a client slot of device {dev} already"]
        try:
            if dp.proc is None:  # not started yet, or lost: a fresh worker (a device reset)
                self.spawn(dp)
            self.wait_ready([dp])
        except errors.AclError as err:
            return [err.code, err.detail]
        taken = {s for info in self.conns.values() for d, s in info["slots"] if d == dev}
        for slot in range(layout.MAX_CLIENTS):
            if slot not in taken and dp.slot_state(slot) == ClientState.FREE:
                dp.set_slot(slot, ClientState.RESERVED)
                self.conns[conn]["slots"].add((dev, slot))
                return [0, slot]
        return [errors.ACL_ERROR_RT_RESOURCE_ALLOC_FAIL,
                f"device {dev} has {layout.MAX_CLIENTS} clients already"]

    def on_disconnect(self, conn: socket.socket) -> None:
        info = self.conns.pop(conn)
        self.sel.unregister(conn)
        conn.close()
        for dev, slot in info["slots"]:
            dp = self.devices[dev]
            if dp.ctl is not None and dp.slot_state(slot) != ClientState.FREE:
                dp.set_slot(slot, ClientState.CLOSING)
                self._post(shm.name(self.node, f"d{dev}", "bell"))
            elif dp.ctl is None:
                shm.unlink_all(self.node, f"d{dev}.c{slot}")
        if not any(other["pid"] == info["pid"] for other in self.conns.values()):
            shm.unlink_all(self.node, f"p{info['pid']}.")  # the kernel's pid, not a claim
            self.reap_communicators(info["pid"])
        if info.get("owner"):
            self.running = False

    def reap_communicators(self, gone: int) -> None:
        """Unlink each communicator segment of the node in which some rank joined and no
        rank is present with a live host process any more, process ``gone`` (which has
        closed its last connection, and may still be exiting) counting as absent. A fresh
        segment whose creator has not joined yet has no rank at all, and is kept."""
        prefix = shm.node_prefix(self.node) + "hccl."
        for entry in shm.leftovers(self.node):
            if entry.startswith(prefix) and "." not in entry[len(prefix):]:
                try:
                    abandoned = _abandoned("/" + entry, gone)
                except Exception as err:  # any segment: ours to skip, never to die of
                    print(f"npuemu supervisor: communicator segment {entry} skipped: {err}",
                          file=sys.stderr)
                    continue
                if abandoned:
                    shm.unlink_segment("/" + entry)

    # loop ----------------------------------------------------------------------------------
    def run(self) -> None:
        if self.args.eager:
            for dp in self.devices:
                self.spawn(dp)
            self.wait_ready(self.devices)
        self.reg[REGISTRY.STARTED_NS] = time.monotonic_ns()
        self.reg[REGISTRY.STATE] = NodeState.READY
        started = time.monotonic()
        while self.running:
            for key, _ in self.sel.select(timeout=LOOP_S):
                self._event(key)
            self.check_heartbeats()
            if self.owner_lost(started):
                self.running = False

    def owner_lost(self, started: float) -> bool:
        """An embedded node's owner died (a zombie included) before it ever connected, or
        has not connected within ``ATTACH_TIMEOUT_S`` of ``started``."""
        return self.owner is not None and not self.owner_seen and (
            not self.owner.alive() or time.monotonic() - started > ATTACH_TIMEOUT_S)

    def _event(self, key: selectors.SelectorKey) -> None:
        kind, obj = key.data
        if kind == "listen":
            self.accept()
        elif kind == "worker":
            self.lost(obj)
        else:
            self._on_readable(obj)

    def accept(self) -> None:
        """Take one connection: the owner's uid only, bounded per peer and in all."""
        for _ in range(64):  # a burst of connections must not fill the listen backlog
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self._admit(conn)

    def _admit(self, conn: socket.socket) -> None:
        try:
            pid, uid, _ = control.peer_cred(conn)
        except OSError:
            conn.close()
            return
        refusal = ""
        if uid != os.geteuid():
            refusal = (f"node {self.node!r} belongs to uid {os.geteuid()}; uid {uid} "
                       "may not use it")
        elif len(self.conns) >= MAX_CONNS or sum(
                info["pid"] == pid for info in self.conns.values()) >= MAX_CONNS_PER_PEER:
            refusal = f"too many control connections (pid {pid})"
        if refusal:
            with contextlib.suppress(OSError):
                conn.setblocking(False)
                control.send(conn, [errors.ACL_ERROR_RT_NO_PERMISSION, refusal])
            conn.close()
            self.refused += 1
            return
        conn.setblocking(False)
        self.conns[conn] = {"pid": pid, "slots": set(), "reader": control.Reader()}
        self.sel.register(conn, selectors.EVENT_READ, ("conn", conn))

    def _on_readable(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(65536)
            messages = self.conns[conn]["reader"].feed(data) if data else None
        except control.BadMessage as err:
            print(f"npuemu supervisor: pid {self.conns[conn]['pid']}: {err}; connection "
                  "closed", file=sys.stderr)
            messages = None
        except OSError:
            messages = None
        if messages is None:
            self.on_disconnect(conn)
            return
        for msg in messages:
            try:
                reply = self.on_request(conn, msg)
            except Exception as err:
                print(f"npuemu supervisor: request {msg!r} failed: {err!r}", file=sys.stderr)
                reply = [errors.ACL_ERROR_RT_INTERNAL_ERROR, f"supervisor error: {err!r}"]
            try:
                control.send(conn, reply)
            except OSError:  # a peer that does not read its replies loses its connection
                self.on_disconnect(conn)
                return

    def stop(self) -> None:
        """Stop every worker (bounded), then remove every name of the node."""
        self.reg[REGISTRY.STATE] = NodeState.STOPPING
        live = [dp for dp in self.devices if dp.proc is not None]
        for dp in live:
            if dp.ctl is not None:
                dp.ctl[DEVICE_CTL.STATE] = DeviceState.STOPPING
                self.wake_clients(dp)
            self._post(shm.name(self.node, f"d{dp.dev}", "bell"))
        deadline = time.monotonic() + STOP_GRACE_S
        for dp in live:
            assert dp.proc is not None
            try:
                dp.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                dp.proc.kill()
            self.lost(dp)
        self.reg.release()
        self.reg_seg.close()
        shm.unlink_all(self.node)  # before the connections close: `stop` returns after this
        for conn in list(self.conns):
            conn.close()
        self.listener.close()


_RANKS_BYTES = (layout.COMM_RANKS + layout.COMM_MAX_RANKS * layout.COMM_RANK.words) * 8
"""The header and rank table of a communicator segment: all the supervisor reads of it."""


def _segment_size(name: str) -> int:
    """Size of segment ``name`` (FileNotFoundError, PermissionError for another user's)."""
    fd = _open_segment(name)
    try:
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def _open_segment(name: str) -> int:
    """A read-only descriptor of segment ``name``, checked like ``shm.Segment``'s opens."""
    fd = os.open(shm.SHM_DIR + name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        shm.check_owner(os.fstat(fd), name)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_rank_table(name: str) -> tuple[int, ...] | None:
    """The header and rank table of communicator segment ``name`` as words, read with
    ``pread`` (a truncation meanwhile is a short read, never a SIGBUS); None when it is not
    a regular file of a whole communicator segment's size. OSError if it cannot be read."""
    fd = _open_segment(name)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size < layout.COMM_SIZE:
            return None
        data = os.pread(fd, _RANKS_BYTES, 0)
    finally:
        os.close(fd)
    if len(data) < _RANKS_BYTES:
        return None
    return struct.unpack(f"<{_RANKS_BYTES // 8}Q", data)


def _abandoned(name: str, gone: int) -> bool:
    """Some rank joined communicator segment ``name`` and none is present with a live host
    process other than ``gone`` (``shared/layout.py``: COMM_HEADER, COMM_RANK). A segment
    too small to be one, or one whose creator has not written its magic yet, is kept."""
    words = _read_rank_table(name)
    if words is None:
        print(f"npuemu supervisor: {name} is smaller than a communicator segment: kept, "
              "not read", file=sys.stderr)
        return False
    if words[layout.COMM_HEADER.MAGIC] != layout.MAGIC_COMM:
        return False  # its creator is still writing it
    joined = False
    for rank in range(layout.COMM_MAX_RANKS):
        base = layout.COMM_RANKS + rank * layout.COMM_RANK.words
        state = words[base + layout.COMM_RANK.STATE]
        if state == layout.CommRankState.FREE:
            continue
        joined = True
        pid = words[base + layout.COMM_RANK.PID]
        if state != layout.CommRankState.LEFT and pid not in (0, gone) and \
                0 < pid < 1 << 22 and liveness.alive_now(pid):  # a zombie is gone
            return False
    return joined


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m npuemu.device.supervisor")
    parser.add_argument("--node", required=True)
    parser.add_argument("--devices", type=int, required=True)
    parser.add_argument("--hbm", type=int, required=True)
    parser.add_argument("--ddr", type=int, required=True)
    parser.add_argument("--soc", default="Ascend910B1")
    parser.add_argument("--owner", type=int, default=0)
    parser.add_argument("--eager", action="store_true")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        sup = Supervisor(args)
    except (OSError, ValueError) as err:
        print(f"npuemu: cannot start node {args.node!r}: {err}", file=sys.stderr)
        return 3
    signal.signal(signal.SIGTERM, lambda *_: setattr(sup, "running", False))
    try:
        sup.run()
    finally:
        sup.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
