"""Copy, memset and host callback steps of a card-side task list: what a captured stream
(``aclmdlRI*``) adds to the kernel steps of a model (``model.py``).

A captured stream is registered on the card as a model task list with no inputs and no
outputs (``MODEL_LOAD``) and replayed as one ``MODEL_EXECUTE`` task; its kernels are
kernel steps as a model's are, its event records and waits between the capture's streams
are the steps' event ids, and its copies and memsets are the steps this module checks
and runs. A memory step is ``[stream, op, [args], [waited event ids], [recorded event
ids]]`` (five fields, where a kernel step has eight): op ``COPY_ASYNC`` with ``[dst, src,
count]`` or ``MEMSET_ASYNC`` with ``[ptr, value, count]``, addresses as the stream tasks of
the same op take them (device memory of the client, a peer card's, or the client's pinned
host memory).

The addresses are resolved at every replay, when the step runs (memory may be freed and
allocated again between replays, as on the real card, where a replay reads whatever the
addresses hold then): a bad range fails the replay with 107000 at that step, an isolated
page with its code, as the same stream task would. The bytes move on the replay's engine
thread (or a helper thread of the model's extra streams), one ``memmove`` / ``memset``,
checked for cancellation only between steps (a copy already under way finishes).

A host callback step is a five-field row of op ``CALLBACK`` with ``[callback id, block,
stream slot]``: when the replay reaches it, the card reports the callback to the host as
the stream task does (``Report.CALLBACK`` with the slot of the stream it was captured on, so
the thread subscribed to that stream runs it, and a tag from ``TAG_BASE`` up in place of a
task number); with ``block`` 1 the replay's lane waits until the host's ``CALLBACK_DONE``
names that tag (``callback_done``), in slices, checking the replay's cancellation (abort,
timeout, unload: 107035). The wait holds the thread that runs the lane (the AI Core engine
thread for the first stream), so a blocking callback that waits for a kernel of the same
card waits until the replay's execution timeout.

An event record step is a five-field row of op ``RECORD`` with ``[event slot, input index,
0]``: the last record of a host event in a capture, which completes that event in the
client's event table when the replay reaches it (as a stream's record task does: its
generation, the time, no error), so a stream outside the instance, or a host synchronize,
waiting on it goes on then, not at the end of the replay. The generation is the replay's
input of that index (the host takes one per event at each replay: ``MODEL_EXECUTE``'s
inputs, ``host/core/model_ri.py``); 0 records nothing (the event was destroyed). A replay
that fails or is cancelled before such a step completes its event with the replay's code
(``fail_records``), so no waiter waits for a record that will not come.

Threading model: ``memory_step`` runs in the worker's loop thread (``MODEL_LOAD``);
``callback_done`` too (``CALLBACK_DONE``); ``_waiting`` (tag -> the ``threading.Event`` a
blocked callback step waits on) is guarded by ``_lock``; a report goes through the client's
``report`` (its ``report_lock`` orders it with the loop's reports); ``current.task`` is the
replay each lane thread runs (set by ``model._lane``, read by the callback step);
``MemoryStep.__call__`` runs on the thread that runs its lane of the replay and reads the
client's pinned-block table (``Worker.resolve`` takes a snapshot of it) and the allocator
(``DeviceMemory.resolve`` is locked).
"""

from __future__ import annotations

import ctypes
import itertools
import threading
import time
from typing import Any, Protocol, cast

from npuemu.device import contracts, engines
from npuemu.shared import errors, layout
from npuemu.shared.protocol import BadFrame, Op, Report, u64

MEMORY_STEP_FIELDS = 5
"""Fields of a copy or memset step (a kernel step has 8)."""
_COPY, _MEMSET, _CALLBACK = int(Op.COPY_ASYNC), int(Op.MEMSET_ASYNC), int(Op.CALLBACK)
_RECORD = int(Op.RECORD)
_EE = layout.EVENT_ENTRY
TAG_BASE = 1 << 62
"""Tags of a replay's callback reports start here: above any stream task number."""
_WAIT_SLICE_S = 0.05
_tags = itertools.count(TAG_BASE)
_lock = threading.Lock()
_waiting: dict[int, tuple[object, threading.Event]] = {}  # tag -> (client, event)
current = threading.local()
"""``current.task``: the replay the calling lane thread runs (``model._lane`` sets it)."""


class ReportingClient(contracts.Client, Protocol):
    """A client as the host callback and event record steps see it (``worker.Client``):
    reports for its host's report thread, its event table and its sync semaphore."""

    events: memoryview
    departed: bool

    def report(self, frame: tuple[Any, ...]) -> None: ...
    def notify_sync(self) -> None: ...
_COUNT_LIMIT = 1 << 63


class MemoryStep:
    """The run function of one copy or memset step: ``step(None, a, b, count)``, called as
    a model step's kernel is (one block, no context)."""

    __slots__ = ("client", "op", "worker")
    __npu_kernel__ = engines.DMA

    def __init__(self, worker: contracts.Card, client: contracts.Client, op: int) -> None:
        self.worker, self.client, self.op = worker, client, op

    def __call__(self, _ctx: object, a: int, b: int, count: int) -> None:
        worker, client = self.worker, self.client
        if self.op == _COPY:
            dst, src = worker.resolve(client, a, count), worker.resolve(client, b, count)
            worker.faults.check_ranges((a, count), (b, count))
            ctypes.memmove(dst, src, count)
        else:
            ptr = worker.resolve(client, a, count)
            worker.faults.check_ranges((a, count))
            ctypes.memset(ptr, b & 0xFF, count)


class CallbackStep:
    """The run function of one host callback step: ``step(None, callback id, block, slot)``
    (module docstring). Blocks, if ``block``, until the host ran the callback."""

    __slots__ = ("client",)
    __npu_kernel__ = engines.AICPU

    def __init__(self, client: ReportingClient) -> None:
        self.client = client

    def __call__(self, _ctx: object, cb_id: int, block: int, slot: int) -> None:
        tag, done = next(_tags), threading.Event()
        if block:
            with _lock:
                _waiting[tag] = (self.client, done)
        try:
            self.client.report((Report.CALLBACK, slot, tag, cb_id, 1 if block else 0))
            task = current.task
            while block and not done.wait(_WAIT_SLICE_S):
                if task.cancelled or task.args[0].unloaded:
                    raise errors.error_for(errors.ACL_ERROR_RT_TASK_ABORT_STOP,
                                           "replay cancelled while a host callback ran")
        finally:
            with _lock:
                _waiting.pop(tag, None)


class RecordStep:
    """The run function of one host event record step: ``step(None, slot, generation, 0)``
    (module docstring). Non-blocking."""

    __slots__ = ("client", "worker")
    __npu_kernel__ = engines.DMA

    def __init__(self, worker: contracts.Card, client: ReportingClient) -> None:
        self.worker, self.client = worker, client

    def __call__(self, _ctx: object, slot: int, gen: int, _unused: int) -> None:
        if gen:
            complete_event(self.worker, self.client, slot, gen, 0)


def complete_event(worker: contracts.Card, client: ReportingClient, slot: int, gen: int,
                   code: int) -> None:
    """Complete record ``gen`` of the client's event ``slot`` carrying ``code``, and wake the
    host's synchronizing threads and the loop (a stream may wait on it)."""
    if client.departed:
        return
    events, base = client.events, slot * _EE.words
    events[base + _EE.TIMESTAMP] = time.monotonic_ns() - worker.boot_ns
    events[base + _EE.ERROR] = code
    events[base + _EE.DONE_GEN] = max(events[base + _EE.DONE_GEN], gen)
    client.notify_sync()
    worker.wake()


def fail_records(steps: list[Any], inputs: tuple[int, ...], code: int) -> None:
    """A replay ended with ``code``: complete with it every host event whose record step
    did not run."""
    for step in steps:
        fn = step[0]
        if type(fn) is RecordStep:
            slot, gen = step[3][0], inputs[step[4][0][2]]
            if gen and fn.client.events[slot * _EE.words + _EE.DONE_GEN] < gen:
                complete_event(fn.worker, fn.client, slot, gen, code)


def callback_done(client: object, tag: int) -> bool:
    """``CALLBACK_DONE`` of a replay's callback: release its step; False if ``tag`` names
    no callback step of this client waiting (then it is a stream task's)."""
    with _lock:
        entry = _waiting.get(tag)
        if entry is None or entry[0] is not client:
            return False
        del _waiting[tag]
    entry[1].set()
    return True


def memory_step(worker: contracts.Card, client: contracts.Client,
                row: tuple[Any, ...] | list[Any], n_inputs: int = 0) -> tuple[Any, ...]:
    """The prepared step of a five-field row (``model.py``'s step tuple: run function,
    name, engine, args, slots, block contexts, stream, waits, records); BadFrame for a row
    that breaks the table."""
    stream, op, args, waits, records = row
    if op not in (_COPY, _MEMSET, _CALLBACK, _RECORD) or type(op) is not int:
        raise BadFrame("a five-field step's op is COPY_ASYNC, MEMSET_ASYNC, CALLBACK or "
                       f"RECORD, not {op!r:.40}")
    if type(args) not in (list, tuple) or len(args) != 3:
        raise BadFrame("a five-field step's args are [dst, src, count], [ptr, value, count], "
                       "[callback id, block, stream slot] or [event slot, input index, 0]")
    a, b, count = (u64(v) for v in args)
    if op == _RECORD:
        if a >= layout.MAX_EVENTS or b >= n_inputs or count:
            raise BadFrame(f"event record step {[a, b, count]}: the slot is below "
                           f"{layout.MAX_EVENTS}, the input below {n_inputs}, then 0")
        return (RecordStep(worker, cast(ReportingClient, client)), "event_record", engines.DMA,
                (a, 0, 0), ((1, 0, b),), (None,), stream, waits, records)
    if op == _CALLBACK:
        if b > 1:
            raise BadFrame(f"callback block {b} is not 0 or 1")
        reporter = cast(ReportingClient, client)
        return (CallbackStep(reporter), "callback", engines.AICPU, (a, b, count), (), (None,),
                stream, waits, records)
    if count >= _COUNT_LIMIT:
        raise BadFrame(f"count {count} too large")
    name = "memcpy" if op == _COPY else "memset"
    return (MemoryStep(worker, client, op), name, engines.DMA, (a, b, count), (), (None,),
            stream, waits, records)
