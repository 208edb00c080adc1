"""Streams and events (``aclrtCreateStream``, ``aclrtRecordEvent`` and friends), raising
AclError.

A stream's tasks are queued to its device's worker without waiting; each task carries the
stream's next sequence number. The worker publishes the last completed sequence number and
failures in the client segment's stream table, and each event's completed record generation
and device timestamp in the event table, so queries cost no round trip and synchronize
sleeps on the link's ``.sync`` doorbell (``DeviceLink.wait_until``).

Our choices where CANN's documentation is silent: a failure is reported once,
by the first synchronize after it (then the stream is usable again in continue mode); the
stop-on-failure mode applies to its stream only; an event that was never recorded is
complete; ``event_get_timestamp`` is in microseconds since the device booted; elapsed time
between events that were not recorded is 107000, not yet complete 507006, without a
timestamp 107006, and end before start 107007.

Threading model: any thread may use any stream or event. ``link.lock`` (the stream's device
link) guards ``Stream.submitted`` and ``Event.gen``: a task's sequence number is taken and
the task pushed under it, and the counter moves only once the push succeeded (an argument
the wire refuses, or a lost device, leaves the stream as it was). ``Stream.after`` (the
positions of other streams its later tasks follow, through untimed event waits) is
replaced, never changed in place, by the thread that queues the wait, and ``Event.src``
with it under the link lock at a record: a reader holds one consistent dict; two threads
queueing waits on one stream at once may lose one of the two entries, which only makes
the memory pools reuse less (``mempool.py``), never unsafely. Completion state is read
from the link's columns without a lock. ``Stream.destroyed`` / ``Event.destroyed`` go from
False to True once, under ``Runtime.lock`` where the handle is dropped. ``Stream.recorder``
and ``Event.capture`` are set by ``capture.py`` under its ``lock`` and read here without it
(a reader sees the old or the new object, each consistent).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from npuemu.host.core import plog, runtime
from npuemu.host.core.runtime import index, lookup
from npuemu.host.driver.interface import Link
from npuemu.host.driver.link import SPIN_S
from npuemu.shared import errors, logring
from npuemu.shared.enums import (
    EventFlag,
    EventRecordedStatus,
    EventStatus,
    StreamFailureMode,
    StreamFlag,
    StreamStatus,
)
from npuemu.shared.protocol import Op

_TIMED = EventFlag.ACL_EVENT_TIME_LINE
_STREAM_COMPLETE = int(StreamStatus.ACL_STREAM_STATUS_COMPLETE)  # plain ints: the queries'
_STREAM_NOT_READY = int(StreamStatus.ACL_STREAM_STATUS_NOT_READY)  # results, as pyACL's
_EVENT_COMPLETE = int(EventStatus.ACL_EVENT_STATUS_COMPLETE)
_EVENT_NOT_READY = int(EventStatus.ACL_EVENT_STATUS_NOT_READY)
_RECORD = int(Op.RECORD)  # plain ints: enum members pack and combine slower
_MODEL_EXECUTE = int(Op.MODEL_EXECUTE)
_PERSISTENT = int(StreamFlag.ACL_STREAM_PERSISTENT)
_FAST_SYNC = int(StreamFlag.ACL_STREAM_FAST_SYNC)
FAST_SYNC_SPIN_S = 2e-3
"""``ACL_STREAM_FAST_SYNC``: synchronize polls this long (yielding) before it sleeps."""
KEPT = int(StreamFlag.ACL_STREAM_PERSISTENT | StreamFlag.ACL_STREAM_DEVICE_USE_ONLY
           | StreamFlag.ACL_STREAM_CPU_SCHEDULE)
"""Streams whose tasks are kept for a model, never run by themselves, so that their
synchronize returns at once (CANN's runtime; ``host/core/capture.py``)."""
PERSISTENT = _PERSISTENT
PERSISTENT_CACHE = 64
"""Most destroyed ``ACL_STREAM_PERSISTENT`` streams kept per device for reuse (the real
runtime keeps their resources in a global cache, to make creating streams cheaper)."""
_cache: weakref.WeakKeyDictionary[Link, list[tuple[int, int, int, int]]] = (
    weakref.WeakKeyDictionary())
"""Per link: (slot, sid, submitted, seen_errors) of destroyed persistent streams whose
worker-side stream is kept alive for the next ``create_stream``; guarded by the link's lock."""
_created_hooks: list[Callable[[Link], None]] = []
_closed_hooks: list[Callable[[Stream], None]] = []


_thread_ids = threading.local()


def _native_id() -> int:
    """The calling thread's native id, asked of the kernel once per thread (a syscall)."""
    try:
        tid: int = _thread_ids.tid
        return tid
    except AttributeError:
        tid = _thread_ids.tid = threading.get_native_id()
        return tid


def _forget_thread_id() -> None:
    _thread_ids.__dict__.clear()  # a forked child's thread has another id


os.register_at_fork(after_in_child=_forget_thread_id)


def on_stream_created(hook: Callable[[Link], None]) -> None:
    """Call ``hook(link)`` after each stream is created (``host/core/callbacks.py`` starts
    the link's report thread this way, so this module does not import it)."""
    _created_hooks.append(hook)


def on_stream_closed(hook: Callable[[Stream], None]) -> None:
    """Call ``hook(stream)`` when a stream is destroyed (``host/core/callbacks.py`` ends the
    stream's subscriptions this way)."""
    _closed_hooks.append(hook)


class Recorder(Protocol):
    """Where the tasks of a stream that does not run them go (``host/core/capture.py``: a
    capture or a model built by hand; ``UNBOUND``: a stream whose tasks are kept for a
    model it is not bound to)."""

    def task(self, stream: Stream, op: int, args: tuple[Any, ...]) -> int: ...
    def record(self, stream: Stream, event: Event) -> None: ...
    def wait(self, stream: Stream, event: Event) -> None: ...
    def refuse(self, stream: Stream, what: str) -> None: ...
    def refuse_event(self, event: Event, what: str) -> None: ...


class _Unbound:
    """Recorder of a PERSISTENT, DEVICE_USE_ONLY or CPU_SCHEDULE stream bound to no model
    (or bound with ACL_MODEL_STREAM_FLAG_DEFAULT, never activated here): its tasks are kept
    for a model in CANN's runtime and never run by themselves; here they are counted in the
    host log (DEBUG) and dropped. Nothing is refused."""

    def task(self, stream: Stream, op: int, args: tuple[Any, ...]) -> int:
        if op == _MODEL_EXECUTE:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"stream {stream.sid} keeps its tasks for a model: it "
                                   "cannot execute one")
        if plog.debug:
            plog.log(logring.DEBUG, f"task (op {op}) of stream {stream.sid} kept, not run: "
                                    f"its flags {stream.flags:#x} keep tasks for a model")
        return 0

    def record(self, stream: Stream, event: Event) -> None:
        self.task(stream, _RECORD, ())

    def wait(self, stream: Stream, event: Event) -> None:
        self.task(stream, int(Op.WAIT_EVENT), ())

    def refuse(self, stream: Stream, what: str) -> None:
        return None

    def refuse_event(self, event: Event, what: str) -> None:
        return None


UNBOUND: Recorder = _Unbound()
UNBOUND_IDLE: Recorder = _Unbound()  # bound with ACL_MODEL_STREAM_FLAG_DEFAULT


@dataclass(eq=False)
class Stream:
    """Host side of an ``aclrtStream``."""

    handle: int
    device: int
    link: Link
    slot: int
    sid: int
    priority: int
    flags: int
    submitted: int = 0
    seen_errors: int = 0
    destroyed: bool = False
    creator_tid: int = field(default_factory=lambda: _native_id())
    mode_set: bool = False  # set_failure_mode was called (then it is not cached for reuse)
    after: dict[Stream, int] = field(default_factory=dict)
    """Other streams' task numbers this stream's later tasks run after (event waits)."""
    recorder: Recorder | None = None
    """Not None: its tasks are recorded or kept, not sent (``host/core/capture.py``)."""

    def completed(self) -> int:
        return self.link.completed[self.slot]

    def done(self, target: int) -> bool:
        return self.link.completed[self.slot] >= target

    def hung(self) -> bool:
        """Its head task hangs (an injected fault)."""
        return bool(self.link.stream_hung[self.slot])


def done_or_hung(stream: Stream, target: int) -> Callable[[], bool]:
    """A ``wait_until`` condition: task ``target`` of ``stream`` is done, or its head task
    hangs (a hung task never completes: waits that must end give it up)."""
    return lambda: stream.done(target) or stream.hung()


@dataclass(eq=False)
class Event:
    """Host side of an ``aclrtEvent``: a slot in its device's event table."""

    handle: int
    device: int
    link: Link
    slot: int
    flags: int
    gen: int = 0  # records submitted so far
    destroyed: bool = False
    src: Stream | None = None  # the stream of the latest record, its task number and
    src_seq: int = 0  # what that stream followed then (``Stream.after``)
    src_after: dict[Stream, int] = field(default_factory=dict)
    capture: Any = None  # the capture.Recording its latest record belongs to, if any

    def done_gen(self) -> int:
        return self.link.event_done[self.slot]

    def complete(self) -> bool:
        return self.link.event_done[self.slot] >= self.gen


# streams ---------------------------------------------------------------------------------------
def create_stream(priority: int = 0, flags: int = 0) -> Stream:
    """Mirrors ``aclrtCreateStreamWithConfig`` (and ``aclrtCreateStream``). One round trip.
    Priority is clamped to 0..7 and recorded (it does not change scheduling). Flags:
    FAST_SYNC makes synchronize poll ~2 ms before sleeping; on PERSISTENT, DEVICE_USE_ONLY
    and CPU_SCHEDULE streams tasks are kept for a model (``aclmdlRIBindStream``), not run,
    so synchronize has nothing to wait for and returns at once, as in CANN's runtime;
    FAST_LAUNCH and HUGE are accepted for compatibility only (no effect: the submission path
    is the same for every stream); unknown bits are kept.
    207008 when the device's stream limit (``NPUEMU_MAX_STREAMS``, default 1024) is reached.
    A stream left in the cache by a destroyed PERSISTENT stream is reused without a round
    trip (the worker records but does not use priority and flags)."""
    rt = runtime.get()
    ctx = rt.current()
    link = rt.devices[ctx.device].link
    priority = min(max(index(priority, errors.ACL_ERROR_INVALID_PARAM, "priority"), 0), 7)
    flags = index(flags, errors.ACL_ERROR_INVALID_PARAM, "flag")
    with link.lock:
        cached = _cache.get(link)
        reuse = cached.pop() if cached else None
    if reuse is not None:
        slot, sid, submitted, seen = reuse
        return rt.register(Stream(0, ctx.device, link, slot, sid, priority, flags,
                                  submitted, seen, recorder=UNBOUND if flags & KEPT else None))
    pool = link.stream_slots
    slot = pool.take(errors.ACL_ERROR_RT_NO_STREAM_RESOURCE)
    try:
        (sid,) = link.call(Op.STREAM_CREATE, slot, priority, flags)
    except errors.AclError:
        pool.give(slot)
        raise
    for hook in _created_hooks:
        hook(link)
    if plog.debug:
        plog.log(logring.DEBUG, f"stream {sid} created on device {ctx.device}")
    return rt.register(Stream(0, ctx.device, link, slot, sid, priority, flags,
                              recorder=UNBOUND if flags & KEPT else None))


def streams_of(link: Link) -> list[Stream]:
    """This process's live streams on ``link``'s device (default streams included)."""
    return [h for h in list(runtime.get().handles.values())
            if isinstance(h, Stream) and h.link is link]


def resolve(handle: object, *, for_submit: bool = False) -> Stream:
    """The stream behind a handle; 0 (or None) is the current context's default stream.
    ``for_submit``: the stream must be on the calling thread's current device (107003)."""
    rt = runtime.get()
    if not handle:
        ctx = rt.current()
        if ctx.default_stream is None:
            ctx.default_stream = create_stream()
        return ctx.default_stream
    stream = rt.handles.get(handle) if type(handle) is int else None
    if type(stream) is not Stream or stream.destroyed:  # the checked path raises 107000
        stream = lookup(rt.handles, handle, Stream, "stream")
    if for_submit and stream.device != rt.current().device:
        raise errors.error_for(errors.ACL_ERROR_RT_STREAM_CONTEXT,
                               f"stream of device {stream.device} used from device "
                               f"{rt.current().device}")
    return stream


def submit(stream: Stream, op: int, *args: object) -> int:
    """Queue a task on ``stream``; returns its sequence number. Never waits for the device.
    The task is counted only once it is queued (107000 for an argument the wire cannot
    carry, e.g. an int >= 2**64, and the stream stays as it was). A stream that records or
    keeps its tasks (``Stream.recorder``) hands the task there: nothing is sent, 0 returned."""
    if stream.recorder is not None:
        return stream.recorder.task(stream, op, args)
    link = stream.link
    with link.lock:
        seq = stream.submitted + 1
        link.submit_locked([op, 0, stream.slot, seq, *args])  # a list: stamped in place
        stream.submitted = seq
    if plog.debug:
        plog.log(logring.DEBUG, f"task {seq} (op {op}) submitted to stream {stream.sid}")
    return seq


def synchronize_stream(handle: object, timeout_ms: int = -1) -> None:
    """Mirrors ``aclrtSynchronizeStream(WithTimeout)``: blocks (GIL released) until every task
    queued so far is done; then raises the stream's first unreported failure. -1 waits
    forever; 0 or < -1 is 107000; expiry is 507046."""
    wait_s = timeout_s(timeout_ms)
    stream = resolve(handle)
    if stream.recorder is not None:  # 107027 while it captures; kept tasks: nothing to wait
        stream.recorder.refuse(stream, "synchronize")
        return
    target = stream.submitted
    spin = FAST_SYNC_SPIN_S if stream.flags & _FAST_SYNC else SPIN_S
    if not stream.link.wait_until(lambda: stream.done(target), wait_s, spin, stream.slot):
        raise errors.error_for(errors.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                               f"stream {stream.sid}: {stream.completed()} of {target} tasks "
                               f"done after {timeout_ms} ms")
    raise_failure(stream)


def raise_failure(stream: Stream) -> None:
    """Raise the stream's latest failure if it was not reported yet."""
    count, code, task = stream.link.stream_failure(stream.slot)
    if count > stream.seen_errors:
        stream.seen_errors = count
        raise errors.error_for(code, f"stream {stream.sid}: task {task} failed")


def timeout_s(timeout_ms: object) -> float | None:
    ms = index(timeout_ms, errors.ACL_ERROR_RT_PARAM_INVALID, "timeout")
    if ms == -1:
        return None
    if ms <= 0:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"timeout {ms} ms: use -1 (forever) or a positive value")
    return ms / 1000


def stream_query(handle: object) -> int:
    """Mirrors ``aclrtStreamQuery``: COMPLETE (0) or NOT_READY (1); no round trip (107027
    while it captures)."""
    stream = resolve(handle)
    if stream.recorder is not None:
        stream.recorder.refuse(stream, "query")
    return _STREAM_COMPLETE if stream.done(stream.submitted) else _STREAM_NOT_READY


def destroy_stream(handle: object, force: bool = False) -> None:
    """Mirrors ``aclrtDestroyStream`` (waits for queued tasks, errors not raised) and, with
    ``force``, ``aclrtDestroyStreamForce`` (queued tasks are dropped)."""
    stream = resolve(handle)
    if not handle:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               "the default stream is destroyed with its context")
    if stream.recorder is not None:  # 107027 while it captures; a bound stream is unbound
        stream.recorder.refuse(stream, "destroy")
    if not force and not stream.done(target := stream.submitted):
        stream.link.wait_until(lambda: stream.done(target), None)
    close_stream(stream, force)


def _keep(stream: Stream) -> bool:
    """Put a destroyed PERSISTENT stream (idle, default failure mode) in its link's cache."""
    if not stream.flags & _PERSISTENT or stream.mode_set:
        return False
    link = stream.link
    if link.lost_detail or not stream.done(stream.submitted):  # a stream of a card found
        return False  # dead later fails at its first use, as any stream of that card
    errors_so_far = link.stream_failure(stream.slot)[0]
    with link.lock:
        cached = _cache.get(link)
        if cached is None:
            cached = _cache[link] = []
        if len(cached) >= PERSISTENT_CACHE:
            return False
        cached.append((stream.slot, stream.sid, stream.submitted, errors_so_far))
    return True


def close_stream(stream: Stream, force: bool = False) -> None:
    rt = runtime.get()
    with rt.lock:
        stream.destroyed = True
        rt.handles.pop(stream.handle, None)
    for hook in _closed_hooks:
        hook(stream)
    if plog.debug:
        plog.log(logring.DEBUG, f"stream {stream.sid} destroyed")
    if not force and _keep(stream):
        return
    if stream.link.alive():
        stream.link.call(Op.STREAM_DESTROY, stream.slot)
        stream.link.stream_slots.give(stream.slot)


def set_failure_mode(handle: object, mode: int) -> None:
    """Mirrors ``aclrtSetStreamFailureMode``: CONTINUE (0) or STOP (1) on failure."""
    mode = index(mode, errors.ACL_ERROR_INVALID_PARAM, "mode")
    if mode not in (StreamFailureMode.ACL_CONTINUE_ON_FAILURE,
                    StreamFailureMode.ACL_STOP_ON_FAILURE):
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, f"failure mode {mode}")
    stream = resolve(handle)
    stream.link.call(Op.STREAM_MODE, stream.slot, mode)
    stream.mode_set = True


def stream_abort(handle: object) -> None:
    """Mirrors ``aclrtStreamAbort``: queued tasks are dropped and a running kernel stops at
    its next block (a copy already under way finishes; its result is dropped)."""
    stream = resolve(handle)
    stream.link.call(Op.STREAM_ABORT, stream.slot)


def stream_get_id(handle: object) -> int:
    """Mirrors ``aclrtStreamGetId``: the device-wide stream id."""
    return resolve(handle).sid


# events ----------------------------------------------------------------------------------------
def create_event(flags: int = EventFlag.ACL_EVENT_TIME_LINE | EventFlag.ACL_EVENT_SYNC) -> Event:
    """Mirrors ``aclrtCreateEvent`` (the default event has a timestamp) and
    ``aclrtCreateEventWithFlag``. No round trip: the event is a slot of the device's table."""
    rt = runtime.get()
    ctx = rt.current()
    flags = index(flags, errors.ACL_ERROR_INVALID_PARAM, "flag")
    return _new_event(rt.devices[ctx.device].link, ctx.device, flags)


def _new_event(link: Link, device: int, flags: int) -> Event:
    slot = link.event_slots.take(errors.ACL_ERROR_RT_NO_EVENT_RESOURCE)
    link.clear_event(slot)  # the worker no longer writes a slot given back
    if plog.debug:
        plog.log(logring.DEBUG, f"event slot {slot} created on device {device}")
    return runtime.get().register(Event(0, device, link, slot, flags))


def event_of(handle: object) -> Event:
    return lookup(runtime.get().handles, handle, Event, "event")


def _same_device(event: Event, stream: Stream) -> None:
    if event.link is not stream.link:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"event of device {event.device} used with a stream of device "
                               f"{stream.device}")


def record_event(event_handle: object, stream_handle: object) -> None:
    """Mirrors ``aclrtRecordEvent``: queue a record on the stream (async, never waits for
    the device). The hot path of async submission: each handle is one dict read of the
    handle table; anything else (not an int, unknown, another kind, destroyed, 0 for the
    default stream) takes the checked path of ``event_of`` / ``resolve`` (107000)."""
    handles = runtime.get().handles
    event = handles.get(event_handle) if type(event_handle) is int else None
    if type(event) is not Event or event.destroyed:
        event = event_of(event_handle)
    stream = handles.get(stream_handle) if type(stream_handle) is int else None
    if type(stream) is not Stream or stream.destroyed:
        stream = resolve(stream_handle)
    link = stream.link
    if event.link is not link:
        _same_device(event, stream)
    if stream.recorder is not None:  # recorded in a capture or kept (host/core/capture.py)
        stream.recorder.record(stream, event)
        return
    with link.lock:
        seq, gen = stream.submitted + 1, event.gen + 1
        link.submit_locked([_RECORD, 0, stream.slot, seq, event.slot, gen])
        stream.submitted, event.gen = seq, gen
        event.src, event.src_seq, event.src_after = stream, seq, stream.after


def reset_event(event_handle: object, stream_handle: object) -> None:
    """Mirrors ``aclrtResetEvent``: queue a reset on the stream (async)."""
    event, stream = event_of(event_handle), resolve(stream_handle)
    _same_device(event, stream)
    if stream.recorder is not None:
        return  # a captured reset records nothing (the capture's events are fresh per replay)
    submit(stream, Op.RESET_EVENT, event.slot)
    event.gen, event.src = 0, None


def stream_wait_event(stream_handle: object, event_handle: object, timeout_ms: int = 0) -> None:
    """Mirrors ``aclrtStreamWaitEvent(WithTimeout)``: later tasks of the stream wait until the
    event's latest record completes (a failed record fails the wait with its code; an
    expired timeout fails it with 107019)."""
    event, stream = event_of(event_handle), resolve(stream_handle)
    _same_device(event, stream)
    timeout_ms = index(timeout_ms, errors.ACL_ERROR_RT_PARAM_INVALID, "timeout")
    recorder = stream.recorder or event.capture
    if recorder is not None and timeout_ms >= 0:  # a capture's wait, or a stream joining it
        recorder.wait(stream, event)
        return
    if event.gen and timeout_ms >= 0:
        submit(stream, Op.WAIT_EVENT, event.slot, event.gen, timeout_ms)
        if not timeout_ms and event.src is not None:  # a timed wait may go on without it
            stream.after = _followed(stream.after, event)
    elif timeout_ms < 0:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, f"timeout {timeout_ms}")


def _followed(after: dict[Stream, int], event: Event) -> dict[Stream, int]:
    """``after`` joined with what a wait on ``event`` orders: its record and all that the
    recording stream followed then (destroyed streams dropped: their tasks have all run, so
    the dict stays as small as the live streams it names)."""
    src = event.src
    assert src is not None  # the caller waits on a recorded event
    joined = {s: seq for s, seq in after.items() if not s.destroyed}
    for s, seq in ((*event.src_after.items(), (src, event.src_seq))):
        if not s.destroyed and joined.get(s, 0) < seq:
            joined[s] = seq
    return joined


def follows(stream: Stream, other: Stream, seq: int) -> bool:
    """Tasks queued on ``stream`` from now on run after task ``seq`` of ``other`` (the same
    stream, or an untimed wait on an event recorded there after it, maybe through others)."""
    return stream is other or stream.after.get(other, 0) >= seq


def order_after(stream: Stream, other: Stream) -> None:
    """Make ``stream``'s later tasks wait for every task queued on ``other`` so far: a
    record of an internal event on ``other`` and an untimed wait on ``stream`` (async; the
    event goes back once its record completed)."""
    event = _new_event(other.link, other.device, EventFlag.ACL_EVENT_SYNC)
    try:
        record_event(event.handle, other.handle)
        stream_wait_event(stream.handle, event.handle)
    finally:
        destroy_event(event.handle)


def settled_event(handle: object, what: str) -> Event:
    """The event behind ``handle`` for a query or synchronize: 107028 if its latest record
    belongs to an active capture."""
    event = event_of(handle)
    if event.capture is not None:
        event.capture.refuse_event(event, what)
    return event


def query_event(handle: object) -> int:
    """Mirrors ``aclrtQueryEvent``: COMPLETE (0) / NOT_READY (1); works from any device."""
    return _EVENT_COMPLETE if settled_event(handle, "query").complete() else _EVENT_NOT_READY


def query_event_status(handle: object) -> int:
    """Mirrors ``aclrtQueryEventStatus``: COMPLETE (1) / NOT_READY (0)."""
    done = settled_event(handle, "query").complete()
    return (EventRecordedStatus.ACL_EVENT_RECORDED_STATUS_COMPLETE if done
            else EventRecordedStatus.ACL_EVENT_RECORDED_STATUS_NOT_READY)


def synchronize_event(handle: object, timeout_ms: int = -1) -> None:
    """Mirrors ``aclrtSynchronizeEvent(WithTimeout)``: blocks until the latest record is done;
    expiry is 507047; a record that carries a failure raises it."""
    wait_s = timeout_s(timeout_ms)
    event = settled_event(handle, "synchronize")
    gen = event.gen
    if not event.link.wait_until(lambda: event.done_gen() >= gen, wait_s):
        raise errors.error_for(errors.ACL_ERROR_RT_EVENT_SYNC_TIMEOUT,
                               f"event not complete after {timeout_ms} ms")
    if gen and (code := event.link.event_error[event.slot]):
        raise errors.error_for(code, "work before the event failed")


def _timestamp_ns(event: Event) -> int:
    if not event.flags & _TIMED:
        raise errors.error_for(errors.ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID,
                               "event was created without ACL_EVENT_TIME_LINE")
    if not event.gen:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, "event was never recorded")
    if not event.complete():
        raise errors.error_for(errors.ACL_ERROR_RT_EVENT_NOT_COMPLETE, "event not complete yet")
    return event.link.event_stamp[event.slot]


def event_elapsed_time(start: object, end: object) -> float:
    """Mirrors ``aclrtEventElapsedTime``: milliseconds between two completed records."""
    t0 = _timestamp_ns(settled_event(start, "elapsed time"))
    t1 = _timestamp_ns(settled_event(end, "elapsed time"))
    if t1 < t0:
        raise errors.error_for(errors.ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL,
                               "end event completed before start event")
    return (t1 - t0) / 1e6


def event_get_timestamp(handle: object) -> int:
    """Mirrors ``aclrtEventGetTimestamp``: microseconds since the device booted."""
    return _timestamp_ns(settled_event(handle, "timestamp")) // 1000


def destroy_event(handle: object) -> None:
    """Mirrors ``aclrtDestroyEvent``: allowed while a record is pending; the slot is reused
    only after that record completes."""
    event = event_of(handle)
    rt = runtime.get()
    with rt.lock:
        event.destroyed = True
        rt.handles.pop(event.handle, None)
    if plog.debug:
        plog.log(logring.DEBUG, f"event slot {event.slot} destroyed")
    pool = event.link.event_slots
    if event.complete() or not event.link.alive():
        pool.give(event.slot)
    else:
        pool.give_when(event.complete, event.slot)
