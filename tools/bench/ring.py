"""Figure family: the synchronous round trip, beside a bare ring and a bare semaphore
ping-pong (the limits run in helper processes: ``--ring-pong`` / ``--sem-pong``)."""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import time
from collections.abc import Callable

import posix_ipc

from npuemu.shared import shm
from npuemu.shared.ring import Ring, region_size
from npuemu.tools.bench.records import Record, Target
from npuemu.tools.bench.registry import Context, figure
from npuemu.tools.bench.sampling import check_ret, time_each

_RAW_CTL = 256  # three flag words, each on its own cache line
_HOST_SLEEPING, _PEER_SLEEPING, _STOP = 0, 8, 16  # word indices into the flags
_PAYLOAD = b"\x92\x01\x01"  # what a PING request weighs on the wire


def _raw_ring_regions(buf: memoryview, init: bool) -> tuple[memoryview, Ring, Ring]:
    from npuemu.host.driver.link import CPL_CAPACITY, SUB_CAPACITY

    sub, cpl = region_size(SUB_CAPACITY), region_size(CPL_CAPACITY)
    flags = buf[:_RAW_CTL].cast("Q")
    a, b = _RAW_CTL, _RAW_CTL + sub
    if init:
        return (flags, Ring(buf[a:b], SUB_CAPACITY, init=True),
                Ring(buf[b : b + cpl], CPL_CAPACITY, init=True))
    return flags, Ring(buf[a:b]), Ring(buf[b : b + cpl])


class _RawPeer:
    """What both bare ping-pongs share: semaphores unlinked on close, a peer process reaped
    (``_stop`` asks it to end, then it is killed after 3 s)."""

    _stack: contextlib.ExitStack
    proc: subprocess.Popen

    def _sem(self, name: str) -> posix_ipc.Semaphore:
        sem = shm.semaphore(name, create=True)
        self._stack.callback(shm.unlink_semaphore, name)
        self._stack.callback(sem.close)
        return sem

    def _ask_to_stop(self) -> None:
        self.proc.terminate()

    def _stop(self) -> None:
        self._ask_to_stop()
        try:
            self.proc.wait(3)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        self._stack.close()


class RawRing(_RawPeer):
    """Host end of a bare ring ping-pong: the link's wait strategy and constants, without
    msgpack, dispatch, locks or the runtime. The peer is ``--ring-pong`` (worker strategy)."""

    def __init__(self, ctx: Context) -> None:
        from npuemu.host.driver.link import CPL_CAPACITY, SLEEP_S, SPIN_S, SUB_CAPACITY

        self.spin_s, self.sleep_s = SPIN_S, SLEEP_S
        self._stack = contextlib.ExitStack()
        try:
            base = ctx.raw_name("ring")
            size = _RAW_CTL + region_size(SUB_CAPACITY) + region_size(CPL_CAPACITY)
            seg = shm.Segment(base, size, create=True)
            self._stack.callback(seg.close)
            self._stack.callback(seg.unlink)
            self.bell = self._sem(base + ".bell")
            self.wake = self._sem(base + ".wake")
            self.flags, self.sub, self.cpl = _raw_ring_regions(seg.buf, init=True)
            self._stack.callback(self.flags.release)
            self._stack.callback(self.sub.release)
            self._stack.callback(self.cpl.release)
            self.proc = ctx.spawn("--ring-pong", base, base + ".bell", base + ".wake")
            self._stack.callback(self._stop)
        except BaseException:
            self._stack.close()
            raise

    def _ask_to_stop(self) -> None:
        self.flags[_STOP] = 1
        self.bell.release()

    def round_trip(self) -> None:
        sub, cpl, flags, pc = self.sub, self.cpl, self.flags, time.perf_counter
        sub.push(_PAYLOAD)
        if flags[_PEER_SLEEPING]:
            self.bell.release()
        end = pc() + self.spin_s
        while (payload := cpl.pop()) is None:
            if pc() < end:
                os.sched_yield()
                continue
            flags[_HOST_SLEEPING] = 1
            if (payload := cpl.pop()) is None:
                shm.wait(self.wake, self.sleep_s)
                payload = cpl.pop()
            flags[_HOST_SLEEPING] = 0
            if payload is not None:
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"ring ping-pong peer exited ({self.proc.returncode})")


def ring_pong(seg_name: str, bell_name: str, wake_name: str) -> int:
    """Peer of RawRing: the device worker's loop (spin with sched_yield for its longest spin,
    SPIN_S, after the last work, then flag + timed sleep on the doorbell; the worker's own
    spin adapts between SPIN_MIN_S and SPIN_S), echoing every frame."""
    from npuemu.device.worker import RECENT_S, SPIN_S
    from npuemu.shared.config import HEARTBEAT_S

    parent = os.getppid()
    seg = shm.Segment(seg_name)
    bell, wake = shm.semaphore(bell_name), shm.semaphore(wake_name)
    flags, sub, cpl = _raw_ring_regions(seg.buf, init=False)
    mono, last_work = time.monotonic, time.monotonic()
    while not flags[_STOP]:
        now = mono()
        payload = sub.pop()
        if payload is not None:
            cpl.push(payload)
            if flags[_HOST_SLEEPING]:
                wake.release()
            last_work = now
        elif now - last_work < SPIN_S:
            os.sched_yield()
        else:
            flags[_PEER_SLEEPING] = 1
            if sub.empty():
                shm.wait(bell, HEARTBEAT_S if now - last_work > RECENT_S else 0.01)
            flags[_PEER_SLEEPING] = 0
            if os.getppid() != parent:
                break
    for view in (flags, sub, cpl):
        view.release()
    seg.close()
    bell.close()
    wake.close()
    return 0


class RawSem(_RawPeer):
    """Host end of a bare posix_ipc semaphore ping-pong (peer: ``--sem-pong``)."""

    def __init__(self, ctx: Context) -> None:
        self._stack = contextlib.ExitStack()
        try:
            base = ctx.raw_name("sem")
            self.ping = self._sem(base + ".ping")
            self.pong = self._sem(base + ".pong")
            self.proc = ctx.spawn("--sem-pong", base + ".ping", base + ".pong")
            self._stack.callback(self._stop)
        except BaseException:
            self._stack.close()
            raise


    def round_trip(self) -> None:
        self.ping.release()
        try:
            self.pong.acquire(5.0)
        except posix_ipc.BusyError:
            raise RuntimeError("semaphore ping-pong peer did not answer in 5 s") from None


def sem_pong(ping_name: str, pong_name: str) -> int:
    parent = os.getppid()
    ping, pong = shm.semaphore(ping_name), shm.semaphore(pong_name)
    acquire, release = ping.acquire, pong.release
    while True:
        try:
            acquire(0.5)
        except posix_ipc.BusyError:
            if os.getppid() != parent:
                return 0
            continue
        release()


@figure("sync-round-trip", devices=2)
def fig_sync_round_trip(ctx: Context) -> list[Record]:
    """PING through the runtime vs a bare ring and a bare semaphore ping-pong."""
    from npuemu.host import acl
    from npuemu.host.core import runtime
    from npuemu.shared.protocol import Op

    check_ret(acl.rt.set_device(0), "set_device(0)")
    link = runtime.get().current_link()
    n, rounds = (2000, 3) if ctx.quick else (10000, 5)
    ring, sem = RawRing(ctx), None
    try:
        sem = RawSem(ctx)
        fns = {"ping": lambda: link.call(Op.PING), "ring": ring.round_trip,
               "sem": sem.round_trip}
        for fn in fns.values():
            time_each(fn, 1000)  # warm-up (the peers start here)
        got: dict[str, list[int]] = {k: [] for k in fns}
        for _ in range(rounds):
            for k, fn in fns.items():
                got[k] += time_each(fn, n)
    finally:
        ring.close()
        if sem is not None:
            sem.close()
    med = {k: statistics.median(v) / 1e3 for k, v in got.items()}
    return [
        Record("sync round trip (PING)", med["ping"], "µs", "bare ring ping-pong", med["ring"],
               Target("≤ 2x", "ratio", "<=", 2.0)),
        Record("sync round trip vs sem", med["ping"], "µs", "bare sem ping-pong", med["sem"]),
    ]


def latency_beside_ring(ctx: Context, call: Callable[[], object], n: int) -> tuple[float, float]:
    """Median µs of ``call`` and of a bare ring round trip (``RawRing``), ``n`` of each in
    10 rounds taking turns, so that load on the machine weighs on both alike."""
    ring = RawRing(ctx)
    try:
        ours, bare = [], []
        time_each(ring.round_trip, 200)
        time_each(call, 200)
        for _ in range(10):
            bare += time_each(ring.round_trip, max(n // 10, 1))
            ours += time_each(call, max(n // 10, 1))
    finally:
        ring.close()
    return statistics.median(ours) / 1e3, statistics.median(bare) / 1e3
