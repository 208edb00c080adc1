"""C bodies of the model runtime instance calls (``aclmdlRI*`` of ``acl_rt.h``): stream
capture and replay, models built by hand, names and ids, over ``acl.mdl``'s ``ri_*`` calls
(``npuemu.host.acl.mdl_ri``), so codes and checks are the Python programs'.

An ``aclmdlRI`` is the face's int handle cast to a pointer. What blocks: ``CaptureEnd`` and
``BuildEnd`` (the card's replies), ``aclmdlRIExecute`` (the replay), ``aclmdlRIDestroy`` (its
queued replays, bounded). The calls ``acl_rt.h`` declares and this module has no body for
(task groups and updates, task parameters, ``aclmdlRIUpdate``, the destroy callbacks,
nested captures) answer 207000 with a log line (``boot.py``).
"""

from __future__ import annotations

from typing import Any

from npuemu.host.acl import mdl_ri
from npuemu.host.capi import exports as X
from npuemu.host.capi.exports import export
from npuemu.host.capi.rt import _out  # the out-parameter rule of every aclrt call
from npuemu.shared import errors


@export
def aclmdlRICaptureBegin(stream: Any, mode: int) -> int:
    return mdl_ri.ri_capture_begin(X.addr(stream), mode)


@export
def aclmdlRICaptureGetInfo(stream: Any, status: Any, model_ri: Any) -> int:
    if status == X.ffi.NULL and model_ri == X.ffi.NULL:
        return X.invalid("aclmdlRICaptureGetInfo", "status and modelRI are both NULL")
    value, handle, ret = mdl_ri.ri_capture_get_info(X.addr(stream))
    if ret == 0:
        if status != X.ffi.NULL:
            status[0] = value
        if model_ri != X.ffi.NULL:
            model_ri[0] = X.ffi.cast("void *", handle)
    return ret


@export
def aclmdlRICaptureEnd(stream: Any, model_ri: Any) -> int:
    if model_ri == X.ffi.NULL:
        return X.invalid("aclmdlRICaptureEnd", "modelRI is NULL")
    return _out("aclmdlRICaptureEnd", model_ri, mdl_ri.ri_capture_end(X.addr(stream)),
                "void *")


@export
def aclmdlRICaptureThreadExchangeMode(mode: Any) -> int:
    if mode == X.ffi.NULL:
        return X.invalid("aclmdlRICaptureThreadExchangeMode", "mode is NULL")
    return _out("aclmdlRICaptureThreadExchangeMode", mode,
                mdl_ri.ri_capture_thread_exchange_mode(mode[0]))


@export
def aclmdlRIExecuteAsync(model_ri: Any, stream: Any) -> int:
    return mdl_ri.ri_execute_async(X.addr(model_ri), X.addr(stream))


@export
def aclmdlRIBuildBegin(model_ri: Any, flag: int) -> int:
    if model_ri == X.ffi.NULL:
        return X.invalid("aclmdlRIBuildBegin", "modelRI is NULL")
    return _out("aclmdlRIBuildBegin", model_ri, mdl_ri.ri_build_begin(flag), "void *")


@export
def aclmdlRIBindStream(model_ri: Any, stream: Any, flag: int) -> int:
    return mdl_ri.ri_bind_stream(X.addr(model_ri), X.addr(stream), flag)


@export
def aclmdlRIEndTask(model_ri: Any, stream: Any) -> int:
    return mdl_ri.ri_end_task(X.addr(model_ri), X.addr(stream))


@export
def aclmdlRIBuildEnd(model_ri: Any, reserve: Any) -> int:
    return mdl_ri.ri_build_end(X.addr(model_ri), X.addr(reserve))


@export
def aclmdlRIUnbindStream(model_ri: Any, stream: Any) -> int:
    return mdl_ri.ri_unbind_stream(X.addr(model_ri), X.addr(stream))


@export
def aclmdlRIDebugJsonPrint(model_ri: Any, path: Any, flags: int) -> int:
    if path == X.ffi.NULL:
        return X.invalid("aclmdlRIDebugJsonPrint", "path is NULL")
    return mdl_ri.ri_debug_json_print(X.addr(model_ri), X.text(path), flags)


@export
def aclmdlRISetName(model_ri: Any, name: Any) -> int:
    if name == X.ffi.NULL:
        return X.invalid("aclmdlRISetName", "name is NULL")
    return mdl_ri.ri_set_name(X.addr(model_ri), X.text(name))


@export
def aclmdlRIGetName(model_ri: Any, max_len: int, name: Any) -> int:
    if name == X.ffi.NULL:
        return X.invalid("aclmdlRIGetName", "name is NULL")
    value, ret = mdl_ri.ri_get_name(X.addr(model_ri))
    if ret:
        return ret
    data = value.encode()
    if len(data) + 1 > max_len:
        return X.invalid("aclmdlRIGetName", f"maxLen {max_len} is too small for the name")
    X.ffi.memmove(name, data + b"\0", len(data) + 1)
    return 0


@export
def aclmdlRIGetId(model_ri: Any, out: Any) -> int:
    return _out("aclmdlRIGetId", out, mdl_ri.ri_get_id(X.addr(model_ri)))


@export
def aclmdlRIGetStreams(model_ri: Any, streams: Any, num: Any) -> int:
    """``*numStreams`` in: the array's size; out: the number of streams. 107039 if the
    array is too small (the count is still written)."""
    if num == X.ffi.NULL:
        return X.invalid("aclmdlRIGetStreams", "numStreams is NULL")
    handles, ret = mdl_ri.ri_get_streams(X.addr(model_ri))
    if ret:
        return ret
    room = num[0]
    num[0] = len(handles)
    if streams == X.ffi.NULL or room < len(handles):
        return X.invalid("aclmdlRIGetStreams", f"room for {room} of {len(handles)} streams",
                         errors.ACL_ERROR_RT_INSUFFICIENT_INPUT_ARRAY)
    for i, h in enumerate(handles):
        streams[i] = X.ffi.cast("void *", h)
    return 0


X.forward("aclmdlRIExecute", mdl_ri.ri_execute)
X.forward("aclmdlRIDestroy", mdl_ri.ri_destroy)
X.forward("aclmdlRIAbort", mdl_ri.ri_abort)
X.forward("aclmdlRIDebugPrint", mdl_ri.ri_debug_print)
