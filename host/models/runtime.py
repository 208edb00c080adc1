"""Models on a card: load (weights and workspace allocated once), execute, unload (seed §5).

Core of ``aclmdlLoadFromFile/Mem(WithMem)``, ``aclmdlExecute(Async)`` and ``aclmdlUnload``;
the faces are ``acl.mdl`` (``host/acl/mdl.py``) and the Pythonic API.

The four memory regions (seed §5.2): **weights** (the OM's WEIGHTS_DATA, copied into HBM at
load) and **workspace** (one block of the MemoryPlanner's size; every intermediate at its
planned offset) are allocated at load, or supplied by the caller (the WithMem loads); the
**inputs** and **outputs** are the caller's buffers, bound per execute. Every op signature
of every program (batch gear) is compiled, or found in the op caches, at load, as a static
op-map entry (never aged out while loaded). An execute therefore allocates nothing: it
fills the caller's input and output addresses into the prepared launch arguments and posts
one ``LAUNCH`` per task on the stream. ``device_allocations`` counts every device
allocation the model has made; executes never change it.

Streams: the OM's schedule spreads independent branches over streams. At load the model
creates its extra streams and its events (never during execute); an execute runs stream 0
of the schedule on the caller's stream, records a start event there that the extra streams
wait on, records and waits the schedule's events between tasks, and finally makes the
caller's stream wait for every extra stream, so the caller's stream completes when the
whole model has. After a hang inside a model (a synchronize timeout), the caller aborts its
stream and unloads the model; unload aborts and destroys the model's own streams.

Missing, against issue 11: the task list is not registered on the card (an execute is one
submission per task, not one per model: that needs a worker-side task-list op).

Codes (the reference names the states, not every code; our choices marked UNVERIFIED):
unknown model id 145003; a WithMem buffer that is not device memory 145007 (UNVERIFIED) or
is too small 145006 (UNVERIFIED); wrong number of inputs/outputs or a buffer smaller than
its tensor 145000 (UNVERIFIED).

Threading model: the registry of loaded models is guarded by ``_lock``; each model's
``lock`` serialises its executes (the reference asks threads sharing a model id to lock;
we do it for them). No thread is started here.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from npuemu.host.core import memory, runtime
from npuemu.host.core import stream as streams
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
from npuemu.shared.errors import AclError
from npuemu.shared.protocol import Op

ACL_ERROR_GE_EXEC_MODEL_DATA_SIZE_INVALID = 145006
ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID = 145007
_H2D = 1
_INPUT, _OUTPUT = -1, -2


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
    streams: list[Stream] = field(default_factory=list)  # the schedule's streams 1..
    events: list[streams.Event] = field(default_factory=list)  # schedule events, then start
    done: list[streams.Event] = field(default_factory=list)  # one per extra stream
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def weight_size(self) -> int:
        return self.om.weight_size

    @property
    def work_size(self) -> int:
        return self.om.work_size

    def program(self, batch: int = 0) -> Program:
        """The program for ``batch`` (0: the largest gear, or the only program)."""
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
    rt = runtime.get()
    ctx = rt.current()
    model = Model(om, device=ctx.device)
    try:
        model.weight_ptr = _region(model, weight, om.weight_size, "weight")
        model.work_ptr = _region(model, work, om.work_size, "work")
        if om.weight_size:
            blob = np.frombuffer(om.weights, np.uint8)
            memory.memcpy(model.weight_ptr, om.weight_size, blob.ctypes.data, om.weight_size,
                          _H2D)
        link = rt.current_link()
        model.programs = [_prepare(model, k, link) for k in range(len(om.programs))]
        _create_streams(model)
    except BaseException:
        _release(model)
        raise
    with _lock:
        _next_id[0] += 1
        model.model_id = _next_id[0]
        _models[model.model_id] = model
    return model


def _create_streams(model: Model) -> None:
    """The schedule's extra streams and its events, created once at load."""
    n_streams = max(p.n_streams for p in model.programs)
    n_events = max(p.n_events for p in model.programs)
    for _ in range(n_streams - 1):
        model.streams.append(streams.create_stream())
        model.done.append(streams.create_event(0))
    if n_streams > 1:
        model.events = [streams.create_event(0) for _ in range(n_events + 1)]


def _region(model: Model, given: tuple[int, int] | None, need: int, what: str) -> int:
    if given is not None and given[0]:
        ptr, size = given
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
    for t, (op_ref, ins, outs, stream_no) in enumerate(prog["tasks"]):
        op_type, attrs, _tiling = om.op_refs[op_ref]
        names = [n for n in ins if n] + list(outs)
        descs = [_desc(info[n], k) for n in names]
        if op_ref not in cache:
            req = executor.Request(op_type, descs[:len(names) - len(outs)],
                                   descs[len(names) - len(outs):], _attr(attrs))
            cache[op_ref] = executor.compile_request(req, link, static=True)
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
        tasks.append(_Task(loaded.bin_id, loaded.binary.name, entry.tiling.block_dim,
                           [*args, *entry.extra], slots, stream_no, waits.get(t, []),
                           records.get(t, [])))
    def sizes(kind: str) -> tuple[list[int], list[list[int]]]:
        rows = sorted((t[4], t) for t in om.tensors if t[2] == kind)
        return ([int(np.prod(t[3][k], dtype=np.int64)) * np.dtype(t[1]).itemsize
                 for _, t in rows], [list(t[3][k]) for _, t in rows])
    in_sizes, in_dims = sizes("input")
    out_sizes, out_dims = sizes("output")
    return Program(prog["batch"], tasks, in_sizes, out_sizes, in_dims, out_dims,
                   len(prog["streams"]), len(prog["events"]))


def _desc(row: list, k: int) -> D.TensorDesc:
    _name, dtype, _kind, shapes, _where = row
    return D.TensorDesc(T.acl_dtype(dtype), tuple(shapes[k]), T.ACL_FORMAT_ND)


def get(model_id: object) -> Model:
    """The loaded model ``model_id`` of this process; 145003 otherwise (reference §3.6)."""
    found = _models.get(model_id) if type(model_id) is int else None  # type: ignore[arg-type]
    if found is None:
        raise ModelError(ACL_ERROR_GE_EXEC_MODEL_ID_INVALID, f"no loaded model {model_id!r}")
    return found


def unload(model_id: object) -> None:
    """Free what the model allocated (``aclmdlUnload``); 145003 for an unknown id."""
    with _lock:
        model = get(model_id)
        del _models[model.model_id]
    with model.lock:
        _release(model)


def _release(model: Model) -> None:
    for ptr in model.own:
        memory.free(ptr)
    model.own.clear()
    for st in model.streams:  # abort first: a hung task on a model's stream is dropped too
        streams.stream_abort(st.handle)
        streams.destroy_stream(st.handle, True)
    for ev in (*model.events, *model.done):
        streams.destroy_event(ev.handle)
    model.streams, model.events, model.done = [], [], []


def execute_async(model_id: object, inputs: list[tuple[int, int]],
                  outputs: list[tuple[int, int]], stream_handle: object,
                  batch: int = 0) -> None:
    """Queue the model's tasks on the stream (``aclmdlExecuteAsync``); allocates nothing."""
    model = get(model_id)
    stream = resolve(stream_handle, for_submit=True)
    with model.lock:
        _launch(model, model.program(batch), inputs, outputs, stream)


def execute(model_id: object, inputs: list[tuple[int, int]], outputs: list[tuple[int, int]],
            stream_handle: object = None, batch: int = 0, timeout_ms: int = -1) -> None:
    """``aclmdlExecute``: queue the tasks and wait for them (blocks, bounded by
    ``timeout_ms``; -1 waits as long as the device is alive)."""
    model = get(model_id)
    stream = resolve(stream_handle, for_submit=True)
    with model.lock:
        _launch(model, model.program(batch), inputs, outputs, stream)
    synchronize_stream(stream_handle, timeout_ms)


def _launch(model: Model, prog: Program, inputs: list[tuple[int, int]],
            outputs: list[tuple[int, int]], stream: Stream) -> None:
    _check_buffers("input", inputs, prog.input_sizes)
    _check_buffers("output", outputs, prog.output_sizes)
    users = {_INPUT: [p for p, _ in inputs], _OUTPUT: [p for p, _ in outputs]}
    lanes = [stream, *model.streams]
    if len(lanes) > 1:
        start = model.events[-1].handle
        streams.record_event(start, stream.handle)
        for extra in model.streams:
            streams.stream_wait_event(extra.handle, start)
    for task in prog.tasks:
        lane = lanes[task.stream]
        for ev in task.waits:
            streams.stream_wait_event(lane.handle, model.events[ev].handle)
        if task.kernel:
            args = task.args
            for i, kind, idx in task.slots:
                args[i] = users[kind][idx]
            submit(lane, Op.LAUNCH, task.bin_id, task.kernel, task.block_dim, list(args))
        for ev in task.records:
            streams.record_event(model.events[ev].handle, lane.handle)
    for extra, done in zip(model.streams, model.done, strict=True):
        streams.record_event(done.handle, extra.handle)
        streams.stream_wait_event(stream.handle, done.handle)
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
