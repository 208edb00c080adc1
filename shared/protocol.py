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
| SET_TIMEOUT | task execution timeout in us  |                         | (no reply) ``aclrtSetOpExecuteTimeOut*``, per client; 0 = default |
| OP_LOAD     | kernel source (str), name (str) | bin id, ptr, span, kernels | op binary into HBM (``device/exec/opbin.py``); source is Python text of at most ``OP_SOURCE_MAX`` UTF-8 bytes, never bytes or marshalled code (``op_load_args``) |
| OP_UNLOAD   | bin id, ptr (as OP_LOAD answered) |                     | frees its HBM; 107000 unless the pair is a loaded op binary |
| MEM_POOLS   |                               | per arena (HBM, DDR): [[name, reserved, used, free, largest free, fragmentation ppm], ...] | page pools (``device/memory/pools.py``) |
| IPC_EXPORT  | ptr (start of a live block)   | share key               | ``device/memory/ipc.py`` |
| IPC_SET_PID | share key, host pid           |                         | exporter only     |
| IPC_IMPORT  | share key                     | ptr, span               | pid must be allowed |
| IPC_CLOSE   | ptr                           |                         | importer done     |
| MEM_MERGE   |                               | bytes given back        | level-2 merge: idle normal-page chunks back to the huge-page pool (``DeviceMemory.merge_free``) |
| MODEL_LOAD  | model id (0 = new), n inputs, n outputs, [step, ...] | model id | a model's task list (``device/exec/model.py``) |
| MODEL_UNLOAD| model id                      |                         | queued executes of it fail |
| COMM_ATTACH | segment name, rank (attach); "", comm id (detach) | comm id (attach) | communicator segment (``device/exec/collective.py``) |
| VMM_MAP     | va (reservation base), reservation size, offset, physical ptr, size | | a mapping joins the client's window of that reservation (``device/memory/windows.py``) |
| VMM_UNMAP   | va (reservation base), offset  |                        | the mapping leaves it |

Stream tasks are fire-and-forget frames ``[op, submit, stream slot, task seq, args...]``
(never answered, whatever ``submit`` holds: a refused task fails in its stream's turn);
``submit`` is 0, or the host's submit time (``time.monotonic_ns()``) when the host profiles:
such a task is recorded in the card's trace ring (``trace.py``). Their
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
| MODEL_EXECUTE| model id, [input addresses], [output addresses] |
| COLLECTIVE   | comm id, kind, algo, dtype, op, root (send/recv: the peer), count, send, recv, timeout ms, [counts] (all_to_allv: send_counts, sdispls, recv_counts, rdispls) |
| DVPP         | kind (str: jpegd, pngd, jpege, vpc), [picture record addresses], [integer parameters] (``device/exec/dvpp.py``) |

A model step (``MODEL_LOAD``) is ``[stream, bin id, kernel name, blocks, [args], [[arg index,
0 input / 1 output, user index], ...], [waited event ids], [recorded event ids]]``, in the
schedule's order; kernel name ``""`` (bin id 0, blocks 0, no args or slots) is a step kept
only for its events. A step of five fields ``[stream, op, [args], [waited event ids],
[recorded event ids]]`` is a copy (op ``COPY_ASYNC``, ``[dst, src, count]``) or memset
(``MEMSET_ASYNC``, ``[ptr, value, count]``) of a captured stream (``device/exec/graph.py``). ``MODEL_EXECUTE`` runs every step of the model as one task (its input
and output counts must be the model's).

Reports (device -> host, report ring): ``[EXCEPTION, stream slot, task seq, code, stream
id, device]`` and ``[CALLBACK, stream slot, task seq, callback id, block]``.

Every integer of a frame is a u64 (``0 <= v < 2**64``) unless the table says otherwise; a
frame that breaks the table is a ``BadFrame`` (answered with 107000 when it carries a ``seq``).

``PROTOCOL_VERSION`` is written in every region header; a worker rejects a client whose
version differs (client slot state REJECTED), so mixed installs fail at attach, not later.
(4: arenas with far pages and their page tables, ``shared/pages.py``.)
"""

from __future__ import annotations

import enum
from typing import Any

import msgpack

PROTOCOL_VERSION = 4


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
    SET_TIMEOUT = 18
    # op kernel binaries (device/exec/opbin.py)
    OP_LOAD = 19
    OP_UNLOAD = 20
    # page pools and IPC sharing of device memory
    MEM_POOLS = 21
    IPC_EXPORT = 22
    IPC_SET_PID = 23
    IPC_IMPORT = 24
    IPC_CLOSE = 25
    # offline models (device/exec/model.py)
    MODEL_LOAD = 26
    MODEL_UNLOAD = 27
    # collectives (device/exec/collective.py)
    COMM_ATTACH = 28
    MEM_MERGE = 29
    # virtual windows (device/memory/windows.py)
    VMM_MAP = 30
    VMM_UNMAP = 31
    # stream tasks
    COPY_ASYNC = 32
    MEMSET_ASYNC = 33
    RECORD = 34
    RESET_EVENT = 35
    WAIT_EVENT = 36
    LAUNCH = 37
    CALLBACK = 38
    MODEL_EXECUTE = 39
    COLLECTIVE = 40  # a collective step (device/exec/collective.py)
    DVPP = 41  # an image task of the DVPP engine (device/exec/dvpp.py)


TASK_OPS = frozenset(op for op in Op if op >= Op.COPY_ASYNC)


U64_LIMIT = 1 << 64


class BadFrame(ValueError):
    """A frame that does not follow this protocol (wrong shape, types or ranges)."""


def u64(value: object) -> int:
    """``value`` if it is a plain int in ``[0, 2**64)``; BadFrame otherwise."""
    if type(value) is not int or not 0 <= value < U64_LIMIT:
        raise BadFrame(f"expected an integer in [0, 2**64), got {value!r}")
    return value


OP_SOURCE_MAX = 256 << 10
"""Largest kernel source an ``OP_LOAD`` carries, in UTF-8 bytes: half the largest frame of the
submission ring (``host/driver/link.py``: a 1 MiB ring takes frames up to 512 KiB). A kernel
the op compiler generates is a few KiB."""
OP_NAME_MAX = 256
"""Longest name (characters) of an ``OP_LOAD``ed binary."""


def op_load_args(source: object, name: object) -> bytes:
    """The UTF-8 bytes of an ``OP_LOAD``'s kernel source; BadFrame unless ``source`` is a
    non-empty ``str`` of at most ``OP_SOURCE_MAX`` bytes and ``name`` a ``str`` of at most
    ``OP_NAME_MAX`` characters. Bytes (marshalled code or anything else) are refused."""
    if type(source) is not str or type(name) is not str:
        raise BadFrame("OP_LOAD takes the kernel's Python source (str) and a name (str)")
    if len(name) > OP_NAME_MAX:
        raise BadFrame(f"OP_LOAD name of {len(name)} characters (at most {OP_NAME_MAX})")
    if not source or len(source) > OP_SOURCE_MAX:
        raise BadFrame(f"OP_LOAD source of {len(source)} characters (1 to {OP_SOURCE_MAX})")
    try:
        image = source.encode("utf-8")
    except UnicodeError as err:
        raise BadFrame(f"OP_LOAD source is not encodable as UTF-8: {err}") from None
    if len(image) > OP_SOURCE_MAX:
        raise BadFrame(f"OP_LOAD source of {len(image)} bytes (at most {OP_SOURCE_MAX})")
    return image


class Report(enum.IntEnum):
    EXCEPTION = 1
    CALLBACK = 2


_packer = msgpack.Packer(autoreset=True, use_bin_type=True)

Frame = tuple[Any, ...]
"""One decoded frame: a request ``(op, ...)`` or a reply ``(seq, ret, ...)`` (msgpack arrays
decode as tuples). What is sent may also be a list."""


def pack(frame: list[Any] | Frame) -> bytes:
    """Encode one frame (msgpack's C packer runs under the GIL, so threads may share it)."""
    payload: bytes = _packer.pack(frame)
    return payload


def unpack(payload: bytes) -> Frame:
    """Decode one frame; raises BadFrame for anything that is not a non-empty array."""
    try:
        frame = msgpack.unpackb(payload, use_list=False, raw=False, strict_map_key=False)
    except Exception as err:  # msgpack raises several unrelated types
        raise BadFrame(f"undecodable frame: {err}") from err
    if not isinstance(frame, tuple) or not frame:
        raise BadFrame(f"frame is not a non-empty array: {frame!r:.80}")
    return frame
