"""Model task lists on the card: registered once at load, run as one stream task per execute.

Mirrors the device half of ``aclmdlLoadFromFile`` / ``aclmdlExecute(Async)`` /
``aclmdlUnload``: the host (``host/models/runtime.py``) sends a model's whole task list at
load (``MODEL_LOAD``); an execute is one ``MODEL_EXECUTE`` stream task naming the model and
the caller's input and output addresses, not one ``LAUNCH`` per op. Frames:

| op            | args                                         | results  |
|---------------|----------------------------------------------|----------|
| MODEL_LOAD    | model id (0 = new), n inputs, n outputs, [step, ...] | model id |
| MODEL_UNLOAD  | model id                                     |          |
| MODEL_EXECUTE (task) | model id, [input address, ...], [output address, ...] | |

A step is ``[stream, bin id, kernel name, blocks, [args], [[arg index, 0 input / 1 output,
user index], ...], [waited event, ...], [recorded event, ...]]``: one op of the schedule, in
the schedule's global order. Its argument template carries the weight and workspace
addresses already; each slot is replaced by a bound input or output address at execute.
A step with kernel name ``""`` (bin id 0, blocks 0) runs nothing: an op the compiler
emptied, kept for its events. A step of five fields ``[stream, op, [args], [waited event,
...], [recorded event, ...]]`` is a copy, memset, host callback or host event record of a
captured stream (``graph.py``).
A model larger than one frame is sent as several ``MODEL_LOAD`` frames, the later ones
naming the id the first returned (steps appended; the host executes it only once every
part is there).

Load binds every kernel function (looked up once per kernel name in a frame; a binary
unloaded later does not affect the model) and
builds each step's argument tuple and its block contexts once, so an execute does no
per-op decoding, lookup or dictionary work: the run walks the prepared steps and calls the
kernels, replacing only the slots of the steps that touch the caller's buffers.

Validation: a frame that breaks the table (types, u64 ranges, a slot beyond the arguments
or the model's inputs/outputs, an event waited before any step records it, blocks outside
[1, MAX_BLOCKS]) is a ``BadFrame`` (107000, nothing registered); a kernel that is not in
its binary, or an unknown model id, is refused with 107000.

Limits (per client; a refused frame registers nothing, and a refused extension leaves the
model as it was): ``MAX_MODELS`` = 256 models, ``MAX_STEPS`` = 65536 steps in one model,
``MAX_CLIENT_STEPS`` = 262144 steps in all of them, ``MAX_MODEL_EVENTS`` = 16384 distinct
events in one model (each is a ``threading.Event`` made per execute). Past any of them
``MODEL_LOAD`` is refused with ``ACL_ERROR_RT_OVER_LIMIT`` (207012), the runtime's code for
a count past its limit, which the model layer passes through to ``aclmdlLoad*`` unchanged
(it passes every code in [107000, 507999]). Counts are checked before anything is built.
Memory a load costs follows what the frame spells out (its steps, arguments, slots and
events): the block contexts of a step are built at load only for steps of at most
``_PREBUILT_BLOCKS`` = 64 blocks and while the client's models hold fewer than
``MAX_PREBUILT`` = 32768 of them; any other step builds its contexts one at a time at each
execute (``_Blocks``), so ``blocks`` = 65535 costs a few bytes, not 65535 objects.

Streams and events: each stream of the schedule is a lane of the task. Stream 0 runs on
the engine thread; every other stream runs at the same time on a helper thread of this
module (started on first use, one per extra stream, shared by all models: model tasks run
one at a time on the engine's one thread). A step waits for its events (``threading.Event``
per event id, made per execute of a model of several streams) and sets the ones it
records, so the schedule's ordering holds while independent branches overlap (numpy
releases the GIL in its heavy calls). The load check that every event is recorded before
it is waited in the schedule's order rules out a cycle. A model of one stream runs without
events or helpers. The task completes when every stream has.

Execution: the task runs on the AI Core engine (its busy time, and its timeout code,
507014 past the execution timeout, are AI Core's; the helpers' time is not counted
separately). The first op that fails ends the task (every stream stops at its next step)
with that op's code
(its engine's exception code, 507053 for a memory fault, an injected engine fault's code),
which reaches the stream, the exception callbacks (with the model task's id) and
synchronize like any task failure. The kernels run under ``containment.user_code``: one that
raises ``SystemExit``, ``KeyboardInterrupt`` or any other BaseException fails the model
task with its engine's exception code as any exception does, and neither the engine
thread nor a helper thread ends (a helper also survives a failure of our own). Abort,
stream destroy, the execution timeout and a detaching client cancel a running model at its
next op or block boundary (107035).

Unload (our choice: CANN asks the caller to unload only after its executes are done and
does not say what happens otherwise): ``MODEL_UNLOAD`` forgets the
record at once; executes of it still queued fail with 107000 when their turn comes, one
that runs stops at its next op boundary (107035); the host then waits for those tasks
before it frees the weights and workspace (``host/models/runtime.py``). A client that
detaches drops its records with its ``Client``.

After each model execute the loop thread calls ``worker.memory.merge_free()`` if the
memory has one (the level-2 defragmentation hook of the memory issue).

Threading model: ``model_load``, ``model_unload``, ``bind``, ``prepare`` and ``finished`` run
in the worker's loop thread, which owns ``Client.models``. A record's steps are immutable
once the host executes it; the run (the AI Core engine thread, plus one helper thread per
extra stream) reads them and the record's ``unloaded`` flag (a bool written by the loop
thread), and touches device memory only through ``KernelContext`` (``DeviceMemory.resolve``
takes the memory lock). ``_helpers`` is touched by the engine thread only. Within one
execute the streams share ``_Run`` (events are thread-safe; ``code`` is written first-wins
under the GIL) and the record's ``Ranges`` (dict operations are atomic; a race at most drops
a cached view, which is then resolved again).
"""

from __future__ import annotations

import itertools
import queue
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from npuemu.device import engines
from npuemu.device.containment import user_code
from npuemu.device.contracts import Card, Job
from npuemu.device.exec import graph
from npuemu.device.exec.kernels import (
    KernelClient,
    KernelContext,
    MemoryFault,
    Ranges,
    check_args,
    is_array,
    lookup,
)
from npuemu.shared import errors
from npuemu.shared.kernel import MAX_BLOCKS
from npuemu.shared.protocol import BadFrame, Op, u64

ENGINE = engines.AICORE
"""The engine thread that runs a model task."""
MAX_STREAMS = 64
MAX_EVENTS = 1 << 16
"""Event ids are below this; a model uses at most MAX_MODEL_EVENTS distinct ones."""
MAX_MODELS = 256
MAX_STEPS = 1 << 16
MAX_CLIENT_STEPS = 1 << 18
MAX_MODEL_EVENTS = 1 << 14
MAX_PREBUILT = 1 << 15
_PREBUILT_BLOCKS = 64
_ids = itertools.count(1)


Step = tuple[Any, str, str, tuple[Any, ...], tuple[tuple[int, int, int], ...],
             Iterable[KernelContext | None], int, tuple[int, ...], tuple[int, ...]]
"""A prepared step: (kernel function, or None for an emptied op; kernel name; engine; args;
slots ``(arg index, 0 input / 1 output, user index)``; block contexts; stream; waited
events; recorded events)."""


class ModelRecord:
    """One registered task list of a client."""

    __slots__ = ("lanes", "mid", "n_inputs", "n_outputs", "prebuilt", "ranges", "recorded",
                 "steps", "unloaded")

    def __init__(self, mid: int, n_inputs: int, n_outputs: int) -> None:
        self.mid, self.n_inputs, self.n_outputs = mid, n_inputs, n_outputs
        self.steps: list[Step] = []  # in the schedule's order
        self.lanes: list[list[tuple[int, Step]]] = [[]]  # (index, step) per stream
        self.recorded: set[int] = set()  # events recorded by the steps so far (load check)
        self.unloaded = False
        self.ranges = Ranges()
        self.prebuilt = 0  # block contexts its steps hold

    def add(self, steps: list[Step]) -> None:
        """Append steps (lanes grow in place: no pass over the steps already there; an
        execute that runs meanwhile may run the new steps too, all checked already)."""
        lanes = self.lanes
        for i, st in enumerate(steps, len(self.steps)):
            while len(lanes) <= st[6]:
                lanes.append([])
            lanes[st[6]].append((i, st))
        self.steps.extend(steps)


class ModelClient(KernelClient, Protocol):
    """A client as its models see it (``worker.Client``): its registered task lists."""

    models: dict[int, ModelRecord]


def _models(client: ModelClient) -> dict[int, ModelRecord]:
    return client.models


# control ops ---------------------------------------------------------------------------------
def model_load(worker: Card, client: ModelClient, mid: int, n_inputs: int, n_outputs: int,
               steps: object) -> tuple[int]:
    """``MODEL_LOAD``: register (or extend) a task list; returns its id."""
    models = _models(client)
    mid, n_inputs, n_outputs = u64(mid), u64(n_inputs), u64(n_outputs)
    if not is_array(steps):
        raise BadFrame("MODEL_LOAD takes an array of steps")
    _check_counts(models, mid, len(steps))
    if mid:
        record = models.get(mid)
        if record is None:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, f"no model {mid}")
        if (record.n_inputs, record.n_outputs) != (n_inputs, n_outputs):
            raise BadFrame(f"model {mid} has {record.n_inputs} inputs and "
                           f"{record.n_outputs} outputs")
    else:
        record = ModelRecord(0, n_inputs, n_outputs)
    recorded = set(record.recorded)
    budget = [MAX_PREBUILT - sum(m.prebuilt for m in models.values())]
    start = budget[0]
    found: dict[tuple[int, str], Any] = {}  # kernels looked up by this load
    record.add([_step(worker, client, record, row, recorded, budget, found) for row in steps])
    record.prebuilt += start - budget[0]
    record.recorded = recorded
    if not mid:
        record.mid = next(_ids)
        models[record.mid] = record
    if worker.debug:
        worker.log("DEBUG", f"model {record.mid}: {len(record.steps)} steps registered")
    return (record.mid,)


def _check_counts(models: dict[int, ModelRecord], mid: int, n_steps: int) -> None:
    """Refuse a load past the client's limits on models and steps (207012)."""
    over = ""
    record = models.get(mid)
    if not mid and len(models) >= MAX_MODELS:
        over = f"{MAX_MODELS} models loaded already"
    elif n_steps + (len(record.steps) if record else 0) > MAX_STEPS:
        over = f"more than {MAX_STEPS} steps in one model"
    elif n_steps + sum(len(m.steps) for m in models.values()) > MAX_CLIENT_STEPS:
        over = f"more than {MAX_CLIENT_STEPS} steps in this process's models"
    if over:
        raise errors.error_for(errors.ACL_ERROR_RT_OVER_LIMIT, f"MODEL_LOAD: {over}")


def model_unload(worker: Card, client: ModelClient, mid: int) -> tuple[()]:
    """``MODEL_UNLOAD``: forget the record; its queued executes fail, a running one stops."""
    record = _models(client).pop(u64(mid), None)
    if record is None:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, f"no model {mid}")
    record.unloaded = True
    return ()


def _step(worker: Card, client: ModelClient, record: ModelRecord, row: object,
          recorded: set[int], budget: list[int], found: dict[tuple[int, str], Any]) -> Step:
    if not is_array(row) or len(row) not in (8, graph.MEMORY_STEP_FIELDS):
        raise BadFrame("a model step is [stream, bin id, kernel, blocks, args, slots, "
                       "waits, records] or [stream, op, args, waits, records]")
    memory = len(row) == graph.MEMORY_STEP_FIELDS  # a captured copy, memset... (graph.py)
    stream, waits, records = (row[0], row[3], row[4]) if memory else (row[0], row[6], row[7])
    if u64(stream) >= MAX_STREAMS:
        raise BadFrame(f"step stream {stream} not below {MAX_STREAMS}")
    waits = () if not waits and is_array(waits) else tuple(_ints(waits, "waits"))
    records = () if not records and is_array(records) else tuple(_ints(records, "records"))
    for ev in waits:
        if ev not in recorded:
            raise BadFrame(f"event {ev} is waited before any step records it")
    for ev in records:
        if ev >= MAX_EVENTS:
            raise BadFrame(f"event {ev} not below {MAX_EVENTS}")
        recorded.add(ev)
    if len(recorded) > MAX_MODEL_EVENTS:
        raise errors.error_for(errors.ACL_ERROR_RT_OVER_LIMIT,
                               f"MODEL_LOAD: more than {MAX_MODEL_EVENTS} events in one model")
    if memory:
        return graph.memory_step(worker, client, (stream, row[1], row[2], waits, records),
                                 record.n_inputs)
    bin_id, name, blocks, args, slots = row[1:6]
    if type(name) is not str:
        raise BadFrame(f"kernel name {name!r:.60} is not a string")
    if not name:  # an emptied op: only its events matter
        if u64(bin_id) or u64(blocks) or args or slots:
            raise BadFrame("an empty step takes bin id 0, blocks 0, no args, no slots")
        return None, "", "", (), (), (), stream, waits, records
    if not 1 <= u64(blocks) <= MAX_BLOCKS:
        raise BadFrame(f"blocks {blocks} not in [1, {MAX_BLOCKS}]")
    check_args(args)
    bound = () if not slots and is_array(slots) else _slots(slots, len(args), record)
    key = (u64(bin_id), name)
    fn = found.get(key)
    if fn is None:
        fn = found[key] = lookup(client, key[0], name)
    if fn is None:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"no kernel {name!r} in binary {bin_id}")
    ctxs = _contexts(worker, client, blocks, record.ranges, budget)
    return fn, name, fn.__npu_kernel__, tuple(args), bound, ctxs, stream, waits, records


def _contexts(worker: Card, client: ModelClient, blocks: int, ranges: Ranges,
              budget: list[int]) -> tuple[KernelContext, ...] | _Blocks:
    """The block contexts of a step: built now within the client's budget of prebuilt
    contexts (``budget[0]``, decremented), else one at a time at each execute."""
    if blocks <= _PREBUILT_BLOCKS and blocks <= budget[0]:
        budget[0] -= blocks
        if blocks == 1:
            return (KernelContext(worker, client, 0, 1, ranges),)
        return tuple(KernelContext(worker, client, b, blocks, ranges) for b in range(blocks))
    return _Blocks(worker, client, blocks, ranges)


class _Blocks:
    """The block contexts of a step of many blocks, made as the run reaches each one."""

    __slots__ = ("blocks", "client", "ranges", "worker")

    def __init__(self, worker: Card, client: ModelClient, blocks: int,
                 ranges: Ranges) -> None:
        self.worker, self.client, self.blocks, self.ranges = worker, client, blocks, ranges

    def __iter__(self) -> Iterator[KernelContext]:
        for b in range(self.blocks):
            yield KernelContext(self.worker, self.client, b, self.blocks, self.ranges)


def _slots(slots: object, n_args: int, record: ModelRecord) -> tuple[tuple[int, int, int], ...]:
    if not is_array(slots):
        raise BadFrame("slots must be an array")
    out = []
    for slot in slots:
        if not is_array(slot) or len(slot) != 3:
            raise BadFrame("a slot is [arg index, 0 input / 1 output, user index]")
        index, kind, user = (u64(v) for v in slot)
        limit = (record.n_inputs, record.n_outputs)[kind] if kind in (0, 1) else -1
        if index >= n_args or not 0 <= user < limit:
            raise BadFrame(f"slot {list(slot)} outside the step's {n_args} arguments or the "
                           "model's inputs/outputs")
        out.append((index, kind, user))
    return tuple(out)


def _ints(values: object, what: str) -> list[int]:
    if not is_array(values):
        raise BadFrame(f"{what} must be an array of integers")
    return [u64(v) for v in values]


def _addresses(value: object) -> None:
    if not is_array(value):
        raise BadFrame("expected an array of addresses")
    for v in value:
        u64(v)


EXECUTE_CHECKS = (u64, _addresses, _addresses)
"""Field checks of a ``MODEL_EXECUTE`` task's arguments (the scheduler applies them)."""


# the stream task -----------------------------------------------------------------------------
def bind(client: ModelClient, args: list[Any]) -> list[Any]:
    """Enqueue time (loop thread): the task's arguments ``[record, inputs, outputs, fault
    step, fault code]`` from ``[model id, inputs, outputs]`` (the record it will run, and its
    buffers)."""
    mid, inputs, outputs = args
    record = _models(client).get(mid)
    if record is None:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, f"no model {mid}")
    if len(inputs) != record.n_inputs or len(outputs) != record.n_outputs:
        raise BadFrame(f"model {mid} takes {record.n_inputs} inputs and {record.n_outputs} "
                       f"outputs, got {len(inputs)} and {len(outputs)}")
    return [record, tuple(inputs), tuple(outputs), -1, 0]


def prepare(worker: Card, client: ModelClient, task: Job) -> tuple[str, Callable[[Job], int]]:
    """Start time (loop thread): the engine and the run function of a model task. An
    injected engine fault is matched to its op here (the fault table is the loop's)."""
    record, inputs, outputs, _at, _code = task.args
    if record.unloaded:  # its host events complete with the code (graph.py)
        graph.fail_records(record.steps, inputs, errors.ACL_ERROR_RT_PARAM_INVALID)
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"model {record.mid} was unloaded before this execute ran")
    faults = worker.faults
    if faults.engine_faults:
        for i, step in enumerate(record.steps):
            if step[0] is None:
                continue
            try:
                faults.check_launch(step[2], step[1])
            except errors.AclError as err:
                task.args = (record, inputs, outputs, i, err.code)
                break

    def run(task: Job) -> int:
        return _run(worker, task)

    return ENGINE, run


def _run(worker: Card, task: Job) -> int:
    """Engine thread: the steps of every stream; the first failure ends the task."""
    record = task.args[0]
    if len(record.lanes) == 1:
        code = _lane(worker, task, record.lanes[0], None)
    else:
        run = _Run({ev: threading.Event() for ev in record.recorded})
        done = [_helper(k).start(worker, task, record.lanes[k], run)
                for k in range(1, len(record.lanes))]
        _lane(worker, task, record.lanes[0], run)
        for finished_lane in done:  # the others stop at their next block once run.code is set
            finished_lane.wait()
        code = run.code
    if code:  # host events of a replay whose record steps did not run (graph.py)
        graph.fail_records(record.steps, task.args[1], code)
    return code


def _lane(worker: Card, task: Job, steps: list[tuple[int, Step]], run: _Run | None) -> int:
    """One stream of the model, in order (``run``: the execute's events and first failure,
    None for a model of one stream). Returns 0 or the code that ended it."""
    record, inputs, outputs, fail_at, fail_code = task.args
    users = (inputs, outputs)
    name = engine = ""
    graph.current.task = task  # what a host callback step checks for cancellation
    try:
        with user_code:  # SystemExit & co. of a kernel fail the task as any exception does
            for i, (fn, name, engine, args, slots, ctxs, _lane_no, waits, records) in steps:
                if run is not None:
                    code = _wait(task, run, waits)
                    if code:
                        return code
                if i == fail_at:
                    worker.log("ERROR", f"{engine} exception in kernel {name} (injected), "
                                        f"model {record.mid} op {i}")
                    return _failed(run, fail_code)
                if slots:
                    filled = list(args)
                    for index, kind, user in slots:
                        filled[index] = users[kind][user]
                    args = tuple(filled)
                for ctx in ctxs:
                    if task.cancelled or record.unloaded:
                        return _failed(run, errors.ACL_ERROR_RT_TASK_ABORT_STOP)
                    fn(ctx, *args)
                if records and run is not None:
                    for ev in records:
                        run.events[ev].set()
    except errors.AclError as err:  # an isolated page was touched
        worker.log("ERROR", f"model {record.mid} kernel {name}: {err}")
        return _failed(run, err.code)
    except MemoryFault as fault:
        worker.log("ERROR", f"model {record.mid} kernel {name} memory fault: {fault}")
        return _failed(run, errors.ACL_ERROR_RT_DEVICE_MEM_ERROR)
    except Exception:
        code = engines.FAILURE_CODE.get(engine, engines.FAILURE_CODE[ENGINE])
        worker.log("ERROR", f"{engine} kernel execute failed, ret={code}, kernel_name={name}, "
                            f"model {record.mid}\n{traceback.format_exc(limit=-3)}")
        return _failed(run, code)
    return 0


class _Run:
    """One execute of a model of several streams: its events and its first failure."""

    __slots__ = ("code", "events")

    def __init__(self, events: dict[int, threading.Event]) -> None:
        self.code = 0
        self.events = events

    def fail(self, code: int) -> None:
        """Keep the first failure and release every stream waiting on an event."""
        if not self.code:
            self.code = code
        for event in self.events.values():
            event.set()


def _failed(run: _Run | None, code: int) -> int:
    if run is not None:
        run.fail(code)
    return code


def _wait(task: Job, run: _Run, waits: tuple[int, ...]) -> int:
    """Wait for the step's events (or a failure, abort or unload); returns 0 or a code."""
    record = task.args[0]
    for ev in waits:
        event = run.events[ev]
        while not event.wait(_WAIT_SLICE_S):
            if task.cancelled or record.unloaded:
                return _failed(run, errors.ACL_ERROR_RT_TASK_ABORT_STOP)
    return run.code


_WAIT_SLICE_S = 0.05
_Lane = tuple[Card, Job, list[tuple[int, Step]], _Run, threading.Event]
"""What a helper thread is given: one stream of one execute, and the event it sets when done."""


class _Helper:
    """A thread that runs one extra stream of the executing model."""

    def __init__(self, k: int) -> None:
        self._queue: queue.SimpleQueue[_Lane] = queue.SimpleQueue()
        threading.Thread(target=self._loop, name=f"model-stream-{k}", daemon=True).start()

    def start(self, worker: Card, task: Job, steps: list[tuple[int, Step]],
              run: _Run) -> threading.Event:
        done = threading.Event()
        self._queue.put((worker, task, steps, run, done))
        return done

    def _loop(self) -> None:
        while True:
            worker, task, steps, run, done = self._queue.get()
            try:
                _lane(worker, task, steps, run)
            except BaseException:  # a bug of ours: fail the execute, keep the thread
                worker.internal_error("model stream")
                run.fail(errors.ACL_ERROR_RT_INTERNAL_ERROR)
            finally:
                done.set()


_helpers: list[_Helper] = []


def _helper(k: int) -> _Helper:
    """The helper of extra stream ``k`` (1, 2, ...), started on first use."""
    while len(_helpers) < k:
        _helpers.append(_Helper(len(_helpers) + 1))
    return _helpers[k - 1]


def finished(worker: Card) -> None:
    """Loop thread, after a model task was reaped: the memory's merge hook, if any."""
    merge = getattr(worker.memory, "merge_free", None)
    if merge is not None:
        merge()


HANDLERS: dict[int, Callable[..., tuple[Any, ...]]] = {Op.MODEL_LOAD: model_load,
                                                      Op.MODEL_UNLOAD: model_unload}
