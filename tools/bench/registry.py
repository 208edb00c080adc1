"""The figure registry: ``@figure(key, devices=N)`` and the ``Context`` a figure gets."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from npuemu.shared import shm
from npuemu.tools.bench.records import Record
from npuemu.tools.bench.track import Tracker


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
