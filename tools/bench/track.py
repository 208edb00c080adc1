"""What the bench's figures start (nodes, helper processes, raw /dev/shm names) and the
cleanup after each figure, whether it succeeded, crashed, timed out or was interrupted."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import psutil

from npuemu.shared import shm

SCRUBBED = ("NPUEMU_NODE", "NPUEMU_DEVICES", "NPUEMU_HBM", "NPUEMU_DDR", "NPUEMU_SOC",
            "ASCEND_RT_VISIBLE_DEVICES")
"""Variables of the caller that would change what a figure's node is (never passed on)."""
NODE_GONE_S = 15.0
"""How long the bench waits for a node's supervisor to stop on its own before killing it."""


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


def supervisor_of(name: str) -> tuple[int, float]:
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


def stop_node(name: str, pid: int, ctime: float) -> list[str]:
    """Make sure node ``name`` is gone: wait for its supervisor, ask it to stop, kill it and
    its workers as a last resort, unlink its names. Returns what had to be forced."""
    from npuemu.shared import control

    forced = []
    if not pid:
        pid, ctime = supervisor_of(name)
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
        forced += stop_node(name, pid, ctime)
    for name in track.raw:
        left = shm.leftovers(name)
        if left:
            forced.append(f"unlinked {len(left)} raw benchmark names {name}.*")
            shm.unlink_all(name)
    return forced


def left_behind(tracks: Iterable[Tracker]) -> list[str]:
    """Names and processes of ``tracks`` that still exist."""
    left = []
    for t in tracks:
        for name in [n for n, _, _ in t.nodes] + t.raw:
            left += shm.leftovers(name)
        for pid, ctime in t.procs + [(p, c) for _, p, c in t.nodes if p]:
            if _process(pid, ctime) is not None:
                left.append(f"process {pid}")
    return left
