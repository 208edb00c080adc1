"""An in-process fake of a node and its device links, for tests of host logic.

``FakeLink`` implements the seam ``host/driver/interface.py`` ``Link`` without a worker
process or shared memory: requests are answered by Python code in the calling thread and
stream tasks run when they are submitted, in stream order. It lets the runtime core's own
logic (argument checks, handle tables, error mapping, callback bookkeeping, slot pools) be
tested in milliseconds; ``tests/unit/conftest.py`` ``fake_runtime`` runs the runtime on it.

What it does, like a worker: device pointers in the card's address window
(``shared/address.py``) backed by an anonymous mapping per arena (host<->device copies move
real bytes), allocation accounting per client, ``MEM_INFO``, streams with ids and a limit
(207008), sync and async copies and memsets, event records with device timestamps, stream
and event failures (``fail_next``), exception and callback reports, blocking callbacks that
hold their stream until ``CALLBACK_DONE``, stream abort, device loss (``lose``) and hangs
(``hang``).

What it does not do (cross the seam for these: the integration tests use real workers):
the allocator's page classes and policies (a bump allocator; freed space is not reused;
spans are the size rounded up to 64 bytes), kernels (``BINARY_LOAD`` only finds the
``@kernel`` functions; ``LAUNCH`` completes without running them), waits on events recorded
later on another stream (a wait is met at once), fault injection (``INJECT`` is 207000), peer
access between cards of different fake nodes, and real concurrency with a device.

Threading model: ``lock`` plays the submission ring's part (the core holds it to number and
queue tasks; ``call`` and ``post`` take it). Stream tasks run in the submitting thread under
``lock``; a task held by a blocking callback runs in the thread that posts its
``CALLBACK_DONE``. ``_cond`` (on ``lock``'s sibling ``_state``) is notified after every
completion, which is what ``wait_until`` sleeps on. Reports go through a ``queue.Queue``.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import mmap
import os
import queue
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from npuemu.host.driver.interface import ClientUsage, Link, MemoryUsage, SlotPool
from npuemu.host.driver.link import encode
from npuemu.shared import address, errors, layout, pages
from npuemu.shared.enums import MemAttr, StreamFailureMode
from npuemu.shared.protocol import Frame, Op, Report

_DDR_ATTRS = {a for a in MemAttr if a.name.startswith("ACL_DDR")}


class FakeNode:
    """Stands in for ``host/driver/node.py`` ``Node`` (the parts the runtime uses)."""

    def __init__(self, devices: int = 2, hbm_bytes: int = 64 << 20, ddr_bytes: int = 16 << 20,
                 soc: str = "Ascend910B1", max_streams: int = layout.MAX_STREAMS) -> None:
        self.name = f"fake{os.getpid()}-{secrets.token_hex(3)}"
        self.devices, self.soc = devices, soc
        self.hbm_bytes, self.ddr_bytes, self.max_streams = hbm_bytes, ddr_bytes, max_streams
        self.groups = [d // 4 for d in range(devices)]  # HCCS groups of 4, as by default
        self.links: list[FakeLink] = []
        self._slots = itertools.count()

    def open_link(self, dev: int) -> FakeLink:
        link = FakeLink(self, dev, next(self._slots))
        self.links.append(link)
        return link

    def close_link(self, link: Link) -> None:
        link.close()

    def close(self) -> None:
        for link in self.links:
            link.close()


class FakeLink:
    """In-process ``Link`` to fake device ``dev``."""

    def __init__(self, node: FakeNode, dev: int, slot: int) -> None:
        self.node, self.dev, self.slot, self.logical = node, dev, slot, dev
        self.lock = threading.Lock()
        self._state = threading.Lock()
        self._cond = threading.Condition(self._state)
        self.lost_detail = ""
        self._hung = False
        self.closing = False
        self.pinned: set[int] = set()
        self.stream_slots = SlotPool(layout.MAX_STREAMS)
        self.event_slots = SlotPool(layout.MAX_EVENTS)
        self.reporter: threading.Thread | None = None
        self.host_func_queues: dict[int, Any] = {}
        self.completed = [0] * layout.MAX_STREAMS
        self.stream_hung = [0] * layout.MAX_STREAMS
        self.event_done = [0] * layout.MAX_EVENTS
        self.event_stamp = [0] * layout.MAX_EVENTS
        self.event_error = [0] * layout.MAX_EVENTS
        self._failures = [(0, 0, 0)] * layout.MAX_STREAMS
        self._reports: queue.Queue[Frame] = queue.Queue()
        self.requests: list[Frame] = []  # every frame received, for tests to inspect
        self._boot = time.monotonic_ns()
        self._arenas = [mmap.mmap(-1, size) for size in (node.hbm_bytes, node.ddr_bytes)]
        self._views = [ctypes.c_char.from_buffer(m) for m in self._arenas]
        self.arena_addr = [ctypes.addressof(v) for v in self._views]
        self.arena_near = [node.hbm_bytes, node.ddr_bytes]  # no far pages here
        self.far: list[pages.FarPages] = []  # none: arena_near is the whole arena
        self._top = [0, 0]  # bump pointer per arena
        self._blocks: dict[int, int] = {}  # ptr -> span
        self._used, self._peak, self._peak_ddr = [0, 0], 0, 0
        self._streams: dict[int, dict[str, Any]] = {}  # slot -> {"sid", "mode", "queue", "held"}
        self._sids = itertools.count(1)
        self._fail_next: list[int] = []  # codes for the next tasks to fail
        self.bins: dict[int, dict[str, str]] = {}
        self._bin_ids = itertools.count(1)

    # test controls ----------------------------------------------------------------------------
    def fail_next(self, code: int) -> None:
        """The next stream task (any stream) fails with ``code``."""
        self._fail_next.append(code)

    def lose(self) -> None:
        """The device dies: every later call is 507010."""
        with self._cond:
            self.lost_detail = f"fake device {self.dev} lost"
            self._cond.notify_all()

    def hang(self) -> None:
        """The device stops answering, as a SIGSTOPped worker: the link gives it up (the real
        link does so once the heartbeat is older than ``DEVICE_LOST_TIMEOUT_S``)."""
        self._hung = True
        self.lose()
        self.lost_detail = f"fake device {self.dev} hung: no heartbeat"

    # liveness ---------------------------------------------------------------------------------
    def alive(self) -> bool:
        return not self.lost_detail

    def check_alive(self) -> None:
        if self.lost_detail:
            raise errors.error_for(errors.ACL_ERROR_RT_LOST_HEARTBEAT, self.lost_detail)

    def hung(self) -> bool:
        return self._hung

    # requests ---------------------------------------------------------------------------------
    def call(self, op: int, *args: object) -> Frame:
        encode((op, 1, *args))
        with self.lock:
            self.check_alive()
            self.requests.append((op, *args))
            return _HANDLERS[op](self, *args)

    def call_many(self, requests: Iterable[tuple[Any, ...]]) -> list[Frame | errors.AclError]:
        out: list[Frame | errors.AclError] = []
        for op, *args in requests:
            try:
                encode((op, 1, *args))
                out.append(self.call(op, *args))
            except errors.AclError as err:
                out.append(err)
        return out

    def post(self, op: int, *args: object) -> None:
        encode((op, 0, *args))
        with self.lock:
            self.check_alive()
            self.requests.append((op, *args))
            with contextlib.suppress(errors.AclError):  # a fire-and-forget frame's failure
                _HANDLERS[op](self, *args)  # goes to the device log only

    def submit_locked(self, frame: list[Any] | Frame) -> None:
        encode(frame)
        self.check_alive()
        op, _seq, slot, task, *args = frame
        self.requests.append((op, slot, task, *args))
        stream = self._streams.get(slot)
        if stream is None:
            return  # the worker drops tasks of an unknown stream (a bad frame)
        stream["queue"].append((op, task, args))
        self._run(slot)

    def wait_until(self, done: Callable[[], bool], timeout_s: float | None,
                   spin_s: float = 0.0, stream: int | None = None) -> bool:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            while not done():
                self.check_alive()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(0.05 if left is None else min(left, 0.05))
        return True

    def pop_report(self, timeout_s: float) -> Frame | None:
        try:
            return self._reports.get(timeout=timeout_s)
        except queue.Empty:
            return None

    # tables and telemetry ---------------------------------------------------------------------
    def stream_failure(self, slot: int) -> tuple[int, int, int]:
        return self._failures[slot]

    def clear_event(self, slot: int) -> None:
        self.event_done[slot] = self.event_stamp[slot] = self.event_error[slot] = 0

    def health(self) -> int:
        return layout.Health.OK

    def abnormal(self) -> bool:
        return not self.alive()

    def busy_ns(self) -> tuple[int, int, int]:
        return 0, 0, 0

    def boot_ns(self) -> int:
        return self._boot

    def memory_usage(self) -> MemoryUsage:
        return MemoryUsage(self._used[0], self.node.hbm_bytes, self._peak, self._used[1],
                           self._peak_ddr)

    def client_usage(self) -> list[ClientUsage]:
        return [ClientUsage(os.getpid(), sum(self._used), self._peak + self._peak_ddr)]

    def poisoned(self, ptr: int, count: int) -> int:
        return 0

    poison_word: tuple[Sequence[int], int] = ((0,), 0)  # never an isolated page

    def faults_injected(self) -> int:
        return 0  # a fake link takes no faults (INJECT is refused)

    def close(self) -> None:
        if self.closing:
            return
        self.closing = True
        if self.reporter is not None and self.reporter is not threading.current_thread():
            self.reporter.join(timeout=1.0)
        with self._cond:
            self._cond.notify_all()
        self._views = []  # drop the ctypes exports first, or the mappings cannot close
        for arena in self._arenas:
            arena.close()

    # the fake device ----------------------------------------------------------------------------
    def _addr(self, ptr: int, count: int) -> int:
        """This process's address of device ``ptr`` (107000 unless inside a live block)."""
        if not address.is_device_ptr(ptr):
            return ptr  # pinned host memory, used in place
        dev, arena, offset = address.decode(ptr)
        base = next((b for b, span in self._blocks.items() if b <= ptr < b + span), None)
        if dev != self.dev or base is None or ptr + count > base + self._blocks[base]:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"0x{ptr:x}+{count} is not device memory of this client")
        return self.arena_addr[arena] + offset

    def _run(self, slot: int) -> None:
        """Run the stream's queued tasks in order until it is empty or held by a callback."""
        stream = self._streams[slot]
        while stream["queue"] and not stream["held"]:
            op, task, args = stream["queue"].pop(0)
            code = self._fail_next.pop(0) if self._fail_next else 0
            if not code:
                try:
                    _TASKS[op](self, slot, task, *args)
                except errors.AclError as err:
                    code = err.code
            if code:
                count = self._failures[slot][0] + 1
                self._failures[slot] = (count, code, task)
                self._reports.put((Report.EXCEPTION, slot, task, code, stream["sid"], self.dev))
                if stream["mode"] == StreamFailureMode.ACL_STOP_ON_FAILURE:
                    task = max([task, *(t for _op, t, _a in stream["queue"])])
                    stream["queue"].clear()
            if stream["held"]:
                return
            with self._cond:
                self.completed[slot] = task
                self._cond.notify_all()

    def _mark(self, slot: int, event: int, gen: int) -> None:
        with self._cond:
            self.event_done[event] = gen
            self.event_stamp[event] = time.monotonic_ns() - self._boot
            self.event_error[event] = self._failures[slot][1] if self._failures[slot][0] else 0


# requests -----------------------------------------------------------------------------------
def _ping(link: FakeLink) -> Frame:
    return (time.monotonic_ns(),)


def _malloc(link: FakeLink, size: int, policy: int) -> Frame:
    arena = address.DDR if policy & 0x10000 else address.HBM  # ACL_MEM_TYPE_LOW_BAND_WIDTH
    span = -(-(size + 32) // 64) * 64
    limit = (link.node.hbm_bytes, link.node.ddr_bytes)[arena]
    if link._top[arena] + span > limit:
        raise errors.error_for(errors.ACL_ERROR_RT_MEMORY_ALLOCATION,
                               f"fake device {link.dev}: {size} bytes do not fit")
    ptr = address.encode(link.dev, arena, link._top[arena])
    link._top[arena] += span
    link._blocks[ptr] = span
    link._used[arena] += span
    link._peak = max(link._peak, link._used[0])
    link._peak_ddr = max(link._peak_ddr, link._used[1])
    return ptr, span, 0


def _free(link: FakeLink, ptr: int) -> Frame:
    span = link._blocks.pop(ptr, None)
    if span is None:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, f"0x{ptr:x} is not a block")
    link._used[address.decode(ptr)[1]] -= span
    return ()


def _mem_info(link: FakeLink, attr: int) -> Frame:
    if attr not in MemAttr._value2member_map_:
        return 0, 0
    arena = address.DDR if attr in _DDR_ATTRS else address.HBM
    total = (link.node.hbm_bytes, link.node.ddr_bytes)[arena]
    return total - link._top[arena], total


def _copy(link: FakeLink, dst: int, src: int, count: int) -> Frame:
    ctypes.memmove(link._addr(dst, count), link._addr(src, count), count)
    return ()


def _stream_create(link: FakeLink, slot: int, priority: int, flags: int) -> Frame:
    if len(link._streams) >= link.node.max_streams:
        raise errors.error_for(errors.ACL_ERROR_RT_NO_STREAM_RESOURCE,
                               f"fake device {link.dev}: {link.node.max_streams} streams")
    sid = next(link._sids)
    link._streams[slot] = {"sid": sid, "mode": 0, "queue": [], "held": 0}
    link.completed[slot] = link.stream_hung[slot] = 0
    link._failures[slot] = (0, 0, 0)
    return (sid,)


def _stream_destroy(link: FakeLink, slot: int) -> Frame:
    link._streams.pop(slot, None)
    return ()


def _stream_mode(link: FakeLink, slot: int, mode: int) -> Frame:
    link._streams[slot]["mode"] = mode
    return ()


def _stream_abort(link: FakeLink, slot: int) -> Frame:
    stream = link._streams[slot]
    if stream["queue"]:
        with link._cond:
            link.completed[slot] = stream["queue"][-1][1]
            link._cond.notify_all()
    stream["queue"].clear()
    return ()


def _pin(link: FakeLink, base: int, size: int, name: str) -> Frame:
    return ()


def _binary_load(link: FakeLink, source: str, name: str) -> Frame:
    scope: dict[str, Any] = {}
    try:
        exec(compile(source, name, "exec"), scope)  # the user's own kernel code
    except Exception as err:
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, f"{name}: {err}") from None
    kernels = {k: v.__npu_kernel__ for k, v in scope.items()
               if callable(v) and hasattr(v, "__npu_kernel__")}
    bin_id = next(link._bin_ids)
    link.bins[bin_id] = kernels
    return bin_id, tuple(kernels.items())


def _binary_unload(link: FakeLink, bin_id: int) -> Frame:
    link.bins.pop(bin_id, None)
    return ()


def _callback_done(link: FakeLink, slot: int, task: int) -> Frame:
    stream = link._streams.get(slot)
    if stream is not None and stream["held"] == task:
        stream["held"] = 0
        with link._cond:
            link.completed[slot] = task
            link._cond.notify_all()
        link._run(slot)
    return ()


def _inject(link: FakeLink, *args: object) -> Frame:
    raise errors.error_for(errors.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "no faults on a fake link")


_HANDLERS: dict[int, Callable[..., Frame]] = {
    Op.PING: _ping, Op.MALLOC: _malloc, Op.FREE: _free, Op.MEM_INFO: _mem_info,
    Op.COPY: _copy, Op.STREAM_CREATE: _stream_create, Op.STREAM_DESTROY: _stream_destroy,
    Op.STREAM_MODE: _stream_mode, Op.STREAM_ABORT: _stream_abort, Op.PIN: _pin,
    Op.UNPIN: lambda link, base: (), Op.BINARY_LOAD: _binary_load,
    Op.BINARY_UNLOAD: _binary_unload, Op.CALLBACK_DONE: _callback_done, Op.INJECT: _inject,
    Op.MEM_MERGE: lambda link: (0,),  # no page pools here: nothing to merge
    # no kernels run here, so no window is kept for them
    Op.VMM_MAP: lambda link, *args: (), Op.VMM_UNMAP: lambda link, *args: (),
}


# stream tasks -------------------------------------------------------------------------------
def _copy_async(link: FakeLink, slot: int, task: int, dst: int, src: int, count: int) -> None:
    _copy(link, dst, src, count)


def _memset_async(link: FakeLink, slot: int, task: int, ptr: int, value: int,
                  count: int) -> None:
    ctypes.memset(link._addr(ptr, count), value, count)


def _record(link: FakeLink, slot: int, task: int, event: int, gen: int) -> None:
    link._mark(slot, event, gen)


def _reset_event(link: FakeLink, slot: int, task: int, event: int) -> None:
    link.clear_event(event)


def _callback(link: FakeLink, slot: int, task: int, cb_id: int, block: int) -> None:
    link._reports.put((Report.CALLBACK, slot, task, cb_id, block))
    if block:
        link._streams[slot]["held"] = task


_TASKS: dict[int, Callable[..., None]] = {
    Op.COPY_ASYNC: _copy_async, Op.MEMSET_ASYNC: _memset_async, Op.RECORD: _record,
    Op.RESET_EVENT: _reset_event, Op.WAIT_EVENT: lambda link, slot, task, *a: None,
    Op.LAUNCH: lambda link, slot, task, *a: None, Op.CALLBACK: _callback,
}
