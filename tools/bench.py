"""``npuemu bench [--quick] [--json PATH]``: npuemu's speed beside this machine's limits.

Every figure is printed next to a limit measured IN THE SAME RUN on this machine, with
``ratio = value / limit`` and, where the project has one, its target and whether it is met.
A limit is what the primitive underneath does with no npuemu code around it (a bare ring, a
bare ``np.copyto``, the allocator called in-process, bare interpreters), so the ratio is the
cost of npuemu's own code. The one fixed target that is not measured (idle CPU) is labelled
"fixed target". ``--quick`` (~18 s) skips 256 MiB copies and takes fewer samples; a full run
takes ~40 s. ``--json PATH`` writes a list of ``{"name", "value", "unit", "limit_name",
"limit_value", "ratio"}`` records. Exit status 1 if a figure failed (targets not met are not
failures). Numbers are noisy on a shared 2-vCPU VM: read ratios, and rerun before trusting
a difference of less than ~30 % in latency figures.

Adding a figure: one function ``f(ctx) -> list[Record]`` registered with ``@figure(key,
devices=N)`` (``devices``: it runs in a fresh interpreter with a fresh embedded node of N
devices; none: in the bench process). ``ctx.quick``, ``ctx.spawn`` (tracked helper
processes), ``ctx.raw_name`` (tracked /dev/shm names) and ``ctx.note`` are all it needs.
Records named ``<label> <i>-><j>`` are cells of a matrix: the table prints them as one
matrix block below its rows (the JSON keeps one record per cell).

Figures (limit in brackets):

* sync round trip: median of ``runtime.get().current_link().call(Op.PING)`` [a bare
  ``shared.ring.Ring`` ping-pong over a posix_ipc segment with a spawned peer, using the
  link's and the worker's own wait strategy and constants: spin with ``sched_yield``, then
  flag + sleep on a semaphore that the other side posts only if the flag is set; and a bare
  posix_ipc semaphore ping-pong]. The three are interleaved in rounds. Target ≤ 2x ring.
* idle CPU: 8 workers attached by ``set_device``, left alone for ``worker.RECENT_S`` (its
  "recently busy" mode), then CPU of the supervisor and its children over 2 s, in % of one
  core, from ``/proc/<pid>/task/*/schedstat`` (ns; psutil ``cpu_times`` ticks at 10 ms, too
  coarse for a 1 % budget over 2 s, and is only the fallback) [fixed target: 1 %].
* H2D / D2H / D2D at 4 KiB..256 MiB: ``acl.rt.memcpy`` between a numpy buffer and
  ``acl.rt.malloc`` memory (D2D is done by the worker) [``np.copyto`` between the same two
  prefaulted numpy buffers]. One untimed copy first; a sample repeats the copy for ~25 ms
  (10 ms quick); median of 7 samples (3 quick), interleaved with the limit's. glibc
  ``memmove`` (npuemu) beats ``np.copyto`` beyond the caches, so ratios > 1 happen there.
  Target for 64 MiB H2D/D2H: ≥ 0.85x.
* malloc+free: ``acl.rt.malloc(256, 0)`` + ``acl.rt.free`` pairs per second [``plan`` +
  ``Allocator.alloc`` + ``Allocator.free`` of ``npuemu.device.allocator``, in-process].
  Target ≥ 100k pairs/s.
* execution (1 device): "async submission" is ``record_event`` calls per second from one
  thread [packing the same frame and pushing it on a bare in-process ``Ring``, popped at
  once]; target ≥ 300k/s. "stream query", "event query" and "synchronize idle stream" are
  medians of one call (no round trip: they read the shared stream/event tables) [the bare
  ring ping-pong of figure 1]; targets ≤ 2 µs and ≤ 2x. "empty kernel launch+sync" is one
  ``launch_kernel`` of an empty AI Core kernel plus ``synchronize_stream`` [the same ring].
  "copy+compute overlap": 16 MiB D2D ``memcpy_async`` on one stream and a 4 Mi-element relu
  kernel on another, sized so that each alone takes about the same time T; the time of both
  at once [the longer one alone]; target ≤ 1.3x.
* node start-up: ``npuemu start --devices 8 --name bench-<pid>`` until it returns, median
  of 5 (1 quick), each followed by ``npuemu stop`` [8 bare ``python -c "import
  npuemu.shared.ring"`` started in parallel]. ``npuemu`` is the console script next to
  ``sys.executable`` (a pyenv shim adds ~45 ms). A failed start is retried under a fresh
  name and reported under NOTES. Target ≤ 1.5 s.
* P2P (4 devices, peer access enabled between every two cards; the same sampling as the
  copies, 64 MiB samples 4x longer): "P2P 64 MiB" is ``acl.rt.memcpy`` kind 3 from card 1
  memory to card 0 memory with current device 0 (card 0's worker copies arena to arena)
  [``np.copyto`` 64 MiB]; target ≥ 0.85x. "P2P bidirectional" is the aggregate GB/s of 64
  MiB 0 -> 1 on a stream of card 0 and 64 MiB 1 -> 0 on a stream of card 1 at once
  (``memcpy_async`` on both, then both synchronized) [``2x np.copyto``: two of 64 MiB at
  once in two threads of the bench process, i.e. the machine doing two big copies at once,
  as the two workers do; one ``np.copyto`` would credit npuemu with the second core and
  memory channel and say nothing of its own cost]. "P2P 16 MiB i->j" is the p2pBandwidthLatencyTest
  matrix: ``acl.rt.memcpy`` of 16 MiB from card i to card j run by card i's DMA engine
  (diagonal: a copy within the card), printed as a matrix below the table
  [``np.copyto`` 16 MiB].

Cleanup: a figure child records in a track file each node and process it starts, and the
bench removes whatever is left afterwards (processes by pid, /dev/shm names by node name),
whether the figure succeeded, crashed, timed out or was interrupted (SIGTERM, Ctrl-C). Then
it checks that nothing is left and prints the result.

Sample, ``npuemu bench`` on the 2-vCPU development VM (other test suites running)::

    npuemu bench (full, 2 CPUs): figures beside limits measured in this run; ratio = value / limit
    [1/6] sync-round-trip ... 2.9 s
    [2/6] idle-cpu ... 5.0 s
    [3/6] copy-bandwidth ... 6.7 s
    [4/6] malloc-free ... 5.2 s
    [5/6] node-start-up ... 5.2 s
    [6/6] p2p-bandwidth ... 8.3 s

    figure                     value  unit     limit (same run)        limit    ratio  target: met?
    ------------------------  ------  -------  --------------------  -------  -------  ------------
    sync round trip (PING)      7.27  µs       bare ring ping-pong      3.83     1.9x  ≤ 2x: yes
    sync round trip vs sem      7.27  µs       bare sem ping-pong       7.21    1.01x  -
    idle CPU, 8 devices        0.379  % core   fixed target             1.00   0.379x  ≤ 1 %: yes
    H2D 4 KiB                  0.949  GB/s     np.copyto 4 KiB          13.5  0.0701x  -
    D2H 4 KiB                  0.948  GB/s     np.copyto 4 KiB          13.5  0.0701x  -
    D2D 4 KiB                   0.23  GB/s     np.copyto 4 KiB          13.5   0.017x  -
    H2D 64 KiB                  11.8  GB/s     np.copyto 64 KiB         46.0   0.257x  -
    D2H 64 KiB                  12.0  GB/s     np.copyto 64 KiB         46.0    0.26x  -
    D2D 64 KiB                  3.39  GB/s     np.copyto 64 KiB         46.0  0.0737x  -
    H2D 1 MiB                   35.1  GB/s     np.copyto 1 MiB          43.6   0.805x  -
    D2H 1 MiB                   35.7  GB/s     np.copyto 1 MiB          43.6   0.818x  -
    D2D 1 MiB                   23.5  GB/s     np.copyto 1 MiB          43.6   0.538x  -
    H2D 16 MiB                  14.9  GB/s     np.copyto 16 MiB         17.8   0.839x  -
    D2H 16 MiB                  17.1  GB/s     np.copyto 16 MiB         17.8   0.963x  -
    D2D 16 MiB                  11.0  GB/s     np.copyto 16 MiB         17.8   0.619x  -
    H2D 64 MiB                  10.9  GB/s     np.copyto 64 MiB         9.74    1.12x  ≥ 0.85x: yes
    D2H 64 MiB                  11.5  GB/s     np.copyto 64 MiB         9.74    1.18x  ≥ 0.85x: yes
    D2D 64 MiB                  8.90  GB/s     np.copyto 64 MiB         9.74   0.914x  -
    H2D 256 MiB                 12.5  GB/s     np.copyto 256 MiB        12.6    0.99x  -
    D2H 256 MiB                 14.0  GB/s     np.copyto 256 MiB        12.6    1.11x  -
    D2D 256 MiB                 10.4  GB/s     np.copyto 256 MiB        12.6    0.82x  -
    malloc+free (256 B)       62 799  pairs/s  allocator in-process  429 196   0.146x  ≥ 100k/s: NO
    node start-up, 8 devices   0.623  s        8 bare interpreters     0.231     2.7x  ≤ 1.5 s: yes
    P2P 64 MiB                  10.3  GB/s     np.copyto 64 MiB         11.0   0.936x  ≥ 0.85x: yes
    P2P bidirectional           12.4  GB/s     2x np.copyto 64 MiB      14.2   0.869x  -

    P2P 16 MiB i->j, GB/s (row: source card i, whose DMA engine copies; column: destination card j)
             ->0   ->1   ->2   ->3
       0->  12.5  15.0  14.8  15.5
       1->  12.1  13.8  15.2  15.4
       2->  12.1  13.9  13.1  13.4
       3->  12.6  14.7  14.3  15.3
      limit (same run): np.copyto 16 MiB 17.4 GB/s; ratio 0.696x .. 0.896x

    cleanup: 10 nodes and 2 helper processes started, nothing left behind

    total runtime 33.3 s
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import posix_ipc
import psutil

from npuemu.shared import shm
from npuemu.shared.ring import Ring, region_size

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
NODE_ENV = {"NPUEMU_HBM": "4G", "NPUEMU_DDR": "1G"}
"""Arena sizes of the benchmark's embedded nodes (sparse; only what is copied is touched)."""
_SCRUBBED = ("NPUEMU_NODE", "NPUEMU_DEVICES", "NPUEMU_HBM", "NPUEMU_DDR", "NPUEMU_SOC",
             "ASCEND_RT_VISIBLE_DEVICES")
NODE_GONE_S = 15.0
"""How long the bench waits for a node's supervisor to stop on its own before killing it."""


# ------------------------------------------------------------------------------- records
@dataclass(frozen=True)
class Target:
    """A project target: ``value`` or ``ratio`` compared with ``bound``; ``text`` for the table."""

    text: str
    on: str  # "value" or "ratio"
    op: str  # "<=" or ">="
    bound: float

    def met(self, rec: Record) -> bool:
        x = rec.ratio if self.on == "ratio" else rec.value
        return x <= self.bound if self.op == "<=" else x >= self.bound


@dataclass
class Record:
    """One row: a figure of npuemu and the limit it is compared with."""

    name: str
    value: float
    unit: str
    limit_name: str
    limit_value: float
    target: Target | None = None

    @property
    def ratio(self) -> float:
        return self.value / self.limit_value

    def public(self) -> dict:
        """The ``--json`` record."""
        return {"name": self.name, "value": self.value, "unit": self.unit,
                "limit_name": self.limit_name, "limit_value": self.limit_value,
                "ratio": self.ratio}

    @classmethod
    def load(cls, d: dict) -> Record:
        target = Target(**d["target"]) if d.get("target") else None
        return cls(**{**d, "target": target})


# ------------------------------------------------------------------- tracking and cleanup
def _ctime(pid: int) -> float:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return 0.0


@dataclass
class Tracker:
    """What a figure started: nodes (name, supervisor pid, ctime), processes (pid, ctime)
    and raw-name prefixes. A child process appends each item to ``path`` at once, so the
    parent can clean up after a child that crashed or was killed."""

    path: str | None = None
    nodes: list[tuple[str, int, float]] = field(default_factory=list)
    procs: list[tuple[int, float]] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)

    def _log(self, *items: object) -> None:
        if self.path:
            with open(self.path, "a") as f:
                f.write(" ".join(str(i) for i in items) + "\n")

    def node(self, name: str, pid: int = 0) -> None:
        ctime = _ctime(pid) if pid else 0.0
        self.nodes.append((name, pid, ctime))
        self._log("node", name, pid, ctime)

    def proc(self, pid: int) -> None:
        ctime = _ctime(pid)
        self.procs.append((pid, ctime))
        self._log("proc", pid, ctime)

    def raw_node(self, name: str) -> None:
        if name not in self.raw:
            self.raw.append(name)
            self._log("raw", name)

    @classmethod
    def load(cls, path: str) -> Tracker:
        t = cls()
        with contextlib.suppress(FileNotFoundError), open(path) as f:
            for line in f:
                kind, *rest = line.split()
                if kind == "node":
                    t.nodes.append((rest[0], int(rest[1]), float(rest[2])))
                elif kind == "proc":
                    t.procs.append((int(rest[0]), float(rest[1])))
                elif kind == "raw":
                    t.raw.append(rest[0])
        return t


def _process(pid: int, ctime: float) -> psutil.Process | None:
    """The live process ``pid`` if it is still the one created at ``ctime``."""
    try:
        p = psutil.Process(pid)
        if ctime and abs(p.create_time() - ctime) > 0.05:
            return None
        return None if p.status() == psutil.STATUS_ZOMBIE else p
    except psutil.Error:
        return None


def _wait_gone(p: psutil.Process, timeout: float) -> bool:
    """Wait for ``p`` to exit; a zombie (not our child, nobody reaped it yet) counts as gone."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.Error:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def _end(p: psutil.Process, grace: float = 3.0) -> None:
    """Terminate one process we started (by pid), then kill it if it lingers."""
    with contextlib.suppress(psutil.Error):
        p.terminate()
    if not _wait_gone(p, grace):
        with contextlib.suppress(psutil.Error):
            p.kill()
        _wait_gone(p, grace)


def _supervisor_of(name: str) -> tuple[int, float]:
    """(pid, ctime) of node ``name``'s supervisor from its registry, or (0, 0)."""
    from npuemu.shared.layout import REGISTRY

    try:
        seg = shm.Segment(shm.name(name, "reg"))
    except (FileNotFoundError, OSError):
        return 0, 0.0
    try:
        words = seg.buf.cast("Q")
        pid, ctime = words[REGISTRY.SUP_PID], words[REGISTRY.SUP_CTIME] / 1e6
        words.release()
    finally:
        seg.close()
    return pid, ctime


def _stop_node(name: str, pid: int, ctime: float) -> list[str]:
    """Make sure node ``name`` is gone: wait for its supervisor, ask it to stop, kill it and
    its workers as a last resort, unlink its names. Returns what had to be forced."""
    from npuemu.shared import control

    forced = []
    if not pid:
        pid, ctime = _supervisor_of(name)
    sup = _process(pid, ctime) if pid else None
    if sup is not None and not _wait_gone(sup, 2.0):
        with contextlib.suppress(OSError), control.connect(name, timeout=2.0) as sock:
            control.call(sock, ["stop"])
        if not _wait_gone(sup, NODE_GONE_S):
            with contextlib.suppress(psutil.Error):
                for child in sup.children(recursive=True):
                    forced.append(f"killed worker {child.pid} of node {name}")
                    _end(child, 1.0)
            forced.append(f"killed supervisor {sup.pid} of node {name}")
            _end(sup, 1.0)
    left = shm.leftovers(name)
    if left:
        forced.append(f"unlinked {len(left)} names of node {name}")
        shm.unlink_all(name)
    return forced


def cleanup(track: Tracker) -> list[str]:
    """Remove everything ``track`` lists (idempotent); returns what had to be forced."""
    forced = []
    for pid, ctime in track.procs:
        p = _process(pid, ctime)
        if p is not None and not _wait_gone(p, 1.0):
            forced.append(f"ended helper process {pid}")
            _end(p)
    for name, pid, ctime in track.nodes:
        forced += _stop_node(name, pid, ctime)
    for name in track.raw:
        left = shm.leftovers(name)
        if left:
            forced.append(f"unlinked {len(left)} raw benchmark names {name}.*")
            shm.unlink_all(name)
    return forced


def _left_behind(tracks: Iterable[Tracker]) -> list[str]:
    """Names and processes of ``tracks`` that still exist."""
    left = []
    for t in tracks:
        for name in [n for n, _, _ in t.nodes] + t.raw:
            left += shm.leftovers(name)
        for pid, ctime in t.procs + [(p, c) for _, p, c in t.nodes if p]:
            if _process(pid, ctime) is not None:
                left.append(f"process {pid}")
    return left


# -------------------------------------------------------------------------------- figures
@dataclass
class Context:
    """What a figure function gets: the mode, and helpers that keep cleanup automatic."""

    quick: bool
    track: Tracker
    notes: list[str] = field(default_factory=list)
    _procs: list[subprocess.Popen] = field(default_factory=list)

    def note(self, text: str) -> None:
        """Something the reader must know (e.g. a product failure that was retried)."""
        self.notes.append(text)

    def raw_name(self, *parts: object) -> str:
        """A /dev/shm name for a bare-primitive limit (removed by the bench if left)."""
        node = f"bench-raw{os.getpid()}"
        self.track.raw_node(node)
        return shm.name(node, *parts)

    def spawn(self, *args: str) -> subprocess.Popen:
        """Start ``python -m npuemu.tools.bench ARGS`` (a helper peer), tracked."""
        proc = subprocess.Popen([sys.executable, "-m", "npuemu.tools.bench", *args],
                                stdin=subprocess.DEVNULL)
        self._procs.append(proc)
        self.track.proc(proc.pid)
        return proc

    def close(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(3)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


@dataclass(frozen=True)
class Figure:
    key: str
    func: Callable[[Context], list[Record]]
    devices: int | None  # fresh embedded node of this many devices in a child; None: in-process
    timeout: float


FIGURES: list[Figure] = []
"""Figures in table order; ``@figure`` appends."""


def figure(key: str, *, devices: int | None = None, timeout: float = 120.0):
    """Register ``func(ctx) -> list[Record]``. With ``devices`` it runs in a fresh
    interpreter whose embedded node has that many devices; without, in the bench process."""

    def register(func: Callable[[Context], list[Record]]):
        FIGURES.append(Figure(key, func, devices, timeout))
        return func

    return register


def _ok(ret: int, what: str) -> None:
    if ret != 0:
        from npuemu.host import acl

        raise RuntimeError(f"{what} returned {ret}: {acl.get_recent_err_msg()}")


def _time_each(fn: Callable[[], object], n: int) -> list[int]:
    """Duration of each of ``n`` calls, ns."""
    pc = time.perf_counter_ns
    out = [0] * n
    for i in range(n):
        t0 = pc()
        fn()
        out[i] = pc() - t0
    return out


def _time_k(fn: Callable[[], object], k: int) -> float:
    t0 = time.perf_counter()
    for _ in range(k):
        fn()
    return time.perf_counter() - t0


def _calibrate(fn: Callable[[], object], sample_s: float) -> int:
    """Calls per sample so that one sample lasts about ``sample_s``."""
    k = 1
    while True:
        t = _time_k(fn, k)
        if t >= sample_s / 4 or k >= 1 << 22:
            break
        k *= 4
    return max(1, round(k * sample_s / max(t, 1e-9)))


def _rates(ops: dict[str, Callable[[], object]], work: float, reps: int,
           sample_s: float) -> dict[str, float]:
    """Median of ``work`` per second over ``reps`` samples of each op, samples interleaved."""
    ks = {name: _calibrate(fn, sample_s) for name, fn in ops.items()}
    got: dict[str, list[float]] = {name: [] for name in ops}
    for _ in range(reps):
        for name, fn in ops.items():
            got[name].append(work * ks[name] / _time_k(fn, ks[name]))
    return {name: statistics.median(v) for name, v in got.items()}


# 1. sync round trip ---------------------------------------------------------------------
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


def _ring_pong(seg_name: str, bell_name: str, wake_name: str) -> int:
    """Peer of RawRing: the device worker's loop (spin with sched_yield for its SPIN_S after
    the last work, then flag + timed sleep on the doorbell), echoing every frame."""
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


def _sem_pong(ping_name: str, pong_name: str) -> int:
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

    _ok(acl.rt.set_device(0), "set_device(0)")
    link = runtime.get().current_link()
    n, rounds = (2000, 3) if ctx.quick else (10000, 5)
    ring, sem = RawRing(ctx), None
    try:
        sem = RawSem(ctx)
        fns = {"ping": lambda: link.call(Op.PING), "ring": ring.round_trip,
               "sem": sem.round_trip}
        for fn in fns.values():
            _time_each(fn, 1000)  # warm-up (the peers start here)
        got: dict[str, list[int]] = {k: [] for k in fns}
        for _ in range(rounds):
            for k, fn in fns.items():
                got[k] += _time_each(fn, n)
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


# 2. idle CPU ----------------------------------------------------------------------------
def _cpu_ns(procs: list[psutil.Process]) -> int:
    """CPU time used so far by ``procs`` (all threads), ns."""
    total = 0
    for p in procs:
        try:
            for tid in os.listdir(f"/proc/{p.pid}/task"):
                with open(f"/proc/{p.pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                total += int((t.user + t.system) * 1e9)
    return total


@figure("idle-cpu", devices=8)
def fig_idle_cpu(ctx: Context) -> list[Record]:
    """CPU of an idle 8-device node (supervisor + workers) vs the 1 % target."""
    from npuemu.device.worker import RECENT_S
    from npuemu.host import acl
    from npuemu.host.core import runtime

    for dev in range(8):
        _ok(acl.rt.set_device(dev), f"set_device({dev})")
    node = runtime.get().node
    assert node is not None and node.proc is not None
    sup = psutil.Process(node.proc.pid)
    procs = [sup, *sup.children(recursive=True)]
    if len(procs) != 9:
        raise RuntimeError(f"expected a supervisor and 8 workers, found {len(procs)} processes")
    time.sleep(RECENT_S + 0.2)  # past the workers' "recently busy" mode
    window = 2.0
    c0, t0 = _cpu_ns(procs), time.perf_counter()
    time.sleep(window)
    c1, t1 = _cpu_ns(procs), time.perf_counter()
    percent = (c1 - c0) / 1e9 / (t1 - t0) * 100
    return [Record("idle CPU, 8 devices", percent, "% core", "fixed target", 1.0,
                   Target("≤ 1 %", "value", "<=", 1.0))]


# 3. copy bandwidth ----------------------------------------------------------------------
COPY_SIZES = [4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 64 * MiB, 256 * MiB]


def size_label(n: int) -> str:
    for unit, div in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


@figure("copy-bandwidth", devices=2)
def fig_copy_bandwidth(ctx: Context) -> list[Record]:
    """H2D, D2H (host copies) and D2D (worker copies) vs np.copyto, per size."""
    import numpy as np

    from npuemu.host import acl
    from npuemu.shared.enums import MemcpyKind

    h2d = int(MemcpyKind.ACL_MEMCPY_HOST_TO_DEVICE)
    d2h = int(MemcpyKind.ACL_MEMCPY_DEVICE_TO_HOST)
    d2d = int(MemcpyKind.ACL_MEMCPY_DEVICE_TO_DEVICE)
    sizes = COPY_SIZES[:-1] if ctx.quick else COPY_SIZES
    reps, sample_s = (3, 0.01) if ctx.quick else (7, 0.025)
    _ok(acl.rt.set_device(0), "set_device(0)")
    nmax = max(sizes)
    host_src = np.empty(nmax, np.uint8)
    host_dst = np.empty(nmax, np.uint8)
    host_src.fill(7)  # prefault both
    host_dst.fill(0)
    memcpy, records = acl.rt.memcpy, []
    for n in sizes:
        src, dst = host_src[:n], host_dst[:n]
        sp, dp = src.ctypes.data, dst.ctypes.data
        dev_a, ret = acl.rt.malloc(n, 0)
        _ok(ret, f"malloc({n})")
        try:
            dev_b, ret = acl.rt.malloc(n, 0)
            _ok(ret, f"malloc({n})")
            try:
                ops = {
                    "np.copyto": functools.partial(np.copyto, dst, src),
                    "H2D": functools.partial(memcpy, dev_a, n, sp, n, h2d),
                    "D2H": functools.partial(memcpy, dp, n, dev_a, n, d2h),
                    "D2D": functools.partial(memcpy, dev_b, n, dev_a, n, d2d),
                }
                for name, fn in ops.items():  # warm: one untimed copy, checked
                    ret = fn()
                    if name != "np.copyto":
                        _ok(ret, f"{name} memcpy of {n} bytes")
                rates = _rates(ops, n / 1e9, reps, sample_s)
            finally:
                _ok(acl.rt.free(dev_b), "free")
        finally:
            _ok(acl.rt.free(dev_a), "free")
        label = size_label(n)
        for kind in ("H2D", "D2H", "D2D"):
            target = (Target("≥ 0.85x", "ratio", ">=", 0.85)
                      if n == 64 * MiB and kind != "D2D" else None)
            records.append(Record(f"{kind} {label}", rates[kind], "GB/s",
                                  f"np.copyto {label}", rates["np.copyto"], target))
    return records


# 4. malloc + free -----------------------------------------------------------------------
@figure("malloc-free", devices=2)
def fig_malloc_free(ctx: Context) -> list[Record]:
    """acl.rt.malloc(256)+free pairs/s vs the allocator called in-process."""
    from npuemu.device.allocator import Allocator, plan
    from npuemu.host import acl

    _ok(acl.rt.set_device(0), "set_device(0)")
    malloc, free = acl.rt.malloc, acl.rt.free
    ptr, ret = malloc(256, 0)
    _ok(ret, "malloc(256)")
    _ok(free(ptr), "free")

    def runtime_pair() -> None:
        p, _ = malloc(256, 0)
        free(p)

    heap = Allocator(4 * GiB, classify=lambda tag: tag[1])  # the worker classifies by tag

    def allocator_pair() -> None:
        step = plan(256, 0)
        heap.free(heap.alloc(step.span, step.align, (0, step.page_class, step.p2p)))

    reps, sample_s = (3, 0.15) if ctx.quick else (5, 0.4)
    rates = _rates({"rt": runtime_pair, "alloc": allocator_pair}, 1.0, reps, sample_s)
    return [Record("malloc+free (256 B)", rates["rt"], "pairs/s", "allocator in-process",
                   rates["alloc"], Target("≥ 100k/s", "value", ">=", 1e5))]


# 4b. execution: streams, events, kernels ------------------------------------------------
_EMPTY_KERNEL = """
from npuemu.shared.kernel import kernel

@kernel("aicore")
def empty(ctx):
    pass
"""


@figure("execution", devices=1)
def fig_execution(ctx: Context) -> list[Record]:
    """Async submission, queries, idle synchronize, empty-kernel launch and copy/compute
    overlap, each beside a bare primitive measured here."""
    from npuemu.host import acl
    from npuemu.shared import protocol
    from npuemu.shared.ring import Ring

    _ok(acl.rt.set_device(0), "set_device(0)")
    stream, ret = acl.rt.create_stream()
    _ok(ret, "create_stream")
    event, ret = acl.rt.create_event()
    _ok(ret, "create_event")
    quick = ctx.quick
    n = 20000 if quick else 60000

    # submission: record_event from one thread vs packing the same frame and pushing it on
    # a bare in-process ring (popped right away, so it never fills)
    frame = (protocol.Op.RECORD, 0, 1, 1, 1, 1)
    ring_buf = memoryview(bytearray(region_size(1 << 20)))
    push_ring, pop_ring = Ring(ring_buf, 1 << 20, init=True), Ring(ring_buf)

    def bare_push() -> None:
        push_ring.push(protocol.pack(frame))
        pop_ring.pop()

    _ok(acl.rt.synchronize_stream(stream), "synchronize")
    rates = _rates({"rt": lambda: acl.rt.record_event(event, stream), "bare": bare_push},
                   1.0, 3 if quick else 5, 0.1 if quick else 0.25)
    _ok(acl.rt.synchronize_stream(stream), "synchronize")
    records = [Record("async submission (record_event)", rates["rt"], "tasks/s",
                      "bare ring push+pop", rates["bare"],
                      Target("≥ 300k/s", "value", ">=", 3e5))]

    # queries and idle synchronize: no round trip; beside a bare ring ping-pong
    def median_us(fn: Callable[[], object]) -> float:
        _time_each(fn, 1000)
        return statistics.median(_time_each(fn, n // 4)) / 1e3

    ring = RawRing(ctx)
    try:
        raw_rtt = median_us(ring.round_trip)
    finally:
        ring.close()
    for name, fn in (("stream query", lambda: acl.rt.stream_query(stream)),
                     ("event query", lambda: acl.rt.query_event(event))):
        records.append(Record(name, median_us(fn), "µs", "bare ring ping-pong", raw_rtt,
                              Target("≤ 2 µs", "value", "<=", 2.0)))
    records.append(Record("synchronize idle stream", median_us(
        lambda: acl.rt.synchronize_stream(stream)), "µs", "bare ring ping-pong", raw_rtt,
        Target("≤ 2x", "ratio", "<=", 2.0)))

    # empty kernel: launch + synchronize, per launch
    binary, ret = acl.rt.binary_load_from_data(_EMPTY_KERNEL)
    _ok(ret, "binary_load_from_data")
    func, ret = acl.rt.binary_get_function(binary, "empty")
    _ok(ret, "binary_get_function")

    def launch_sync() -> None:
        acl.rt.launch_kernel(func, 1, [], stream)
        acl.rt.synchronize_stream(stream)

    records.append(Record("empty kernel launch+sync", median_us(launch_sync), "µs",
                          "bare ring ping-pong", raw_rtt))
    records.append(_overlap(ctx, acl, stream))
    return records


def _overlap(ctx: Context, acl: Any, copy_stream: int) -> Record:
    """A copy stream and a compute stream, each worth T alone, run together: the time
    together over the longer alone (1.0 = perfect overlap, 2.0 = none)."""
    size = 16 * MiB
    src, ret = acl.rt.malloc(size, 0)
    _ok(ret, "malloc")
    dst, ret = acl.rt.malloc(size, 0)
    _ok(ret, "malloc")
    x, ret = acl.rt.malloc(size, 0)
    _ok(ret, "malloc")
    compute, ret = acl.rt.create_stream()
    _ok(ret, "create_stream")
    binary, ret = acl.rt.binary_load_from_file(_library_path())
    _ok(ret, "binary_load_from_file")
    relu, ret = acl.rt.binary_get_function(binary, "relu")
    _ok(ret, "binary_get_function")
    n = size // 4

    def copies(k: int) -> None:
        for _ in range(k):
            acl.rt.memcpy_async(dst, size, src, size, 3, copy_stream)

    def kernels(k: int) -> None:
        for _ in range(k):
            acl.rt.launch_kernel(relu, 1, [x, x, n, "float32"], compute)

    def timed(*parts: tuple[Callable[[int], None], int]) -> float:
        t0 = time.perf_counter()
        for fn, k in parts:
            fn(k)
        _ok(acl.rt.synchronize_stream(copy_stream), "synchronize")
        _ok(acl.rt.synchronize_stream(compute), "synchronize")
        return time.perf_counter() - t0

    timed((copies, 2), (kernels, 2))  # warm-up: pages touched
    budget = 0.1 if ctx.quick else 0.3
    kc = max(1, round(budget / timed((copies, 4)) * 4))
    kk = max(1, round(budget / timed((kernels, 4)) * 4))
    reps = 3 if ctx.quick else 5
    alone = statistics.median(max(timed((copies, kc)), timed((kernels, kk)))
                              for _ in range(reps))
    together = statistics.median(timed((copies, kc), (kernels, kk)) for _ in range(reps))
    return Record("copy+compute overlap", together, "s", "longer stream alone", alone,
                  Target("≤ 1.3x", "ratio", "<=", 1.3))


def _library_path() -> str:
    from npuemu.host.core.kernel import LIBRARY

    return LIBRARY


# 5. node start-up -----------------------------------------------------------------------
def npuemu_command() -> list[str]:
    """The ``npuemu`` console script of this interpreter (a pyenv shim would add ~0.1 s)."""
    script = os.path.join(os.path.dirname(sys.executable), "npuemu")
    if os.access(script, os.X_OK):
        return [script]
    return [sys.executable, "-m", "npuemu.tools"]


def _wait_all(procs: list[subprocess.Popen], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    try:
        for p in procs:
            if p.wait(max(0.1, deadline - time.monotonic())) != 0:
                raise RuntimeError(f"{p.args} exited {p.returncode}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def _start_node(cli: list[str], env: dict[str, str], name: str, ctx: Context,
                ) -> tuple[float, int, float] | str:
    """``npuemu start --devices 8 --name NAME``: (seconds, supervisor pid, ctime), or why it
    failed (its error and the last line of the node's log)."""
    ctx.track.node(name)  # tracked before its supervisor exists: cleaned up by name
    t0 = time.perf_counter()
    res = subprocess.run([*cli, "start", "--devices", "8", "--name", name], env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    elapsed = time.perf_counter() - t0
    pid, ctime = _supervisor_of(name)
    if pid:
        ctx.track.node(name, pid)
    if res.returncode == 0:
        return elapsed, pid, ctime
    why = [re.sub(r" \(log: [^)]*\)", "", line)  # the log is in a temporary directory
           for line in (res.stderr.strip() or res.stdout.strip()).splitlines()[-1:] or ["?"]]
    with contextlib.suppress(OSError), open(os.path.join(env["TMPDIR"],
                                                         f"npuemu-{name}.log")) as f:
        log = [line.strip() for line in f if line.strip()]
        if log:
            why.append(f"log: {log[-1]}")
    return f"rc {res.returncode}: " + " | ".join(why)


@figure("node-start-up", timeout=180.0)
def fig_node_start_up(ctx: Context) -> list[Record]:
    """``npuemu start --devices 8`` vs 8 bare interpreters started in parallel."""
    reps, tries = (1, 3) if ctx.quick else (5, 3)
    cli = npuemu_command()
    base = f"bench-{os.getpid()}"
    values, limits, failures, attempts = [], [], [], 0
    with tempfile.TemporaryDirectory(prefix="npuemu-bench-") as tmp:
        env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
        env["TMPDIR"] = tmp  # `npuemu start` writes its log there
        bare = [sys.executable, "-c", "import npuemu.shared.ring"]
        for _ in range(reps):
            t0 = time.perf_counter()
            _wait_all([subprocess.Popen(bare, env=env, stdin=subprocess.DEVNULL)
                       for _ in range(8)], 60)
            limits.append(time.perf_counter() - t0)
            for _ in range(tries):  # a failed start is retried under a fresh name
                name = base if attempts == 0 else f"{base}-{attempts}"
                attempts += 1
                got = _start_node(cli, env, name, ctx)
                if not isinstance(got, str):
                    break
                failures.append(got)
                _stop_node(name, 0, 0.0)  # let the failed node finish tearing down
            else:
                raise RuntimeError(f"npuemu start failed {tries} times: {failures[-tries:]}")
            elapsed, pid, ctime = got
            values.append(elapsed)
            stop = subprocess.run([*cli, "stop", "--name", name], env=env,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=60)
            if stop.returncode != 0:
                raise RuntimeError(f"npuemu stop failed ({stop.returncode}): "
                                   f"{stop.stdout}{stop.stderr}")
            forced = _stop_node(name, pid, ctime)
            if forced:
                raise RuntimeError(f"npuemu stop left node {name} behind: {forced}")
    if failures:
        ctx.note(f"npuemu start failed {len(failures)} of {attempts} times (retried; "
                 f"not timed): " + "; ".join(sorted(set(failures))))
    return [Record("node start-up, 8 devices", statistics.median(values), "s",
                   "8 bare interpreters", statistics.median(limits),
                   Target("≤ 1.5 s", "value", "<=", 1.5))]


# 6. P2P between cards -------------------------------------------------------------------
P2P_BYTES = 64 * MiB
P2P_MATRIX_BYTES = 16 * MiB
P2P_CARDS = 4


@figure("p2p-bandwidth", devices=P2P_CARDS)
def fig_p2p_bandwidth(ctx: Context) -> list[Record]:
    """Copies between cards (peer access enabled both ways between all 4 cards) vs bare
    ``np.copyto``: 64 MiB one way, 64 MiB both ways at once, and a 16 MiB matrix."""
    import numpy as np

    from npuemu.host import acl

    rt, d2d = acl.rt, 3  # ACL_MEMCPY_DEVICE_TO_DEVICE
    reps, sample_s = (3, 0.01) if ctx.quick else (7, 0.025)
    n, m = P2P_BYTES, P2P_MATRIX_BYTES
    owned: list[int] = []

    def malloc(dev: int, size: int) -> int:
        _ok(rt.set_device(dev), f"set_device({dev})")
        ptr, ret = rt.malloc(size, 3)  # ACL_MEM_MALLOC_HUGE_FIRST_P2P
        _ok(ret, f"malloc({size}) on device {dev}")
        owned.append(ptr)
        return ptr

    for dev in range(P2P_CARDS):
        _ok(rt.set_device(dev), f"set_device({dev})")
        for peer in range(P2P_CARDS):
            if peer != dev:
                _ok(rt.device_enable_peer_access(peer, 0), f"enable peer {dev} -> {peer}")
    host = [np.empty(n, np.uint8) for _ in range(4)]  # two src/dst pairs for the limits
    for i, h in enumerate(host):
        h.fill(i + 1)  # prefault
    streams: list[int] = []
    try:
        x0, y0, x1, y1 = malloc(0, n), malloc(0, n), malloc(1, n), malloc(1, n)
        src = [malloc(d, m) for d in range(P2P_CARDS)]
        dst = [malloc(d, m) for d in range(P2P_CARDS)]
        for dev in (0, 1):
            _ok(rt.set_device(dev), f"set_device({dev})")
            s, ret = rt.create_stream()
            _ok(ret, f"create_stream on device {dev}")
            streams.append(s)
        s0, s1 = streams
        set_device, memcpy, memcpy_async = rt.set_device, rt.memcpy, rt.memcpy_async
        sync = rt.synchronize_stream

        def one_way() -> None:  # card 1 memory -> card 0 memory, by card 0's DMA engine
            set_device(0)
            memcpy(y0, n, x1, n, d2d)

        def both_ways() -> None:  # 0 -> 1 on card 0's stream, 1 -> 0 on card 1's, at once
            set_device(0)
            memcpy_async(y1, n, x0, n, d2d, s0)
            set_device(1)
            memcpy_async(y0, n, x1, n, d2d, s1)
            sync(s0)
            sync(s1)

        def two_copyto() -> None:  # the machine doing two 64 MiB copies at once
            t = threading.Thread(target=np.copyto, args=(host[3], host[2]))
            t.start()
            np.copyto(host[1], host[0])
            t.join()

        set_device(0)  # one untimed copy of each op first, checked
        _ok(memcpy(y0, n, x1, n, d2d), "P2P memcpy 1 -> 0")
        _ok(memcpy_async(y1, n, x0, n, d2d, s0) or sync(s0), "P2P memcpy_async 0 -> 1")
        set_device(1)
        _ok(memcpy_async(y0, n, x1, n, d2d, s1) or sync(s1), "P2P memcpy_async 1 -> 0")
        long_s = 4 * sample_s  # a 64 MiB copy takes ~10 ms: a few per sample
        rates = _rates({"one": one_way, "limit": functools.partial(np.copyto, host[1], host[0])},
                       n / 1e9, reps, long_s)
        both = _rates({"both": both_ways, "limit": two_copyto}, 2 * n / 1e9, reps, long_s)

        cells = {}
        for i in range(P2P_CARDS):
            for j in range(P2P_CARDS):
                def cell(i: int = i, j: int = j) -> None:  # row i: card i's engine pushes
                    set_device(i)
                    memcpy(dst[j], m, src[i], m, d2d)

                set_device(i)
                _ok(memcpy(dst[j], m, src[i], m, d2d), f"P2P memcpy {i} -> {j}")
                cells[f"{i}->{j}"] = cell
        cells["limit"] = functools.partial(np.copyto, host[1][:m], host[0][:m])
        matrix = _rates(cells, m / 1e9, reps, sample_s)
    finally:
        for s in streams:
            rt.destroy_stream(s)
        for ptr in owned:
            rt.free(ptr)
    label, mlabel = size_label(n), size_label(m)
    records = [
        Record(f"P2P {label}", rates["one"], "GB/s", f"np.copyto {label}", rates["limit"],
               Target("≥ 0.85x", "ratio", ">=", 0.85)),
        Record("P2P bidirectional", both["both"], "GB/s", f"2x np.copyto {label}",
               both["limit"]),
    ]
    records += [Record(f"P2P {mlabel} {key}", matrix[key], "GB/s", f"np.copyto {mlabel}",
                       matrix["limit"]) for key in cells if key != "limit"]
    return records


# ---------------------------------------------------------------------------- the runner
def _child_env(devices: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env.update(NODE_ENV, NPUEMU_DEVICES=str(devices))
    return env


def _run_figure(fig: Figure, quick: bool) -> tuple[list[Record], Tracker, list[str]]:
    """Run one figure (in a fresh child if it needs a node); always clean up after it.
    Returns its records, what it started (already cleaned up) and its notes."""
    if fig.devices is None:
        track = Tracker()
        ctx = Context(quick, track)
        try:
            return fig.func(ctx), track, ctx.notes
        finally:
            ctx.close()
            _report_forced(fig, cleanup(track))
    with tempfile.TemporaryDirectory(prefix="npuemu-bench-") as tmp:
        out, track_path = os.path.join(tmp, "out.json"), os.path.join(tmp, "track")
        cmd = [sys.executable, "-m", "npuemu.tools.bench", "--figure", fig.key,
               "--out", out, "--track", track_path] + (["--quick"] if quick else [])
        proc = subprocess.Popen(cmd, env=_child_env(fig.devices), stdin=subprocess.DEVNULL)
        try:
            try:
                rc = proc.wait(fig.timeout)
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"did not finish within {fig.timeout:.0f} s") from None
        finally:
            if proc.poll() is None:  # timeout or Ctrl-C: let it tear down, then insist
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            track = Tracker.load(track_path)
            track.raw_node(f"bench-raw{proc.pid}")
            _report_forced(fig, cleanup(track))
        if rc != 0:
            raise RuntimeError(f"figure process exited {rc}")
        with open(out) as f:
            result = json.load(f)
        return [Record.load(d) for d in result["records"]], track, result["notes"]


def _report_forced(fig: Figure, forced: list[str]) -> None:
    if forced:
        print(f"\n  cleanup after {fig.key} had to: {'; '.join(forced)}", file=sys.stderr)


def _child_figure(key: str, quick: bool, out: str, track_path: str) -> int:
    """``--figure KEY``: run one figure on a fresh embedded node, write its records."""
    from npuemu.host.core import runtime

    fig = next(f for f in FIGURES if f.key == key)
    ctx = Context(quick, Tracker(track_path))
    rt = runtime.get()
    try:
        node = rt.ensure_node()
        ctx.track.node(node.name, node.proc.pid if node.proc else 0)
        records = fig.func(ctx)
    finally:
        ctx.close()
        rt.shutdown()
    with open(out, "w") as f:
        json.dump({"records": [dataclasses.asdict(r) for r in records], "notes": ctx.notes}, f)
    return 0


def _fmt(v: float) -> str:
    a = abs(v)
    if a >= 10000:
        return f"{v:,.0f}".replace(",", " ")
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


_CELL = re.compile(r"(?P<label>.+) (?P<row>\d+)->(?P<col>\d+)")
"""Records named ``<label> <i>-><j>`` are cells of a matrix (row i, column j)."""


def format_table(records: list[Record]) -> str:
    """The table: figure, value, unit, limit (same run), its value, ratio, target: met?
    Matrix cells (``P2P 16 MiB 0->1``...) are printed as a matrix below the rows."""
    head = ["figure", "value", "unit", "limit (same run)", "limit", "ratio", "target: met?"]
    plain = [r for r in records if not _CELL.fullmatch(r.name)]
    rows = [[r.name, _fmt(r.value), r.unit, r.limit_name, _fmt(r.limit_value),
             f"{r.ratio:.3g}x",
             f"{r.target.text}: {'yes' if r.target.met(r) else 'NO'}" if r.target else "-"]
            for r in plain]
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    right = {1, 4, 5}

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(head), sep, *(line(r) for r in rows), *format_matrices(records)])


def format_matrices(records: list[Record]) -> list[str]:
    """Each group of matrix cells as a block: values by row and column, then the limit and
    the range of ratios (the cells of one matrix share their limit)."""
    groups: dict[str, dict[tuple[int, int], Record]] = {}
    for r in records:
        m = _CELL.fullmatch(r.name)
        if m:
            groups.setdefault(m["label"], {})[int(m["row"]), int(m["col"])] = r
    lines = []
    for label, cells in groups.items():
        rows = sorted({i for i, _ in cells})
        cols = sorted({j for _, j in cells})
        first = next(iter(cells.values()))
        ratios = [r.ratio for r in cells.values()]
        table = [["", *(f"->{j}" for j in cols)]]
        table += [[f"{i}->", *(_fmt(cells[i, j].value) if (i, j) in cells else "-"
                                for j in cols)] for i in rows]
        width = max(len(c) for row in table for c in row)
        lines += ["", f"{label} i->j, {first.unit} (row: source card i, whose DMA engine "
                      "copies; column: destination card j)"]
        lines += ["  " + "  ".join(c.rjust(width) for c in row) for row in table]
        lines.append(f"  limit (same run): {first.limit_name} {_fmt(first.limit_value)} "
                     f"{first.unit}; ratio {min(ratios):.3g}x .. {max(ratios):.3g}x")
    return lines


def _on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(quick: bool = False, json_path: str | None = None) -> int:
    """Run every figure, print the table, write ``json_path``; 1 if a figure failed.
    SIGTERM and Ctrl-C stop the bench after cleaning up what the running figure started."""
    previous = None
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL):
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return _main(quick, json_path)
    except (KeyboardInterrupt, SystemExit) as stop:
        code = stop.code if isinstance(stop, SystemExit) else 130
        print(f"\nnpuemu bench: stopped ({'SIGTERM' if code == 143 else 'interrupted'}); "
              "what the running figure started was cleaned up", file=sys.stderr)
        return code if isinstance(code, int) else 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(quick: bool, json_path: str | None) -> int:
    try:
        "µ≤≥".encode(getattr(sys.stdout, "encoding", None) or "ascii")
    except UnicodeEncodeError:
        with contextlib.suppress(AttributeError, ValueError):
            sys.stdout.reconfigure(errors="replace")  # type: ignore[union-attr]
    t_start = time.perf_counter()
    mode = "quick" if quick else "full"
    print(f"npuemu bench ({mode}, {os.cpu_count()} CPUs): figures beside limits measured in "
          "this run; ratio = value / limit", flush=True)
    records: list[Record] = []
    tracks: list[Tracker] = []
    notes: list[str] = []
    failed: list[str] = []
    for i, fig in enumerate(FIGURES, 1):
        t0 = time.perf_counter()
        print(f"[{i}/{len(FIGURES)}] {fig.key} ...", end="", flush=True)
        try:
            recs, track, fig_notes = _run_figure(fig, quick)
            tracks.append(track)
            notes += [f"{fig.key}: {n}" for n in fig_notes]
        except Exception as err:  # report it and go on with the others
            failed.append(f"{fig.key}: {err}")
            print(f" FAILED: {err}", flush=True)
            continue
        records += recs
        print(f" {time.perf_counter() - t0:.1f} s", flush=True)
    print()
    if records:
        print(format_table(records))
    left = _left_behind(tracks)
    nodes = len({n for t in tracks for n, _, _ in t.nodes})
    helpers = sum(len(t.procs) for t in tracks)
    print(f"\ncleanup: {nodes} nodes and {helpers} helper processes started, "
          + (f"LEFT BEHIND: {left}" if left else "nothing left behind"))
    if notes:
        print("\nNOTES:\n  " + "\n  ".join(notes))
    if failed:
        print("\nFAILED figures:\n  " + "\n  ".join(failed))
    print(f"\ntotal runtime {time.perf_counter() - t_start:.1f} s")
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump([r.public() for r in records], f, indent=1, ensure_ascii=False)
            f.write("\n")
    return 1 if failed else 0


def _entry(argv: list[str]) -> int:
    """``python -m npuemu.tools.bench``: the bench's own helper processes (and the bench)."""
    p = argparse.ArgumentParser(prog="python -m npuemu.tools.bench")
    p.add_argument("--figure", help="run one figure on a fresh embedded node (internal)")
    p.add_argument("--out")
    p.add_argument("--track")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--ring-pong", nargs=3, metavar=("SEG", "BELL", "WAKE"), help="internal")
    p.add_argument("--sem-pong", nargs=2, metavar=("PING", "PONG"), help="internal")
    args = p.parse_args(argv)
    if args.ring_pong:
        return _ring_pong(*args.ring_pong)
    if args.sem_pong:
        return _sem_pong(*args.sem_pong)
    if args.figure:
        return _child_figure(args.figure, args.quick, args.out, args.track)
    return main(args.quick, args.json)


if __name__ == "__main__":
    sys.exit(_entry(sys.argv[1:]))
