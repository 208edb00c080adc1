"""Figure family: the card's own cost per task, the host's CPU while it synchronizes, and how
one card shares itself among processes.

``card`` (1 device) reads the card's own counters (``LOOP_WORK_CPU_NS`` over ``TASKS`` of
the control block: the share of the worker's loop thread's CPU that its working passes took,
by their wall time, see ``device/loopcpu.py``), which load on the machine disturbs far less
than a round trip:

* ``card CPU per tiny task``: a burst of cache-hit ``execute_v2`` Add (1 KiB) queued on one
  stream, then synchronized [the bare intake of one task frame: a ring pop and its msgpack
  decode, in this process]; target ≤ 3 µs. The same for an empty kernel and an event
  record, and for the tiny op launched and synchronized one at a time.
* ``tiny op launch+sync``: median µs of one ``execute_v2`` Add plus ``synchronize_stream``
  [a bare ring round trip, ``bench.RawRing``, sampled in rounds interleaved with it];
  target ≤ 3x.
* ``host CPU per synchronize``: the host thread's CPU (``time.thread_time``) over the wall
  time of ``synchronize_stream`` [that wall time], for a kernel that keeps its engine busy
  for 2 ms (target ≤ 30 %) and for the tiny op.

``card-sharing`` starts a one-card node (``npuemu start --devices 1``, stopped at the end)
and on it 4 helper processes (``NPUEMU_NODE``), attached and warm once; then windows of 1 s
(0.5 s quick) in which 1, 2 or 4 of them launch empty kernels in batches of 64 plus a
synchronize, the three counts in turn for 3 rounds (2 quick), so that all three meet the
same load of the machine: ``share ratio`` is the largest process's task count over the
smallest's in a window [equal shares, 1.0; target ≤ 1.3], ``aggregate`` their tasks per
second [one process alone; target ≥ 0.9x]; each the median over the rounds.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time
from typing import Any

from npuemu.tools.bench.records import Record, Target
from npuemu.tools.bench.registry import Context, figure
from npuemu.tools.bench.ring import latency_beside_ring
from npuemu.tools.bench.runner import child_command
from npuemu.tools.bench.sampling import check_ret

_EMPTY = "from npuemu.shared.kernel import kernel\n\n@kernel('aicore')\ndef empty(ctx):\n    pass\n"
_BUSY = """import time
from npuemu.shared.kernel import kernel

@kernel("aicore")
def busy(ctx, seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
"""
_BATCH = 64
_READY_S = 120.0  # longest a sharing helper takes to attach and warm up, or waits to start


def _card_counters(link: Any) -> tuple[int, int]:
    """``(loop work CPU ns, tasks completed)`` of the card, once its loop has published
    them (its housekeeping runs every few ms, and at least every 10 ms after activity)."""
    from npuemu.shared.layout import DEVICE_CTL
    from npuemu.shared.protocol import Op

    time.sleep(0.03)
    link.call(Op.PING)
    time.sleep(0.03)
    return link.ctl[DEVICE_CTL.LOOP_WORK_CPU_NS], link.ctl[DEVICE_CTL.TASKS]


def _bare_intake_us(n: int) -> float:
    """CPU µs of a ring pop plus the msgpack decode of one LAUNCH frame, in this process."""
    from npuemu.shared import protocol
    from npuemu.shared.ring import Ring, region_size

    frame = protocol.pack((int(protocol.Op.LAUNCH), 0, 1, 1, 1, "empty", 1, ()))
    buf = memoryview(bytearray(region_size(1 << 20)))
    push, pop = Ring(buf, 1 << 20, init=True), Ring(buf)
    unpack = protocol.unpack
    total = 0
    for _ in range(n // _BATCH):
        for _ in range(_BATCH):
            push.push(frame)
        t0 = time.thread_time_ns()
        while (payload := pop.pop()) is not None:
            unpack(payload)
        total += time.thread_time_ns() - t0
    return total / (n // _BATCH * _BATCH) / 1e3


@figure("card", devices=1)
def fig_card(ctx: Context) -> list[Record]:
    """The card's CPU per task (its own counters) and the host's CPU per synchronize."""
    from npuemu.host import acl
    from npuemu.host.core import runtime
    from npuemu.tools.bench.ops import _Tensor

    check_ret(acl.rt.set_device(0), "set_device(0)")
    stream, ret = acl.rt.create_stream()
    check_ret(ret, "create_stream")
    link = runtime.get().current_link()
    x, z = _Tensor(acl, (256,)), _Tensor(acl, (256,))
    attr = acl.op.create_attr()
    check_ret(acl.op.compile("Add", [x.desc, x.desc], [z.desc], attr, 0, 0, None), "compile")
    empty = _function(acl, _EMPTY, "empty")
    event, ret = acl.rt.create_event()
    check_ret(ret, "create_event")

    def tiny_op() -> None:
        acl.op.execute_v2("Add", [x.desc, x.desc], [x.buf, x.buf], [z.desc], [z.buf], attr,
                          stream)

    def sync() -> None:
        check_ret(acl.rt.synchronize_stream(stream), "synchronize_stream")

    n = 5000 if ctx.quick else 20000
    queued = {"tiny op": tiny_op,
              "empty kernel": lambda: acl.rt.launch_kernel(empty, 1, [], stream),
              "event record": lambda: acl.rt.record_event(event, stream)}
    per_task = {name: _card_cpu_per_task(link, fn, sync, n) for name, fn in queued.items()}
    intake = _bare_intake_us(n)
    def tiny_op_then_sync() -> None:
        tiny_op()
        sync()

    ping_pong = _card_cpu_per_task(link, tiny_op_then_sync, lambda: None, n // 5)
    records = [Record("card CPU per tiny task", per_task["tiny op"], "µs",
                      "bare intake (ring pop + decode)", intake,
                      Target("≤ 3 µs", "value", "<=", 3.0))]
    records += [Record(f"card CPU per task: {name}", per_task[name], "µs",
                       "bare intake (ring pop + decode)", intake)
                for name in ("empty kernel", "event record")]
    records.append(Record("card CPU per tiny task (launch+sync)", ping_pong, "µs",
                          "bare intake (ring pop + decode)", intake))
    op_us, ring_us = latency_beside_ring(ctx, tiny_op_then_sync, 500 if ctx.quick else 2000)
    records.append(Record("tiny op launch+sync", op_us, "µs", "bare ring round trip", ring_us,
                          Target("≤ 3x", "ratio", "<=", 3.0)))
    busy = _function(acl, _BUSY, "busy")
    for name, launch, reps in (
            ("2 ms kernel", lambda: acl.rt.launch_kernel(busy, 1, [0.002], stream), 50),
            ("tiny op", tiny_op, 500 if ctx.quick else 2000)):
        cpu_us, wall_us = _host_cpu_per_sync(launch, sync, reps)
        records.append(Record(f"host CPU per synchronize ({name})", cpu_us, "µs",
                              "wall time of the synchronize", wall_us,
                              Target("≤ 30 %", "ratio", "<=", 0.3)
                              if name == "2 ms kernel" else None))
    check_ret(acl.rt.destroy_stream(stream), "destroy_stream")
    return records


def _function(acl: Any, source: str, name: str) -> Any:
    binary, ret = acl.rt.binary_load_from_data(source)
    check_ret(ret, "binary_load_from_data")
    func, ret = acl.rt.binary_get_function(binary, name)
    check_ret(ret, "binary_get_function")
    return func


def _card_cpu_per_task(link: Any, submit: Any, sync: Any, n: int) -> float:
    """The card's loop CPU (µs) per task over ``n`` calls of ``submit`` and one ``sync``
    (after a warm-up: the first launch of a kernel runs on its engine)."""
    for _ in range(200):
        submit()
    sync()
    work0, tasks0 = _card_counters(link)
    for _ in range(n):
        submit()
    sync()
    work1, tasks1 = _card_counters(link)
    return (work1 - work0) / max(tasks1 - tasks0, 1) / 1e3


def _host_cpu_per_sync(launch: Any, sync: Any, reps: int) -> tuple[float, float]:
    """Median host thread CPU µs and wall µs of one ``sync`` after one ``launch``."""
    for _ in range(20):
        launch()
        sync()
    cpu, wall = [], []
    for _ in range(reps):
        launch()
        c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
        sync()
        cpu.append(time.thread_time_ns() - c0)
        wall.append(time.perf_counter_ns() - t0)
    return statistics.median(cpu) / 1e3, statistics.median(wall) / 1e3


@figure("card-sharing", timeout=300)
def fig_card_sharing(ctx: Context) -> list[Record]:
    """Share ratio and aggregate rate of 2 and 4 processes submitting equal loads."""
    from npuemu.tools.bench.nodes import npuemu_command
    from npuemu.tools.bench.track import SCRUBBED, stop_node, supervisor_of

    name, cli = f"bench-share-{os.getpid()}", npuemu_command()
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    ctx.track.node(name)  # tracked before its supervisor exists: cleaned up by name
    subprocess.run([*cli, "start", "--devices", "1", "--hbm", "1G", "--ddr", "256M",
                    "--name", name], env=env, stdin=subprocess.DEVNULL, check=True,
                   capture_output=True, timeout=60)
    pid, ctime = supervisor_of(name)
    ctx.track.node(name, pid)
    rounds, seconds = (2, 0.5) if ctx.quick else (3, 1.0)
    plan = [p for _ in range(rounds) for p in _SHARE_COUNTS]
    try:
        windows = _share_run(ctx, {**env, "NPUEMU_NODE": name}, plan, seconds)
    finally:
        subprocess.run([*cli, "stop", "--name", name], env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=60)
        stop_node(name, pid, ctime)
    by_count: dict[int, list[list[float]]] = {p: [] for p in _SHARE_COUNTS}
    for p, rates in zip(plan, windows, strict=True):
        by_count[p].append(rates)
    alone = statistics.median(rates[0] for rates in by_count[1])
    records = []
    for p in _SHARE_COUNTS[1:]:
        ratios = [max(r) / min(r) if min(r) else float("inf") for r in by_count[p]]
        records.append(Record(f"card share ratio, {p} processes", statistics.median(ratios),
                              ":1", "equal shares", 1.0, Target("≤ 1.3", "value", "<=", 1.3)))
        records.append(Record(f"card aggregate, {p} processes",
                              statistics.median(sum(r) for r in by_count[p]), "tasks/s",
                              "1 process alone", alone, Target("≥ 0.9x", "ratio", ">=", 0.9)))
    ctx.note("tasks/s per process, windows in turn (1, 2, 4 processes, " + f"{rounds} rounds): "
             + "; ".join(f"{p}: " + ", ".join(f"{r:.0f}" for r in rates)
                         for p, rates in zip(plan, windows, strict=True)))
    return records


_SHARE_COUNTS = (1, 2, 4)
"""Processes submitting at once in the sharing windows (taken in turn, round after round)."""


def _share_run(ctx: Context, env: dict[str, str], plan: list[int], seconds: float,
               ) -> list[list[float]]:
    """Tasks per second of each submitting helper in each window of ``plan`` (how many of
    the ``max(plan)`` helpers submit in it; the others wait). The helpers attach and warm
    up once; a window opens once every helper is done with the one before, so the windows
    with 1, 2 and 4 processes take turns under the same load of the machine."""
    helpers = max(plan)
    with tempfile.TemporaryDirectory(prefix="npuemu-bench-share-") as tmp:
        outs = [os.path.join(tmp, f"{i}.json") for i in range(helpers)]
        go = os.path.join(tmp, "go")
        procs = []
        for i, out in enumerate(outs):
            proc = subprocess.Popen(child_command(__name__, "--share", out, go, repr(seconds),
                                                  str(i), str(len(plan))),
                                    env=env, stdin=subprocess.DEVNULL)
            ctx.track.proc(proc.pid)
            procs.append(proc)
        try:
            _wait_files([out + ".ready" for out in outs], procs)
            for k, count in enumerate(plan):
                with open(f"{go}.{k}.tmp", "w") as f:
                    f.write(f"{time.monotonic() + 0.05!r} {count}")
                os.rename(f"{go}.{k}.tmp", f"{go}.{k}")
                _wait_files([f"{out}.{k}" for out in outs], procs)
            for proc in procs:
                rc = proc.wait(60)
                if rc:
                    raise RuntimeError(f"card-sharing helper exited {rc}")
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        got = []
        for out in outs:
            with open(out) as f:
                got.append(json.load(f))
    return [[got[i][k]["tasks"] / got[i][k]["seconds"] for i in range(count)]
            for k, count in enumerate(plan)]


def _wait_files(paths: list[str], procs: list[subprocess.Popen]) -> None:
    """Until every file in ``paths`` exists; RuntimeError after ``_READY_S`` or when a
    helper has exited."""
    deadline = time.monotonic() + _READY_S
    while not all(os.path.exists(path) for path in paths):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            raise RuntimeError("card-sharing helpers did not get ready")
        time.sleep(0.005)


def _share_child(out: str, go: str, seconds: float, index: int, windows: int) -> int:
    from npuemu.host import acl

    check_ret(acl.rt.set_device(0), "set_device(0)")
    stream, ret = acl.rt.create_stream()
    check_ret(ret, "create_stream")
    empty = _function(acl, _EMPTY, "empty")
    launch = acl.rt.launch_kernel

    def batch() -> None:
        for _ in range(_BATCH):
            launch(empty, 1, [], stream)
        check_ret(acl.rt.synchronize_stream(stream), "synchronize_stream")

    for _ in range(4):
        batch()
    open(out + ".ready", "w").close()
    results = []
    for k in range(windows):
        deadline = time.monotonic() + _READY_S
        while not os.path.exists(f"{go}.{k}"):
            if time.monotonic() > deadline:
                return 3
            time.sleep(0.001)
        with open(f"{go}.{k}") as f:
            start_text, count_text = f.read().split()
        start_at, tasks = float(start_text), 0
        while time.monotonic() < start_at:
            time.sleep(0.0005)
        if index < int(count_text):
            end = start_at + seconds
            while time.monotonic() < end:
                batch()
                tasks += _BATCH
        results.append({"tasks": tasks, "seconds": time.monotonic() - start_at})
        open(f"{out}.{k}", "w").close()
    with open(out, "w") as f:
        json.dump(results, f)
    check_ret(acl.rt.destroy_stream(stream), "destroy_stream")
    check_ret(acl.rt.reset_device(0), "reset_device")
    return 0


def child_main(argv: list[str]) -> int:
    """The figure's helpers (``runner.child_command``): ``--share OUT GO SECONDS INDEX
    WINDOWS`` (window ``k`` opens with the file ``GO.k``, holding the window's monotonic
    start and how many helpers submit in it: those whose INDEX is below that count; each
    helper marks a window done with ``OUT.k``)."""
    return _share_child(argv[1], argv[2], float(argv[3]), int(argv[4]), int(argv[5]))
