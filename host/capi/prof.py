"""C bodies of ``acl_prof.h``: the profiling state machine (``aclprofInit`` .. ``Finalize``,
configurations, ``aclprofSetConfig``) and the msproftx stamps, marks and ranges.

Each mirrors the C call of its name through ``acl.prof`` (``npuemu.host.acl.prof``, whose
docstring gives the codes and what is partial); the ``PROF_*`` folders are the ones a Python
program gets. While a configuration with ``ACL_PROF_ACL_API`` runs, the C calls are timed
as the Python face's are (they go through the same ``acl`` functions). ``aicoreEvents`` is
not read. ``aclprofStop`` and ``aclprofFinalize`` block (drain and export).
"""

from __future__ import annotations

from typing import Any

from npuemu.host.acl import prof
from npuemu.host.capi import exports as X
from npuemu.host.capi.exports import export


def _text(p: Any, n: int) -> str | None:
    if p == X.ffi.NULL:
        return None
    return bytes(X.ffi.buffer(p, n)).split(b"\0", 1)[0].decode("utf-8", "replace")


@export
def aclprofInit(path: Any, length: int) -> int:
    text = _text(path, length)
    if text is None or length == 0:
        return X.invalid("aclprofInit", "profilerResultPath is NULL or empty")
    return prof.init(text)


@export
def aclprofFinalize() -> int:
    return prof.finalize()


@export
def aclprofCreateConfig(devices: Any, n: int, metrics: int, events: Any,
                        data_types: int) -> Any:
    """Mirrors ``aclprofCreateConfig`` (NULL on bad arguments)."""
    if n and devices == X.ffi.NULL:
        return X.ffi.NULL
    ids = list(X.ffi.unpack(devices, n)) if n else []
    return X.ffi.cast("aclprofConfig *", prof.create_config(ids, metrics, 0, data_types))


X.forward("aclprofDestroyConfig", prof.destroy_config)
X.forward("aclprofStart", prof.start)
X.forward("aclprofStop", prof.stop)


@export
def aclprofSetConfig(config_type: int, value: Any, length: int) -> int:
    text = _text(value, length)
    if text is None:
        return X.invalid("aclprofSetConfig", "config is NULL")
    return prof.set_config(config_type, text)


@export
def aclprofCreateStamp() -> Any:
    return X.ffi.cast("void *", prof.create_stamp())


@export
def aclprofDestroyStamp(stamp: Any) -> None:
    prof.destroy_stamp(X.addr(stamp))


@export
def aclprofSetStampTraceMessage(stamp: Any, msg: Any, length: int) -> int:
    text = _text(msg, length)
    if text is None:
        return X.invalid("aclprofSetStampTraceMessage", "msg is NULL")
    return prof.set_stamp_trace_message(X.addr(stamp), text, length)


X.forward("aclprofMark", prof.mark)


@export
def aclprofMarkEx(msg: Any, length: int, s: Any) -> int:
    text = _text(msg, length)
    if text is None:
        return X.invalid("aclprofMarkEx", "msg is NULL")
    return prof.mark_ex(text, X.addr(s))


X.forward("aclprofPush", prof.push)


@export
def aclprofPop() -> int:
    return prof.pop()


@export
def aclprofRangeStart(stamp: Any, out: Any) -> int:
    if out == X.ffi.NULL:
        return X.invalid("aclprofRangeStart", "rangeId is NULL")
    range_id, ret = prof.range_start(X.addr(stamp))
    if ret == 0:
        out[0] = range_id
    return ret


@export
def aclprofRangeStop(range_id: int) -> int:
    return prof.range_stop(range_id)
