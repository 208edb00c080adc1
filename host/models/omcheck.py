"""Type and range checks of a decoded OM file, before anything reads its partitions.

An OM file is sealed (a checksum and its length) but may still be written by anyone: every field of
every msgpack partition (see ``omfile.py`` for the layout) is checked here for its type and
range, so that the model descriptor (``aclmdlGetDesc*``), the loader (``aclmdlLoad*``), the
size queries (``aclmdlQuerySize*``) and ``atc --mode=1`` only ever see well-formed values.
A failure is ``ACL_ERROR_GE_PARAM_INVALID`` (145000, what the real loader returns for bad
model content) naming the field, raised as :class:`~npuemu.host.models.codes.ModelError`.

Checked: containers have the expected type and length; names are non-empty strings and
unique; integers are ``int`` (never ``bool``) within int64 and their own range; dims are in
``[0, 2**31)``, at most :data:`MAX_RANK` of them, and every tensor's byte size fits in int64;
a weight's extent and an intermediate's block hold its bytes in every program; user input
and output indices are exactly ``0..n-1``; programs match the batch gears; events and
streams name tasks that exist; op attributes are scalars, lists of scalars or lists of int
lists; map keys are strings and nesting is at most :data:`MAX_DEPTH` deep (so the JSON dump
cannot fail). The cross-references between partitions are checked after this by
``omfile.validate``. Stateless; no threads.
"""

from __future__ import annotations

import math
from collections.abc import Collection

from npuemu.host.models.codes import ACL_ERROR_GE_PARAM_INVALID, ModelError
from npuemu.host.models.graph import ACL_DTYPES

INT64_MAX = (1 << 63) - 1
MAX_DIM = (1 << 31) - 1
MAX_RANK = 32
MAX_DEPTH = 32
KINDS = ("input", "output", "weight", "intermediate")
_ITEMSIZE = {"float32": 4, "float16": 2, "int8": 1, "int32": 4, "uint8": 1, "int16": 2,
             "uint16": 2, "uint32": 4, "int64": 8, "uint64": 8, "float64": 8, "bool": 1}


def bad(detail: str) -> ModelError:
    """The error of a malformed file (145000)."""
    return ModelError(ACL_ERROR_GE_PARAM_INVALID, f"malformed OM file: {detail}")


def need(ok: bool, detail: str) -> None:
    if not ok:
        raise bad(detail)


def is_int(value: object, lo: int = 0, hi: int = INT64_MAX) -> bool:
    return type(value) is int and lo <= value <= hi


def is_name(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 4096


def rows(value: object, what: str, width: int | None = None) -> list:
    """``value`` as a list (of lists of ``width`` items when given)."""
    if not isinstance(value, list):
        raise bad(f"{what} is {type(value).__name__}, not a list")
    if width is not None:
        for i, row in enumerate(value):
            need(isinstance(row, list) and len(row) >= width,
                 f"{what}[{i}] is not a list of {width} items")
    return value


def nbytes(dtype: str, shape: list[int]) -> int:
    """Bytes of a tensor of ``dtype`` and ``shape`` (exact, no wrap-around)."""
    return math.prod(shape) * _ITEMSIZE[dtype]


def plain_tree(value: object, what: str) -> None:
    """Every map key is a string and nesting stays within MAX_DEPTH (iterative: only maps and
    lists are visited; a non-empty one at depth MAX_DEPTH holds an item nested deeper)."""
    todo = [(value, 0)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, dict):
            need(all(isinstance(k, str) for k in item), f"{what} has a map key that is not "
                                                      "a string")
            children: Collection[object] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if children:
            need(depth < MAX_DEPTH, f"{what} is nested more than {MAX_DEPTH} deep")
            todo += [(v, depth + 1) for v in children if isinstance(v, dict | list)]


def check(model_def: object, tensors: object, programs: object, op_refs: object,
          plan: object, weight_size: int) -> None:
    """Check the decoded partitions (see module doc); 145000 naming the first bad field."""
    for what, part in (("MODEL_DEF", model_def), ("TENSOR_DESC", tensors),
                       ("TASK_INFO", programs), ("TILING_DATA", op_refs),
                       ("MEMORY_PLAN", plan)):
        plain_tree(part, what)
    gears = _model_def(model_def)
    assert isinstance(model_def, dict)  # _model_def refused anything else
    hw = model_def.get("dynamic_hw") or []
    need(isinstance(hw, list) and all(isinstance(g, list) and len(g) == 2 and all(
        is_int(d, 1, MAX_DIM) for d in g) for g in hw), f"dynamic image sizes {hw!r}")
    _aipp(model_def.get("aipp") or [])
    blocks = _plan(plan)
    _programs(programs, gears or [0] * max(1, len(hw)))
    _tensors(tensors, len(programs), blocks, weight_size)  # type: ignore[arg-type]
    _op_refs(op_refs)


def _model_def(md: object) -> list[int]:
    need(isinstance(md, dict), "the model definition is not a map")
    assert isinstance(md, dict)
    for key in ("name", "soc_version", "input_format"):
        need(key not in md or isinstance(md[key], str), f"model {key} is not a string")
    for key in ("inputs", "outputs"):
        need(key not in md or (isinstance(md[key], list) and all(
            isinstance(n, str) for n in md[key])), f"model {key} is not a list of names")
    need("report" not in md or isinstance(md["report"], dict), "the ATC report is not a map")
    gears = md.get("dynamic_batch") or []
    need(isinstance(gears, list) and all(is_int(g, 1, MAX_DIM) for g in gears)
         and len(set(gears)) == len(gears), f"dynamic batch gears {gears!r}")
    return gears


def _aipp(entries: object) -> None:
    """The model definition's AIPP entries (``host/models/aipp.py``)."""
    for e in rows(entries, "the AIPP entries"):
        need(isinstance(e, dict) and is_name(e.get("input")) and e.get("mode") in (
            "static", "dynamic"), f"AIPP entry {e!r}")
        dims = e.get("model_dims")
        need(isinstance(dims, list) and len(dims) == 4 and all(is_int(d, 1, MAX_DIM)
                                                               for d in dims),
             f"AIPP entry model dims {dims!r}")
        if e["mode"] == "dynamic":
            need(is_name(e.get("params_input")), f"AIPP entry {e!r}")
            continue
        params = e.get("params")
        size = params.get("src_image_size") if isinstance(params, dict) else None
        need(isinstance(size, list) and len(size) == 2 and all(is_int(d, 1, MAX_DIM)
                                                               for d in size),
             f"AIPP entry parameters {params!r}")


def _plan(plan: object) -> dict[str, list]:
    need(isinstance(plan, dict), "the memory plan is not a map")
    assert isinstance(plan, dict)
    need("blocks" in plan and "size" in plan, "the memory plan lacks its size or blocks")
    need(is_int(plan["size"]), f"workspace size {plan['size']!r}")
    for key in ("naive", "lower_bound"):
        need(key not in plan or is_int(plan[key]), f"memory plan {key} {plan.get(key)!r}")
    blocks: dict[str, list] = {}
    for i, b in enumerate(rows(plan["blocks"], "memory plan blocks", 3)):
        need(is_name(b[0]) and b[0] not in blocks, f"block {i} name {b[0]!r}")
        need(is_int(b[1]) and is_int(b[2]), f"block {b[0]!r} at {b[1]!r}+{b[2]!r}")
        blocks[b[0]] = b
    return blocks


def _programs(programs: object, gears: list[int]) -> None:
    progs = rows(programs, "the program list")
    need(all(isinstance(p, dict) for p in progs), "a program is not a map")
    batches = [p.get("batch") for p in progs]
    need(batches == gears, f"program batches {batches!r} for gears {gears!r}")
    for k, prog in enumerate(progs):
        _program(prog, k)


def _program(prog: dict, k: int) -> None:
    what = f"program {k}"
    tasks = rows(prog.get("tasks"), f"{what} tasks", 4)
    n = len(tasks)
    for t, (op_ref, ins, outs, stream, *_) in enumerate(tasks):
        need(is_int(op_ref) and is_int(stream), f"{what} task {t}: op {op_ref!r} / stream "
                                                 f"{stream!r}")
        need(isinstance(ins, list) and all(n_ is None or isinstance(n_, str) for n_ in ins),
             f"{what} task {t}: inputs {ins!r}")
        need(isinstance(outs, list) and bool(outs) and all(is_name(o) for o in outs),
             f"{what} task {t}: outputs {outs!r}")
    streams = rows(prog.get("streams"), f"{what} streams")
    need(bool(streams) or not n, f"{what} has tasks but no stream")
    for s in streams:
        need(isinstance(s, list) and all(is_int(t, 0, n - 1) for t in s),
             f"{what} stream {s!r} names tasks that do not exist")
    for e in rows(prog.get("events"), f"{what} events", 3):
        need(is_int(e[0], 0, MAX_DIM) and is_int(e[1], 0, n - 1) and is_int(e[2], 0, n - 1),
             f"{what} event {e!r}")
    scratch = prog.get("workspaces", [""] * n)
    need(isinstance(scratch, list) and all(isinstance(w, str) for w in scratch),
         "the tasks' workspace blocks do not match the memory plan")


def _tensors(tensors: object, n_programs: int, blocks: dict[str, list],
             weight_size: int) -> None:
    names: set[str] = set()
    user: dict[str, list[int]] = {"input": [], "output": []}
    for i, row in enumerate(rows(tensors, "the tensor list", 5)):
        name, dtype, kind, shapes, where = row[:5]
        need(is_name(name) and name not in names, f"tensor {i} name {name!r}")
        names.add(name)
        need(isinstance(dtype, str) and dtype in ACL_DTYPES, f"tensor {name!r} dtype {dtype!r}")
        need(isinstance(kind, str) and kind in KINDS, f"tensor {name!r} kind {kind!r}")
        need(isinstance(shapes, list) and len(shapes) == n_programs,
             f"tensor {name!r}: shapes {shapes!r} for {n_programs} programs")
        for shape in shapes:
            need(isinstance(shape, list) and len(shape) <= MAX_RANK and all(
                is_int(d, 0, MAX_DIM) for d in shape), f"tensor {name!r} shape {shape!r}")
            need(nbytes(dtype, shape) <= INT64_MAX, f"tensor {name!r} of shape {shape} is "
                                                    "larger than int64")
        largest = max(nbytes(dtype, s) for s in shapes) if shapes else 0
        _location(name, kind, where, largest, blocks, weight_size)
        if kind in user:
            user[kind].append(where)
    for kind, indices in user.items():
        need(sorted(indices) == list(range(len(indices))),
             f"{kind} indices {sorted(indices)} are not 0..{len(indices) - 1}")


def _location(name: str, kind: str, where: object, size: int, blocks: dict[str, list],
              weight_size: int) -> None:
    if kind == "weight":
        ok = (isinstance(where, list) and len(where) == 2 and is_int(where[0])
              and is_int(where[1]) and where[0] + where[1] <= weight_size)
        need(ok, f"weight {name!r} at {where!r} lies outside the weights partition")
        need(where[1] >= size, f"weight {name!r}: {where[1]} bytes for a tensor "  # type: ignore[index]
                               f"of {size}")
    elif kind == "intermediate":
        need(isinstance(where, str) and where in blocks,
             f"tensor {name!r} has no block in the memory plan")
        need(blocks[where][2] >= size, f"tensor {name!r}: block {where!r} of "  # type: ignore[index]
                                       f"{blocks[where][2]} bytes for {size}")  # type: ignore[index]
    else:
        need(is_int(where, 0, MAX_DIM), f"{kind} {name!r} index {where!r}")


_SCALARS = (bool, int, float, str)


def _attr_ok(value: object) -> bool:
    if type(value) is int:
        return -INT64_MAX - 1 <= value <= INT64_MAX
    if isinstance(value, _SCALARS) or value is None:
        return True
    if not isinstance(value, list):
        return False
    if value and isinstance(value[0], list):
        return all(isinstance(r, list) and all(is_int(v, -INT64_MAX - 1) for v in r)
                   for r in value)
    return all(isinstance(v, _SCALARS) and _attr_ok(v) for v in value)


def _op_refs(op_refs: object) -> None:
    for i, ref in enumerate(rows(op_refs, "the op list", 3)):
        op_type, attrs = ref[0], ref[1]
        need(is_name(op_type), f"op {i} type {op_type!r}")
        need(isinstance(attrs, dict), f"op {i} ({op_type}) attributes are not a map")
        for key, value in attrs.items():
            need(_attr_ok(value), f"op {i} ({op_type}) attribute {key!r} = {value!r}")
