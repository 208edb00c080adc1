"""Model runtime instances (``aclmdlRI``): stream capture and models built by hand on
persistent streams, registered on the card as one task list and replayed as one task.

Capture (``aclmdlRICaptureBegin`` / ``CaptureEnd``): from the begin on, the tasks queued on
the stream (kernels, op launches, async copies, memsets, event records and waits) are
recorded, not sent; a stream that waits on an event recorded in the capture joins it (its
later tasks are recorded too, as a stream of the instance), and must be joined back: its
last task an event record that a stream of the capture waits for (107025 at the end
otherwise). At the end the recorded list goes to the card (``MODEL_LOAD``: a task list with
no inputs or outputs, ``device/exec/model.py`` and ``graph.py``) and every stream of the
capture runs eagerly again. A replay (``aclmdlRIExecuteAsync``) is one ``MODEL_EXECUTE``
task on the caller's stream: every step, its streams on their own card threads ordered by
the capture's events; the first failing step fails the replay with its code; abort, reset,
the execution timeout cancel it as any model task. An event recorded in the capture is
recorded at its place in every replay (its last record in the capture: a record step,
``device/exec/graph.py``), so a stream outside the capture, or a host synchronize, that
waits on it goes on when the steps before that record are done, as in CANN's runtime; a
replay that fails or is cancelled first completes it with the replay's code.

Host callbacks (``aclrtLaunchCallback``, ``aclrtLaunchHostFunc``) queued on a capturing
stream are steps too (``callbacks.keep``): at each replay the card reports the callback when
the replay reaches it, so it runs on the thread subscribed to the stream it was captured on
(or the runtime's thread for a host function), in order with the other steps; a blocking one
holds the replay until it returned (``device/exec/graph.py``).

What CANN's runtime refuses while a stream captures, with its codes: synchronize, query or
destroy of a capturing stream, and a model execute on it, 107027; query, synchronize,
elapsed time or timestamp of an event recorded in an active capture, 107028; an async copy
of pageable host memory on a capturing stream, 107000; a synchronous copy or memset (and
an async copy of pageable memory, which turns synchronous: 107041) while the capture modes
forbid it (below), 107030. None of these invalidates the capture (as in CANN's runtime
sources). What invalidates it: a wait on an event recorded outside the capture
(107024) or a collective (207000: not recordable here); every
later task of the capture is then 507903, and the end returns 507903 and no instance.

Capture modes (``aclmdlRICaptureMode``, with CANN's rule): while any capture in
GLOBAL mode is active, or the calling thread began one in THREAD_LOCAL mode, a thread whose
own mode (``aclmdlRICaptureThreadExchangeMode``, GLOBAL by default) is GLOBAL may not call
the unsafe functions above; a thread whose mode is THREAD_LOCAL may not while it began a
GLOBAL or THREAD_LOCAL capture itself; RELAXED threads always may. The end of a GLOBAL or
THREAD_LOCAL capture must come from the thread that began it (107038). CANN's runtime
counts captures per context; here they are counted per process.

Models built by hand on persistent streams record through the same ``Recording``
(``model_ri.py``: binding, execute, destroy, inspect, and what is not emulated). An event
reset inside a capture records nothing (the capture's events are fresh at each replay).

Threading model: any thread may use any instance. ``lock`` guards the mode counts and
every instance's recording state (``Recording.rows``, ``lanes``, ``events``, ``status``)
and the ``recorder`` / ``capture`` fields it sets on streams and events (read without the
lock on the submit path: a reader sees the old or the new object, both consistent).
``Recording.pending`` is written under ``lock`` by the submitting thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from npuemu.host.core import callbacks, plog, runtime
from npuemu.host.core import stream as streams
from npuemu.host.core.runtime import index, lookup
from npuemu.host.core.stream import Event, Stream
from npuemu.host.driver.interface import Link
from npuemu.shared import errors, logring, protocol
from npuemu.shared.enums import CaptureMode, CaptureStatus, ModelStreamFlag
from npuemu.shared.protocol import Op

_GLOBAL, _THREAD_LOCAL, _RELAXED = (int(m) for m in CaptureMode)
_ACTIVE = int(CaptureStatus.ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE)
_INVALIDATED = int(CaptureStatus.ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED)
_NONE = int(CaptureStatus.ACL_MODEL_RI_CAPTURE_STATUS_NONE)
_HEAD = int(ModelStreamFlag.ACL_MODEL_STREAM_FLAG_HEAD)
_DEFAULT = int(ModelStreamFlag.ACL_MODEL_STREAM_FLAG_DEFAULT)
_LAUNCH, _COPY, _MEMSET = int(Op.LAUNCH), int(Op.COPY_ASYNC), int(Op.MEMSET_ASYNC)
_CALLBACK, _COLLECTIVE, _RECORD = int(Op.CALLBACK), int(Op.COLLECTIVE), int(Op.RECORD)
_CHUNK_BYTES = 128 * 1024
"""``MODEL_LOAD`` frames stay well below the ring's frame limit."""

lock = threading.Lock()
_active = [0, 0, 0]  # active captures per mode
ACTIVE = _active
"""The same list, read by ``memory.small_copy``: while all three are 0, ``check_mode`` has
nothing to check (the short path skips the call)."""
_thread_modes: dict[int, list[int]] = {}  # native thread id -> modes of captures it began
_exchange = threading.local()  # .mode: this thread's mode (aclmdlRICaptureThreadExchangeMode)


@dataclass(eq=False)
class Recording:
    """Host side of an ``aclmdlRI``: the recorded task list and what it runs on."""

    handle: int
    device: int
    link: Link
    captured: bool  # a stream capture (else built by hand)
    origin: Stream | None = None
    mode: int = _GLOBAL
    thread: int = 0
    status: int = _ACTIVE  # ACTIVE while recording, NONE once registered, or INVALIDATED
    code: int = 0  # what invalidated it
    rows: list[list[Any]] = field(default_factory=list)  # MODEL_LOAD steps, in submission order
    lanes: dict[Stream, int] = field(default_factory=dict)
    idle: set[Stream] = field(default_factory=set)  # bound DEFAULT streams: never run
    ended: set[Stream] = field(default_factory=set)  # head streams that had their EndTask
    events: dict[Event, int] = field(default_factory=dict)  # event -> id of its last record
    waited: set[int] = field(default_factory=set)
    next_event: int = 0  # the last event id given to a record
    card_id: int = 0
    pending: dict[Stream, int] = field(default_factory=dict)  # replays queued, per stream
    name: str = ""
    replays: int = 0
    destroyed: bool = False
    callbacks: list[int] = field(default_factory=list)  # kept callback ids (callbacks.py)
    host_events: list[Event] = field(default_factory=list)  # record steps' events, by input

    # the stream hooks (``stream.Recorder``) ---------------------------------------------
    def task(self, stream: Stream, op: int, args: tuple[Any, ...]) -> int:
        """Record one task of ``stream`` (it is not sent); returns 0 (no sequence number)."""
        with lock:
            self._usable(stream)
            if op == _LAUNCH:
                bin_id, name, blocks, values = args
                row = [self.lanes[stream], bin_id, name, blocks, list(values), [], [], []]
            elif op in (_COPY, _MEMSET):
                row = [self.lanes[stream], op, list(args), [], []]
            elif op == _CALLBACK:
                cb_id, block = args
                callbacks.keep(cb_id)
                self.callbacks.append(cb_id)
                row = [self.lanes[stream], op, [cb_id, block, stream.slot], [], []]
            elif op == Op.MODEL_EXECUTE:
                raise errors.error_for(errors.ACL_ERROR_RT_STREAM_CAPTURED,
                                       f"stream {stream.sid}: a model execute while capturing")
            else:
                what = "a collective" if op == _COLLECTIVE else f"task op {op}"
                self._invalidate(errors.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                                 f"{what} cannot be recorded in a model runtime instance")
            self.rows.append(row)
        return 0

    def record(self, stream: Stream, event: Event) -> None:
        """``aclrtRecordEvent`` on a recording stream: a step that records a fresh id."""
        with lock:
            self._usable(stream)
            self.next_event = ev = self.next_event + 1
            self.events[event] = ev
            event.capture = self
            self.rows.append([self.lanes[stream], 0, "", 0, [], [], [], [ev]])

    def wait(self, stream: Stream, event: Event) -> None:
        """``aclrtStreamWaitEvent`` where the stream or the event belongs to this instance:
        a step that waits for the event's last record here (the stream joins a capture)."""
        with lock:
            ev = self.events.get(event) if event.capture is self else None
            if ev is None:
                if not event.gen and event.capture is None:
                    return  # an event never recorded: nothing to wait for, as eagerly
                self._invalidate(errors.ACL_ERROR_RT_CAPTURE_DEPENDENCY,
                                 f"stream {stream.sid} waits on an event recorded outside "
                                 "the instance")
            if stream not in self.lanes:
                self._join(stream)
            self._usable(stream)
            self.waited.add(ev)
            self.rows.append([self.lanes[stream], 0, "", 0, [], [], [ev], []])

    def refuse(self, stream: Stream, what: str) -> None:
        """Raise for what a capturing stream may not do (107027); a stream bound by hand
        that is destroyed leaves its instance."""
        if self.captured and self.status != _NONE:
            raise errors.error_for(errors.ACL_ERROR_RT_STREAM_CAPTURED,
                                   f"stream {stream.sid}: {what} while it captures")
        if what == "destroy":
            with lock:
                stream.recorder = streams.UNBOUND
                self.lanes.pop(stream, None)

    def refuse_event(self, event: Event, what: str) -> None:
        """Raise 107028 for a query or synchronize of an event recorded in an active capture."""
        if self.captured and self.status != _NONE:
            raise errors.error_for(errors.ACL_ERROR_RT_EVENT_CAPTURED,
                                   f"{what} of an event recorded in a capture")

    # helpers (under _lock) ----------------------------------------------------------------
    def _usable(self, stream: Stream) -> None:
        if self.status == _INVALIDATED:
            raise errors.error_for(errors.ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED,
                                   f"the capture was invalidated: {errors.name_of(self.code)}")
        if self.status != _ACTIVE or stream in self.ended:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"stream {stream.sid}: its model runtime instance is built")

    def _join(self, stream: Stream) -> None:
        if not self.captured or stream.recorder is not None or stream.link is not self.link:
            self._invalidate(errors.ACL_ERROR_RT_CAPTURE_DEPENDENCY,
                             f"stream {stream.sid} cannot join the instance")
        self.lanes[stream] = len(self.lanes)
        stream.recorder = self

    def _invalidate(self, code: int, detail: str) -> NoReturn:
        """Invalidate a capture (a build keeps going) and raise ``code``."""
        if self.captured and self.status == _ACTIVE:
            self.status, self.code = _INVALIDATED, code
            plog.log(logring.ERROR, f"capture of model runtime instance {self.handle} "
                                    f"invalidated: {detail}")
        raise errors.error_for(code, detail)

    def _release_streams(self) -> None:
        """Every stream of the instance runs eagerly again; its events are plain again."""
        for stream in self.lanes:
            if stream.recorder is self:
                stream.recorder = streams.UNBOUND if stream.flags & streams.KEPT else None
        for stream in self.idle:
            if stream.recorder is self:
                stream.recorder = streams.UNBOUND
        for event in self.events:
            if event.capture is self:
                event.capture = None


# modes -----------------------------------------------------------------------------------------
def _mode(value: object) -> int:
    mode = index(value, errors.ACL_ERROR_RT_PARAM_INVALID, "capture mode")
    if mode not in (_GLOBAL, _THREAD_LOCAL, _RELAXED):
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, f"capture mode {mode}")
    return mode


def thread_exchange_mode(mode: object) -> int:
    """Mirrors ``aclmdlRICaptureThreadExchangeMode``: set the calling thread's mode, return
    the one it had (GLOBAL at first). Non-blocking."""
    new = _mode(mode)
    old: int = getattr(_exchange, "mode", _GLOBAL)
    _exchange.mode = new
    return old


def check_mode(what: str, code: int = errors.ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT) -> None:
    """Raise ``code`` (107030, or 107041 for an async call that turns synchronous) if the
    capture modes forbid the calling thread ``what`` (module docstring)."""
    if not any(_active):
        return
    mine: int = getattr(_exchange, "mode", _GLOBAL)
    if mine == _RELAXED:
        return
    with lock:
        begun = min(_thread_modes.get(threading.get_native_id(), ()), default=_RELAXED + 1)
        anywhere = next((m for m, n in enumerate(_active) if n), _RELAXED + 1)
    if (mine == _GLOBAL and (anywhere == _GLOBAL or begun == _THREAD_LOCAL)) or (
            mine == _THREAD_LOCAL and begun in (_GLOBAL, _THREAD_LOCAL)):
        raise errors.error_for(code, f"{what} while a stream captures (mode "
                                     f"{CaptureMode(min(anywhere, begun)).name}); call "
                                     "aclmdlRICaptureThreadExchangeMode for RELAXED first")


# capture -----------------------------------------------------------------------------------------
def capture_begin(stream_handle: object, mode: object) -> None:
    """Mirrors ``aclmdlRICaptureBegin``: the stream's tasks are recorded from now on.
    107027 if it captures already; 107000 for a stream whose tasks are kept for a model
    (PERSISTENT, DEVICE_USE_ONLY, CPU_SCHEDULE) or a bad mode; 100000 for no stream."""
    if not stream_handle:
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, "aclmdlRICaptureBegin: no stream")
    mode_ = _mode(mode)
    stream = streams.resolve(stream_handle, for_submit=True)
    if stream.flags & streams.KEPT:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"stream {stream.sid}: its flags {stream.flags:#x} keep its "
                               "tasks for a model; it cannot be captured")
    rec = new_recording(True, stream, mode_)
    tid = rec.thread
    with lock:
        if stream.recorder is not None:
            rec.destroyed = True
            runtime.get().handles.pop(rec.handle, None)
            raise errors.error_for(errors.ACL_ERROR_RT_STREAM_CAPTURED,
                                   f"stream {stream.sid} captures already")
        rec.lanes[stream] = 0
        stream.recorder = rec
        _active[mode_] += 1
        _thread_modes.setdefault(tid, []).append(mode_)


def capture_get_info(stream_handle: object) -> tuple[int, int]:
    """Mirrors ``aclmdlRICaptureGetInfo``: (status, instance handle or 0). Non-blocking."""
    if not stream_handle:
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, "aclmdlRICaptureGetInfo: no stream")
    stream = streams.resolve(stream_handle)
    rec = stream.recorder
    if not isinstance(rec, Recording) or not rec.captured or rec.status == _NONE:
        return _NONE, 0
    return rec.status, rec.handle


def capture_end(stream_handle: object) -> int:
    """Mirrors ``aclmdlRICaptureEnd``: end the capture begun on this stream, register the
    recorded list on the card (blocks for its replies) and return the instance. 107029 if
    the stream does not capture, 107036 if the capture was begun on another stream, 107038
    from another thread (GLOBAL, THREAD_LOCAL), 507903 if it was invalidated, 107025 if a
    joined stream was not joined back; the capture is over after any of the last three."""
    if not stream_handle:
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, "aclmdlRICaptureEnd: no stream")
    stream = streams.resolve(stream_handle)
    rec = stream.recorder
    if not isinstance(rec, Recording) or not rec.captured or rec.status == _NONE:
        raise errors.error_for(errors.ACL_ERROR_RT_STREAM_NOT_CAPTURED,
                               f"stream {stream.sid} does not capture")
    if rec.origin is not stream:
        raise errors.error_for(errors.ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED,
                               f"the capture was begun on stream {rec.origin and rec.origin.sid}")
    with lock:
        _leave(rec)
        failure = _end_failure(rec)
        rec.status = _NONE if not failure else _INVALIDATED
    if failure:
        destroy_recording(rec)
        raise errors.error_for(*failure)
    try:
        register(rec)
    except errors.AclError:
        destroy_recording(rec)
        raise
    return rec.handle


def _leave(rec: Recording) -> None:
    """The capture's mode no longer counts; its streams run eagerly again (under ``lock``)."""
    _active[rec.mode] -= 1
    modes = _thread_modes.get(rec.thread, [])
    modes.remove(rec.mode)
    if not modes:
        _thread_modes.pop(rec.thread, None)
    rec._release_streams()


def _device_closed(link: Link) -> None:
    """The captures under way on a device this process releases (``aclrtResetDevice``) are
    dropped with it, so their modes stop forbidding anything."""
    for rec in [h for h in list(runtime.get().handles.values())
                if isinstance(h, Recording) and h.link is link]:
        if rec.captured and rec.status != _NONE:
            with lock:
                _leave(rec)
                rec.status = _INVALIDATED
        destroy_recording(rec)


runtime.on_close_device(_device_closed)


def _end_failure(rec: Recording) -> tuple[int, str] | None:
    """Why the capture ends without an instance (code, detail), or None."""
    if rec.mode != _RELAXED and rec.thread != threading.get_native_id():
        return (errors.ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD,
                "the capture was begun by another thread")
    if rec.status == _INVALIDATED:
        return (errors.ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED,
                f"the capture was invalidated: {errors.name_of(rec.code)}")
    for stream, lane in rec.lanes.items():
        mine = [row for row in rec.rows if row[0] == lane]
        if lane and not (mine and len(mine[-1]) == 8 and mine[-1][7]
                         and mine[-1][7][0] in rec.waited):
            return (errors.ACL_ERROR_RT_STREAM_UNJOINED,
                    f"stream {stream.sid} was not joined back to the origin stream: its last "
                    "task must be an event record that a captured stream waits for")
    return None


def register(rec: Recording) -> None:
    """Send the task list to the card (``MODEL_LOAD`` frames of at most ``_CHUNK_BYTES``;
    blocks for the replies): the last record of each event becomes a record step of the
    event's slot, whose generation is the replay's input of the event's index."""
    rec.host_events = list(rec.events)
    last = {rec.events[event]: i for i, event in enumerate(rec.host_events)}
    rows = [_record_step(row, rec.host_events, last) for row in rec.rows if row[0] != -1]
    n_events = len(rec.host_events)
    for chunk in _chunks(rows):
        (rec.card_id,) = rec.link.call(Op.MODEL_LOAD, rec.card_id, n_events, 0, chunk)
    if plog.debug:
        plog.log(logring.DEBUG, f"model runtime instance {rec.handle}: {len(rows)} tasks "
                                f"registered as card task list {rec.card_id}")


def _record_step(row: list[Any], events: list[Event], last: dict[int, int]) -> list[Any]:
    """``row``, or the record step (``[stream, RECORD, [slot, input, 0], [], [id]]``) that
    replaces an event's last record in the instance."""
    if len(row) == 8 and not row[2] and row[7] and row[7][0] in last:
        i = last[row[7][0]]
        return [row[0], _RECORD, [events[i].slot, i, 0], row[6], row[7]]
    return row


def _chunks(rows: list[list[Any]]) -> list[list[list[Any]]]:
    """``rows`` in runs whose frames stay within ``_CHUNK_BYTES`` (halved until they fit;
    at least one run, maybe empty)."""
    if len(rows) <= 1 or len(protocol.pack(rows)) <= _CHUNK_BYTES:
        return [rows]
    half = len(rows) // 2
    return _chunks(rows[:half]) + _chunks(rows[half:])


def done_cond(stream: Stream, seq: int) -> Callable[[], bool]:
    return lambda: stream.done(seq)


def destroy_recording(rec: Recording) -> None:
    rt = runtime.get()
    with rt.lock:
        if rec.destroyed:
            return
        rec.destroyed = True
        rt.handles.pop(rec.handle, None)
    callbacks.release(rec.callbacks)
    with lock:
        rec._release_streams()
        for stream in rec.idle | set(rec.lanes):
            if stream.recorder is rec or stream.recorder is streams.UNBOUND_IDLE:
                stream.recorder = streams.UNBOUND
    if rec.card_id and rec.link.alive():
        try:
            rec.link.call(Op.MODEL_UNLOAD, rec.card_id)
        except errors.AclError as err:  # a card reset dropped the list with the client
            plog.log(logring.WARNING, f"model runtime instance {rec.handle}: {err}")




def new_recording(captured: bool, origin: Stream | None = None, mode: int = _GLOBAL) -> Recording:
    """A new instance on the current device (a capture of ``origin``, or built by hand)."""
    rt = runtime.get()
    ctx = rt.current()
    return rt.register(Recording(0, ctx.device, rt.devices[ctx.device].link, captured, origin,
                                 mode, threading.get_native_id()))


def get(handle: object) -> Recording:
    return lookup(runtime.get().handles, handle, Recording, "model runtime instance")
