"""The OM file: npuemu's own versioned container for an offline model.

It borrows the real container's outline (a 256-byte header starting with the
bytes ``IMOD``, then a partition table) but not its contents, which are our own. All integers
are little-endian. Layout, written once:

====== ====== =============================================================================
offset bytes  field
====== ====== =============================================================================
0      4      magic ``b"IMOD"`` (0x444F4D49 read as u32, as the real header)
4      4      u32 header size = 256
8      4      u32 format version (:data:`FORMAT_VERSION`); a reader refuses a newer one
12     32     the file's checksum, these 32 bytes zeroed while it is computed: version 2,
              XXH3-128 (16 bytes, then 16 zero bytes); version 1, sha256
44     8      u64 file length in bytes (header + table + partitions)
52     4      u32 number of partitions ``n``
56     1      u8 dynamic: 1 when built with ``--dynamic_batch_size``
57     32     model name, UTF-8, NUL-padded
89     167    reserved, zero
256    24*n   partition table: ``n`` entries of (u32 type, u32 reserved, u64 offset, u64 size);
              offsets count from the start of the file and are multiples of 64
...           partitions, each starting at a 64-byte aligned offset
====== ====== =============================================================================

Partitions (type numbers follow the real ``ModelPartitionType`` where one fits):

====== ================ ======================================================================
type   name             contents
====== ================ ======================================================================
0      MODEL_DEF        msgpack map: name, soc_version, framework, input/output names, formats,
                        dynamic batch gears, the ATC report (planner figures, streams)
1      WEIGHTS_DATA     raw weight bytes; each weight at a 64-byte aligned offset in it
2      TASK_INFO        msgpack list of programs (one per batch gear; one for a static model):
                        ``{batch, streams: [[task, ...], ...], events: [[id, producer,
                        consumer], ...], tasks: [[op_ref, [inputs], [outputs], stream], ...],
                        workspaces: [block name or "", one per task]}`` (``workspaces``: the
                        memory-plan block of each task's op scratch; absent = none)
8      TENSOR_DESC      msgpack list of ``[name, dtype, kind, [shape per program], location]``;
                        location: weight offset, workspace block name, or user buffer index
12     TILING_DATA      msgpack list of op references: ``[op_type, attrs, tiling]``, one per
                        distinct op signature (what the op library compiles once)
100    MEMORY_PLAN      msgpack map: workspace size, naive, lower bound, and
                        ``blocks: [[name, offset, size, producer, [users]], ...]``
====== ================ ======================================================================

:func:`read` rejects a truncated, corrupted, malformed or newer-version file with
``ACL_ERROR_GE_PARAM_INVALID`` (145000, the real loader's code for bad model content); a sealed
file (valid checksum and length) is still checked field by field for type and range
(``omcheck.py``) and cross-checked (:func:`validate`) before anything uses it.
:func:`read_file` refuses an unreadable or empty path, one larger than
:data:`MAX_FILE_BYTES` and anything but a regular file (a FIFO, ``/dev/zero``, a directory:
opened without blocking, refused before a byte is read) with
``ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID`` (145002), and reads no more than the file's size and
its header's declared length. Neither lets another exception out. :func:`open_file` reads
the same way but hands back the model while its weights are still arriving (``Weights``).

Threading model: ``open_file`` starts one thread per load that reads the WEIGHTS_DATA
partition into its place and hashes it; that thread alone touches its file descriptor, the
checksum and the place until it ends. The caller reads its verdict through
``Weights.finish`` (after a join) and must call it before it uses or frees the place.
Everything else here runs in the caller's thread and keeps no state.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np
import xxhash

from npuemu.host.models import omcheck
from npuemu.host.models.codes import (
    ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID,
    ACL_ERROR_GE_PARAM_INVALID,
    ModelError,
)

MAGIC = b"IMOD"
HEADER_SIZE = 256
FORMAT_VERSION = 2
"""Version 2 seals the file with XXH3-128, about ten times sha256's pace (version 1's,
still read): the checksum finds corruption, it is no signature, and hashing was the larger
part of loading a model of large weights."""
ALIGN = 64
_HEADER = struct.Struct("<4sII32sQIB32s")
_ENTRY = struct.Struct("<IIQQ")
_SUM = slice(12, 44)
MAX_FILE_BYTES = 1 << 34
"""Largest OM file read (16 GiB); a larger one is refused as a bad path (145002)."""

MODEL_DEF, WEIGHTS_DATA, TASK_INFO, TENSOR_DESC, TILING_DATA, MEMORY_PLAN = 0, 1, 2, 8, 12, 100
PARTITION_NAMES = {MODEL_DEF: "MODEL_DEF", WEIGHTS_DATA: "WEIGHTS_DATA", TASK_INFO: "TASK_INFO",
                   TENSOR_DESC: "TENSOR_DESC", TILING_DATA: "TILING_DATA",
                   MEMORY_PLAN: "MEMORY_PLAN"}


@dataclass
class OmModel:
    """A decoded OM file. ``weights`` is the raw WEIGHTS_DATA partition."""

    version: int
    name: str
    dynamic: bool
    model_def: dict[str, Any]
    tensors: list[list]
    programs: list[dict[str, Any]]
    op_refs: list[list]
    memory_plan: dict[str, Any]
    weights: bytes | np.ndarray  # a read file's: a uint8 view into the file's one buffer

    @property
    def weight_size(self) -> int:
        return len(self.weights)

    @property
    def work_size(self) -> int:
        return int(self.memory_plan["size"])


def _pad(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def pack_weights(arrays: dict[str, bytes]) -> tuple[bytes, dict[str, int]]:
    """Concatenate weights at 64-byte aligned offsets; returns the blob and each offset."""
    out, offsets, at = bytearray(), {}, 0
    for name, data in arrays.items():
        offsets[name] = at
        out += data
        at = _pad(at + len(data))
        out += b"\0" * (at - len(out))
    return bytes(out), offsets


def write(path: str | os.PathLike, om: OmModel) -> int:
    """Write ``om`` atomically (temporary file, then rename); returns the file size."""
    data = encode(om)
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise ModelError(100004, f"cannot write {path}: {exc}") from exc  # ACL_ERROR_WRITE_FILE
    return len(data)


def encode(om: OmModel) -> bytes:
    """The bytes of ``om`` in the layout of the module docstring."""
    def pack(obj: Any) -> bytes:
        return msgpack.packb(obj, use_bin_type=True)
    parts = [(MODEL_DEF, pack(om.model_def)), (WEIGHTS_DATA, om.weights),
             (TASK_INFO, pack(om.programs)), (TENSOR_DESC, pack(om.tensors)),
             (TILING_DATA, pack(om.op_refs)), (MEMORY_PLAN, pack(om.memory_plan))]
    at = _pad(HEADER_SIZE + _ENTRY.size * len(parts))
    table, body = bytearray(), bytearray()
    for ptype, blob in parts:
        table += _ENTRY.pack(ptype, 0, at, len(blob))
        body += blob if isinstance(blob, bytes) else blob.data  # a read file's weights: an array
        body += b"\0" * (_pad(len(blob)) - len(blob))
        at += _pad(len(blob))
    start = _pad(HEADER_SIZE + len(table))
    total = start + len(body)
    header = _HEADER.pack(MAGIC, HEADER_SIZE, om.version, b"\0" * 32, total, len(parts),
                          int(om.dynamic), om.name.encode()[:32])
    out = bytearray(header.ljust(HEADER_SIZE, b"\0"))
    out += table
    out += b"\0" * (start - len(out))
    out += body
    return seal(out)


def seal(data: bytearray) -> bytes:
    """The bytes of the OM image ``data`` with its checksum field written for the format
    version its header states (the field's own bytes are ignored)."""
    data[_SUM] = _digest_from(memoryview(data), _HEADER.unpack_from(data)[2]).digest()
    return bytes(data)


Place = Callable[[int], memoryview]
"""Where a read puts the weights: called once with the WEIGHTS_DATA size, returns a writable
buffer of that many bytes (a model load's device memory)."""
CHUNK_BYTES = 1 << 20
"""The weights are read into their place and hashed this many bytes at a time (each chunk
is hashed while it is still in the cache)."""


def read_file(path: str | os.PathLike, place: Place | None = None) -> OmModel:
    """``open_file`` with its weights read to the end and checked before it returns."""
    om, weights = open_file(path, place)
    weights.finish()
    return om


def open_file(path: str | os.PathLike, place: Place | None = None) -> tuple[OmModel, Weights]:
    """Read and decode an OM file, its weights perhaps still arriving (``Weights``): 145002
    if missing, unreadable, empty, larger than
    :data:`MAX_FILE_BYTES` or not a regular file (a FIFO, a device such as ``/dev/zero``, a
    directory: opened without blocking and refused before any read); 145000 if its
    header's length is not the file's. At most the declared length is read.

    With ``place``, the WEIGHTS_DATA partition is read straight into ``place(size)`` in
    chunks, hashed as it comes (the rest of the file is read first, the checksum compared
    after the last chunk); the model's ``weights`` are that buffer. That read runs in a
    thread of its own while the rest is decoded and checked, and goes on after this
    returns: ``Weights.finish`` waits for it and raises what it found (145000 for a file
    that shrank or whose checksum does not match, 145002 for a read error), also when
    decoding failed first, so a corrupted file is reported as such whichever part of it is
    bad. A file whose table is not plain (the partition missing, overlapping another, out
    of bounds) is read whole and its weights copied into the buffer, so its errors are the
    ones above. ``place`` is called at most once, and may have been called when the read
    fails (the caller releases what it gave once ``finish`` returned or raised: nothing
    writes it after that)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, TypeError, ValueError) as exc:
        raise _no_path(path, str(exc)) from exc
    try:
        with os.fdopen(fd, "rb") as f:
            total = _checked_size(f, path)
            staged = None if place is None else _stage(f, total)
            if staged is not None and place is not None:
                return _decode_staged(f, staged, place, path)
            data = _read_bounded(f, total)
    except OSError as exc:
        raise _no_path(path, str(exc)) from exc
    except MemoryError as exc:  # a large (or sparse) file this host cannot hold
        raise _no_path(path, "too large for this host's memory") from exc
    om = _decode_guarded(data)  # the buffer is this call's own: decoded without a copy
    if place is not None:
        weights = np.frombuffer(place(om.weight_size), np.uint8)
        weights[:] = np.frombuffer(om.weights, np.uint8)
        om.weights = weights
    return om, READ


@dataclass
class _Staged:
    """A file read but for its weights: the bytes before and after WEIGHTS_DATA and the
    partition's place in the file."""

    pre: bytes
    post: bytes
    offset: int
    size: int
    total: int


def _stage(f: Any, total: int) -> _Staged | None:
    """Read all of the file but WEIGHTS_DATA, or None (then it is read whole) unless the
    header and table are plain: the magic, a supported version, the declared length, and
    a WEIGHTS_DATA partition that no other partition overlaps."""
    fd = f.fileno()
    head = os.pread(fd, HEADER_SIZE, 0)
    if len(head) < HEADER_SIZE:
        return None
    magic, hsize, version, _digest, declared, count, _dyn, _name = _HEADER.unpack_from(head)
    if (magic != MAGIC or hsize != HEADER_SIZE or not 0 < version <= FORMAT_VERSION
            or declared != total or HEADER_SIZE + count * _ENTRY.size > total):
        return None
    table = os.pread(fd, count * _ENTRY.size, HEADER_SIZE)
    if len(table) != count * _ENTRY.size:
        return None
    entries = [_ENTRY.unpack_from(table, k * _ENTRY.size) for k in range(count)]
    weights = [(off, size) for ptype, _, off, size in entries if ptype == WEIGHTS_DATA]
    if len(weights) != 1:
        return None
    off, size = weights[0]
    end = off + size
    if off % ALIGN or off < HEADER_SIZE + count * _ENTRY.size or end > total:
        return None
    if any(ptype != WEIGHTS_DATA and o < end and off < o + n for ptype, _, o, n in entries):
        return None
    pre, post = os.pread(fd, off, 0), os.pread(fd, total - end, end)
    if len(pre) != off or len(post) != total - end:
        raise _bad(f"OM file shrank while read: {len(pre) + len(post) + size} of {total}")
    return _Staged(pre, post, off, size, total)


def _decode_staged(f: Any, staged: _Staged, place: Place,
                   path: object) -> tuple[OmModel, Weights]:
    """``staged``'s weights read from ``f`` into ``place(size)`` by a ``Weights`` thread
    while the file is decoded as ``_decode`` does (same checks, same codes; a failed
    checksum before any error of the decoding)."""
    dest = place(staged.size)
    if len(dest) != staged.size:
        raise ValueError(f"a weights place of {len(dest)} bytes for {staged.size}")
    weights = Weights(os.dup(f.fileno()), staged, dest, path)
    pre = memoryview(staged.pre)
    end = staged.offset + staged.size

    def part(off: int, size: int) -> memoryview:
        if off + size <= staged.offset:
            return pre[off:off + size]
        if off >= end:
            return memoryview(staged.post)[off - end:off - end + size]
        return dest  # the one WEIGHTS_DATA partition (_stage checked nothing overlaps it)

    try:
        return _build(pre, part, staged.total), weights
    except BaseException as exc:
        weights.finish()  # a corrupted file says so first
        if isinstance(exc, ModelError) or not isinstance(exc, Exception):
            raise
        raise ModelError(ACL_ERROR_GE_PARAM_INVALID, f"malformed OM file: {exc!r}") from exc


class Weights:
    """The WEIGHTS_DATA partition of a file being read into its place: a thread reads it in
    ``CHUNK_BYTES`` pieces (``os.preadv``, which lets other threads run meanwhile) and
    feeds them to the file's checksum between the bytes before and after it, each piece
    while it is still in the cache. ``finish`` (blocks until the read ends; a regular
    file's read, as the synchronous one was) raises what it found, every time it is
    called."""

    def __init__(self, fd: int, staged: _Staged, dest: memoryview, path: object) -> None:
        self._fd, self._staged, self._dest, self._path = fd, staged, dest, path
        self._error: ModelError | None = None
        self._thread = threading.Thread(target=self._read, name="npuemu-om-weights",
                                        daemon=True)
        try:
            self._thread.start()
        except BaseException:
            os.close(fd)
            raise

    def _read(self) -> None:
        staged, dest = self._staged, self._dest
        try:
            pre = memoryview(staged.pre)
            check = _digest_from(pre, _HEADER.unpack_from(pre)[2])
            at = 0
            while at < staged.size:
                piece = dest[at:min(at + CHUNK_BYTES, staged.size)]
                got = os.preadv(self._fd, [piece], staged.offset + at)
                if not got:
                    raise _bad(f"OM file shrank while read: {staged.offset + at} of "
                               f"{staged.total} bytes")
                check.update(dest[at:at + got])
                at += got
            check.update(staged.post)
            if check.digest() != _HEADER.unpack_from(pre)[3]:
                raise _bad("OM file checksum mismatch: corrupted")
        except ModelError as exc:
            self._error = exc
        except OSError as exc:
            self._error = _no_path(self._path, str(exc))
        except Exception as exc:  # anything else is the file's fault too
            self._error = _bad(f"OM weights unreadable: {exc!r}")
        finally:
            os.close(self._fd)

    def finish(self) -> None:
        """Wait for the read; raise its error (145000 or 145002) if it had one."""
        self._thread.join()
        if self._error is not None:
            raise self._error


class _Read(Weights):
    """``Weights`` of a file read whole (or without a place): nothing left to wait for."""

    def __init__(self) -> None:
        pass

    def finish(self) -> None:
        """Nothing to wait for."""


READ = _Read()
"""The ``Weights`` of a model whose weights are already in place."""


class _Seal:
    """The checksum of one format version, fed in file order; ``digest`` is the header's
    32-byte field."""

    def __init__(self, version: int) -> None:
        self._hash: Any = hashlib.sha256() if version == 1 else xxhash.xxh3_128()

    def update(self, data: bytes | memoryview) -> None:
        self._hash.update(data)

    def digest(self) -> bytes:
        return self._hash.digest().ljust(_SUM.stop - _SUM.start, b"\0")


def _digest_from(head: memoryview, version: int) -> _Seal:
    """The checksum of ``version`` fed the file's first bytes ``head`` (the header at
    least) with the checksum field zeroed: the file's once the rest is added in file
    order."""
    check = _Seal(version)
    check.update(head[:_SUM.start])
    check.update(bytes(_SUM.stop - _SUM.start))
    check.update(head[_SUM.stop:])
    return check


def _no_path(path: object, detail: str) -> ModelError:
    return ModelError(ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID, f"{path!r}: {detail}")


def _checked_size(f: Any, path: object) -> int:
    """The file's length, once it is known to be a regular file of 1 to MAX_FILE_BYTES
    bytes whose header declares that length."""
    st = os.fstat(f.fileno())
    if not stat.S_ISREG(st.st_mode):
        raise _no_path(path, "not a regular file")
    if st.st_size == 0 or st.st_size > MAX_FILE_BYTES:
        raise _no_path(path, f"size {st.st_size} (an OM file has 1 to {MAX_FILE_BYTES} bytes)")
    head = os.pread(f.fileno(), HEADER_SIZE, 0)
    total = _HEADER.unpack_from(head)[4] if len(head) == HEADER_SIZE else len(head)
    if total != st.st_size:
        raise _bad(f"OM file length {st.st_size} does not match its header ({total}): "
                   "truncated or extended")
    return int(total)


def _read_bounded(f: Any, total: int) -> bytes:
    """The file's ``total`` bytes (``_checked_size``), never more."""
    data = f.read(total)  # one buffer (the weights stay views of it)
    if len(data) != total:
        raise _bad(f"OM file shrank while read: {len(data)} of {total} bytes")
    return data


def read(data: bytes | bytearray | memoryview) -> OmModel:
    """Decode an OM image held in host memory (see module doc for the errors); a mutable
    image is copied once (the caller may reuse its memory)."""
    return _decode_guarded(bytes(data))


def _decode_guarded(data: bytes | bytearray) -> OmModel:
    try:
        return _decode(data)
    except ModelError:
        raise
    except Exception as exc:  # malformed content of any shape: never crash the caller
        raise ModelError(ACL_ERROR_GE_PARAM_INVALID, f"malformed OM file: {exc!r}") from exc


def _bad(detail: str) -> ModelError:
    return ModelError(ACL_ERROR_GE_PARAM_INVALID, detail)


def _decode(data: bytes | bytearray) -> OmModel:
    if len(data) < HEADER_SIZE:
        raise _bad(f"truncated OM file: {len(data)} bytes, header needs {HEADER_SIZE}")
    magic, head, version, digest, total = _HEADER.unpack_from(data)[:5]
    if magic != MAGIC or head != HEADER_SIZE:
        raise _bad(f"not an OM file (magic {magic!r}, header size {head})")
    if version > FORMAT_VERSION or version == 0:
        raise _bad(f"OM format version {version} is not supported (this reader: "
                   f"{FORMAT_VERSION})")
    if total != len(data):
        raise _bad(f"OM file length {len(data)} does not match its header ({total}): "
                   "truncated or extended")
    view = memoryview(data)
    check = _digest_from(view, version)
    if check.digest() != digest:
        raise _bad("OM file checksum mismatch: corrupted")
    return _build(view, lambda off, size: view[off:off + size], len(data))


def _build(head: memoryview, part: Callable[[int, int], memoryview], total: int) -> OmModel:
    """The model of a checked file: ``head`` holds its header and partition table, ``part``
    gives the bytes of a partition by offset and size, ``total`` is the file's length."""
    version, _digest, _total, count, dynamic, name = _HEADER.unpack_from(head)[2:]
    parts = _partitions(head, count, total, part)
    om = OmModel(version, name.rstrip(b"\0").decode(), bool(dynamic),
                 _unpack(parts, MODEL_DEF), _unpack(parts, TENSOR_DESC),
                 _unpack(parts, TASK_INFO), _unpack(parts, TILING_DATA),
                 _unpack(parts, MEMORY_PLAN), np.frombuffer(parts[WEIGHTS_DATA], np.uint8))
    validate(om)
    return om


def _partitions(table: memoryview, count: int, total: int,
                part: Callable[[int, int], memoryview]) -> dict[int, memoryview]:
    """Each partition as a view (``part``, no copy) of a file of ``total`` bytes whose
    header and table are in ``table``."""
    if HEADER_SIZE + count * _ENTRY.size > min(total, len(table)):
        raise _bad(f"partition table of {count} entries runs past the end of the file")
    parts = {}
    for k in range(count):
        ptype, _, off, size = _ENTRY.unpack_from(table, HEADER_SIZE + k * _ENTRY.size)
        if off % ALIGN or off + size > total or off < HEADER_SIZE:
            raise _bad(f"partition {ptype} at {off}+{size} is outside the file or unaligned")
        parts[ptype] = part(off, size)
    missing = sorted(PARTITION_NAMES[t] for t in set(PARTITION_NAMES) - set(parts))
    if missing:
        raise _bad(f"OM file lacks partitions {missing}")
    return parts


def _unpack(parts: dict[int, memoryview], ptype: int) -> Any:
    return msgpack.unpackb(parts[ptype], raw=False, strict_map_key=False)


def validate(om: OmModel) -> None:
    """Check every field's type and range (``omcheck.py``), then cross-check the
    partitions: every reference resolves, every range is in bounds."""
    omcheck.check(om.model_def, om.tensors, om.programs, om.op_refs, om.memory_plan,
                  om.weight_size)
    names = {}
    blocks = {b[0]: b for b in om.memory_plan["blocks"]}
    for name, _dtype, kind, shapes, where in om.tensors:
        names[name] = kind
        if len(shapes) != len(om.programs):
            raise _bad(f"tensor {name!r}: {len(shapes)} shapes for {len(om.programs)} programs")
        if kind == "weight" and not (where[0] >= 0 and where[0] + where[1] <= om.weight_size):
            raise _bad(f"weight {name!r} at {where} lies outside the weights partition")
        if kind == "intermediate" and where not in blocks:
            raise _bad(f"tensor {name!r} has no block in the memory plan")
    for _name, off, size, *_ in blocks.values():
        if off < 0 or off + size > om.work_size:
            raise _bad(f"block at {off}+{size} outside the workspace of {om.work_size}")
    for prog in om.programs:
        for op_ref, ins, outs, stream in prog["tasks"]:
            if not 0 <= op_ref < len(om.op_refs) or not 0 <= stream < len(prog["streams"]):
                raise _bad(f"task refers to op {op_ref} / stream {stream} that do not exist")
            unknown = [t for t in [*ins, *outs] if t and t not in names]
            if unknown:
                raise _bad(f"task refers to unknown tensors {unknown}")
        scratch = prog.get("workspaces", [""] * len(prog["tasks"]))
        if not isinstance(scratch, list) or len(scratch) != len(prog["tasks"]) or any(
                ws and ws not in blocks for ws in scratch):
            raise _bad("the tasks' workspace blocks do not match the memory plan")
