"""Wire protocol between a host client and a device worker (frames on the rings).

Every frame is one msgpack array (never a dict, never pickle).

Request (host -> device, submission ring): ``[op, seq, arg0, arg1, ...]``
  ``seq`` > 0 asks for a reply carrying the same ``seq``; ``seq`` == 0 is fire-and-forget
  (the worker reports a failure in its device log and in ``bad_frames``, never by reply).
Reply (device -> host, completion ring): ``[seq, ret, result0, ...]``; ``ret`` is an ACL code
  (0 = success); on failure the only result is a detail string.

| op          | args                          | results                 | notes             |
|-------------|-------------------------------|-------------------------|-------------------|
| PING        |                               | device monotonic ns     | round-trip probe  |
| MALLOC      | size, policy                  | ptr, span, page_class   | aclrtMalloc       |
| FREE        | ptr                           |                         | aclrtFree (async) |
| MEM_INFO    | attr                          | free, total             | aclrtGetMemInfo   |
| COPY        | dst, src, count               |                         | D2D by the DMA engine |
| MEMSET      | ptr, value, count             |                         | by the DMA engine |
| SNAPSHOT    |                               | [[ptr, span, class, client], ...] | live allocations |
| STREAM_CREATE | slot, priority, flags       | stream id               | 207008 past the limit |
| STREAM_DESTROY| slot                        |                         |                   |
| STREAM_MODE | slot, mode                    |                         | failure mode      |
| STREAM_ABORT| slot                          |                         | drops queued tasks|
| PIN         | host address, size, segment name |                      | pinned host block |
| UNPIN       | host address                  |                         | (no reply)        |
| BINARY_LOAD | source, file name             | bin id, [[kernel, engine], ...] |           |
| BINARY_UNLOAD | bin id                      |                         |                   |
| CALLBACK_DONE | slot, task seq              |                         | (no reply) releases a BLOCK callback |
| INJECT      | fault name, {parameters}      |                         | ``device/faults.py`` |
| OP_LOAD     | code bytes, name              | bin id, ptr, span, kernels | op binary into HBM (``device/opbin.py``) |
| OP_UNLOAD   | bin id, ptr                   |                         | frees its HBM     |

Stream tasks are fire-and-forget frames ``[op, 0, stream slot, task seq, args...]``; their
completion is published in the client's stream/event tables (``layout.py``):

| task op      | args                                   |
|--------------|----------------------------------------|
| COPY_ASYNC   | dst, src, count (device or pinned host addresses) |
| MEMSET_ASYNC | ptr, value, count                      |
| RECORD       | event slot, generation                 |
| RESET_EVENT  | event slot                             |
| WAIT_EVENT   | event slot, generation, timeout ms (0 = none) |
| LAUNCH       | bin id, kernel name, blocks, [args]    |
| CALLBACK     | callback id, block (0/1)               |

Reports (device -> host, report ring): ``[EXCEPTION, stream slot, task seq, code, stream
id, device]`` and ``[CALLBACK, stream slot, task seq, callback id, block]``.

``PROTOCOL_VERSION`` is written in every region header; a worker rejects a client whose
version differs (client slot state REJECTED), so mixed installs fail at attach, not later.
"""

from __future__ import annotations

import enum

import msgpack

PROTOCOL_VERSION = 2


class Op(enum.IntEnum):
    PING = 1
    MALLOC = 2
    FREE = 3
    MEM_INFO = 4
    COPY = 5
    MEMSET = 6
    SNAPSHOT = 7
    STREAM_CREATE = 8
    STREAM_DESTROY = 9
    STREAM_MODE = 10
    STREAM_ABORT = 11
    PIN = 12
    UNPIN = 13
    BINARY_LOAD = 14
    BINARY_UNLOAD = 15
    CALLBACK_DONE = 16
    INJECT = 17
    # op kernel binaries (device/opbin.py; helper "ops")
    OP_LOAD = 18
    OP_UNLOAD = 19
    # stream tasks
    COPY_ASYNC = 32
    MEMSET_ASYNC = 33
    RECORD = 34
    RESET_EVENT = 35
    WAIT_EVENT = 36
    LAUNCH = 37
    CALLBACK = 38


TASK_OPS = frozenset(op for op in Op if op >= Op.COPY_ASYNC)


class Report(enum.IntEnum):
    EXCEPTION = 1
    CALLBACK = 2


_packer = msgpack.Packer(autoreset=True, use_bin_type=True)


def pack(frame: list | tuple) -> bytes:
    """Encode one frame (msgpack's C packer runs under the GIL, so threads may share it)."""
    return _packer.pack(frame)


def unpack(payload: bytes) -> tuple:
    """Decode one frame; raises ValueError for anything that is not a non-empty array."""
    try:
        frame = msgpack.unpackb(payload, use_list=False, raw=False)
    except Exception as err:  # msgpack raises several unrelated types
        raise ValueError(f"undecodable frame: {err}") from err
    if not isinstance(frame, tuple) or not frame:
        raise ValueError(f"frame is not a non-empty array: {frame!r}")
    return frame
