"""C bodies of ``acl_rt.h``: devices, contexts, streams, events, memory, last error.

Each mirrors the C call of its name through ``acl.rt`` (``npuemu.host.acl.rt``), whose
docstrings (and the runtime core's) say what blocks: the synchronize calls, ``aclrtMemcpy``
and ``aclrtResetDevice`` block (with the GIL released, so other C threads go on); the rest
return at once. An out-parameter is written only on success; a NULL one gets 100000.
"""

from __future__ import annotations

from typing import Any

from npuemu.host.acl import rt
from npuemu.host.capi import exports as X
from npuemu.host.capi.exports import export


def _out(func: str, p: Any, result: tuple, cast: str | None = None) -> int:
    """Write ``result``'s value (``(value, ret)``) to ``*p`` when ret is 0; return ret."""
    if p == X.ffi.NULL:
        return X.invalid(func, "the output pointer is NULL")
    value, ret = result
    if ret == 0:
        p[0] = X.ffi.cast(cast, value) if cast else value
    return ret


def _handle_out(func: str, p: Any, result: tuple) -> int:
    return _out(func, p, result, "void *")


# devices ---------------------------------------------------------------------------------------
@export
def aclrtSetDevice(dev: int) -> int:
    return rt.set_device(dev)


@export
def aclrtResetDevice(dev: int) -> int:
    return rt.reset_device(dev)


@export
def aclrtResetDeviceForce(dev: int) -> int:
    return rt.reset_device_force(dev)


@export
def aclrtGetDevice(p: Any) -> int:
    return _out("aclrtGetDevice", p, rt.get_device())


@export
def aclrtGetDeviceCount(p: Any) -> int:
    return _out("aclrtGetDeviceCount", p, rt.get_device_count())


@export
def aclrtGetDeviceInfo(dev: int, attr: int, p: Any) -> int:
    return _out("aclrtGetDeviceInfo", p, rt.get_device_info(dev, attr))


@export
def aclrtGetRunMode(p: Any) -> int:
    return _out("aclrtGetRunMode", p, rt.get_run_mode())


@export
def aclrtQueryDeviceStatus(dev: int, p: Any) -> int:
    return _out("aclrtQueryDeviceStatus", p, rt.query_device_status(dev))


@export
def aclrtSynchronizeDevice() -> int:
    return rt.synchronize_device()


@export
def aclrtSynchronizeDeviceWithTimeout(timeout: int) -> int:
    return rt.synchronize_device_with_timeout(timeout)


@export
def aclrtGetDeviceUtilizationRate(dev: int, info: Any) -> int:
    if info == X.ffi.NULL:
        return X.invalid("aclrtGetDeviceUtilizationRate", "utilizationInfo is NULL")
    if info.utilizationExtend != X.ffi.NULL:
        return X.invalid("aclrtGetDeviceUtilizationRate", "utilizationExtend must be NULL")
    rates, ret = rt.get_device_utilization_rate(dev)
    for key, value in rates.items():
        setattr(info, key, value)
    return ret


@export
def aclrtDeviceGetStreamPriorityRange(least: Any, greatest: Any) -> int:
    if least == X.ffi.NULL or greatest == X.ffi.NULL:
        return X.invalid("aclrtDeviceGetStreamPriorityRange", "an output pointer is NULL")
    least[0], greatest[0], ret = rt.device_get_stream_priority_range()
    return ret


@export
def aclrtDeviceCanAccessPeer(p: Any, dev: int, peer: int) -> int:
    return _out("aclrtDeviceCanAccessPeer", p, rt.device_can_access_peer(dev, peer))


@export
def aclrtDeviceEnablePeerAccess(peer: int, flags: int) -> int:
    return rt.device_enable_peer_access(peer, flags)


@export
def aclrtDeviceDisablePeerAccess(peer: int) -> int:
    return rt.device_disable_peer_access(peer)


# contexts --------------------------------------------------------------------------------------
@export
def aclrtCreateContext(p: Any, dev: int) -> int:
    if p == X.ffi.NULL:
        return X.invalid("aclrtCreateContext", "context is NULL")
    return _handle_out("aclrtCreateContext", p, rt.create_context(dev))


X.forward("aclrtDestroyContext", rt.destroy_context)
X.forward("aclrtSetCurrentContext", rt.set_context)


@export
def aclrtGetCurrentContext(p: Any) -> int:
    return _handle_out("aclrtGetCurrentContext", p, rt.get_context())


# streams ---------------------------------------------------------------------------------------
@export
def aclrtCreateStream(p: Any) -> int:
    if p == X.ffi.NULL:
        return X.invalid("aclrtCreateStream", "stream is NULL")
    return _handle_out("aclrtCreateStream", p, rt.create_stream())


@export
def aclrtCreateStreamWithConfig(p: Any, priority: int, flag: int) -> int:
    if p == X.ffi.NULL:
        return X.invalid("aclrtCreateStreamWithConfig", "stream is NULL")
    return _handle_out("aclrtCreateStreamWithConfig", p,
                       rt.create_stream_with_config(priority, flag))


X.forward("aclrtDestroyStream", rt.destroy_stream)
X.forward("aclrtDestroyStreamForce", rt.destroy_stream_force)
X.forward("aclrtSynchronizeStream", rt.synchronize_stream)
X.forward("aclrtSynchronizeStreamWithTimeout", rt.synchronize_stream_with_timeout)


@export
def aclrtStreamQuery(s: Any, p: Any) -> int:
    return _out("aclrtStreamQuery", p, rt.stream_query(X.addr(s)))


@export
def aclrtStreamGetId(s: Any, p: Any) -> int:
    return _out("aclrtStreamGetId", p, rt.stream_get_id(X.addr(s)))


@export
def aclrtStreamWaitEvent(s: Any, e: Any) -> int:
    return rt.stream_wait_event(X.addr(s), X.addr(e))


@export
def aclrtStreamWaitEventWithTimeout(s: Any, e: Any, timeout: int) -> int:
    return rt.stream_wait_event_with_timeout(X.addr(s), X.addr(e), timeout)


X.forward("aclrtSetStreamFailureMode", rt.set_stream_failure_mode)
X.forward("aclrtStreamAbort", rt.stream_abort)


# events ----------------------------------------------------------------------------------------
@export
def aclrtCreateEvent(p: Any) -> int:
    if p == X.ffi.NULL:
        return X.invalid("aclrtCreateEvent", "event is NULL")
    return _handle_out("aclrtCreateEvent", p, rt.create_event())


@export
def aclrtCreateEventWithFlag(p: Any, flag: int) -> int:
    if p == X.ffi.NULL:
        return X.invalid("aclrtCreateEventWithFlag", "event is NULL")
    return _handle_out("aclrtCreateEventWithFlag", p, rt.create_event_with_flag(flag))


@export
def aclrtCreateEventExWithFlag(p: Any, flag: int) -> int:
    if p == X.ffi.NULL:
        return X.invalid("aclrtCreateEventExWithFlag", "event is NULL")
    return _handle_out("aclrtCreateEventExWithFlag", p, rt.create_event_ex_with_flag(flag))


X.forward("aclrtDestroyEvent", rt.destroy_event)


@export
def aclrtRecordEvent(e: Any, s: Any) -> int:
    return rt.record_event(X.addr(e), X.addr(s))


@export
def aclrtResetEvent(e: Any, s: Any) -> int:
    return rt.reset_event(X.addr(e), X.addr(s))


@export
def aclrtQueryEvent(e: Any, p: Any) -> int:
    return _out("aclrtQueryEvent", p, rt.query_event(X.addr(e)))


@export
def aclrtQueryEventStatus(e: Any, p: Any) -> int:
    return _out("aclrtQueryEventStatus", p, rt.query_event_status(X.addr(e)))


@export
def aclrtQueryEventWaitStatus(e: Any, p: Any) -> int:
    return _out("aclrtQueryEventWaitStatus", p, rt.query_event_wait_status(X.addr(e)))


X.forward("aclrtSynchronizeEvent", rt.synchronize_event)
X.forward("aclrtSynchronizeEventWithTimeout", rt.synchronize_event_with_timeout)


@export
def aclrtEventElapsedTime(p: Any, start: Any, end: Any) -> int:
    return _out("aclrtEventElapsedTime", p, rt.event_elapsed_time(X.addr(start), X.addr(end)))


@export
def aclrtEventGetTimestamp(e: Any, p: Any) -> int:
    return _out("aclrtEventGetTimestamp", p, rt.event_get_timestamp(X.addr(e)))


# last error ------------------------------------------------------------------------------------
@export
def aclrtPeekAtLastError(level: int) -> int:
    return rt.peek_at_last_error(level)


@export
def aclrtGetLastError(level: int) -> int:
    return rt.get_last_error(level)


@export
def aclrtSetOpExecuteTimeOut(timeout: int) -> int:
    return rt.set_op_execute_time_out(timeout)
