"""C bodies of the host-callback and exception-information calls of ``acl_rt.h``.

- ``aclrtLaunchCallback``: the C function runs on the C thread subscribed to the stream
  (``aclrtSubscribeReport`` with its pthread id), inside that thread's
  ``aclrtProcessReport``, as on hardware; ``ACL_CALLBACK_BLOCK`` holds the stream until it
  returns. ``aclrtLaunchHostFunc``: on the runtime's own thread of that stream.
- Exception callbacks (``aclrtSetExceptionInfoCallback``, ``...Register``) run on the
  runtime's report thread, with an ``aclrtExceptionInfo *`` valid during the call; the
  ``aclrtGet*FromExceptionInfo`` getters read it (0xFFFFFFFF for NULL or a stale one).

C threads are not Python threads: a pthread id that Python has not seen is taken as a C
thread (``CThread``). Like hardware, which takes any id, a bogus id is accepted and then never
served; once a C thread has called ``aclrtProcessReport`` its kernel thread id is known, so
its end is noticed (its pending callbacks then run on the report thread, never hang).
C function pointers are called with the GIL released (cffi's default), so a callback may
block or call back into the runtime.

Threads: ``_lock`` guards ``_cthreads`` and ``_registered``; nothing is called under it.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from npuemu.host.acl import rt
from npuemu.host.capi import exports as X
from npuemu.host.capi.exports import export
from npuemu.host.core import callbacks as core_callbacks

_lock = threading.Lock()


class CThread:
    """A C thread named by its pthread id (what ``threading.get_ident()`` gives in it)."""

    def __init__(self, ident: int) -> None:
        self.ident = ident
        self.native_id: int | None = None  # learnt at its first aclrtProcessReport

    def is_alive(self) -> bool:
        native = self.native_id
        return native is None or os.path.exists(f"/proc/self/task/{native}")


_cthreads: dict[int, CThread] = {}
_registered: dict[int, Any] = {}  # C callback address -> the Python callable registered


def _find(tid: int) -> CThread:
    with _lock:
        return _cthreads.setdefault(tid, CThread(tid))


core_callbacks.add_thread_finder(_find)


@export
def aclrtSubscribeReport(thread_id: int, s: Any) -> int:
    """Mirrors ``aclrtSubscribeReport`` (100033 if the stream has a subscriber already)."""
    return rt.subscribe_report(thread_id, X.addr(s))


@export
def aclrtUnSubscribeReport(thread_id: int, s: Any) -> int:
    return rt.unsubscribe_report(thread_id, X.addr(s))


@export
def aclrtProcessReport(timeout: int) -> int:
    """Mirrors ``aclrtProcessReport``: runs one callback due to this thread (blocks up to
    ``timeout`` ms, -1 forever; 100000 for 0 or < -1, 107012 unsubscribed, 507012 timeout)."""
    me = _cthreads.get(threading.get_ident())
    if me is not None and me.native_id is None:
        me.native_id = threading.get_native_id()
    return rt.process_report(timeout)


def _c_callback(fn: Any, user: Any) -> Any:
    def run(_args: Any) -> None:
        fn(user)

    return run


@export
def aclrtLaunchCallback(fn: Any, user: Any, block: int, s: Any) -> int:
    """Mirrors ``aclrtLaunchCallback`` (107015 if no thread subscribed to the stream)."""
    if fn == X.ffi.NULL:
        return X.invalid("aclrtLaunchCallback", "fn is NULL")
    return rt.launch_callback(_c_callback(fn, user), None, block, X.addr(s))


@export
def aclrtLaunchHostFunc(s: Any, fn: Any, args: Any) -> int:
    """Mirrors ``aclrtLaunchHostFunc``: ``fn(args)`` on the runtime's thread of the stream."""
    if fn == X.ffi.NULL:
        return X.invalid("aclrtLaunchHostFunc", "fn is NULL")
    return rt.launch_host_func(X.addr(s), _c_callback(fn, args), None)


def _info_callback(fn: Any) -> Any:
    def run(info: int) -> None:
        fn(X.ffi.cast("aclrtExceptionInfo *", info))

    return run


@export
def aclrtSetExceptionInfoCallback(fn: Any) -> int:
    """Mirrors ``aclrtSetExceptionInfoCallback`` (NULL clears; the last call wins)."""
    return rt.set_exception_info_callback(None if fn == X.ffi.NULL else _info_callback(fn))


@export
def aclrtExceptionInfoCallbackRegister(fn: Any) -> int:
    """Mirrors ``aclrtExceptionInfoCallbackRegister`` (NULL: 107000)."""
    if fn == X.ffi.NULL:
        return rt.exception_info_callback_register(None)
    body = _info_callback(fn)
    ret = rt.exception_info_callback_register(body)
    if ret == 0:
        with _lock:
            _registered[X.addr(fn)] = body
    return ret


@export
def aclrtExceptionInfoCallbackUnregister(fn: Any) -> int:
    with _lock:
        body = _registered.pop(X.addr(fn), None)
    return rt.exception_info_callback_unregister(body)


def _getter(field: str) -> Any:
    def get(info: Any) -> int:
        return core_callbacks.info_field(X.addr(info), field)

    return get


for _name, _field in (("Task", "task_id"), ("Stream", "stream_id"), ("Thread", "thread_id"),
                      ("Device", "device_id"), ("ErrorCode", "error_code")):
    _fn = _getter(_field)
    _fn.__name__ = f"aclrtGet{_name}IdFromExceptionInfo" if _name != "ErrorCode" \
        else "aclrtGetErrorCodeFromExceptionInfo"
    export(_fn)
