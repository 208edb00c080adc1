"""Single-op model files (``atc --singleop``) and their static load (``aclopSetModelDir``,
``aclopLoad``).

The file (``opfile.py``: layout, writer, checked reader) describes an op (type, descriptors,
attributes, tiling) and carries no code. Loading checks every field, then builds the kernel
from that description with the local op compiler, through this user's own disk cache
(``diskcache.py``, trusted only if no one else can write it), and registers it in a
process-wide static table; the first execution on a card puts the binary in that card's HBM
as a *static* entry: it never ages, and it is not a compile. A model with dynamic dims (-1
with shape ranges, or ``{-2}``) is matched like a dynamic compile: any concrete shape inside
its ranges runs it, tiled at execute time.

Codes: a bad file is the code ``opfile.decode`` gives (100012 / 100013 / 100016, as the real
op model parser); a description the op library refuses is the code ``aclopCompile`` would
answer for it (100020 unknown op type, 100021 / 100022 counts, 100026 data type, ...), and a
description it cannot handle at all (any other exception of its shape inference or source
generation) is 100013 with that exception in the message. ``aclopLoad`` returns that code;
``aclopSetModelDir`` skips such a file with a warning in the host log, as the real one does.

Threading model: ``STATIC``, ``STATIC_DYNAMIC`` and the set-once flag of ``set_model_dir`` are
changed under ``_lock``; the executor reads them without it (dict reads are atomic under the
GIL). Building a model's kernel happens before ``_lock`` is taken.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from npuemu.host.core import plog
from npuemu.host.ops import binaries, compiler, opfile, registry
from npuemu.host.ops import desc as D
from npuemu.host.ops import signature as S
from npuemu.host.ops import types as T
from npuemu.host.ops.cache import DeviceOpCache, Entry
from npuemu.host.ops.opfile import ModelFileError
from npuemu.shared import errors, logring

OM_DIR_MAX_DEPTH = 3

STATIC: dict[tuple, dict[str, Any]] = {}
"""op-map key -> {"op", "ins", "outs", "attrs", "used", "binary"}"""
STATIC_DYNAMIC: dict[tuple, list[dict[str, Any]]] = {}
"""shapeless key -> records of dynamic-shape models (-1 dims with ranges, or {-2})"""
_model_dir_set = [False]
_lock = threading.Lock()


def encode(op_type: str, ins: list[D.TensorDesc], outs: list[D.TensorDesc],
           attr: D.OpAttr | None, binary: compiler.KernelBinary) -> bytes:
    """One single-op model file for a signature ``binary`` was built for (its tiling is
    kept; its source is not: the loader compiles its own)."""
    return opfile.encode(op_type, ins, outs, attr, binary.tiling)


def register_model(data: bytes) -> tuple:
    """Check one model, build its kernel and add it to the static table; returns its key.
    ModelFileError or AclError for a model that cannot be used (see the module docstring)."""
    model = opfile.decode(data)
    try:
        record, key, shapeless = _record(model)
    except errors.AclError:
        raise
    except Exception as err:  # the op library failing on a checked description: 100013
        raise ModelFileError(errors.ACL_ERROR_PARSE_MODEL,
                             f"the op library cannot build {model.op_type} as described: "
                             f"{err!r:.200}") from None
    with _lock:
        if shapeless is not None:
            STATIC_DYNAMIC.setdefault(shapeless, []).append(record)
        else:
            STATIC[key] = record
    return key


def _record(model: opfile.OpModel) -> tuple[dict[str, Any], tuple, tuple | None]:
    """The static-table record of a checked model, its key, and its shapeless key if it is
    dynamic (else None). Builds the kernel (disk cache, else the compiler)."""
    op = registry.lookup(model.op_type)
    ins, outs = model.ins, model.outs
    attr = model.attr if model.attr.values else None
    present = [d for d in ins if not d.unused]
    key = S.full_key(op.type, present, outs, attr)
    attrs = registry.attrs_of(op, {k: v for k, (_t, v) in model.attr.values.items()})
    dynamic = any(d.dynamic for d in (*present, *outs))
    in_specs = [S.spec(S.representative(d) if dynamic else d) for d in present]
    out_specs = S.outputs(op, in_specs, [] if dynamic else [S.spec(d) for d in outs], attrs)
    binary, _from_disk = binaries.build(op, in_specs, out_specs, attrs, key, model.tiling)
    record = {"op": op, "ins": in_specs, "outs": out_specs, "attrs": attrs,
              "used": tuple(i for i, d in enumerate(ins) if not d.unused), "binary": binary}
    if not dynamic:
        return record, key, None
    record["pattern"] = [(d.dims, d.shape_range) for d in present]
    record["key"] = key
    return record, key, S.shapeless_key(op.type, present, outs, attr)


def load_static(cache: DeviceOpCache, key: tuple) -> Entry | None:
    """A static entry on this card for ``key`` if a model was loaded for it."""
    found = STATIC.get(key)
    if found is None:
        return None
    binary: compiler.KernelBinary = found["binary"]
    loaded = cache.load_binary(binary)
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
        binary: compiler.KernelBinary = record["binary"]
        entry = Entry(record["key"], record["op"], record["ins"], record["outs"],
                      record["attrs"], cache.load_binary(binary), binary.tiling, static=True,
                      used=record["used"])
        entry.pattern = record["pattern"]  # type: ignore[attr-defined]
        cache.insert(entry)
        cache.dynamic.setdefault(shapeless, []).append(entry)
        cache.models_loaded.add(id(record))


def set_model_dir(path: object) -> int:
    """``aclopSetModelDir``: load every ``*.om`` up to 3 levels below ``path``. A second call
    is 100002; a path that cannot be resolved 100014; files that are not regular, cannot be
    read or are not usable models are skipped (a WARNING line in the host log says why).
    Returns the number of models loaded."""
    if not isinstance(path, str) or not os.path.isdir(path):
        raise T.fail(T.ACL_ERROR_READ_MODEL_FAILURE, f"model dir {path!r} cannot be read")
    with _lock:
        if _model_dir_set[0]:
            raise T.fail(T.ACL_ERROR_REPEAT_INITIALIZE, "aclopSetModelDir was already called")
        _model_dir_set[0] = True
    count = 0
    root_depth = path.rstrip(os.sep).count(os.sep)
    for folder, dirs, files in os.walk(path):
        if folder.rstrip(os.sep).count(os.sep) - root_depth >= OM_DIR_MAX_DEPTH:
            dirs[:] = []
        for name in sorted(files):
            if name.endswith(".om"):
                count += _load_file(os.path.join(folder, name))
    return count


def _load_file(file: str) -> int:
    """1 if the model at ``file`` was registered, else 0 (logged)."""
    try:
        register_model(opfile.read_path(file))
        return 1
    except (OSError, ModelFileError, errors.AclError) as err:
        code = getattr(err, "code", None)
        plog.log(logring.WARNING, f"single-op model {file} skipped"
                                  f"{f' ({code})' if code else ''}: {err}")
        return 0


def load(data: bytes) -> None:
    """``aclopLoad``: one model from host memory (100000 if empty; a bad model is the code
    of ``register_model``)."""
    if not data:
        raise T.fail(T.ACL_ERROR_INVALID_PARAM, "model size is 0")
    try:
        register_model(bytes(data))
    except ModelFileError as err:
        raise T.fail(err.code, f"not a usable single-op model: {err}") from None


def reset() -> None:
    """Forget static models and allow set_model_dir again (tests, finalize)."""
    with _lock:
        STATIC.clear()
        STATIC_DYNAMIC.clear()
        _model_dir_set[0] = False
