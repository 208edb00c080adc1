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

Every field's type and range is written once, in ``REQUEST_FIELDS`` (requests) and
``TASK_FIELDS`` (stream tasks) below: most integers are u64 (``0 <= v < 2**64``), counts of a
stream task are below 2**63, strings have their limits. ``check_request`` / ``check_task``
apply them; a frame that breaks them is a ``BadFrame`` (answered with 107000 when it carries
a ``seq``). A field deeper than a value (model steps, kernel arguments) is ``nested``: its
executor checks it, with the same BadFrame.

``PROTOCOL_VERSION`` is written in every region header; a worker rejects a client whose
version differs (client slot state REJECTED), so mixed installs fail at attach, not later.
(4: arenas with far pages and their page tables, ``shared/pages.py``.)
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, NamedTuple

import msgpack

from npuemu.shared.kernel import MAX_BLOCKS
from npuemu.shared.layout import MAX_EVENTS

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
COUNT_LIMIT = 1 << 63

Check = Callable[[object], Any]
"""A field's check: returns the value as the handler gets it, or raises BadFrame."""


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
    """The UTF-8 bytes of an ``OP_LOAD``'s kernel source; BadFrame unless ``source`` passes
    ``op_source`` and ``name`` is a ``str`` of at most ``OP_NAME_MAX`` characters (the
    ``OP_LOAD`` row of ``REQUEST_FIELDS``)."""
    text, _name = _checked(Op.OP_LOAD, REQUEST_FIELDS, _REQUEST_CHECKS[Op.OP_LOAD],
                           (source, name))
    image: bytes = text.encode("utf-8")
    return image


def count(value: object) -> int:
    """A byte count: a u64 that also fits a signed size_t (ctypes), so below 2**63."""
    n = u64(value)
    if n >= COUNT_LIMIT:
        raise BadFrame(f"count {n} too large")
    return n


def flag(value: object) -> int:
    """0 or 1."""
    if type(value) is not int or value not in (0, 1):
        raise BadFrame(f"expected 0 or 1, got {value!r:.40}")
    return value


def event_slot(value: object) -> int:
    """An event slot of the client's event table: below ``layout.MAX_EVENTS``."""
    slot = u64(value)
    if slot >= MAX_EVENTS:
        raise BadFrame(f"event slot {slot} not in [0, {MAX_EVENTS})")
    return slot


def blocks(value: object) -> int:
    """A kernel launch's block count: 1 to ``kernel.MAX_BLOCKS``."""
    n = u64(value)
    if not 1 <= n <= MAX_BLOCKS:
        raise BadFrame(f"num_blocks {n} not in [1, {MAX_BLOCKS}]")
    return n


def text(limit: int | None = None) -> Check:
    """A check of a ``str`` of at most ``limit`` characters (any length if None)."""
    def check(value: object) -> str:
        if type(value) is not str:
            raise BadFrame(f"expected a string, got {value!r:.60}")
        if limit is not None and len(value) > limit:
            raise BadFrame(f"string of {len(value)} characters (at most {limit})")
        return value
    return check


def u64_array(limit: int) -> Check:
    """A check of an array of at most ``limit`` u64."""
    def check(value: object) -> tuple[int, ...]:
        if not isinstance(value, tuple | list) or len(value) > limit:
            raise BadFrame(f"expected an array of at most {limit} integers, got {value!r:.60}")
        return tuple(u64(v) for v in value)
    return check


def params(value: object) -> dict[str, Any]:
    """A map of parameter names (str) to values (those the receiver checks)."""
    if not isinstance(value, dict) or not all(type(k) is str for k in value):
        raise BadFrame(f"expected a map of parameter names, got {value!r:.60}")
    return value


def nested(value: object) -> object:
    """A field deeper than a value (model steps, kernel arguments, collective counts): passed
    on as decoded, and checked field by field by the module that executes it (the table's
    comment names it)."""
    return value


def op_source(value: object) -> str:
    """An ``OP_LOAD``'s kernel source: a non-empty ``str`` of at most ``OP_SOURCE_MAX`` UTF-8
    bytes (never bytes: marshalled code or anything else is refused)."""
    if type(value) is not str:
        raise BadFrame("OP_LOAD takes the kernel's Python source (str) and a name (str)")
    if not value or len(value) > OP_SOURCE_MAX:
        raise BadFrame(f"OP_LOAD source of {len(value)} characters (1 to {OP_SOURCE_MAX})")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeError as err:
        raise BadFrame(f"OP_LOAD source is not encodable as UTF-8: {err}") from None
    if size > OP_SOURCE_MAX:
        raise BadFrame(f"OP_LOAD source of {size} bytes (at most {OP_SOURCE_MAX})")
    return value


class Field(NamedTuple):
    """One argument of a frame: its name (as in the tables above) and its check, which
    returns the value (as the handler gets it) or raises BadFrame."""

    name: str
    check: Check


def _fields(*pairs: tuple[str, Check]) -> tuple[Field, ...]:
    return tuple(Field(name, check) for name, check in pairs)


SHM_NAME_MAX = 255
"""Longest POSIX shared-memory name (NAME_MAX): pinned blocks and communicator segments."""
FAULT_NAME_MAX = 64

REQUEST_FIELDS: dict[int, tuple[Field, ...]] = {
    Op.PING: (),
    Op.MALLOC: _fields(("size", u64), ("policy", u64)),
    Op.FREE: _fields(("ptr", u64)),
    Op.MEM_INFO: _fields(("attr", u64)),
    Op.COPY: _fields(("dst", u64), ("src", u64), ("count", u64)),
    Op.MEMSET: _fields(("ptr", u64), ("value", u64), ("count", u64)),
    Op.SNAPSHOT: (),
    Op.STREAM_CREATE: _fields(("slot", u64), ("priority", u64), ("flags", u64)),
    Op.STREAM_DESTROY: _fields(("slot", u64)),
    Op.STREAM_MODE: _fields(("slot", u64), ("mode", u64)),
    Op.STREAM_ABORT: _fields(("slot", u64)),
    Op.PIN: _fields(("host address", u64), ("size", u64),
                    ("segment name", text(SHM_NAME_MAX))),
    Op.UNPIN: _fields(("host address", u64)),
    Op.BINARY_LOAD: _fields(("source", text()), ("file name", text())),
    Op.BINARY_UNLOAD: _fields(("bin id", u64)),
    Op.CALLBACK_DONE: _fields(("slot", u64), ("task seq", u64)),
    Op.INJECT: _fields(("fault name", text(FAULT_NAME_MAX)), ("parameters", params)),
    Op.SET_TIMEOUT: _fields(("timeout us", u64)),
    Op.OP_LOAD: _fields(("kernel source", op_source), ("name", text(OP_NAME_MAX))),
    Op.OP_UNLOAD: _fields(("bin id", u64), ("ptr", u64)),
    Op.MEM_POOLS: (),
    Op.IPC_EXPORT: _fields(("ptr", u64)),
    Op.IPC_SET_PID: _fields(("share key", u64), ("host pid", u64)),
    Op.IPC_IMPORT: _fields(("share key", u64)),
    Op.IPC_CLOSE: _fields(("ptr", u64)),
    Op.MEM_MERGE: (),
    # the steps: device/exec/model.py checks each one
    Op.MODEL_LOAD: _fields(("model id", u64), ("n inputs", u64), ("n outputs", u64),
                           ("steps", nested)),
    Op.MODEL_UNLOAD: _fields(("model id", u64)),
    Op.COMM_ATTACH: _fields(("segment name", text(SHM_NAME_MAX)), ("rank or comm id", u64)),
    Op.VMM_MAP: _fields(("va", u64), ("reservation size", u64), ("offset", u64),
                        ("physical ptr", u64), ("size", u64)),
    Op.VMM_UNMAP: _fields(("va", u64), ("offset", u64)),
}
"""Each request op's arguments (after ``op, seq``), in order: the one statement of their
types and ranges, which ``check_request`` applies."""

TASK_FIELDS: dict[int, tuple[Field, ...]] = {
    Op.COPY_ASYNC: _fields(("dst", u64), ("src", u64), ("count", count)),
    Op.MEMSET_ASYNC: _fields(("ptr", u64), ("value", u64), ("count", count)),
    Op.RECORD: _fields(("event slot", event_slot), ("generation", u64)),
    Op.RESET_EVENT: _fields(("event slot", event_slot)),
    Op.WAIT_EVENT: _fields(("event slot", event_slot), ("generation", u64),
                           ("timeout ms", u64)),
    # the kernel arguments: device/exec/kernels.py
    Op.LAUNCH: _fields(("bin id", u64), ("kernel name", text()), ("blocks", blocks),
                       ("args", nested)),
    Op.CALLBACK: _fields(("callback id", u64), ("block", flag)),
    # the address arrays: device/exec/model.py
    Op.MODEL_EXECUTE: _fields(("model id", u64), ("inputs", nested), ("outputs", nested)),
    # the names (kind, algo, dtype, op) and the counts: device/exec/collective.py
    Op.COLLECTIVE: _fields(("comm id", u64), ("kind", nested), ("algo", nested),
                           ("dtype", nested), ("op", nested), ("root", u64), ("count", u64),
                           ("send", u64), ("recv", u64), ("timeout ms", u64),
                           ("counts", nested)),
    # the kind, picture records and parameters: device/exec/dvpp.py
    Op.DVPP: _fields(("kind", nested), ("records", nested), ("parameters", nested)),
}
"""Each stream task op's arguments (after ``op, submit, stream slot, task seq``)."""


def reply_seq(frame: Frame) -> int:
    """The ``seq`` a request's answer carries: field 1 when it is a valid non-zero u64, else 0
    (no answer: a frame whose seq cannot be read is only counted and logged)."""
    seq = frame[1] if len(frame) > 1 else 0
    return seq if type(seq) is int and 0 < seq < U64_LIMIT else 0


def check_request(frame: Frame) -> tuple[int, tuple[Any, ...]]:
    """``(op, args)`` of a request frame ``[op, seq, *args]`` whose every field follows
    ``REQUEST_FIELDS``; BadFrame naming the first field that does not."""
    op = frame[0]
    if type(op) is not int:
        raise BadFrame(f"op {op!r:.40} is not an integer")
    checks = _REQUEST_CHECKS.get(op)
    if checks is None:
        raise BadFrame(f"op {op} is not a request of protocol {PROTOCOL_VERSION}")
    if len(frame) != 2 + len(checks):
        raise BadFrame(f"op {Op(op).name} takes {len(checks)} arguments, got {len(frame) - 2}")
    u64(frame[1])
    return op, _checked(op, REQUEST_FIELDS, checks, frame[2:])


def check_task(frame: Frame) -> tuple[int, int, int, int, tuple[Any, ...]]:
    """``(op, submit, stream slot, task seq, args)`` of a stream task frame whose every field
    follows ``TASK_FIELDS`` (its nested fields still to be checked by their executor);
    BadFrame naming the first field that does not."""
    op = frame[0]
    checks = _TASK_CHECKS.get(op) if type(op) is int else None
    if checks is None:
        raise BadFrame(f"op {op!r:.40} is not a stream task")
    if len(frame) != 4 + len(checks):
        raise BadFrame(f"task op {Op(op).name} takes {len(checks)} arguments, "
                       f"got {len(frame) - 4}")
    submit, slot, seq = (u64(v) for v in frame[1:4])
    return op, submit, slot, seq, _checked(op, TASK_FIELDS, checks, frame[4:])


_REQUEST_CHECKS = {op: tuple(f.check for f in fields) for op, fields in REQUEST_FIELDS.items()}
_TASK_CHECKS = {op: tuple(f.check for f in fields) for op, fields in TASK_FIELDS.items()}
"""The check functions of each row, in order (what the fast path runs)."""


def _checked(op: int, table: dict[int, tuple[Field, ...]], checks: tuple[Check, ...],
             values: tuple[Any, ...]) -> tuple[Any, ...]:
    """The checked values; on a failure, BadFrame naming the op and the field."""
    try:
        return tuple([check(value) for check, value in zip(checks, values, strict=True)])
    except BadFrame:
        for field, value in zip(table[op], values, strict=True):
            try:
                field.check(value)
            except BadFrame as err:
                raise BadFrame(f"{Op(op).name} {field.name}: {err}") from None
        raise


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
