"""Host callbacks and exception callbacks, served by one report thread per device link.

The worker pushes a report on the link's report ring when a stream reaches a host callback
task or when a task fails. The report thread (started with the link's first stream):

- hands ``launch_host_func`` callbacks (``aclrtLaunchHostFunc``: the runtime's own
  threads) to a thread of their stream, which runs them in order and releases the stream;
- hands ``launch_callback`` callbacks (``aclrtLaunchCallback``) to the thread subscribed to
  the stream, which runs them in ``process_report``; with ``ACL_CALLBACK_BLOCK`` the stream
  waits until the callback returned;
- calls every registered exception callback with an ``aclrtExceptionInfo`` handle, readable
  with the ``get_*_from_exception_info`` getters while the callback runs.

Threads are named by their pthread id, i.e. Python's ``threading.get_ident()`` /
``Thread.ident`` (what ``acl.util.start_thread`` returns), as pyACL does. A subscription
ends with its stream (destroyed, or its device reset): a thread blocked in
``process_report`` then wakes and, with nothing left to serve, gets 107012.

A callback queued on a capturing stream is kept (``keep``) for the instance's replays: each
replay's report of it runs it again, as the stream task's report does, until ``release``.

Threading model: ``_lock`` guards every module-level table (``_pending``, ``_kept``,
``_subscribers``, ``_queues``, ``_threads``, ``_infos`` and both callback lists); nothing
walks or mutates them outside it, and no callback runs while it is held (lists are copied
under the lock, then run).
Threads: one report thread per link (``_serve``: owns popping the link's report ring), one
thread per stream for ``launch_host_func`` callbacks (owns that stream's queue), and the
user's subscribed threads, each of which alone consumes its own ``_queues`` entry in
``process_report``. The report thread only puts to those queues.
"""

from __future__ import annotations

import itertools
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from npuemu.host.core import runtime
from npuemu.host.core.stream import (
    Stream,
    on_stream_closed,
    on_stream_created,
    resolve,
    streams_of,
    submit,
)
from npuemu.host.driver.interface import Link
from npuemu.shared import errors
from npuemu.shared.enums import CallbackBlockType
from npuemu.shared.protocol import Frame, Op, Report

POLL_S = 0.1
INVALID = 0xFFFFFFFF


@dataclass(frozen=True)
class ExceptionInfo:
    """``aclrtExceptionInfo``: what a failed task reports."""

    task_id: int
    stream_id: int
    thread_id: int
    device_id: int
    error_code: int


class ThreadLike(Protocol):
    """A thread that may subscribe: a ``threading.Thread``, or a thread Python did not start
    that a ``_thread_finders`` entry found (``host/capi``'s C threads)."""

    @property
    def ident(self) -> int | None: ...
    def is_alive(self) -> bool: ...


Callback = Callable[[Any], Any]
_HostFunc = tuple[Callback | None, Any, int]  # fn, args, task seq: one host-func queue entry
_Due = tuple[Link, int, int, Callback | None, Any, int]  # link, slot, seq, fn, args, block

_lock = threading.Lock()
_ids = itertools.count(1)
_exception_callbacks: list[Callable[[int], Any]] = []
_legacy_callback: list[Callable[[int], Any]] = []  # set_exception_info_callback: 0 or 1 item
_infos: dict[int, ExceptionInfo] = {}
_pending: dict[int, tuple[str, Callback, Any]] = {}
_kept: dict[int, tuple[str, Callback, Any]] = {}  # callbacks of model runtime instances
_subscribers: dict[Stream, int] = {}
_queues: dict[int, queue.SimpleQueue[_Due | None]] = {}  # None: _WAKE
_threads: dict[int, ThreadLike] = {}  # subscribed ident -> its thread


# the report thread ---------------------------------------------------------------------------
def ensure_reporter(link: Link) -> None:
    """Start ``link``'s report thread once."""
    with _lock:
        if link.reporter is None:
            link.reporter = threading.Thread(target=_serve, args=(link,), daemon=True,
                                             name=f"npuemu-reports-d{link.dev}")
            link.reporter.start()


on_stream_created(ensure_reporter)  # every link with a stream drains its report ring


def _serve(link: Link) -> None:
    while not link.closing and link.alive():
        try:
            report = link.pop_report(POLL_S)
        except (ValueError, AttributeError):  # the link was closed under us
            return
        if report is not None:
            _dispatch(link, report)


def _dispatch(link: Link, report: Frame) -> None:
    kind, slot, seq = report[0], report[1], report[2]
    if kind == Report.EXCEPTION:
        code, sid = report[3], report[4]
        _raise_exception(ExceptionInfo(seq, sid, _thread_of(link, slot), link.logical, code))
    elif kind == Report.CALLBACK:
        cb_id, block = report[3], report[4]
        with _lock:
            entry = _pending.pop(cb_id, None) or _kept.get(cb_id)
        style, fn, args = entry if entry is not None else ("", None, None)
        if style == "host_func":
            _host_func_queue(link, slot).put((fn, args, seq))
        elif style == "callback":
            with _lock:
                tid = next((t for s, t in _subscribers.items()
                            if s.link is link and s.slot == slot and not s.destroyed), None)
                q = _queues.get(tid) if tid is not None else None
                thread = _threads.get(tid) if tid is not None else None
            if q is None or thread is None or not thread.is_alive():
                # unsubscribed meanwhile, or its thread has ended: run it here rather than
                # hang the stream (on hardware nobody would run it)
                _run(fn, args)
                if block:
                    link.post(Op.CALLBACK_DONE, slot, seq)
            else:
                q.put((link, slot, seq, fn, args, block))


def _host_func_queue(link: Link, slot: int) -> queue.SimpleQueue[_HostFunc]:
    """The queue of the thread that runs ``launch_host_func`` callbacks of one stream: each
    stream gets its own thread, so a callback that blocks holds only its own stream."""
    q: queue.SimpleQueue[_HostFunc] | None = link.host_func_queues.get(slot)
    if q is None:
        q = link.host_func_queues[slot] = queue.SimpleQueue()
        threading.Thread(target=_run_host_funcs, args=(link, slot, q), daemon=True,
                         name=f"npuemu-hostfunc-d{link.dev}-s{slot}").start()
    return q


def _run_host_funcs(link: Link, slot: int, q: queue.SimpleQueue[_HostFunc]) -> None:
    while not link.closing:
        try:
            fn, args, seq = q.get(timeout=POLL_S)
        except queue.Empty:
            continue
        _run(fn, args)
        if link.alive():
            link.post(Op.CALLBACK_DONE, slot, seq)


def _thread_of(link: Link, slot: int) -> int:
    return next((s.creator_tid for s in streams_of(link) if s.slot == slot), 0)


def _run(fn: Callback | None, args: Any) -> None:
    if fn is None:
        return
    try:
        fn(args)
    except Exception:
        traceback.print_exc(file=sys.stderr)


def _raise_exception(info: ExceptionInfo) -> None:
    key = next(_ids)
    with _lock:
        _infos[key] = info
        targets = [*_legacy_callback, *_exception_callbacks]
    try:
        for fn in targets:
            _run(fn, key)
    finally:
        with _lock:
            del _infos[key]


# exception callbacks -------------------------------------------------------------------------
def set_exception_info_callback(fn: Callable[[int], Any] | None) -> None:
    """Mirrors ``aclrtSetExceptionInfoCallback`` (one process-wide callback; None clears)."""
    with _lock:
        _legacy_callback[:] = [] if fn is None else [fn]


def exception_info_callback_register(fn: Callable[[int], Any]) -> None:
    """Mirrors ``aclrtExceptionInfoCallbackRegister`` (None: 107000)."""
    if fn is None or not callable(fn):
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, "callback must be callable")
    with _lock:
        _exception_callbacks.append(fn)


def exception_info_callback_unregister(fn: Callable[[int], Any]) -> None:
    """Mirrors ``aclrtExceptionInfoCallbackUnregister``."""
    with _lock:
        if fn not in _exception_callbacks:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, "callback not registered")
        _exception_callbacks.remove(fn)


def info_field(info: object, name: str) -> int:
    """The ``aclrtGet*FromExceptionInfo`` getters: 0xFFFFFFFF for an invalid info."""
    with _lock:
        found = _infos.get(info) if type(info) is int else None
    return INVALID if found is None else getattr(found, name)


# host callbacks ------------------------------------------------------------------------------
_WAKE = None
"""Put on a thread's queue when one of its subscriptions ends, so process_report re-checks."""
WAIT_SLICE_S = 1.0
"""process_report re-checks its subscriptions at least this often (a missed wake-up costs
this much, never a hang)."""
_PTHREAD_LIMIT = 1 << 64


def _thread_of_id(thread_id: object) -> ThreadLike:
    """The live thread named by ``thread_id`` (its ``Thread.ident``, the
    pthread id pyACL uses; the kernel id ``native_id`` is accepted too). 107000 otherwise:
    our choice; hardware takes any ``uint64`` and never serves a bogus id."""
    tid = runtime.index(thread_id, errors.ACL_ERROR_RT_PARAM_INVALID, "thread id")
    if not 0 < tid < _PTHREAD_LIMIT:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, f"thread id {tid} is invalid")
    for thread in threading.enumerate():
        if tid in (thread.ident, thread.native_id):
            return thread
    for find in _thread_finders:  # threads Python does not know (the C ABI's C threads)
        found = find(tid)
        if found is not None:
            return found
    raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                           f"thread id {tid} is not a live thread of this process")


_thread_finders: list[Callable[[int], ThreadLike | None]] = []
"""``find(tid)`` -> an object with ``ident`` and ``is_alive()``, or None: threads not started
by Python that may subscribe (``host/capi``'s C threads). Appended once at import."""


def add_thread_finder(find: Callable[[int], ThreadLike | None]) -> None:
    """Let ``subscribe_report`` name threads Python has not seen (see ``_thread_finders``)."""
    _thread_finders.append(find)


def _prune_locked() -> None:
    """Drop subscriptions whose stream has ended and wake their threads (``_lock`` held)."""
    for stream in [s for s in _subscribers if s.destroyed]:
        tid = _subscribers.pop(stream)
        q = _queues.get(tid)
        if q is not None:
            q.put(_WAKE)


def subscribe_report(thread_id: int, stream_handle: object) -> None:
    """Mirrors ``aclrtSubscribeReport``: ``thread_id`` (a pthread id, ``Thread.ident``) will
    run the stream's callbacks. 100033 if the stream already has a subscriber; 107000 for an
    id that names no live thread."""
    thread = _thread_of_id(thread_id)
    tid = thread.ident
    assert tid is not None
    stream = resolve(stream_handle)
    with _lock:
        _prune_locked()
        if stream in _subscribers:
            raise errors.error_for(errors.ACL_ERROR_REPEAT_SUBSCRIBE,
                                   f"stream {stream.sid} already has a subscriber")
        _subscribers[stream] = tid
        _queues.setdefault(tid, queue.SimpleQueue())
        _threads[tid] = thread
    ensure_reporter(stream.link)


def unsubscribe_report(thread_id: int, stream_handle: object) -> None:
    """Mirrors ``aclrtUnSubscribeReport``."""
    tid = runtime.index(thread_id, errors.ACL_ERROR_RT_PARAM_INVALID, "thread id")
    stream = resolve(stream_handle)
    with _lock:
        owner = _subscribers.get(stream)
        if owner is None or tid not in (owner, _native_of(owner)):
            raise errors.error_for(errors.ACL_ERROR_RT_STREAM_SUBSCRIBE,
                                   f"thread {tid} is not subscribed to stream {stream.sid}")
        del _subscribers[stream]
        q = _queues.get(owner)
    if q is not None:
        q.put(_WAKE)


def _native_of(ident: int) -> int | None:
    return next((t.native_id for t in threading.enumerate() if t.ident == ident), None)


def _subscribed(tid: int) -> bool:
    with _lock:
        _prune_locked()
        return tid in _subscribers.values()


def process_report(timeout_ms: int) -> None:
    """Mirrors ``aclrtProcessReport``: run one callback due to the calling thread, waiting
    up to ``timeout_ms`` (-1 forever). 100000 for 0 or < -1; 107012 if the thread is
    subscribed to no live stream (also when its last stream ends during the wait); 507012 on
    timeout. Blocks with the GIL released."""
    timeout_ms = runtime.index(timeout_ms, errors.ACL_ERROR_INVALID_PARAM, "timeout")
    if timeout_ms == 0 or timeout_ms < -1:
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, f"timeout {timeout_ms}")
    tid = threading.get_ident()
    deadline = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000
    while True:
        with _lock:
            q = _queues.get(tid)
        if q is None or not _subscribed(tid):
            raise errors.error_for(errors.ACL_ERROR_RT_THREAD_SUBSCRIBE,
                                   f"thread {tid} is subscribed to no live stream")
        left = WAIT_SLICE_S if deadline is None else min(WAIT_SLICE_S,
                                                         deadline - time.monotonic())
        try:
            item = q.get(timeout=max(left, 0))
        except queue.Empty:
            if deadline is not None and time.monotonic() >= deadline:
                raise errors.error_for(errors.ACL_ERROR_RT_REPORT_TIMEOUT,
                                       f"no callback within {timeout_ms} ms") from None
            continue
        if item is not _WAKE:
            break
    link, slot, seq, fn, args, block = item
    _run(fn, args)
    if block:
        link.post(Op.CALLBACK_DONE, slot, seq)


def launch_callback(fn: Callable[[Any], Any], args: Any, block: int,
                    stream_handle: object) -> None:
    """Mirrors ``aclrtLaunchCallback``: queue ``fn(args)`` on the stream for its subscribed
    thread. 107015 if no thread subscribed to the stream."""
    stream = resolve(stream_handle, for_submit=True)
    with _lock:
        subscribed = stream in _subscribers
    if not subscribed:
        raise errors.error_for(errors.ACL_ERROR_RT_STREAM_NO_CB_REG,
                               f"stream {stream.sid} has no subscribed thread")
    block = runtime.index(block, errors.ACL_ERROR_INVALID_PARAM, "block type")
    if block not in (CallbackBlockType.ACL_CALLBACK_NO_BLOCK, CallbackBlockType.ACL_CALLBACK_BLOCK):
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, f"block type {block}")
    _queue_callback(stream, "callback", fn, args, block)


def launch_host_func(stream_handle: object, fn: Callable[[Any], Any], args: Any) -> None:
    """Mirrors ``aclrtLaunchHostFunc``: the runtime's report thread runs ``fn(args)`` when
    the stream reaches it; the stream waits for it to return."""
    stream = resolve(stream_handle, for_submit=True)
    ensure_reporter(stream.link)
    _queue_callback(stream, "host_func", fn, args, 1)


def _queue_callback(stream: Stream, style: str, fn: Callable[[Any], Any], args: Any,
                    block: int) -> None:
    if not callable(fn):
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, "callback must be callable")
    cb_id = next(_ids)
    with _lock:
        _pending[cb_id] = (style, fn, args)
    submit(stream, Op.CALLBACK, cb_id, block)


def keep(cb_id: int) -> str:
    """A callback queued on a capturing stream stays for every replay (``capture.py``);
    returns its style (``callback`` or ``host_func``), "" for an unknown id."""
    with _lock:
        entry = _pending.pop(cb_id, None)
        if entry is not None:
            _kept[cb_id] = entry
    return entry[0] if entry is not None else ""


def release(cb_ids: list[int]) -> None:
    """Forget the kept callbacks of a destroyed model runtime instance."""
    with _lock:
        for cb_id in cb_ids:
            _kept.pop(cb_id, None)


def forget_stream(stream: Stream) -> None:
    """End the stream's subscription (it was destroyed, or its device reset) and wake the
    subscribed thread. Called by the stream's teardown; ``_prune_locked`` catches the rest."""
    with _lock:
        _prune_locked()
        tid = _subscribers.pop(stream, None)
        q = _queues.get(tid) if tid is not None else None
    if q is not None:
        q.put(_WAKE)


on_stream_closed(forget_stream)  # a destroyed stream ends its subscriptions
