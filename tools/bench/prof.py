"""Figure family: profiling: what recording every task costs, and whether records are lost.

- **async submission, profiling on**: batches of ``record_event`` (each followed, outside the
  clock, by one ``synchronize_stream``), tasks per second, with the card recording every task
  (a profiling session's trace ring, drained by its thread) beside the same batches with
  recording off, samples interleaved in one run. Target: on costs at most 15 %.
  **async submit+complete** is the same with the synchronize inside the clock (no target:
  with tasks this small the card's recording is a visible share of each).
- **profiling off: hook cost per task**: what the hooks cost when nothing is profiled: the
  three tests a task passes through (the host's ``link.tracer is not None``, the scheduler's
  ``task.submit_ns`` at start and at completion), timed in a loop, over the time of one task
  (submit and complete) with profiling off. The two builds (with and without hooks) cannot
  run in one process, so this is measured, not compared. Target: at most 1 %.
- **trace records kept at full rate**: ``record_event`` as fast as one thread can submit (a
  ``synchronize_stream`` after every 5000), for 10 s (1 s in quick mode), profiling on with
  the default ring: records that reached the raw file beside the tasks submitted (the ring
  counts what it dropped; the achieved rate and the dropped count are in the notes). Target:
  all. The issue asks for 100k tasks/s; one
  submitting thread on the machine at hand may reach less (the note says how much).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
import timeit

from npuemu.tools.bench.records import Record, Target
from npuemu.tools.bench.registry import Context, figure
from npuemu.tools.bench.sampling import check_ret


@figure("profiling", devices=1, timeout=240)
def fig_profiling(ctx: Context) -> list[Record]:
    from npuemu.host import acl
    from npuemu.host.prof import session as prof_session

    check_ret(acl.rt.set_device(0), "set_device(0)")
    stream, ret = acl.rt.create_stream()
    check_ret(ret, "create_stream")
    event, ret = acl.rt.create_event()
    check_ret(ret, "create_event")
    with tempfile.TemporaryDirectory() as tmp:
        run = prof_session.Session(tmp, prof_session.ACL_PROF_TASK_TIME)
        prof_session.activate(run)
        try:
            reader = run.readers[0]
            rates = _rates(ctx, acl, stream, event, reader)
            kept, lost, submitted, seconds = _loss(ctx, acl, stream, event, reader, run)
        finally:
            prof_session.deactivate(run)
    hook_ns = _hook_ns()
    task_ns = 1e9 / rates["off+sync"]
    ctx.note(f"full-rate run: {submitted} tasks in {seconds:.1f} s "
             f"({submitted / seconds / 1e3:.0f}k tasks/s), {lost} records dropped")
    check_ret(acl.rt.reset_device(0), "reset_device(0)")
    return [Record("async submission, profiling on", rates["on"], "tasks/s",
                   "profiling off", rates["off"], Target("≥ 0.85x", "ratio", ">=", 0.85)),
            Record("async submit+complete, profiling on", rates["on+sync"], "tasks/s",
                   "profiling off", rates["off+sync"]),
            Record("profiling off: hook cost per task", hook_ns, "ns",
                   "one task, profiling off", task_ns, Target("≤ 1 %", "ratio", "<=", 0.01)),
            Record("trace records kept at full rate", kept, "records", "tasks submitted",
                   submitted, Target("all (1.0x)", "ratio", ">=", 1.0))]


def _rates(ctx: Context, acl, stream: int, event: int, reader) -> dict[str, float]:
    """Median rates over interleaved samples: ``<mode>`` = submission alone (the clock stops
    before the synchronize), ``<mode>+sync`` = submission and completion."""
    batch = 2000 if ctx.quick else 5000

    def timed() -> tuple[float, float]:
        t0 = time.perf_counter()
        for _ in range(batch):
            acl.rt.record_event(event, stream)
        t1 = time.perf_counter()
        check_ret(acl.rt.synchronize_stream(stream), "synchronize")
        return batch / (t1 - t0), batch / (time.perf_counter() - t0)

    modes = {"off": reader.stop, "on": reader.start}
    got: dict[str, list[float]] = {}
    for switch in modes.values():  # warm-up
        switch()
        timed()
    for _ in range(5 if ctx.quick else 11):
        for mode, switch in modes.items():
            switch()
            submit, complete = timed()
            got.setdefault(mode, []).append(submit)
            got.setdefault(mode + "+sync", []).append(complete)
    reader.stop()
    return {m: statistics.median(v) for m, v in got.items()}


def _loss(ctx: Context, acl, stream: int, event: int, reader,
          run) -> tuple[int, int, int, float]:
    """``(records kept, records dropped, tasks submitted, seconds)`` of a full-rate run."""
    from npuemu.host.driver.trace import RECORD_DTYPE

    seconds = 1.0 if ctx.quick else 10.0
    run.drain()
    raw = os.path.join(run.dir, "device_0", "data", "task.bin")
    size_before = os.path.getsize(raw) if os.path.exists(raw) else 0
    dropped_before = reader.dropped()
    reader.start()
    n, t0 = 0, time.perf_counter()
    deadline = t0 + seconds
    while time.perf_counter() < deadline:
        for _ in range(5000):  # a synchronize per 5000 keeps the card's backlog bounded
            check_ret(acl.rt.record_event(event, stream), "record_event")
        n += 5000
        check_ret(acl.rt.synchronize_stream(stream), "synchronize")
    elapsed = time.perf_counter() - t0
    reader.stop()
    run.drain()
    kept = (os.path.getsize(raw) - size_before) // RECORD_DTYPE.itemsize
    return kept, reader.dropped() - dropped_before, n, elapsed


class _Task:
    __slots__ = ("submit_ns",)

    def __init__(self) -> None:
        self.submit_ns = 0


class _Link:
    def __init__(self) -> None:
        self.tracer = None


def _hook_ns() -> float:
    """ns of the three profiling-off tests one task passes (host once, card twice), timeit's
    loop overhead included (so an upper bound)."""
    task, link, number = _Task(), _Link(), 100_000
    host = min(timeit.repeat("if link.tracer is not None: pass", globals={"link": link},
                             number=number, repeat=5))
    card = min(timeit.repeat("if task.submit_ns: pass", globals={"task": task},
                             number=number, repeat=5))
    return (host + 2 * card) / number * 1e9
