"""The single-op model file (``atc --singleop``; read by ``aclopSetModelDir`` / ``aclopLoad``):
its layout, its writer, and a reader that checks every field by type and range before use.

The file is an OM container: the 256-byte ``ModelFileHeader`` (magic bytes ``IMOD``, headsize
256, ``VERSION``, ``length`` = bytes after the header, the op type as ``name``, ``ops`` = 1)
then a ``ModelPartitionTable`` (u32 count, then per partition u32 type, u64 offset, u64 size;
offsets count from the end of the table, our choice where the real layout is not known):

| partition   | type | content                                                        |
|-------------|------|----------------------------------------------------------------|
| MODEL_DEF   | 0    | JSON: ``op`` type, ``input_desc`` / ``output_desc`` (``type``,  |
|             |      | ``format``, ``shape``, ``shape_range``, ``const`` hex or null,  |
|             |      | ``storage_format``), ``attr`` ([name, type, value], ...)        |
| TILING_DATA | 12   | JSON: ``tiling`` = [block_dim, rows, tile, loops]               |

The file carries **no code**: the loader builds the kernel from this description with the
local op compiler. Version 1 files (``0x20000000``) had a ``TBE_KERNELS`` partition of
marshalled byte code; they, and any file with a partition other than these two, are refused.
``MODEL_DEF`` is JSON where the real file has a protobuf.

Codes of a bad file (``ModelFileError.code``), as the real op model parser answers:

- ``ACL_ERROR_PARSE_MODEL`` (100013): no more than a header, or a header ``length`` that is
  not the real size; a field of the wrong type or out of range (dtype or format not an
  aclDataType / aclFormat, a dim below -2 or above ``DIM_MAX``, too many dims, a shape range
  that is not [lo, hi], const bytes that are not hex or not the descriptor's size, an
  attribute of the wrong type, a tiling outside ``compiler.check_tiling``'s ranges);
- ``ACL_ERROR_DESERIALIZE_MODEL`` (100012): not an OM container (magic, header size,
  version), a partition table that does not fit the file, a partition twice, one that is
  not ours (kernel code), ``MODEL_DEF`` or ``TILING_DATA`` missing or not a JSON map;
- ``ACL_ERROR_MODEL_MISSING_ATTR`` (100016): ``op``, ``input_desc``, ``output_desc``, a
  descriptor's ``type``/``format``/``shape`` or ``tiling`` absent.

Reading never raises anything else: ``read_path`` refuses what is not a regular file, reads
at most ``FILE_MAX`` bytes, and the parser slices only inside the bytes it has.
"""

from __future__ import annotations

import json
import math
import os
import stat
import struct
from dataclasses import dataclass
from typing import Any, cast

from npuemu.host.ops import compiler
from npuemu.host.ops import desc as D
from npuemu.host.ops import types as T
from npuemu.shared import errors

MAGIC = 0x444F4D49
HEADER = 256
VERSION = 0x20000002
"""Format version 2: no code partition (version 1, 0x20000000, carried marshalled code)."""
MODEL_DEF, TBE_KERNELS, TILING_DATA = 0, 3, 12
FILE_MAX = 64 << 20
"""Largest single-op file read (a description is KiB; const inputs may add some MiB)."""
MAX_PARTITIONS = 16
MAX_TENSORS = 256
MAX_DIMS = 128
DIM_MAX = (1 << 31) - 1
ELEMENTS_MAX = 1 << 48
MAX_ATTRS = 1024
MAX_LIST = 1 << 16
MAX_TEXT = 1 << 16
_ENTRY = struct.Struct("<IQQ")  # ModelPartitionMemInfo: type, mem_offset, mem_size
PARSE = errors.ACL_ERROR_PARSE_MODEL
DESERIALIZE = errors.ACL_ERROR_DESERIALIZE_MODEL
MISSING = errors.ACL_ERROR_MODEL_MISSING_ATTR


class ModelFileError(ValueError):
    """A single-op model file that cannot be used; ``code`` is the ACL code to return."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(detail)
        self.code = code


@dataclass
class OpModel:
    """What a valid file describes."""

    op_type: str
    ins: list[D.TensorDesc]
    outs: list[D.TensorDesc]
    attr: D.OpAttr
    tiling: compiler.Tiling


# writing -----------------------------------------------------------------------------------------
def _desc_json(d: D.TensorDesc) -> dict:
    return {"type": d.dtype, "format": d.format, "shape": list(d.dims),
            "shape_range": [list(r) for r in d.shape_range],
            "const": d.const.hex() if d.const is not None else None,
            "storage_format": d.storage_format}


def encode(op_type: str, ins: list[D.TensorDesc], outs: list[D.TensorDesc],
           attr: D.OpAttr | None, tiling: compiler.Tiling) -> bytes:
    """One single-op model file."""
    model_def = json.dumps({
        "op": op_type, "input_desc": [_desc_json(d) for d in ins],
        "output_desc": [_desc_json(d) for d in outs],
        "attr": [[k, t, v] for k, (t, v) in (attr.values.items() if attr else ())]}).encode()
    tiling_data = json.dumps({"tiling": compiler.tiling_list(tiling)}).encode()
    parts = [(MODEL_DEF, model_def), (TILING_DATA, tiling_data)]
    table = struct.pack("<I", len(parts))
    offset = 0
    for kind, blob in parts:
        table += _ENTRY.pack(kind, offset, len(blob))
        offset += len(blob)
    body = b"".join(blob for _k, blob in parts)
    header = bytearray(HEADER)
    struct.pack_into("<III", header, 0, MAGIC, HEADER, VERSION)
    struct.pack_into("<I", header, 76, len(table) + len(body))  # length (after the header)
    header[82:82 + 32] = op_type.encode()[:32].ljust(32, b"\0")  # name
    struct.pack_into("<I", header, 114, 1)  # ops
    return bytes(header) + table + body


# reading -----------------------------------------------------------------------------------------
def read_path(path: str) -> bytes:
    """The bytes of the file at ``path``: ModelFileError (100013) unless it is a regular
    file of at most ``FILE_MAX`` bytes; OSError if it cannot be opened. Never blocks on a
    FIFO or device (``O_NONBLOCK``, then ``fstat`` before any read)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ModelFileError(PARSE, f"{path} is not a regular file")
        if st.st_size > FILE_MAX:
            raise ModelFileError(PARSE, f"{path} has {st.st_size} bytes (at most {FILE_MAX})")
        chunks, left = [], st.st_size
        while left > 0 and (chunk := os.read(fd, left)):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def decode(data: bytes) -> OpModel:
    """The op a single-op model file describes; ModelFileError (see the module docstring)."""
    model_def, tiling_data = partitions(data)
    model = _json_map(model_def, "MODEL_DEF")
    for field in ("op", "input_desc", "output_desc"):
        if field not in model:
            raise ModelFileError(MISSING, f"MODEL_DEF has no {field!r}")
    op_type = model["op"]
    if not isinstance(op_type, str) or not 0 < len(op_type) <= 128:
        raise ModelFileError(PARSE, f"op type {op_type!r:.80} is not a name")
    tiling = _json_map(tiling_data, "TILING_DATA")
    if "tiling" not in tiling:
        raise ModelFileError(MISSING, "TILING_DATA has no 'tiling'")
    try:
        checked = compiler.check_tiling(tiling["tiling"])
    except ValueError as err:
        raise ModelFileError(PARSE, str(err)) from None
    return OpModel(op_type, _descs(model["input_desc"], "input"),
                   _descs(model["output_desc"], "output"), _attrs(model.get("attr") or []),
                   checked)


def partitions(data: bytes) -> tuple[bytes, bytes]:
    """``(MODEL_DEF, TILING_DATA)`` of a file after the header and table checks."""
    if not isinstance(data, bytes):
        raise ModelFileError(PARSE, f"a model is bytes, not {type(data).__name__}")
    if len(data) <= HEADER:
        raise ModelFileError(PARSE, f"{len(data)} bytes: no more than a model file header")
    (length,) = struct.unpack_from("<I", data, 76)
    if length + HEADER != len(data):
        raise ModelFileError(PARSE, f"header length {length} + {HEADER} is not the model's "
                                    f"size {len(data)}")
    magic, head, version = struct.unpack_from("<III", data, 0)
    if magic != MAGIC or head != HEADER:
        raise ModelFileError(DESERIALIZE, "not an OM file (no IMOD magic / header size)")
    if version != VERSION:
        raise ModelFileError(DESERIALIZE, f"single-op model version {version:#x} is not "
                             f"{VERSION:#x} (files of 0x20000000 carry kernel code and are not "
                             "read: rebuild them with npuemu atc --singleop)")
    (num,) = struct.unpack_from("<I", data, HEADER)
    base = HEADER + 4 + num * _ENTRY.size
    if not 0 < num <= MAX_PARTITIONS or base > len(data):
        raise ModelFileError(DESERIALIZE, f"partition table of {num} entries does not fit")
    parts: dict[int, bytes] = {}
    for i in range(num):
        kind, off, size = _ENTRY.unpack_from(data, HEADER + 4 + i * _ENTRY.size)
        if kind not in (MODEL_DEF, TILING_DATA) or kind in parts:
            raise ModelFileError(DESERIALIZE, f"partition type {kind} is not read (a "
                                 "single-op model holds MODEL_DEF and TILING_DATA once each, "
                                 "no kernel code)")
        if base + off + size > len(data):
            raise ModelFileError(DESERIALIZE, f"partition {kind} runs past the end of the file")
        parts[kind] = data[base + off : base + off + size]
    if len(parts) != 2:
        raise ModelFileError(DESERIALIZE, "MODEL_DEF or TILING_DATA partition missing")
    return parts[MODEL_DEF], parts[TILING_DATA]


def _json_map(blob: bytes, what: str) -> dict:
    try:
        value = json.loads(blob.decode("utf-8"))
    except (ValueError, RecursionError) as err:
        raise ModelFileError(DESERIALIZE, f"{what} is not JSON: {str(err)[:80]}") from None
    if not isinstance(value, dict):
        raise ModelFileError(DESERIALIZE, f"{what} is not a JSON map")
    return value


def _list(value: object, what: str, limit: int) -> list:
    if not isinstance(value, list) or len(value) > limit:
        raise ModelFileError(PARSE, f"{what} is not a list of at most {limit} items")
    return value


def _int(value: object, lo: int, hi: int, what: str) -> int:
    if type(value) is not int or not lo <= value <= hi:
        raise ModelFileError(PARSE, f"{what} {value!r:.40} is not an integer in [{lo}, {hi}]")
    return value


# descriptors -------------------------------------------------------------------------------------
def _descs(items: object, kind: str) -> list[D.TensorDesc]:
    return [_desc(it, f"{kind} {i}") for i, it in enumerate(_list(items, kind, MAX_TENSORS))]


def _desc(item: object, what: str) -> D.TensorDesc:
    if not isinstance(item, dict):
        raise ModelFileError(PARSE, f"{what} is not a map")
    for field in ("type", "format", "shape"):
        if field not in item:
            raise ModelFileError(MISSING, f"{what} has no {field!r}")
    dtype = _enum(item["type"], T.DATA_TYPES, f"{what} data type")
    fmt = _enum(item["format"], T.FORMATS, f"{what} format")
    dims = _dims(item["shape"], what)
    desc = D.TensorDesc(dtype, dims, fmt)
    desc.shape_range = _ranges(item.get("shape_range") or [], what)
    if item.get("storage_format") is not None:
        desc.storage_format = _enum(item["storage_format"], T.FORMATS, f"{what} storage format")
    if item.get("const") is not None:
        desc.const = _const(item["const"], desc, what)
    return desc


def _enum(value: object, table: dict, what: str) -> int:
    if type(value) is not int or value not in table:
        raise ModelFileError(PARSE, f"{what} {value!r:.40} is not a known value")
    return value


def _dims(value: object, what: str) -> tuple[int, ...]:
    dims = tuple(_int(d, -2, DIM_MAX, f"{what} dim")
                 for d in _list(value, f"{what} shape", MAX_DIMS))
    if -2 in dims and dims != (-2,):
        raise ModelFileError(PARSE, f"{what} shape {list(dims)}: -2 must be the only dim")
    if all(d >= 0 for d in dims) and math.prod(dims) > ELEMENTS_MAX:
        raise ModelFileError(PARSE, f"{what} shape {list(dims)} has more than 2**48 elements")
    return dims


def _ranges(value: object, what: str) -> tuple[tuple[int, int], ...]:
    out = []
    for pair in _list(value, f"{what} shape range", MAX_DIMS):
        if not isinstance(pair, list) or len(pair) != 2:
            raise ModelFileError(PARSE, f"{what} shape range item {pair!r:.40} is not [lo, hi]")
        lo = _int(pair[0], 0, DIM_MAX, f"{what} range low")
        hi = _int(pair[1], -1, DIM_MAX, f"{what} range high")
        if hi != -1 and hi < lo:
            raise ModelFileError(PARSE, f"{what} shape range [{lo}, {hi}] is empty")
        out.append((lo, hi))
    return tuple(out)


def _const(value: object, desc: D.TensorDesc, what: str) -> bytes:
    if desc.dynamic:
        raise ModelFileError(PARSE, f"{what}: a const input needs a static shape")
    need = desc.element_count() * T.data_type_size(desc.dtype)
    if not isinstance(value, str) or len(value) != 2 * need:
        raise ModelFileError(PARSE, f"{what} const is not {need} bytes as hex")
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise ModelFileError(PARSE, f"{what} const is not hex") from None


# attributes --------------------------------------------------------------------------------------
def _attrs(items: object) -> D.OpAttr:
    attr = D.OpAttr()
    for item in _list(items, "attr", MAX_ATTRS):
        if not isinstance(item, list) or len(item) != 3:
            raise ModelFileError(PARSE, f"attribute {item!r:.60} is not [name, type, value]")
        name, kind, value = item
        if not isinstance(name, str) or not 0 < len(name) <= 256:
            raise ModelFileError(PARSE, f"attribute name {name!r:.60} is not a name")
        if kind not in D.ATTR_TYPES:
            raise ModelFileError(PARSE, f"attribute {name}: type {kind!r:.40} is not known")
        attr.values[name] = (kind, _attr_value(kind, value, f"attribute {name}"))
    return attr


_INT64 = (-(1 << 63), (1 << 63) - 1)


def _scalar(kind: str, value: object, what: str) -> Any:
    if kind == "bool" and type(value) is bool:
        return value
    if kind == "int":
        return _int(value, *_INT64, what)
    if kind == "data_type":
        return _enum(value, T.DATA_TYPES, what)
    if kind == "float" and type(value) in (int, float):
        return float(cast(float, value))
    if kind == "string" and isinstance(value, str) and len(value) <= MAX_TEXT:
        return value
    raise ModelFileError(PARSE, f"{what}: {value!r:.40} is not a {kind}")


def _attr_value(kind: str, value: object, what: str) -> object:
    if kind == "list_list_int":
        return tuple(tuple(_int(v, *_INT64, what) for v in _list(row, what, MAX_LIST))
                     for row in _list(value, what, MAX_LIST))
    if kind.startswith("list_"):
        return tuple(_scalar(kind[5:], v, what) for v in _list(value, what, MAX_LIST))
    return _scalar(kind, value, what)
