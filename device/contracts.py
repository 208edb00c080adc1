"""What the card's parts see of the worker, its clients and its tasks: small Protocols.

The worker (``worker.py``) imports its parts at run time: the scheduler, the request table
(``dispatch.py``), the fault table (``faults.py``) and what the engines run (``exec/``).
The fault table and the kernels, op binaries, models, captured graphs, collectives and DVPP
tasks of ``exec/`` name the worker only through these protocols, so none of them imports
``worker.py`` or ``scheduler.py`` back, not even for types, and each says exactly what it
uses (a new part of ``exec/`` had best do the same):

| protocol        | stands for              | used by                                    |
|-----------------|-------------------------|--------------------------------------------|
| ``Card``        | ``worker.Worker``       | faults; exec/ (kernels, opbin, model, ...) |
| ``Peer``        | ``worker.Peer``         | faults, collectives: a peer card's block   |
| ``Client``      | ``worker.Client``       | ``Card.resolve``; exec/ extends it         |
| ``Job``         | ``scheduler.Task``      | the bodies engines run (kernels, DVPP ...) |
| ``FaultChecks`` | ``faults.Faults``       | exec/: the checks a task makes first       |
| ``EngineTable`` | ``scheduler.Scheduler`` | collectives, DVPP: engines, task end times |

A feature's own state on a client is declared where the feature lives, as a protocol that
extends ``Client`` (``exec/kernels.py`` ``KernelClient``: binaries and tensor views;
``exec/opbin.py``, ``exec/model.py``, ``exec/collective.py`` likewise), and ``worker.Client``
holds the real fields. mypy checks at every call from the worker and the scheduler that
the real classes fit (structural typing: nothing here is inherited at run time).

The scheduler and the request table are the worker's own halves (the loop's task queues and
its op table): they take the concrete ``Worker`` and ``Client`` (imported for types only).

Threading model: declarations only (no state). Which thread may call what is said by each
real class.
"""

from __future__ import annotations

import collections
from typing import Any, Protocol

from npuemu.device.engines import Engine
from npuemu.device.memory.arenas import DeviceMemory
from npuemu.device.memory.windows import Windows
from npuemu.shared import shm


class Peer(Protocol):
    """Another card of the node as this card sees it (``worker.Peer``)."""

    ctl: memoryview

    def alive(self) -> bool: ...
    def address(self, kind: int, offset: int, count: int, ptr: int) -> int: ...


class Client(Protocol):
    """One attached host process, as ``Card.resolve`` reads it (``worker.Client``)."""

    slot: int
    pinned: dict[int, shm.Segment]
    peers_ok: set[int]
    windows: Windows


class Job(Protocol):
    """A stream task as the body an engine runs sees it (``scheduler.Task``): its arguments
    (the body's ``prepare`` may replace them) and whether it was cancelled meanwhile."""

    args: tuple[Any, ...]
    cancelled: bool


class FaultChecks(Protocol):
    """The checks of injected faults a task makes (``faults.Faults``)."""

    engine_faults: list[list[Any]]

    def check_ranges(self, *ranges: tuple[int, int]) -> None: ...
    def check_copy(self, peers: tuple[int, ...]) -> None: ...
    def check_launch(self, engine: str, kernel: str) -> None: ...


class EngineTable(Protocol):
    """The card's engine threads by key, and the queue they report to
    (``scheduler.Scheduler``)."""

    @property
    def engines(self) -> dict[str, Engine[Any]]: ...
    @property
    def done(self) -> collections.deque[tuple[Any, int, int]]: ...
    def expect(self, task: Any, ns: int) -> None: ...  # task starts now; ran ns last time


class Card(Protocol):
    """The device worker as its parts see it (``worker.Worker``)."""

    dev: int
    node: str
    ctl: memoryview
    debug: bool  # some module logs at DEBUG (test it before formatting a line)
    alloc_changes: int  # mallocs, frees, mappings, unpins so far (kept checks compare it)
    boot_ns: int  # time.monotonic_ns() at boot: event timestamps count from it
    memory: DeviceMemory

    @property
    def faults(self) -> FaultChecks: ...
    @property
    def scheduler(self) -> EngineTable: ...

    def log(self, level: str, message: str, module: str = ...) -> None: ...
    def internal_error(self, where: str) -> None: ...
    def resolve(self, client: Client, addr: int, count: int) -> int: ...
    def peer(self, dev: int) -> Peer: ...
    def wake(self) -> None: ...
