"""Model runtime instances built by hand, and what every instance offers: execute,
destroy, inspect (``aclmdlRIBuildBegin``, ``BindStream``, ``EndTask``, ``BuildEnd``,
``UnbindStream``, ``ExecuteAsync``, ``Execute``, ``Destroy``, ``DebugPrint``,
``DebugJsonPrint``, ``SetName`` / ``GetName``, ``GetId``, ``GetStreams``).

Built by hand: streams created with ``ACL_STREAM_PERSISTENT`` are bound to the instance;
their tasks are recorded as a capture's are (``capture.py``: events between bound streams
order them) until ``BuildEnd`` registers the list on the card; ``aclmdlRIExecute`` runs it
on the current default stream and waits. A stream bound with
``ACL_MODEL_STREAM_FLAG_DEFAULT`` runs only when activated, which is not emulated
(``aclrtActiveStream``): its tasks are kept and never run. Every head stream must have had
its ``EndTask`` before ``BuildEnd`` (our choice; 107000 otherwise).

A replay (``aclmdlRIExecuteAsync``) is one ``MODEL_EXECUTE`` task on the caller's stream;
its inputs are the new generation of each event the instance records, completed on the
card at the place of the event's record (``capture.py``).

``aclmdlRIAbort`` stops the instance's replays: the card forgets its task list (the one
running stops at its next step with 107035, those queued fail with 107000 when their turn
comes, and their events complete with that code) and it is registered again at once, so
the next execute runs it (its id, ``aclmdlRIGetId``, changes).

Not emulated (``not_emulated``: 207000 with a log line): task groups and their updates,
task parameters and ``aclmdlRIUpdate`` (which applies such updates), conditional tasks,
nested captures, the destroy callbacks.

Not done as CANN's runtime does: tasks queued on a persistent stream before it is bound to
an instance are dropped (CANN keeps them on the stream for the model it is bound to later,
until ``aclrtPersistentTaskClean``, which npuemu does not have), so bind first; memory
freed while an instance refers to it is not kept alive for its replays: a replay resolves
its addresses when each step runs, so a freed range fails that step (107000 for a copy or
memset, 507053 for a kernel's tensor) and a range allocated again is used as it is then.

Threading model: as ``capture.py`` (its ``lock`` guards what these calls change).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from npuemu.host.core import capture, plog
from npuemu.host.core import stream as streams
from npuemu.host.core.runtime import index
from npuemu.shared import errors, logring
from npuemu.shared.enums import CaptureStatus, ModelStreamFlag
from npuemu.shared.protocol import Op

_ACTIVE = int(CaptureStatus.ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE)
_NONE = int(CaptureStatus.ACL_MODEL_RI_CAPTURE_STATUS_NONE)
_HEAD = int(ModelStreamFlag.ACL_MODEL_STREAM_FLAG_HEAD)
_DEFAULT = int(ModelStreamFlag.ACL_MODEL_STREAM_FLAG_DEFAULT)
_COPY, _CALLBACK = int(Op.COPY_ASYNC), int(Op.CALLBACK)
DESTROY_WAIT_S = 30.0
"""Longest ``aclmdlRIDestroy`` waits for the instance's queued replays before it unloads."""


# built by hand ---------------------------------------------------------------------------------
def build_begin(flag: object) -> int:
    """Mirrors ``aclmdlRIBuildBegin``: a new instance to bind persistent streams to; the
    flag must be 0 (107000)."""
    if index(flag, errors.ACL_ERROR_RT_PARAM_INVALID, "flag") != 0:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, f"flag {flag}: must be 0")
    return capture.new_recording(False).handle


def bind_stream(handle: object, stream_handle: object, flag: object) -> None:
    """Mirrors ``aclmdlRIBindStream``: the stream's later tasks belong to the instance.
    107000 for a flag other than HEAD / DEFAULT, a stream not created PERSISTENT, or an
    instance already built; 107005 for a stream bound already."""
    rec = capture.get(handle)
    flag_ = index(flag, errors.ACL_ERROR_RT_PARAM_INVALID, "flag")
    if flag_ not in (_HEAD, _DEFAULT):
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, f"flag {flag_:#x}")
    stream = streams.resolve(stream_handle, for_submit=True)
    if not stream.flags & streams.PERSISTENT or rec.captured or stream.link is not rec.link:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"stream {stream.sid}: only a PERSISTENT stream of the "
                               "instance's device can be bound to a model built by hand")
    with capture.lock:
        if stream.recorder is not streams.UNBOUND:
            raise errors.error_for(errors.ACL_ERROR_RT_STREAM_MODEL,
                                   f"stream {stream.sid} is bound to a model already")
        if rec.status != _ACTIVE:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, "the instance is built")
        if flag_ == _DEFAULT:
            rec.idle.add(stream)
            stream.recorder = streams.UNBOUND_IDLE
            return
        rec.lanes[stream] = len(rec.lanes)
        stream.recorder = rec


def _bound(handle: object, stream_handle: object) -> tuple[capture.Recording, streams.Stream]:
    """The instance and a stream bound to it (107005 if it is not)."""
    rec = capture.get(handle)
    stream = streams.resolve(stream_handle)
    if stream.recorder is not rec and not (stream in rec.idle
                                           and stream.recorder is streams.UNBOUND_IDLE):
        raise errors.error_for(errors.ACL_ERROR_RT_STREAM_MODEL,
                               f"stream {stream.sid} is not bound to the instance")
    return rec, stream


def end_task(handle: object, stream_handle: object) -> None:
    """Mirrors ``aclmdlRIEndTask``: the stream's last task of the instance was queued."""
    rec, stream = _bound(handle, stream_handle)
    with capture.lock:
        rec.ended.add(stream)


def build_end(handle: object, reserve: object = None) -> None:
    """Mirrors ``aclmdlRIBuildEnd``: register the bound streams' tasks on the card (blocks
    for its replies). ``reserve`` must be null (100000); 107000 if the instance is built
    already or a head stream had no ``EndTask``."""
    if reserve:
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, "reserve must be null")
    rec = capture.get(handle)
    with capture.lock:
        if rec.captured or rec.status != _ACTIVE:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   "the instance is not being built")
        missing = [s.sid for s in rec.lanes if s not in rec.ended]
        if missing:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"streams {missing} had no aclmdlRIEndTask")
        rec.status = _NONE
        for event in rec.events:
            if event.capture is rec:
                event.capture = None
    capture.register(rec)


def unbind_stream(handle: object, stream_handle: object) -> None:
    """Mirrors ``aclmdlRIUnbindStream``: the stream leaves the instance (107005 if it was
    not bound); a built instance keeps its registered tasks."""
    rec, stream = _bound(handle, stream_handle)
    with capture.lock:
        rec.idle.discard(stream)
        if rec.status == _ACTIVE:  # unbound before the build ended: its tasks go
            lane = rec.lanes.pop(stream, None)
            for row in rec.rows:
                if row[0] == lane:
                    row[0] = -1
        stream.recorder = streams.UNBOUND


# execute, destroy, inspect ---------------------------------------------------------------------
def _built(rec: capture.Recording) -> None:
    if rec.status != _NONE:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               "the model runtime instance is not built yet")


def execute_async(handle: object, stream_handle: object) -> None:
    """Mirrors ``aclmdlRIExecuteAsync``: one replay task on the stream (async), which
    records the instance's events at their places. 107027 on a capturing stream, 107000 on a
    stream whose tasks are kept for a model or an instance not built."""
    rec = capture.get(handle)
    _built(rec)
    stream = streams.resolve(stream_handle, for_submit=True)
    if stream.recorder is not None:
        if isinstance(stream.recorder, capture.Recording) and stream.recorder.captured:
            raise errors.error_for(errors.ACL_ERROR_RT_STREAM_CAPTURED,
                                   f"stream {stream.sid} captures")
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"stream {stream.sid} keeps its tasks for a model")
    if stream.link is not rec.link:
        raise errors.error_for(errors.ACL_ERROR_RT_STREAM_CONTEXT,
                               f"instance of device {rec.device}, stream of device "
                               f"{stream.device}")
    seq = _submit_replay(rec, stream)
    with capture.lock:
        rec.pending[stream] = seq
        rec.replays += 1


def _submit_replay(rec: capture.Recording, stream: streams.Stream) -> int:
    """Queue the ``MODEL_EXECUTE`` task, each event of the instance taking its next
    generation with it (0 for a destroyed one); returns the task's number. A wait on such an
    event orders nothing more than the event (its record completes within the replay)."""
    link = stream.link
    with link.lock:
        seq = stream.submitted + 1
        gens = [0 if event.destroyed else event.gen + 1 for event in rec.host_events]
        link.submit_locked([int(Op.MODEL_EXECUTE), 0, stream.slot, seq, rec.card_id, gens, []])
        stream.submitted = seq
        for event, gen in zip(rec.host_events, gens, strict=True):
            if gen:
                event.gen, event.src = gen, None
    return seq


def execute(handle: object, timeout_ms: object = -1) -> None:
    """Mirrors ``aclmdlRIExecute``: a replay on the current default stream, then waits for
    it (blocks, GIL released; -1 forever, else milliseconds: 507046 on expiry). A captured
    instance is 107000, as in CANN's runtime (it runs only through ``ExecuteAsync``)."""
    rec = capture.get(handle)
    if rec.captured:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               "aclmdlRIExecute does not run a captured instance: use "
                               "aclmdlRIExecuteAsync")
    streams.timeout_s(timeout_ms)  # checked before anything runs
    execute_async(handle, 0)
    streams.synchronize_stream(0, index(timeout_ms, errors.ACL_ERROR_RT_PARAM_INVALID,
                                        "timeout"))


def destroy(handle: object) -> None:
    """Mirrors ``aclmdlRIDestroy``: waits (bounded, device alive) for its queued replays,
    then the card forgets the task list. 107026 while it is being captured."""
    rec = capture.get(handle)
    if rec.captured and rec.status == _ACTIVE:
        raise errors.error_for(errors.ACL_ERROR_RT_MODEL_CAPTURED,
                               "the instance is being captured: end the capture first")
    for stream, seq in list(rec.pending.items()):
        if not stream.destroyed:
            try:
                stream.link.wait_until(capture.done_cond(stream, seq), DESTROY_WAIT_S)
            except errors.AclError:  # the card is lost: nothing of it runs any more
                break
    capture.destroy_recording(rec)


def abort(handle: object) -> None:
    """Mirrors ``aclmdlRIAbort``: stop the instance's running and queued replays (module
    docstring); 107000 for an instance not built. Blocks for the card's replies."""
    rec = capture.get(handle)
    _built(rec)
    rec.link.call(Op.MODEL_UNLOAD, rec.card_id)
    rec.card_id = 0
    capture.register(rec)
    plog.log(logring.INFO, f"model runtime instance {rec.handle} aborted: its replays stop")


def describe(handle: object) -> dict[str, Any]:
    """What ``aclmdlRIDebugPrint`` / ``DebugJsonPrint`` show: the instance's streams and
    each one's tasks in order."""
    rec = capture.get(handle)
    with capture.lock:
        lanes = {lane: stream for stream, lane in rec.lanes.items()}
        out: dict[int, list[dict[str, Any]]] = {lane: [] for lane in lanes}
        for row in rec.rows:
            if row[0] in out:
                out[row[0]].append(_task_info(row))
    return {"model_ri": rec.handle, "name": rec.name, "captured": rec.captured,
            "status": CaptureStatus(rec.status).name, "replays": rec.replays,
            "streams": [{"stream_id": lanes[k].sid, "tasks": tasks}
                        for k, tasks in sorted(out.items())]}


def _task_info(row: list[Any]) -> dict[str, Any]:
    if len(row) == 5:
        kind = {_COPY: "MEMCPY", _CALLBACK: "HOST_CALLBACK"}.get(row[1], "MEMSET")
        return {"type": kind, "args": row[2]}
    if row[2]:
        return {"type": "KERNEL", "kernel": row[2], "blocks": row[3]}
    if row[7]:
        return {"type": "EVENT_RECORD", "event": row[7][0]}
    return {"type": "EVENT_WAIT", "event": row[6][0]}


def debug_print(handle: object) -> None:
    """Mirrors ``aclmdlRIDebugPrint``: the instance's tasks to the host log (INFO)."""
    info = describe(handle)
    for stream in info["streams"]:
        plog.log(logring.INFO, f"model runtime instance {info['model_ri']} stream "
                               f"{stream['stream_id']}: {len(stream['tasks'])} tasks: "
                               + ", ".join(t["type"] for t in stream["tasks"]))


def debug_json_print(handle: object, path: object, flags: object) -> None:
    """Mirrors ``aclmdlRIDebugJsonPrint``: the instance as JSON in the file ``path``
    (SUMMARY 0: task types and counts; VERBOSE 1: every task). 107000 for other flags,
    100000 for no path, 107010 if the file cannot be written."""
    if not isinstance(path, str) or not path:
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, "path")
    verbose = index(flags, errors.ACL_ERROR_RT_PARAM_INVALID, "flags")
    if verbose not in (0, 1):
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, f"flags {verbose}")
    info = describe(handle)
    if not verbose:
        for stream in info["streams"]:
            stream["tasks"] = len(stream["tasks"])
    try:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(info, out, indent=1)
    except OSError as err:
        raise errors.error_for(errors.ACL_ERROR_RT_FILE_WRITE, f"{path}: {err}") from None


def set_name(handle: object, name: object) -> None:
    """Mirrors ``aclmdlRISetName``."""
    if not isinstance(name, str):
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, "name")
    capture.get(handle).name = name


def get_name(handle: object) -> str:
    """Mirrors ``aclmdlRIGetName``."""
    return capture.get(handle).name


def not_emulated(what: str) -> Callable[..., None]:
    """A call of the family that npuemu does not emulate: 207000 with a log line."""

    def refuse(*_args: object) -> None:
        plog.log(logring.WARNING, f"{what} is not emulated")
        raise errors.error_for(errors.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, f"{what} is not emulated")

    return refuse


def instance_id(handle: object) -> int:
    """Mirrors ``aclmdlRIGetId``: the instance's id (its card task list's, 0 until built)."""
    return capture.get(handle).card_id


def stream_handles(handle: object) -> list[int]:
    """Mirrors ``aclmdlRIGetStreams``: the handles of the instance's streams (a capture's:
    the streams that took part in it, origin first)."""
    rec = capture.get(handle)
    with capture.lock:
        return [s.handle for s in sorted(rec.lanes, key=rec.lanes.__getitem__)]
