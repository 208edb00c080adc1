"""Models on a card: load (weights and workspace allocated once), execute, unload.

Core of ``aclmdlLoadFromFile/Mem(WithMem)``, ``aclmdlExecute(Async)`` and ``aclmdlUnload``;
the faces are ``acl.mdl`` (``host/acl/mdl.py``) and the Pythonic API.

The four memory regions of a loaded model: **weights** (the OM's WEIGHTS_DATA, put into HBM
at load: a file's read straight into it, ``load_file``) and **workspace** (one block of the
MemoryPlanner's size; every intermediate at its planned offset) are allocated at load, or
supplied by the caller (the WithMem loads); the **inputs** and **outputs** are the caller's
buffers, bound per execute. An op that declares scratch (``OpDef.workspace``) gets its
planned block of the workspace as its kernel's last argument. Every op signature of every
program (batch gear) is compiled, or found in the op caches, at load, as a static
op-map entry (never aged out while loaded); the binaries of the fresh ones are placed on the
card in one pipelined batch of ``OP_LOAD``s (``executor.preload``), not one round trip each.
The task list of every program (each op's binary, kernel, blocks and argument template with
the weight and workspace addresses, the
schedule's streams and events) is registered on the card at load (``MODEL_LOAD``,
``device/exec/model.py``). An execute therefore allocates nothing and is **one
submission**: a ``MODEL_EXECUTE`` task on the caller's stream naming the card's model and
the caller's input and output addresses; the card runs the whole list and the task
completes with the last op (or fails with the first failing op's code).
``device_allocations`` counts every device allocation the model has made; executes never
change it; ``submissions`` counts the stream tasks its executes queued.

Streams: the OM's schedule spreads independent branches over streams and orders them with
events; the card runs those streams at once inside the one model task, each waiting for
the events it needs (``device/exec/model.py``). After a hang inside a
model (a synchronize timeout), the caller aborts its stream (which cancels the model task)
and unloads the model.

Unload (our choice, see ``device/exec/model.py``): the card forgets the task list at
once (executes still queued fail with 107000, a running one stops at its next op), then
unload waits up to ``UNLOAD_WAIT_S`` for the model's tasks already submitted to leave
their streams before it frees the weights and workspace; if they do not (a stream hung
and not aborted), that memory stays allocated until the process detaches rather than be
freed under a running kernel.

Codes (CANN's documentation names the states, not every code): unknown model id 145003;
our choices: a WithMem buffer that is not device memory 145007 or is too small 145006;
wrong number of inputs/outputs or a buffer smaller than its tensor 145000.

Threading model: the registry of loaded models is guarded by ``_lock``; each model's
``lock`` serialises its executes and guards ``pending`` (CANN asks threads sharing
a model id to lock; we do it for them). No thread is started here.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from npuemu.host.core import memory, plog, runtime
from npuemu.host.core.stream import Stream, resolve, submit, synchronize_stream
from npuemu.host.models import omfile
from npuemu.host.models.codes import (
    ACL_ERROR_GE_EXEC_MODEL_ID_INVALID,
    ACL_ERROR_GE_PARAM_INVALID,
    ModelError,
)
from npuemu.host.ops import desc as D
from npuemu.host.ops import executor
from npuemu.host.ops import types as T
from npuemu.shared import logring, protocol
from npuemu.shared.errors import AclError
from npuemu.shared.protocol import Op

ACL_ERROR_GE_EXEC_MODEL_DATA_SIZE_INVALID = 145006
ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID = 145007
_H2D = 1
_INPUT, _OUTPUT = 0, 1  # slot kinds of a MODEL_LOAD step
UNLOAD_WAIT_S = 30.0
_CHUNK_BYTES = 128 * 1024  # MODEL_LOAD frames stay well below the ring's frame limit


@dataclass
class _Task:
    """One prepared launch: binary, kernel, blocks, and argument template."""

    bin_id: int
    kernel: str
    block_dim: int
    args: list[Any]
    slots: list[tuple[int, int, int]]  # (arg index, _INPUT/_OUTPUT, user index)
    stream: int = 0  # index in the schedule's streams
    waits: list[int] = field(default_factory=list)  # event ids to wait before
    records: list[int] = field(default_factory=list)  # event ids to record after

    def row(self) -> list:
        """The task as a ``MODEL_LOAD`` step (``shared/protocol.py``)."""
        return [self.stream, self.bin_id, self.kernel, self.block_dim, self.args,
                [list(s) for s in self.slots], self.waits, self.records]


@dataclass
class Program:
    """One static variant of the model (one per batch gear)."""

    batch: int
    tasks: list[_Task]
    input_sizes: list[int]
    output_sizes: list[int]
    input_dims: list[list[int]]
    output_dims: list[list[int]]
    n_streams: int = 1
    n_events: int = 0
    card_id: int = 0  # the registered task list on the card (MODEL_LOAD)
    hw: list[int] | None = None  # the (h, w) gear of a --dynamic_image_size model


@dataclass(eq=False)
class Model:
    """A model loaded on the current device (see module doc)."""

    om: omfile.OmModel
    weight_ptr: int = 0
    work_ptr: int = 0
    own: list[int] = field(default_factory=list)
    programs: list[Program] = field(default_factory=list)
    device_allocations: int = 0
    executions: int = 0
    model_id: int = 0
    device: int = -1
    desc: Any = None  # the face's descriptor (acl.mdl: modeldesc.ModelDesc)
    link: Any = None  # the card's link (host/driver)
    submissions: int = 0  # stream tasks queued by executes (one per execute)
    pending: dict[Stream, int] = field(default_factory=dict)  # last task seq per stream
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def weight_size(self) -> int:
        return self.om.weight_size

    @property
    def work_size(self) -> int:
        return self.om.work_size

    def program(self, batch: int = 0, hw: list[int] | None = None) -> Program:
        """The program for ``batch`` or the (h, w) gear ``hw`` (neither: the largest gear,
        or the only program)."""
        if hw:
            for prog in self.programs:
                if prog.hw == list(hw):
                    return prog
            raise ModelError(ACL_ERROR_GE_PARAM_INVALID, f"image size {list(hw)} is not a "
                             f"gear of this model ({[p.hw for p in self.programs]})")
        if not batch:
            return self.programs[-1]
        for prog in self.programs:
            if prog.batch == batch:
                return prog
        raise ModelError(145013, f"batch {batch} is not a gear of this model "
                                 f"({[p.batch for p in self.programs]})")


_lock = threading.Lock()
_models: dict[int, Model] = {}
_next_id = [0]


def load(om: omfile.OmModel, work: tuple[int, int] | None = None,
         weight: tuple[int, int] | None = None) -> Model:
    """Load ``om`` on the current device (blocks: allocation, weight copy, op compiles)."""
    model = Model(om, device=runtime.get().current().device)
    try:
        model.weight_ptr = _region(model, weight, om.weight_size, "weight")
        if om.weight_size:
            blob = np.frombuffer(om.weights, np.uint8)
            memory.memcpy(model.weight_ptr, om.weight_size, blob.ctypes.data, om.weight_size,
                          _H2D)
    except BaseException:
        _release(model)
        raise
    return _finish(model, work)


def load_file(path: Any, work: tuple[int, int] | None = None,
              weight: tuple[int, int] | None = None) -> Model:
    """Load the OM file at ``path`` on the current device (blocks), its weights read from
    the file straight into their device memory (``omfile.open_file`` with a place: no host
    copy of them, no host-to-device copy) and checked there, by a thread of ``omfile``'s
    while this one compiles the model's ops; the rest as ``load``."""
    model = Model(omfile.OmModel(0, "", False, {}, [], [], [], {}, b""),
                  device=runtime.get().current().device)

    def place(size: int) -> memoryview:
        model.weight_ptr = _region(model, weight, size, "weight")
        return memory.host_view(model.weight_ptr, size) if size else memoryview(bytearray())

    try:
        model.om, weights = omfile.open_file(path, place)
    except BaseException:
        _release(model)
        raise
    return _finish(model, work, weights)


def _finish(model: Model, work: tuple[int, int] | None,
            weights: omfile.Weights = omfile.READ) -> Model:
    """The rest of a load once the weights are on their way to the card (``weights``, read
    meanwhile): the workspace, every program compiled, then, once the weights are all there
    and sealed, every program registered, the model id."""
    rt = runtime.get()
    om = model.om
    try:
        model.work_ptr = _region(model, work, om.work_size, "work")
        model.link = link = rt.current_link()
        model.programs = [_prepare(model, k, link) for k in range(len(om.programs))]
        weights.finish()
        link.check_alive()
        for prog in model.programs:
            _register(model, prog)
    except BaseException:
        try:
            weights.finish()  # nothing writes the weights' memory once it is freed; a
        finally:              # corrupted file says so before what compiling it found
            _release(model)
        raise
    with _lock:
        _next_id[0] += 1
        model.model_id = _next_id[0]
        _models[model.model_id] = model
    return model


def _register(model: Model, prog: Program) -> None:
    """Send the program's task list to the card (``MODEL_LOAD``, in frames of at most
    ``_CHUNK_BYTES``); blocks for the replies."""
    n_in, n_out = len(prog.input_sizes), len(prog.output_sizes)
    chunk: list[list] = []
    size = 0
    rows = [task.row() for task in prog.tasks]
    for i, row in enumerate(rows):
        chunk.append(row)
        size += len(protocol.pack(row))
        if size >= _CHUNK_BYTES or i == len(rows) - 1:
            (prog.card_id,) = model.link.call(Op.MODEL_LOAD, prog.card_id, n_in, n_out, chunk)
            chunk, size = [], 0
    if not rows:
        (prog.card_id,) = model.link.call(Op.MODEL_LOAD, 0, n_in, n_out, [])


def _region(model: Model, given: tuple[int, int] | None, need: int, what: str) -> int:
    if given is not None and given[0]:
        ptr, size = given
        if type(ptr) is not int or type(size) is not int or size < 0:
            raise ModelError(ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID,
                             f"{what} memory {ptr!r} of size {size!r}")
        if size < need:
            raise ModelError(ACL_ERROR_GE_EXEC_MODEL_DATA_SIZE_INVALID,
                             f"{what} memory of {size} bytes, the model needs {need}")
        try:
            memory.find(ptr, max(need, 1))
        except AclError as exc:
            raise ModelError(ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID,
                             f"{what} memory {ptr:#x}: {exc}") from exc
        return ptr
    if not need:
        return 0
    ptr = memory.malloc(need)
    model.own.append(ptr)
    model.device_allocations += 1
    return ptr


def _attr(values: dict[str, Any]) -> D.OpAttr:
    attr = D.OpAttr()
    for name, value in values.items():
        if value is None:
            continue
        attr.values[name] = (_kind(value), _frozen(value))
    return attr


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if value and isinstance(value[0], list | tuple):
        return "list_list_int"
    return "list_float" if any(isinstance(v, float) for v in value) else "list_int"


def _frozen(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


def _prepare(model: Model, k: int, link: Any) -> Program:
    """Compile (or find) every op of program ``k`` and build its launch templates."""
    om = model.om
    prog = om.programs[k]
    info = {t[0]: t for t in om.tensors}
    blocks = {b[0]: b for b in om.memory_plan["blocks"]}
    cache: dict[int, Any] = {}
    tasks = []
    waits: dict[int, list[int]] = {}
    records: dict[int, list[int]] = {}
    for ev, producer, consumer in prog["events"]:
        records.setdefault(producer, []).append(ev)
        waits.setdefault(consumer, []).append(ev)
    workspaces = prog.get("workspaces", [""] * len(prog["tasks"]))
    reqs: dict[int, executor.Request] = {}
    for op_ref, ins, outs, _stream in prog["tasks"]:
        names = [n for n in ins if n] + list(outs)
        if op_ref not in reqs and not _aliased(om, op_ref, names, info, k):
            reqs[op_ref] = _request(om, op_ref, names, len(outs), info, k)
    ready = executor.preload(list(reqs.values()), link)  # one batch of OP_LOADs
    try:
        for op_ref, req in reqs.items():
            cache[op_ref] = _compile(req, link, ready)
    finally:
        executor.discard(ready, link)
    for t, (op_ref, ins, outs, stream_no) in enumerate(prog["tasks"]):
        names = [n for n in ins if n] + list(outs)
        if _aliased(om, op_ref, names, info, k):
            tasks.append(_Task(0, "", 0, [], [], stream_no, waits.get(t, []),
                               records.get(t, [])))
            continue  # its output is its input's block (planner.aliases): nothing to move
        entry = cache[op_ref]
        if entry.empty:  # nothing to run; its events still order the streams
            tasks.append(_Task(0, "", 0, [], [], stream_no, waits.get(t, []),
                               records.get(t, [])))
            continue
        args, slots = [], []
        for i, n in enumerate(names):
            kind, where = info[n][2], info[n][4]
            if kind == "weight":
                args.append(model.weight_ptr + where[0])
            elif kind == "intermediate":
                args.append(model.work_ptr + blocks[where][1])
            else:
                args.append(0)
                slots.append((i, _INPUT if kind == "input" else _OUTPUT, where))
        loaded = entry.loaded
        extra: list[Any] = list(entry.extra)
        scratch = workspaces[t]
        if scratch and loaded.binary.workspace:
            # the kernel's last parameter: its planned scratch (shapes and tiling before it)
            extra = extra or [tuple(tuple(info[n][3][k]) for n in names),
                              *entry.tiling.args()]
            extra.append(model.work_ptr + blocks[scratch][1])
        tasks.append(_Task(loaded.bin_id, loaded.binary.name, entry.tiling.block_dim,
                           [*args, *extra], slots, stream_no, waits.get(t, []),
                           records.get(t, [])))
    def sizes(kind: str) -> tuple[list[int], list[list[int]]]:
        rows = sorted((t[4], t) for t in om.tensors if t[2] == kind)
        return ([math.prod(t[3][k]) * np.dtype(t[1]).itemsize for _, t in rows],
                [list(t[3][k]) for _, t in rows])
    in_sizes, in_dims = sizes("input")
    out_sizes, out_dims = sizes("output")
    return Program(prog["batch"], tasks, in_sizes, out_sizes, in_dims, out_dims,
                   len(prog["streams"]), len(prog["events"]), hw=prog.get("hw"))


def _aliased(om: omfile.OmModel, op_ref: int, names: list[str], info: dict[str, Any],
             k: int) -> bool:
    """A Reshape whose output is its input's block: an empty step, nothing compiled."""
    return om.op_refs[op_ref][0] == "Reshape" and _shares_block(names, info, k)


def _request(om: omfile.OmModel, op_ref: int, names: list[str], n_out: int,
             info: dict[str, Any], k: int) -> executor.Request:
    op_type, attrs, _tiling = om.op_refs[op_ref]
    descs = [_desc(info[n], k) for n in names]
    return executor.Request(op_type, descs[:len(names) - n_out], descs[len(names) - n_out:],
                            _attr(attrs))


def _shares_block(names: list[str], info: dict[str, Any], k: int) -> bool:
    """Whether every tensor of a task is an intermediate of program ``k``'s byte size in one
    and the same block (else the op is compiled and checked as any other)."""
    rows = [info[n] for n in names]
    return all(r[2] == "intermediate" for r in rows) and len({r[4] for r in rows}) == 1 \
        and len({math.prod(r[3][k]) * np.dtype(r[1]).itemsize for r in rows}) == 1


def _compile(req: executor.Request, link: Any, ready: executor.Ready) -> Any:
    """The op's static map entry (its binary from ``ready`` when ``preload`` placed it); an
    attribute of the file the op compiler cannot take (its type and range are the op's, not
    the file format's) is 145000, not an exception."""
    try:
        return executor.compile_request(req, link, static=True, ready=ready)
    except AclError:
        raise
    except Exception as exc:  # the file's values, whatever the op makes of them
        raise ModelError(ACL_ERROR_GE_PARAM_INVALID, f"op {req.op_type} of the model does not "
                         f"compile with its attributes: {exc!r}") from exc


def _desc(row: list, k: int) -> D.TensorDesc:
    _name, dtype, _kind, shapes, _where = row
    return D.TensorDesc(T.acl_dtype(dtype), tuple(shapes[k]), T.ACL_FORMAT_ND)


def get(model_id: object) -> Model:
    """The loaded model ``model_id`` of this process; 145003 otherwise (the real loader's
    code for an unknown id)."""
    found = _models.get(model_id) if type(model_id) is int else None
    if found is None:
        raise ModelError(ACL_ERROR_GE_EXEC_MODEL_ID_INVALID, f"no loaded model {model_id!r}")
    return found


def unload(model_id: object) -> None:
    """``aclmdlUnload`` (blocks: the card's reply, then the model's submitted executes; see
    the module doc): the card forgets the task list, then the weights and workspace are
    freed; 145003 for an unknown id."""
    with _lock:
        model = get(model_id)
        del _models[model.model_id]
    with model.lock:
        _release(model)


def _release(model: Model) -> None:
    opened = runtime.get().devices.get(model.device)
    attached = opened is not None and opened.link is model.link
    for prog in model.programs:
        if prog.card_id and attached:
            # a card that reset or was lost dropped this client's task lists with it
            with contextlib.suppress(AclError):
                model.link.call(Op.MODEL_UNLOAD, prog.card_id)
        prog.card_id = 0
    if not attached:  # the client detached: nothing of the model runs on the card any more
        model.pending.clear()
    if not _drained(model):
        plog.log(logring.WARNING, f"model {model.model_id}: executes still running after "
                                  f"{UNLOAD_WAIT_S:g} s; its memory stays allocated")
        return
    for ptr in model.own:
        memory.free(ptr)
    model.own.clear()


def _drained(model: Model) -> bool:
    """Wait (bounded, device alive) until the model's submitted tasks left their streams."""
    for stream, seq in model.pending.items():
        if stream.destroyed:  # its queue was dropped (or waited for) when destroyed
            continue
        try:
            if not stream.link.wait_until(functools.partial(stream.done, seq), UNLOAD_WAIT_S):
                return False
        except AclError:  # the card is lost: no kernel runs there any more
            continue
    model.pending.clear()
    return True


def execute_async(model_id: object, inputs: list[tuple[int, int]],
                  outputs: list[tuple[int, int]], stream_handle: object,
                  batch: int = 0, hw: list[int] | None = None) -> None:
    """Queue the model's tasks on the stream (``aclmdlExecuteAsync``); allocates nothing."""
    model = get(model_id)
    stream = resolve(stream_handle, for_submit=True)
    with model.lock:
        _launch(model, model.program(batch, hw), inputs, outputs, stream)


def execute(model_id: object, inputs: list[tuple[int, int]], outputs: list[tuple[int, int]],
            stream_handle: object = None, batch: int = 0, timeout_ms: int = -1,
            hw: list[int] | None = None) -> None:
    """``aclmdlExecute``: queue the tasks and wait for them (blocks, bounded by
    ``timeout_ms``; -1 waits as long as the device is alive)."""
    model = get(model_id)
    stream = resolve(stream_handle, for_submit=True)
    with model.lock:
        _launch(model, model.program(batch, hw), inputs, outputs, stream)
    synchronize_stream(stream_handle, timeout_ms)


def _launch(model: Model, prog: Program, inputs: list[tuple[int, int]],
            outputs: list[tuple[int, int]], stream: Stream) -> None:
    """One ``MODEL_EXECUTE`` task on ``stream`` (the caller holds ``model.lock``)."""
    _check_buffers("input", inputs, prog.input_sizes)
    _check_buffers("output", outputs, prog.output_sizes)
    seq = submit(stream, Op.MODEL_EXECUTE, prog.card_id, [p for p, _ in inputs],
                 [p for p, _ in outputs])
    model.pending[stream] = seq
    model.submissions += 1
    model.executions += 1


def _check_buffers(kind: str, given: list[tuple[int, int]], sizes: list[int]) -> None:
    if len(given) != len(sizes):
        raise ModelError(ACL_ERROR_GE_PARAM_INVALID,
                         f"the model has {len(sizes)} {kind}s, {len(given)} buffers given")
    for i, ((ptr, size), need) in enumerate(zip(given, sizes, strict=True)):
        if not ptr or size < need:
            raise ModelError(ACL_ERROR_GE_PARAM_INVALID,
                             f"{kind} {i}: buffer {ptr:#x} of {size} bytes, the tensor needs "
                             f"{need}")
