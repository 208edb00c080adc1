"""Single-op model files (``atc --singleop``) and their static load (``aclopSetModelDir``,
``aclopLoad``).

A file is an OM container (reference §3.9): the 256-byte ``ModelFileHeader`` (magic bytes
``IMOD``, headsize 256, version 0x20000000, ``ops`` = 1, the op type as ``name``) followed by
a ``ModelPartitionTable`` of three partitions, offsets counted from the end of the table
(the reference leaves that UNVERIFIED; this is our choice):

| partition         | type | content                                                   |
|-------------------|------|-----------------------------------------------------------|
| MODEL_DEF         | 0    | JSON: op type, input/output descs (dtype, format, dims,   |
|                   |      | shape range, const bytes as hex), attrs ([type, value])   |
| TBE_KERNELS       | 3    | the marshalled kernel binary (``compiler.py``)            |
| TILING_DATA       | 12   | JSON: kernel name and tiling                              |

Loading registers the op in a process-wide static table; the first execution on a card puts
the binary in that card's HBM as a *static* entry: it never ages, and it is not a compile.
A model with dynamic dims (-1 with shape ranges, or ``{-2}``) is matched like a dynamic
compile: any concrete shape inside its ranges runs it, tiled at execute time.
``MODEL_DEF`` is JSON where the real file has a protobuf (the schema is UNVERIFIED).
"""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import threading
from typing import Any

from npuemu.host.ops import compiler, registry
from npuemu.host.ops import desc as D
from npuemu.host.ops import types as T
from npuemu.host.ops.cache import DeviceOpCache, Entry, Loaded

MAGIC = 0x444F4D49
HEADER = 256
MODEL_DEF, TBE_KERNELS, TILING_DATA = 0, 3, 12
OM_DIR_MAX_DEPTH = 3
_ENTRY = struct.Struct("<IQQ")  # ModelPartitionMemInfo: type, mem_offset, mem_size

STATIC: dict[tuple, dict[str, Any]] = {}
"""op-map key -> {"op", "ins", "outs", "attrs", "used", "code", "name", "tiling"}"""
STATIC_DYNAMIC: dict[tuple, list[dict[str, Any]]] = {}
"""shapeless key -> records of dynamic-shape models (-1 dims with ranges, or {-2})"""
_model_dir_set = [False]
_lock = threading.Lock()


# writing (atc --singleop) ----------------------------------------------------------------------
def _desc_json(d: D.TensorDesc) -> dict:
    return {"type": d.dtype, "format": d.format, "shape": list(d.dims),
            "shape_range": [list(r) for r in d.shape_range],
            "const": d.const.hex() if d.const is not None else None,
            "storage_format": d.storage_format}


def encode(op_type: str, ins: list[D.TensorDesc], outs: list[D.TensorDesc],
           attr: D.OpAttr | None, binary: compiler.KernelBinary) -> bytes:
    """One single-op model file."""
    model_def = json.dumps({
        "op": op_type, "input_desc": [_desc_json(d) for d in ins],
        "output_desc": [_desc_json(d) for d in outs],
        "attr": [[k, t, v] for k, (t, v) in (attr.values.items() if attr else ())],
        "python": importlib.util.MAGIC_NUMBER.hex()}).encode()
    tiling = json.dumps({"name": binary.name, "digest": binary.digest,
                         "tiling": list(binary.tiling.__dict__.values())}).encode()
    parts = [(MODEL_DEF, model_def), (TBE_KERNELS, binary.code), (TILING_DATA, tiling)]
    table = struct.pack("<I", len(parts))
    offset = 0
    for kind, blob in parts:
        table += _ENTRY.pack(kind, offset, len(blob))
        offset += len(blob)
    body = b"".join(blob for _k, blob in parts)
    header = bytearray(HEADER)
    struct.pack_into("<III", header, 0, MAGIC, HEADER, 0x20000000)
    struct.pack_into("<I", header, 76, len(table) + len(body))  # length (after checksum)
    header[82:82 + 32] = op_type.encode()[:32].ljust(32, b"\0")  # name
    struct.pack_into("<I", header, 114, 1)  # ops
    return bytes(header) + table + body


# reading ---------------------------------------------------------------------------------------
def decode(data: bytes) -> dict[str, Any]:
    """Parse a single-op model; ValueError when it is not one."""
    if len(data) < HEADER + 4 or struct.unpack_from("<I", data, 0)[0] != MAGIC:
        raise ValueError("not an OM file (no IMOD magic)")
    (num,) = struct.unpack_from("<I", data, HEADER)
    base = HEADER + 4 + num * _ENTRY.size
    parts = {}
    for i in range(num):
        kind, off, size = _ENTRY.unpack_from(data, HEADER + 4 + i * _ENTRY.size)
        if base + off + size > len(data):
            raise ValueError("partition past the end of the file")
        parts[kind] = data[base + off : base + off + size]
    if not {MODEL_DEF, TBE_KERNELS, TILING_DATA} <= parts.keys():
        raise ValueError("not a single-op model (partitions missing)")
    model = json.loads(parts[MODEL_DEF])
    if model.get("python") != importlib.util.MAGIC_NUMBER.hex():
        raise ValueError("compiled by another Python version (op library mismatch)")
    return {"model": model, "code": parts[TBE_KERNELS], "tiling": json.loads(parts[TILING_DATA])}


def _descs(items: list[dict]) -> list[D.TensorDesc]:
    out = []
    for it in items:
        d = D.TensorDesc(int(it["type"]), tuple(it["shape"]), int(it["format"]))
        d.shape_range = tuple(tuple(r) for r in it.get("shape_range") or ())
        d.storage_format = it.get("storage_format")
        if it.get("const") is not None:
            d.const = bytes.fromhex(it["const"])
        out.append(d)
    return out


def register_model(data: bytes) -> tuple:
    """Add one model to the static table; returns its key."""
    from npuemu.host.ops.executor import _representative, _shapeless, full_key, signature

    parsed = decode(data)
    model = parsed["model"]
    ins, outs = _descs(model["input_desc"]), _descs(model["output_desc"])
    attr = D.OpAttr()
    for name, kind, value in model.get("attr", ()):
        attr.values[name] = (kind, tuple(map(tuple, value)) if kind == "list_list_int"
                             else tuple(value) if kind.startswith("list") else value)
    op = registry.lookup(model["op"])
    present = [d for d in ins if not d.unused]
    key = full_key(op.type, present, outs, attr if attr.values else None)
    attrs = registry.attrs_of(op, {k: v for k, (_t, v) in attr.values.items()})
    from npuemu.host.ops.executor import _spec

    dynamic = any(d.dynamic for d in (*present, *outs))
    in_specs = [_spec(_representative(d) if dynamic else d) for d in present]
    out_specs = signature(op, in_specs, [] if dynamic else [_spec(d) for d in outs], attrs)
    record = {"op": op, "ins": in_specs, "outs": out_specs, "attrs": attrs,
              "used": tuple(i for i, d in enumerate(ins) if not d.unused),
              "code": parsed["code"], **parsed["tiling"]}
    with _lock:
        if dynamic:
            record["pattern"] = [(d.dims, d.shape_range) for d in present]
            record["key"] = key
            shapeless = _shapeless(op.type, present, outs, attr if attr.values else None)
            STATIC_DYNAMIC.setdefault(shapeless, []).append(record)
        else:
            STATIC[key] = record
    return key


def load_static(cache: DeviceOpCache, key: tuple) -> Entry | None:
    """A static entry on this card for ``key`` if a model was loaded for it."""
    found = STATIC.get(key)
    if found is None:
        return None
    binary = compiler.KernelBinary(found["op"].type, found["name"], found["op"].engine,
                                   found["code"], "", compiler.Tiling(*found["tiling"]),
                                   (), 0, found["digest"])
    from npuemu.host.ops.executor import _load

    loaded: Loaded = _load(cache, binary)
    entry = Entry(key, found["op"], found["ins"], found["outs"], found["attrs"], loaded,
                  binary.tiling, static=True, used=found["used"])
    cache.insert(entry)
    cache.stats.hits += 1
    return entry


def load_static_dynamic(cache: DeviceOpCache, shapeless: tuple) -> None:
    """Put the dynamic-shape models for ``shapeless`` on this card (once) as static entries
    that the executor's dynamic match tiles from."""
    for record in STATIC_DYNAMIC.get(shapeless, ()):
        if id(record) in cache.models_loaded:
            continue
        binary = compiler.KernelBinary(record["op"].type, record["name"], record["op"].engine,
                                       record["code"], "", compiler.Tiling(*record["tiling"]),
                                       (), 0, record["digest"])
        from npuemu.host.ops.executor import _load

        entry = Entry(record["key"], record["op"], record["ins"], record["outs"],
                      record["attrs"], _load(cache, binary), binary.tiling, static=True,
                      used=record["used"])
        entry.pattern = record["pattern"]  # type: ignore[attr-defined]
        cache.insert(entry)
        cache.dynamic.setdefault(shapeless, []).append(entry)
        cache.models_loaded.add(id(record))


def set_model_dir(path: object) -> int:
    """``aclopSetModelDir``: load every ``*.om`` up to 3 levels below ``path``. A second call
    is 100002; a path that cannot be resolved 100014; unparsable files are skipped (logged).
    Returns the number of models loaded."""
    if not isinstance(path, str) or not os.path.isdir(path):
        raise T.fail(T.ACL_ERROR_READ_MODEL_FAILURE, f"model dir {path!r} cannot be read")
    with _lock:
        if _model_dir_set[0]:
            raise T.fail(T.ACL_ERROR_REPEAT_INITIALIZE, "aclopSetModelDir was already called")
        _model_dir_set[0] = True
    from npuemu.host.core import plog
    from npuemu.shared import logring

    count = 0
    root_depth = path.rstrip(os.sep).count(os.sep)
    for folder, dirs, files in os.walk(path):
        if folder.rstrip(os.sep).count(os.sep) - root_depth >= OM_DIR_MAX_DEPTH:
            dirs[:] = []
        for name in sorted(files):
            if not name.endswith(".om"):
                continue
            try:
                with open(os.path.join(folder, name), "rb") as f:
                    register_model(f.read())
                count += 1
            except (OSError, ValueError, KeyError, TypeError) as err:
                plog.log(logring.WARNING, f"single-op model {name} skipped: {err}")
    return count


def load(data: bytes) -> None:
    """``aclopLoad``: one model from host memory (100000 if empty or not a model)."""
    if not data:
        raise T.fail(T.ACL_ERROR_INVALID_PARAM, "model size is 0")
    try:
        register_model(bytes(data))
    except (ValueError, KeyError, TypeError) as err:
        raise T.fail(T.ACL_ERROR_INVALID_PARAM, f"not a single-op model: {err}") from err


def reset() -> None:
    """Forget static models and allow set_model_dir again (tests, finalize)."""
    with _lock:
        STATIC.clear()
        STATIC_DYNAMIC.clear()
        _model_dir_set[0] = False
