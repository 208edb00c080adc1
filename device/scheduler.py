"""Streams, events and the task scheduler of one device.

Each host stream is an ordered queue of tasks in the worker. On every pass of the worker
loop the scheduler looks at the head task of every stream that is not busy: a task whose
waits are met is started, on its engine's thread (large copies, kernels) or right away in
the loop thread (event record/reset/wait, callbacks, copies and memsets of at most
``INLINE_BYTES``, VPC tasks measured short: ``exec/dvpp.py`` ``INLINE_VPC_NS``); a stream
blocked on an event blocks only itself. Completions come back
through ``done`` and are published in the client segment's stream and event tables, which
the host reads without a round trip (``shared/layout.py``: STREAM_ENTRY, EVENT_ENTRY). A task
whose last run of the same work the card timed (a kernel launched again with the same
blocks and arguments on its idle engine; a VPC task of the same geometry, ``exec/dvpp.py``)
also publishes when it should end (``expect``): a host synchronize wakes shortly before and
polls for the end instead of sleeping until the completion's wake-up.

Failures: a task that fails records its code on its stream (``err_count`` grows, so the
host reports it once, at its next synchronize), is reported to the host's exception
callbacks through the report ring, and in ``ACL_STOP_ON_FAILURE`` mode makes the stream
drop the tasks queued behind it. An event recorded after a failure carries the failure,
and a stream that waits on such an event fails its wait task with the same code, so work
that depends on a failed task is never silently run.

Execution timeout (``aclrtSetOpExecuteTimeOut`` family, per client): a task on an engine
(or hanging by an injected fault) that runs past it fails with its engine's timeout code
(``TIMEOUT_CODE``) and its stream goes on. A kernel stops at its next block boundary; a
copy already inside its ``memmove`` finishes in the background (its result is dropped).

Tiny kernels: a kernel launch whose last run of the same function with the same arguments
and block count took at most ``INLINE_KERNEL_NS`` runs in the loop thread, right away,
instead of being handed to its engine thread and reported back (two thread hand-offs that
cost more than the kernel itself). Everything else, and every first launch of a kernel,
goes to the engine, so real work still overlaps across engines and streams. An inline
kernel cannot be cancelled or timed out while it runs, which is why only kernels measured
as tiny (and only under a timeout far above that) qualify; one that turns out slow goes back
to its engine from its next launch on. Its time counts as its engine's busy time. Known
limit: a kernel whose run time depends on device memory (e.g. one that waits for a flag
another stream sets) and that was tiny last time runs inline once more: while it runs the
loop serves nothing, and a kernel that waits for work of this same card never returns.
Kernels of the op library and of models depend only on their shapes. Only plain functions
qualify (their cost is kept as an attribute; a kernel object of another type could run code
of its own when it is read or set).

Late completions: a task whose stream was destroyed, aborted or timed out, or whose client
detached, is marked ``cancelled`` before its engine reports it; the report is then dropped,
so it can never land in a reused stream slot or in a departed client's released tables.

Validation: ``enqueue`` checks every field of a task frame (types, u64 ranges, slots,
``num_blocks``) and raises ``protocol.BadFrame`` for a frame that breaks the protocol; a
frame that is well-formed but names bad memory fails its task with 107000 when it starts.

Per-task path: a frame whose fields are all bounded ints, or a LAUNCH that repeats its
kernel's last checked arguments, is checked in one expression and queued (``enqueue``'s fast
path; every other frame, and one the fast checks refuse, meets every field check). In a
turn, unprofiled event records and repeated tiny launches that succeed complete without the
general ``_complete``; the stream's COMPLETED word is written once a turn (and before an
event record or another completion publishes), the task count and the host's wake-up once a
turn too (``_turn``). Such a task whose frame is the last in its client's ring, on a card
with nothing queued, runs in ``enqueue`` itself (``_at_intake``): what the pass's ``pump``
would run next, and nothing else, without a turn of the rotation; the count and the wake-up
follow at the end of the pass.

Kernels that end their card: a kernel that raises ``SystemExit``, ``KeyboardInterrupt`` or
any other BaseException, on an engine or inline, fails its task with its engine's exception
code as any raising kernel does (``containment.py``); the engine and the loop go on at once.
A failure of the scheduler itself while it starts a task (even a BaseException) fails that
task with 507000 and the stream goes on; only the worker's own stop (``is_stop``) passes.

Threading model: everything here runs in the worker's loop thread, except ``Task.run``
functions, which run on engine threads (or, for tiny kernels, inline in the loop thread)
and touch only their task's ``args`` (addresses
resolved in the loop thread) and, for kernels, the allocator through
``DeviceMemory.resolve`` (locked there). Engines hand results back through the ``done``
deque (atomic appends); ``Task.cancelled`` is written by the loop and read by engines.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import time
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from npuemu.device import containment, engines
from npuemu.device.exec import collective, dvpp_frame
from npuemu.device.exec import model as model_tasks
from npuemu.device.exec.kernels import check_args as _kernel_args
from npuemu.device.exec.kernels import launch as run_kernel
from npuemu.device.exec.kernels import lookup as lookup_kernel
from npuemu.device.rotation import Rotation
from npuemu.shared import errors, layout, protocol
from npuemu.shared.config import WorkerSettings
from npuemu.shared.enums import StreamFailureMode
from npuemu.shared.kernel import (
    AICPU_DEFAULT_TIMEOUT_US,
    MAX_BLOCKS,
    MAX_TIMEOUT_US,
    actual_timeout_us,
)
from npuemu.shared.layout import EVENT_ENTRY, STREAM_ENTRY
from npuemu.shared.memcopy import move
from npuemu.shared.protocol import BadFrame, Op, u64

if TYPE_CHECKING:
    from npuemu.device.worker import Client, Worker

INLINE_BYTES = 64 * 1024
INLINE_KERNEL_NS = 100_000
"""A kernel whose last identical launch ran at most this long runs inline in the loop."""
_INLINE_TIMEOUT_FLOOR_S = 0.01  # below this execution timeout, no kernel runs inline
DEFAULT_MAX_STREAMS = 1024
_SE, _EE = STREAM_ENTRY, EVENT_ENTRY
DEFAULT_TIMEOUT_US = {engines.AICPU: AICPU_DEFAULT_TIMEOUT_US}
"""Defaults without ``aclrtSetOpExecuteTimeOut`` (Atlas A2): AI CPU 28 s; AI Core, AI Vector,
DMA and every other task: ``MAX_TIMEOUT_US`` (about 1091 s). See ``shared/kernel.py``."""
TIMEOUT_CODE = {engines.AICORE: errors.ACL_ERROR_RT_AICORE_TIMEOUT,
                engines.AIVECTOR: errors.ACL_ERROR_RT_VECTOR_CORE_TIMEOUT,
                engines.AICPU: errors.ACL_ERROR_RT_AICPU_TIMEOUT}
"""Code of a task that ran past the timeout, by engine. Copies, memsets and other tasks get
``ACL_ERROR_RT_TASK_TIMEOUT`` (107020: our choice, a real SDMA timeout's code is not documented)."""
_NO_DEADLINE = float("inf")
_U64 = protocol.U64_LIMIT
_COST = "__npu_last_run__"
"""Attribute of a kernel function: ``(args, num_blocks, ns)`` of its last successful run in
this worker (read by ``_tiny``; it goes with the function when its binary is unloaded)."""
_LAUNCH, _RECORD = int(Op.LAUNCH), int(Op.RECORD)  # plain ints: enum lookups cost more
_MODEL_EXECUTE, _DVPP = int(Op.MODEL_EXECUTE), int(Op.DVPP)
_COPY_ASYNC, _MEMSET_ASYNC = int(Op.COPY_ASYNC), int(Op.MEMSET_ASYNC)
_TASKS = layout.DEVICE_CTL.TASKS
_monotonic_ns = time.monotonic_ns
_FUNCTION = types.FunctionType


PASS_BUDGET = 2048
"""Most tasks started in one pass of the worker loop, over all streams (a few ms of inline
work): a long backlog must not keep the loop from its rings and its heartbeat."""
QUANTUM = 32
"""Most head tasks of one stream started in one turn (clients and their streams take turns:
``rotation.py``)."""


class Task:
    __slots__ = ("args", "cancelled", "deadline", "end_ns", "engine", "op", "seq", "start_ns",
                 "stream", "submit_ns")

    def __init__(self, op: int, seq: int, args: tuple[Any, ...], stream: Stream,
                 submit_ns: int = 0) -> None:
        self.op, self.seq, self.args, self.stream = op, seq, args, stream
        self.submit_ns = submit_ns  # host submit stamp: nonzero = profiled (device/trace.py)
        self.start_ns = self.end_ns = 0  # set only for profiled tasks (and by engines)
        self.engine = ""
        self.deadline = 0.0  # monotonic seconds; 0 = not running on an engine / not hung
        self.cancelled = False  # its completion is decided elsewhere: drop the engine's report


class Stream:
    """Worker side of one host stream."""

    def __init__(self, client: Client, slot: int, sid: int, priority: int, flags: int) -> None:
        self.client, self.slot, self.sid = client, slot, sid
        self.priority, self.flags = priority, flags
        self.mode = StreamFailureMode.ACL_CONTINUE_ON_FAILURE
        self.queue: collections.deque[Task] = collections.deque()
        self.busy = False
        self.deadline = 0.0  # of a head WAIT with a timeout
        self.pending_error = 0  # failure not yet carried by an event record
        self.stopped = 0  # stop-on-failure: the code that stopped it
        self.hung = False  # its head task hangs (injected fault) until abort
        self.base = slot * _SE.words


class Scheduler:
    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.done: collections.deque[tuple[Task, int, int]] = collections.deque()
        self.engines = {name: engines.Engine(name, self.done, worker.wake)
                        for name in engines.ENGINES}
        self.streams: dict[tuple[int, int], Stream] = {}
        self.max_streams = WorkerSettings.from_env().max_streams
        self._next_sid = 0
        self._touched: set[Client] = set()
        self.rotation: Rotation[Stream] = Rotation()
        self.completed = 0  # tasks completed and not yet added to the control block's TASKS
        self._nearest = _NO_DEADLINE  # earliest deadline of a blocked WAIT seen this pass
        self.progressed = False
        self.next_deadline = _NO_DEADLINE  # no running task's deadline is earlier
        self.on_engines = 0  # tasks handed to engine threads and not yet reaped (worker.run)

    # stream management (synchronous requests) ----------------------------------------------
    def create(self, client: Client, slot: int, priority: int, flags: int) -> int:
        if len(self.streams) >= self.max_streams:
            raise errors.error_for(errors.ACL_ERROR_RT_NO_STREAM_RESOURCE,
                                   f"device {self.worker.dev} has {self.max_streams} streams")
        if not 0 <= slot < layout.MAX_STREAMS or (client.slot, slot) in self.streams:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, f"stream slot {slot}")
        self._next_sid += 1
        stream = Stream(client, slot, self._next_sid, priority, flags)
        for field in range(_SE.words):
            client.streams[stream.base + field] = 0
        self.streams[(client.slot, slot)] = stream
        return stream.sid

    def destroy(self, client: Client, slot: int) -> None:
        """Forget the stream; tasks still queued are dropped (the host waited first unless it
        asked for ``destroy_stream_force``)."""
        stream = self._stream(client, slot)
        _cancel_running(stream)
        stream.queue.clear()
        del self.streams[(client.slot, slot)]
        self.rotation.remove(client, slot)

    def set_mode(self, client: Client, slot: int, mode: int) -> None:
        self._stream(client, slot).mode = StreamFailureMode(mode)

    def abort(self, client: Client, slot: int) -> None:
        """``aclrtStreamAbort``: drop every queued task; they count as completed. A kernel
        running on an engine stops at its next block boundary; a running copy finishes in
        the background. Neither reports afterwards."""
        stream = self._stream(client, slot)
        _cancel_running(stream)
        while stream.queue:
            task = stream.queue.pop()
            client.streams[stream.base + _SE.COMPLETED] = max(
                client.streams[stream.base + _SE.COMPLETED], task.seq)
        stream.busy = stream.hung = False
        stream.deadline = 0.0
        client.streams[stream.base + _SE.HUNG] = 0
        self._touched.add(client)

    def drop_client(self, client: Client) -> None:
        """Forget a detached client's streams; its running tasks are cancelled."""
        for key in [k for k in self.streams if k[0] == client.slot]:
            _cancel_running(self.streams[key])
            self.streams[key].queue.clear()
            del self.streams[key]
        self.rotation.drop_client(client)
        self._touched.discard(client)

    def _stream(self, client: Client, slot: int) -> Stream:
        stream = self.streams.get((client.slot, slot))
        if stream is None:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"stream slot {slot!r} is not a live stream")
        return stream

    # submission (asynchronous frames) ------------------------------------------------------
    def enqueue(self, client: Client, frame: protocol.Frame) -> None:
        """Frame ``[op, 0, stream_slot, task_seq, *args]`` from the submission ring. Raises
        BadFrame (nothing queued) for a frame that breaks the protocol table.

        The common frame takes the fast path: an op whose fields are all bounded ints
        (``_FAST``) checked in one expression, or a LAUNCH that repeats its kernel's last
        checked arguments; any other frame, and any frame the fast checks do not pass, goes
        through every field check (``_enqueue_checked``), which names the field at fault."""
        op, slot = frame[0], frame[2]
        fast = _FAST.get(op)
        args: tuple[Any, ...] | None = None
        if fast is not None:
            if fast(frame):
                args = tuple(frame[4:])
        elif op == _LAUNCH and len(frame) == 8 and _header_ok(frame):
            fn = _known_kernel(client, frame[4], frame[5], frame[6], frame[7])
            if fn is not None:
                args = (*frame[4:], fn)
        stream = self.streams.get((client.slot, slot)) \
            if args is not None and type(slot) is int else None
        if stream is None or args is None:
            self._enqueue_checked(client, frame)
            return
        queue = stream.queue
        task = Task(op, frame[3], args, stream, frame[1])
        if not queue:
            if not self.rotation and op in _AT_INTAKE and self._at_intake(task):
                return
            self.rotation.add(client, slot, stream)
        queue.append(task)

    def _at_intake(self, task: Task) -> bool:
        """Run ``task`` now, as the fast lane of ``_turn`` would in this pass's ``pump``, if
        nothing else could come first: no stream of the card has queued work (the rotation
        is empty, so no engine task is in flight either), its own stream is idle, and its
        frame is the last one in its client's ring (a later frame of this pass, a request
        included, would have been handled before ``pump`` ran it; with none left, the
        general path runs it next, and nothing else). Only fast-lane tasks qualify: an
        unprofiled event record, or a repeated tiny launch with its prepared callable, on a
        stream not stopped, no hang injected, no DEBUG log. True if it ran (completed, or
        failed with its code); the host is told at the end of the pass, as for any turn."""
        stream = task.stream
        client = stream.client
        worker = self.worker
        if task.submit_ns or stream.stopped or worker.faults.hangs or worker.debug \
                or not client.sub.empty():
            return False
        try:
            if task.op == _RECORD:
                _record(self, task, 0.0)
                code: int | None = 0
            else:
                code = self._inline_fast(task)
                if code is None:
                    return False
            if code:
                self._complete(task, code)
                return True
        except BaseException as err:  # a bug of ours: fail this task, go on (as ``_turn``)
            if containment.is_stop(err):
                raise
            worker.internal_error(f"task of stream {stream.sid}")
            self._complete(task, errors.ACL_ERROR_RT_INTERNAL_ERROR)
            return True
        client.streams[stream.base + _SE.COMPLETED] = task.seq
        self._touched.add(client)
        self.completed += 1
        return True

    def _enqueue_checked(self, client: Client, frame: protocol.Frame) -> None:
        """``enqueue`` with every field checked by the protocol's and executors' checks."""
        op = frame[0]
        check = _TASK_ARGS[op]
        if len(frame) != 4 + len(check):
            raise BadFrame(f"task op {op} takes {len(check)} arguments, got {len(frame) - 4}")
        _op, submit_ns, slot, seq, *args = frame
        if not (type(submit_ns) is int and 0 <= submit_ns < _U64):
            u64(submit_ns)  # raises BadFrame
        stream = self.streams.get((client.slot, slot)) if type(slot) is int else None
        if stream is None:
            stream = self._stream(client, u64(slot))  # raises: not a u64 or no such stream
        if not (type(seq) is int and 0 <= seq < _U64):
            u64(seq)  # raises BadFrame
        try:
            if op == _LAUNCH:
                _launch_args(client, args)
            else:
                for value, kind in zip(args, check, strict=False):  # lengths checked above
                    kind(value)
                if op == _MODEL_EXECUTE:  # bind the model's record (device/exec/model.py)
                    args = model_tasks.bind(client, args)
        except (BadFrame, errors.AclError) as err:
            # The stream and the task's number were readable: fail that task in its turn, so
            # the host's count of the stream's tasks is still met and no synchronize waits
            # forever for a task that was never queued.
            code = getattr(err, "code", errors.ACL_ERROR_RT_PARAM_INVALID)
            self._queue(stream, Task(_REFUSED, seq, (code,), stream, submit_ns))
            raise
        self._queue(stream, Task(op, seq, tuple(args), stream, submit_ns))

    def _queue(self, stream: Stream, task: Task) -> None:
        """Append ``task`` to its stream; a stream with queued tasks has a place in the
        rotation (it is added when its queue was empty, and leaves only once it is)."""
        if not stream.queue:
            self.rotation.add(stream.client, stream.slot, stream)
        stream.queue.append(task)

    def callback_done(self, client: Client, slot: int, seq: int) -> None:
        stream = self._stream(client, slot)
        head = stream.queue[0] if stream.busy and stream.queue else None
        if head is not None and head.op == Op.CALLBACK and head.seq == seq:
            self._complete(head, 0)

    def set_timeout(self, client: Client, timeout_us: int) -> None:
        """``aclrtSetOpExecuteTimeOut*`` of one client (0: the defaults)."""
        client.op_timeout_s = actual_timeout_us(timeout_us) / 1e6 if timeout_us else 0.0

    def _deadline(self, task: Task, engine: str, now: float) -> None:
        timeout_s = task.stream.client.op_timeout_s
        if not timeout_s:
            timeout_s = DEFAULT_TIMEOUT_US.get(engine, MAX_TIMEOUT_US) / 1e6
        task.deadline = deadline = now + timeout_s
        if deadline < self.next_deadline:
            self.next_deadline = deadline

    def expire(self, now: float) -> None:
        """Fail every running task past its deadline with its timeout code."""
        if now < self.next_deadline:
            return
        nearest = _NO_DEADLINE
        for stream in list(self.streams.values()):
            if not (stream.busy and stream.queue):
                continue
            task = stream.queue[0]
            if not task.deadline:
                continue
            if now >= task.deadline:
                self._time_out(stream, task)
            elif task.deadline < nearest:
                nearest = task.deadline
        self.next_deadline = nearest

    def _time_out(self, stream: Stream, task: Task) -> None:
        engine = task.engine
        if not engine and task.op == Op.LAUNCH and task.args[4] is not None:
            engine = task.args[4].__npu_kernel__
        code = TIMEOUT_CODE.get(engine, errors.ACL_ERROR_RT_TASK_TIMEOUT)
        self.worker.log("ERROR", f"task {task.seq} of stream {stream.sid} ran past its "
                                 f"execution timeout on {engine or 'the scheduler'}, ret={code}")
        task.cancelled = True
        if stream.hung:
            stream.hung = False
            stream.client.streams[stream.base + _SE.HUNG] = 0
        self._complete(task, code)

    # the pass ------------------------------------------------------------------------------
    def pump(self) -> float:
        """Reap completions and start runnable head tasks, clients and their streams taking
        turns (``rotation.py``: at most ``QUANTUM`` tasks of a stream a turn, at most
        ``PASS_BUDGET`` a pass, so a long backlog of inline tasks does not keep the loop
        from its rings and its heartbeat, and equal loads of two processes get equal
        shares). Returns the number of seconds until the nearest wait deadline (or 1.0)."""
        progressed = bool(self.done)
        if progressed:
            self._reap()
        now = time.monotonic()
        if now >= self.next_deadline:
            self.expire(now)
        self._nearest = now + 1.0
        if self.next_deadline < self._nearest:
            self._nearest = self.next_deadline
        if self.rotation and self._rounds(now):
            progressed = True
        self.progressed = progressed
        if self.completed:
            self.worker.ctl[_TASKS] += self.completed
            self.completed = 0
        if self._touched:
            for client in self._touched:
                if not client.departed:
                    client.notify_sync()
            self._touched.clear()
        return max(self._nearest - now, 0.0)

    def _rounds(self, now: float) -> bool:
        """Rounds of turns until nothing more starts or the pass budget is spent: in each
        round every client with queued work starts up to ``QUANTUM`` tasks of its first
        stream that can start some. True if a task started."""
        rotation, budget, progressed = self.rotation, PASS_BUDGET, False
        while True:
            moved = 0
            for client in rotation.clients():
                for stream in rotation.streams(client):
                    started = self._turn(stream, QUANTUM if budget > QUANTUM else budget, now)
                    if started:
                        if stream.queue:  # else it left the rotation (``_turn``)
                            rotation.served(client, stream.slot)
                        moved += started
                        budget -= started
                        break
                if budget <= 0:
                    return True
            if not moved:
                return progressed
            progressed = True
            if not rotation:
                return True

    def _reap(self) -> None:
        """Complete what the engines reported (their ``done`` deque)."""
        done = self.done
        while done:
            task, code, ns = done.popleft()
            self.engines[task.engine].running -= 1
            self.on_engines -= 1
            task.stream.client.inflight -= 1
            if not task.cancelled:
                if task.op == _LAUNCH and not code:
                    self._learn(task, ns, None)
                self._complete(task, code)
            if task.op == _MODEL_EXECUTE:
                model_tasks.finished(self.worker)

    def _turn(self, stream: Stream, limit: int, now: float) -> int:
        """Start up to ``limit`` head tasks of ``stream`` (fewer if one must wait or runs
        on an engine); returns how many started. A stream found with nothing queued
        leaves the rotation.

        Fast lane: an unprofiled event record, or a repeated tiny launch (``_inline_fast``)
        that succeeds, on a stream that is not stopped, with no hang injected and no DEBUG
        log on, completes here without ``_complete``: the stream's COMPLETED word (which
        the host polls) is written once, at the end of the turn or before anything else
        publishes (an event record's DONE_GEN, another task's completion), so the stream
        table never says less than an event does; the control block's task count and the
        host's wake-up follow once per turn too. Anything else goes through ``_start``."""
        queue, started, fast = stream.queue, 0, 0
        done_seq = 0  # the last seq the fast lane completed, not yet in the stream table
        table, completed_at = stream.client.streams, stream.base + _SE.COMPLETED
        worker = self.worker
        faults = worker.faults
        while queue and not stream.busy and started < limit:
            task = queue[0]
            code: int | None = None
            try:
                if not (task.submit_ns or stream.stopped or faults.hangs or worker.debug):
                    op = task.op
                    if op == _RECORD:
                        if done_seq:  # the stream's earlier tasks before the event's DONE_GEN
                            table[completed_at] = done_seq
                        _record(self, task, now)
                        code = 0
                    elif op == _LAUNCH:
                        code = self._inline_fast(task)
                    if code == 0:
                        queue.popleft()
                        done_seq = task.seq
                        started += 1
                        fast += 1
                        continue
                if done_seq:
                    table[completed_at] = done_seq
                    done_seq = 0
                if code is None:
                    ok = self._start(task, now)
                else:  # a tiny launch that failed (or an injected engine fault)
                    self._complete(task, code)
                    ok = True
            except BaseException as err:  # a bug of ours: fail this task, go on
                if containment.is_stop(err):
                    raise
                self.worker.internal_error(f"task of stream {stream.sid}")
                if done_seq:
                    table[completed_at] = done_seq
                    done_seq = 0
                self._complete(queue[0], errors.ACL_ERROR_RT_INTERNAL_ERROR)
                ok = True
            if not ok:
                if stream.deadline and stream.deadline < self._nearest:
                    self._nearest = stream.deadline
                break
            started += 1
        if fast:
            if done_seq:
                table[completed_at] = done_seq
            self._touched.add(stream.client)
            self.completed += fast
        if not queue:
            self.rotation.remove(stream.client, stream.slot)
        return started

    def _inline_fast(self, task: Task) -> int | None:
        """Run the LAUNCH ``task`` inline if it repeats a launch measured as tiny whose
        prepared callable is at hand (``_repeat``, as ``_tiny``, but building nothing); its
        code (0: it succeeded, and the caller completes it), or None if it
        must take ``_start``'s path. An injected engine fault's code without running."""
        last = _repeat(task)
        if last is None or last[3] is None or last[4] is not task.stream.client:
            return None
        _bin, name, _blocks, _args, fn = task.args
        engine: str = fn.__dict__["__npu_kernel__"]  # a plain function: no code of its own
        faults = self.worker.faults
        if faults.engine_faults:
            try:
                faults.check_launch(engine, name)
            except errors.AclError as err:
                return err.code
        start = _monotonic_ns()
        code: int = last[3](task)
        elapsed = _monotonic_ns() - start
        self.engines[engine].inline_ns += elapsed
        if code:
            task.start_ns, task.end_ns = start, start + elapsed
            with contextlib.suppress(AttributeError, TypeError):
                setattr(fn, _COST, None)
        elif elapsed > INLINE_KERNEL_NS:  # no longer tiny: its next launch goes to the engine
            self._learn(task, elapsed, last[3])
        return code

    def expect(self, task: Task, ns: int) -> None:
        """``task`` starts now, and its last run of the same work took ``ns``: publish when it
        should end (its stream's ``ETA_NS``), so that a host synchronize on the stream wakes
        shortly before then and polls, instead of sleeping until the completion's wake-up
        (``host/driver/link.py`` ``wait_until``). The estimate is left as it is once the
        task ends: in the past, it is no estimate. Loop thread."""
        stream = task.stream
        stream.client.streams[stream.base + _SE.ETA_NS] = _monotonic_ns() + ns

    def idle(self) -> bool:
        """Nothing can move until a frame, an engine completion or a wait deadline: the
        last pass started nothing (streams blocked on events do not keep the loop awake;
        the record they wait for is this worker's own work, which wakes it)."""
        return not self.done and not self.progressed

    def _start(self, task: Task, now: float) -> bool:
        """Start ``task``; False if it must wait (a WAIT whose event is not done)."""
        stream = task.stream
        if task.submit_ns and not task.start_ns:  # profiled: first attempt (a wait's start)
            task.start_ns = time.monotonic_ns()
        if stream.stopped:  # dropped; an event record still completes, carrying the failure
            if task.op == _RECORD:
                stream.pending_error = stream.stopped
                _record(self, task, now)
            self._complete(task, stream.stopped, report=False)
            return True
        faults = self.worker.faults
        if faults.hangs and faults.take_hang():
            stream.busy = stream.hung = True
            stream.client.streams[stream.base + _SE.HUNG] = 1
            self._deadline(task, "", now)
            self.worker.log("EVENT", f"task {task.seq} of stream {stream.sid} hangs (injected)")
            return True
        op = task.op
        handler = _INLINE.get(op)
        if handler is not None:
            try:
                result = handler(self, task, now)
            except errors.AclError as err:
                result = err.code
            if result is None:
                return False
            if result >= 0:
                self._complete(task, result)
            return True
        try:
            if op == _LAUNCH and (tiny := self._tiny(task)) is not None:
                self._run_inline(task, *tiny)
                return True
            engine, run = self._prepare(task)
        except errors.AclError as err:
            self._complete(task, err.code)
            return True
        if engine is None:
            self._complete(task, run(task))
            if op == _DVPP:  # a VPC job ran here: its waiters wake now, not after the pass
                self._touched.discard(stream.client)
                stream.client.notify_sync()
        else:
            if op == _LAUNCH and not self.engines[engine].running:
                self._expect_launch(task)
            stream.busy = True
            task.engine = engine
            self._deadline(task, engine, now)
            stream.client.inflight += 1
            self.on_engines += 1
            self.engines[engine].submit(task, run)
        return True

    def _expect_launch(self, task: Task) -> None:
        """A kernel launch about to start on its idle engine: the estimate of its end
        (``expect``) when it repeats the kernel's last successful run (``_last_run``)."""
        if (last := _last_run(task)) is not None:
            self.expect(task, last[2])

    def _tiny(self, task: Task) -> tuple[str, Any] | None:
        """``(engine, run)`` if ``task`` (a LAUNCH) repeats a launch measured as tiny (see
        the module docstring) and its client's execution timeout leaves ample room, else
        None. ``run`` is the callable prepared for that earlier launch when there is one
        (the same kernel, blocks and arguments of the same client: it runs the same), so
        a repeated tiny launch builds nothing. Raises AclError for an injected engine
        fault, as any launch does."""
        last = _repeat(task)
        if last is None:
            return None
        run = last[3]
        if run is None or last[4] is not task.stream.client:
            return run_kernel(self.worker, task.stream.client, task)  # checks injected faults
        engine: str = task.args[4].__dict__["__npu_kernel__"]  # a plain function
        self.worker.faults.check_launch(engine, task.args[1])
        return engine, run

    def _learn(self, task: Task, ns: int, run: Any) -> None:
        """Keep the cost of a successful launch on its kernel (and ``run``, the callable
        that ran it inline, or None)."""
        _bin, _name, num_blocks, args, fn = task.args
        if type(fn) is _FUNCTION:  # no code of the kernel's own runs here
            setattr(fn, _COST, (args, num_blocks, ns, run, task.stream.client))

    def _run_inline(self, task: Task, engine: str, run: Any) -> None:
        """Run a tiny kernel in the loop thread (``run`` reports failures as codes)."""
        start = time.monotonic_ns()
        code = run(task)
        end = time.monotonic_ns()
        task.start_ns, task.end_ns = start, end  # read by the trace ring writer
        elapsed = end - start
        self.engines[engine].inline_ns += elapsed
        if not code:
            self._learn(task, elapsed, run)
        else:
            with contextlib.suppress(AttributeError, TypeError):
                setattr(task.args[4], _COST, None)
        self._complete(task, code)

    def _prepare(self, task: Task) -> tuple[str | None, Any]:
        """Resolve addresses now (loop thread); returns (engine or None for inline, run)."""
        client, op = task.stream.client, task.op
        if op == _COPY_ASYNC:
            dst, src, count = task.args
            d = self.worker.resolve(client, dst, count)
            s = self.worker.resolve(client, src, count)
            self.worker.faults.check_ranges((dst, count), (src, count))
            devs = self.worker.count_p2p(dst, src, count)
            self.worker.faults.check_copy(devs)
            task.args = (d, s, count, [self.worker.peer(p) for p in devs])
            return (engines.DMA if count > INLINE_BYTES else None), _run_copy
        if op == _MEMSET_ASYNC:
            ptr, value, count = task.args
            addr = self.worker.resolve(client, ptr, count)
            self.worker.faults.check_ranges((ptr, count))
            self.worker.faults.check_copy(())
            task.args = (addr, value, count)
            return (engines.DMA if count > INLINE_BYTES else None), _run_memset
        if op == _LAUNCH:
            return run_kernel(self.worker, client, task)
        if task.op == Op.MODEL_EXECUTE:
            return model_tasks.prepare(self.worker, client, task)
        if task.op == Op.COLLECTIVE:
            return collective.prepare(self.worker, client, task)
        if task.op == Op.DVPP:
            from npuemu.device.exec import dvpp  # its codecs load with the first DVPP task
            return dvpp.prepare(self.worker, client, task)
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, f"unknown task op {task.op}")


    # completion ----------------------------------------------------------------------------
    def _complete(self, task: Task, code: int, report: bool = True) -> None:
        stream = task.stream
        client = stream.client
        if code:
            self._fail(stream, task, code, report)
        elif self.worker.debug:
            self.worker.log("DEBUG", f"task {task.seq} (op {task.op}) of stream {stream.sid} "
                                     "complete")
        if task.submit_ns:  # profiled (device/trace.py)
            self.worker.trace.write(task, code)
        client.streams[stream.base + _SE.COMPLETED] = task.seq
        if stream.queue and stream.queue[0] is task:
            stream.queue.popleft()
        stream.busy = False
        self._touched.add(client)
        self.completed += 1  # added to the control block once per pass (pump)

    def _fail(self, stream: Stream, task: Task, code: int, report: bool) -> None:
        table, base = stream.client.streams, stream.base
        table[base + _SE.ERR_CODE] = code
        table[base + _SE.ERR_TASK] = task.seq
        table[base + _SE.ERR_COUNT] += 1
        stream.pending_error = code
        self.worker.ctl[layout.DEVICE_CTL.LAST_ERROR] = code
        if stream.mode == StreamFailureMode.ACL_STOP_ON_FAILURE:
            stream.stopped = code
        if report:
            stream.client.report((protocol.Report.EXCEPTION, stream.slot, task.seq, code,
                                  stream.sid, self.worker.dev))
            self.worker.log("ERROR", f"task {task.seq} of stream {stream.sid} failed, "
                                     f"ret={code} ({errors.name_of(code)})")


# inline handlers: return a code (>= 0) to complete now, -1 if the task completes later,
# None if it cannot start yet -------------------------------------------------------------------
def _record(sched: Scheduler, task: Task, now: float) -> int:
    slot, gen = task.args
    stream = task.stream
    events, base = stream.client.events, _event_base(slot)
    events[base + _EE.TIMESTAMP] = time.monotonic_ns() - sched.worker.boot_ns
    events[base + _EE.ERROR] = stream.pending_error
    stream.pending_error = 0
    # an event re-recorded on another stream may complete out of order: keep the newest
    events[base + _EE.DONE_GEN] = max(events[base + _EE.DONE_GEN], gen)
    return 0


def _reset(sched: Scheduler, task: Task, now: float) -> int:
    events, base = task.stream.client.events, _event_base(task.args[0])
    events[base + _EE.ERROR] = 0
    events[base + _EE.DONE_GEN] = 0
    return 0


def _wait(sched: Scheduler, task: Task, now: float) -> int | None:
    slot, gen, timeout_ms = task.args
    stream = task.stream
    events, base = stream.client.events, _event_base(slot)
    if events[base + _EE.DONE_GEN] >= gen:
        stream.deadline = 0.0
        return events[base + _EE.ERROR]
    if timeout_ms > 0:
        if not stream.deadline:
            stream.deadline = now + timeout_ms / 1000
        elif now >= stream.deadline:
            stream.deadline = 0.0
            return errors.ACL_ERROR_RT_WAIT_TIMEOUT
    return None


def _callback(sched: Scheduler, task: Task, now: float) -> int:
    cb_id, block = task.args
    stream = task.stream
    stream.client.report((protocol.Report.CALLBACK, stream.slot, task.seq, cb_id, block))
    if block:
        stream.busy = True
        return -1
    return 0


def _event_base(slot: int) -> int:
    if not 0 <= slot < layout.MAX_EVENTS:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, f"event slot {slot}")
    return slot * _EE.words


_REFUSED = -1
"""Pseudo op of a task frame the worker refused: it fails with its code when its turn comes."""


def _refused(_sched: Scheduler, task: Task, _now: float) -> int:
    code: int = task.args[0]
    return code


_AT_INTAKE = frozenset((_LAUNCH, _RECORD))
"""Task ops ``enqueue`` may run at intake (``_at_intake``): the fast lane's."""
_INLINE = {Op.RECORD: _record, Op.RESET_EVENT: _reset, Op.WAIT_EVENT: _wait,
           Op.CALLBACK: _callback, _REFUSED: _refused}


_kernel_name = protocol.text()


def _last_run(task: Task) -> tuple[Any, ...] | None:
    """The cost record of the LAUNCH ``task``'s kernel if its last successful run had the
    same blocks and arguments (a plain function: only those keep the record); else None."""
    _bin, _name, num_blocks, args, fn = task.args
    if type(fn) is not _FUNCTION:
        return None
    last: tuple[Any, ...] | None = fn.__dict__.get(_COST)
    if last is None or last[1] != num_blocks or last[0] != args:
        return None
    return last


def _repeat(task: Task) -> tuple[Any, ...] | None:
    """The cost record of the LAUNCH ``task``'s kernel if the task repeats a launch measured
    as tiny (``_last_run``, at most ``INLINE_KERNEL_NS``) and its client's execution timeout
    leaves ample room; else None."""
    last = _last_run(task)
    if last is None or last[2] > INLINE_KERNEL_NS:
        return None
    timeout_s = task.stream.client.op_timeout_s
    if timeout_s and timeout_s < _INLINE_TIMEOUT_FLOOR_S:
        return None
    return last


def _fast_check(bounds: tuple[int, ...]) -> Callable[[protocol.Frame], bool]:
    """A check that a task frame has exactly ``len(bounds)`` arguments, each an int in
    ``[0, bound)``, and a submit stamp and task seq that are u64s: what the protocol's
    checks of such an op accept, in one expression (no message: a frame it refuses goes
    through the full checks, which name the field)."""
    if len(bounds) == 2:  # the event record: the commonest small task, unrolled
        b0, b1 = bounds

        def pair(f: protocol.Frame) -> bool:
            if len(f) != 6:
                return False
            _op, stamp, _slot, seq, v0, v1 = f
            return (type(stamp) is int and type(seq) is int and type(v0) is int
                    and type(v1) is int and 0 <= stamp < _U64 and 0 <= seq < _U64
                    and 0 <= v0 < b0 and 0 <= v1 < b1)
        return pair
    size = 4 + len(bounds)

    def check(f: protocol.Frame) -> bool:
        return (len(f) == size and _header_ok(f)
                and all(type(v) is int and 0 <= v < b
                        for v, b in zip(f[4:], bounds, strict=True)))
    return check


def _header_ok(f: protocol.Frame) -> bool:
    """The submit stamp and task seq of a task frame are u64s."""
    stamp, seq = f[1], f[3]
    return type(stamp) is int and type(seq) is int and 0 <= stamp < _U64 and 0 <= seq < _U64


def _known_kernel(client: Client, bin_id: object, name: object, num_blocks: object,
                  kernel_args: object) -> Any:
    """The kernel of a LAUNCH whose fields pass the protocol's checks because they repeat
    what was checked before: ``name`` a plain function of a loaded binary's module
    namespace (read from its ``__dict__``: no code of the binary runs), marked as a kernel,
    and ``kernel_args`` equal to those of its last successful launch. None otherwise (the
    full checks decide)."""
    if not (type(bin_id) is int and type(name) is str and type(num_blocks) is int
            and 0 < num_blocks <= MAX_BLOCKS):
        return None
    module = client.binaries.get(bin_id)
    if type(module) is not types.ModuleType or name.startswith("__"):
        return None
    fn = module.__dict__.get(name)
    if type(fn) is not _FUNCTION:
        return None
    marks = fn.__dict__
    last = marks.get(_COST)
    if last is None or "__npu_kernel__" not in marks or last[0] != kernel_args:
        return None
    return fn


def _launch_args(client: Client, args: list[Any]) -> None:
    """Check a LAUNCH's ``[bin_id, name, num_blocks, kernel args]`` and bind its kernel
    (appended: an unload must not break queued work). Kernel arguments equal to those of
    the kernel's last successful launch were checked then and are not walked again (what
    msgpack decodes and the check refuses, maps, bytes, nil, extension types, never
    compares equal to an accepted array). Raises BadFrame."""
    bin_id, name, num_blocks, kernel_args = args
    u64(bin_id)
    _kernel_name(name)
    protocol.blocks(num_blocks)
    fn = lookup_kernel(client, bin_id, name)
    last = fn.__dict__.get(_COST) if type(fn) is _FUNCTION else None
    if last is None or last[0] != kernel_args:
        _kernel_args(kernel_args)
    args.append(fn)


_SIMPLE_TASKS = (Op.COPY_ASYNC, Op.MEMSET_ASYNC, Op.RECORD, Op.RESET_EVENT, Op.WAIT_EVENT,
                 Op.CALLBACK)
_TASK_ARGS: dict[int, tuple[Callable[[object], object], ...]] = {
    **{op: tuple(field.check for field in protocol.TASK_FIELDS[op]) for op in _SIMPLE_TASKS},
    # the protocol's nested fields, checked by their executors
    Op.LAUNCH: (u64, _kernel_name, protocol.blocks, _kernel_args),
    Op.MODEL_EXECUTE: model_tasks.EXECUTE_CHECKS,
    Op.COLLECTIVE: collective.TASK_ARGS, Op.DVPP: dvpp_frame.TASK_ARGS,
}
"""Each task op's field checks: the protocol's (``TASK_FIELDS``), and for its nested fields
those of the executor (kernel arguments, model addresses, collective and DVPP fields)."""
_BOUND: dict[Callable[[object], object], int] = {
    protocol.u64: _U64, protocol.count: protocol.COUNT_LIMIT,
    protocol.event_slot: layout.MAX_EVENTS, protocol.flag: 2}
"""Upper bound of the int each of these protocol checks accepts (``[0, bound)``)."""
_FAST: dict[int, Callable[[protocol.Frame], bool]] = {
    int(op): _fast_check(tuple(_BOUND[field.check] for field in protocol.TASK_FIELDS[op]))
    for op in _SIMPLE_TASKS}
"""The fast check of each op whose fields are all bounded ints (``enqueue``)."""


def _run_copy(task: Task) -> int:
    dst, src, count, peers = task.args
    move(dst, src, count)  # around 4K aliasing, as two neighbouring blocks are
    if not all(peer.alive() for peer in peers):  # the peer died during the copy
        return errors.ACL_ERROR_RT_SUSPECT_REMOTE_ERROR
    return 0


def _run_memset(task: Task) -> int:
    ptr, value, count = task.args
    ctypes.memset(ptr, value & 0xFF, count)
    return 0


def _cancel_running(stream: Stream) -> None:
    """The stream's running task (on an engine, hung, or a blocking callback) will not
    complete through its engine: a kernel stops at its next block, the report is dropped."""
    if stream.busy and stream.queue:
        stream.queue[0].cancelled = True
