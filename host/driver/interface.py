"""The driver seam: what the runtime core may use of a link to one device.

``Link`` is the one interface the core (``host/core/``) programs against. Two classes
implement it:

- ``host/driver/link.py`` ``DeviceLink``: rings and shared memory to a real worker process;
- ``host/driver/fake.py`` ``FakeLink``: the same behaviour in-process, for tests of host
  logic that does not need to cross the seam (argument checks, handle tables, error
  mapping, callback bookkeeping).

``NodeHandle`` is what the core uses of the node its links come from (``Node``, ``FakeNode``).

Nothing outside ``host/driver/`` reads a shared-memory word: completion state is exposed as
*columns* (read-only sequences indexed by stream or event slot, bound once, so a read costs
one index and no allocation) and everything else through the methods below.

Threading model: a link is used by every thread of the process. ``lock`` serialises the
submission ring (one request in flight; stream tasks numbered and pushed in ring order);
``SlotPool.lock`` guards each pool; the columns are written only by the device (or the fake
under ``lock``) and read without a lock (single aligned 8-byte words).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from npuemu.shared import errors, pages
from npuemu.shared.protocol import Frame


class MemoryUsage(NamedTuple):
    """A device's memory counters, bytes (from its control block)."""

    hbm_used: int
    hbm_total: int
    hbm_peak: int
    ddr_used: int
    ddr_peak: int


class ClientUsage(NamedTuple):
    """One attached host process's device memory, bytes."""

    pid: int
    used: int
    peak: int


class Link(Protocol):
    """Host end of the link to one device, as the runtime core uses it."""

    dev: int  # node device id
    slot: int  # client slot on the device
    logical: int  # the id this process knows the device by (set by the runtime)
    lock: threading.Lock  # held to number and push stream tasks (``submit_locked``)
    lost_detail: str  # why the device is lost ("" while it is usable)
    closing: bool
    pinned: set[int]  # pinned host blocks this device has mapped
    stream_slots: SlotPool
    event_slots: SlotPool
    reporter: threading.Thread | None  # the report thread (host/core/callbacks.py)
    host_func_queues: dict[int, Any]  # stream slot -> its host-func queue
    arena_addr: list[int]  # this process's address of each arena mapping (address.ARENA_NAMES)
    arena_near: list[int]  # bytes of each arena's segment; far pages (shared/pages.py) above
    far: list[pages.FarPages]  # per arena: ``ensure()`` before touching an address above near
    # completion columns, indexed by slot (written by the device, read-only here: properties,
    # so a link may bind any sequence type, a memoryview or a list)
    @property
    def completed(self) -> Sequence[int]: ...  # stream: sequence number of its last task done
    @property
    def stream_hung(self) -> Sequence[int]: ...  # stream: 1 while its head task hangs (fault)
    @property
    def event_done(self) -> Sequence[int]: ...  # event: generation of the last completed record
    @property
    def event_stamp(self) -> Sequence[int]: ...  # event: device ns of that completion
    @property
    def event_error(self) -> Sequence[int]: ...  # event: failure code carried by that record

    # liveness
    def alive(self) -> bool: ...
    def check_alive(self) -> None: ...
    def hung(self) -> bool: ...

    # requests
    def call(self, op: int, *args: object) -> Frame: ...
    def call_many(self, requests: Iterable[tuple[Any, ...]]
                  ) -> list[Frame | errors.AclError]: ...
    def post(self, op: int, *args: object) -> None: ...
    def submit_locked(self, frame: list[Any] | Frame) -> None: ...
    def wait_until(self, done: Callable[[], bool], timeout_s: float | None,
                   spin_s: float = ..., stream: int | None = ...) -> bool: ...
    def pop_report(self, timeout_s: float) -> Frame | None: ...

    # tables and telemetry
    def stream_failure(self, slot: int) -> tuple[int, int, int]: ...
    def clear_event(self, slot: int) -> None: ...
    def health(self) -> int: ...
    def abnormal(self) -> bool: ...
    def busy_ns(self) -> tuple[int, int, int]: ...
    def boot_ns(self) -> int: ...
    def memory_usage(self) -> MemoryUsage: ...
    def client_usage(self) -> list[ClientUsage]: ...
    def poisoned(self, ptr: int, count: int) -> int: ...
    poison_word: tuple[Sequence[int], int]  # (words, i): words[i] != 0 while a page is isolated
    def faults_injected(self) -> int: ...  # faults ever injected into the card (0: none)

    def close(self) -> None: ...


class NodeHandle(Protocol):
    """A node as the runtime core uses it: ``host/driver/node.py`` ``Node`` (a connection to
    a supervisor) or ``host/driver/fake.py`` ``FakeNode`` (in-process, for tests)."""

    @property
    def name(self) -> str: ...
    @property
    def devices(self) -> int: ...  # cards of the node
    @property
    def soc(self) -> str: ...  # SoC name of its cards
    @property
    def groups(self) -> list[int]: ...  # HCCS group of each card

    def open_link(self, dev: int) -> Link: ...
    def close_link(self, link: Link) -> None: ...
    def close(self) -> None: ...


@dataclass
class SlotPool:
    """Free slots of one of the link's tables (streams, events). A slot given back with
    ``give_when`` is reused only once ``done()`` says the worker no longer writes it.
    ``lock`` guards every field."""

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

    def in_use(self) -> int:
        """Slots taken and not given back (pending ones count as in use)."""
        with self.lock:
            return self.next - len(self.free)
