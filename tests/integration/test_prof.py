"""Profiling against real device workers: what a profiled program submitted is what the trace
shows (order, durations, flow arrows, on one clock), the Chrome trace and CSVs of a real run,
``npuemu msprof`` on unmodified programs (the waits report's two diagnoses, a crash and a
``kill -9`` still leave a readable trace, re-export, plot), and overflow counting.

Children write into ``tmp_path``; the assertions load the ``PROF_*`` dirs here. Times are
compared with each other (monotonic order), never with fixed bounds.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import textwrap

import chrome_trace
import pytest
from childprog import CHILD_HELPERS, run_scenario

from npuemu.host.prof import export, model, waits

pytestmark = pytest.mark.integration

ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "512M", "NPUEMU_DDR": "128M"}
PRELUDE = CHILD_HELPERS + """
from npuemu.host.core.kernel import LIBRARY
ok(acl.init(), "init")
ok(acl.rt.set_device(0), "set_device")
binary, ret = acl.rt.binary_load_from_file(LIBRARY)
ok(ret, "binary_load")
ADD, ret = acl.rt.binary_get_function(binary, "add")
MATMUL, ret = acl.rt.binary_get_function(binary, "matmul")
"""


def _only_prof_dir(root) -> str:
    dirs = export.find_prof_dirs(str(root))
    assert len(dirs) == 1, dirs
    return dirs[0]


def _by_stream(run: model.Run) -> dict[int, list[model.Task]]:
    out: dict[int, list[model.Task]] = {}
    for t in run.devices[0].tasks:
        out.setdefault(t.stream, []).append(t)
    return {sid: sorted(ts, key=lambda t: t.seq) for sid, ts in out.items()}


def test_two_stream_pipeline_trace_matches_what_was_submitted(run_py, tmp_path):
    r = run_scenario(run_py, PRELUDE, f"""
        n = 1 << 18
        copy_s, comp_s = stream(), stream()
        ev = event()
        x, y, z = malloc(4 * n), malloc(4 * n), malloc(4 * n)
        host, ret = acl.rt.malloc_host(4 * n)
        ok(acl.prof.init({str(tmp_path)!r}), "prof.init")
        cfg = acl.prof.create_config([0], 0xFF, 0, 0x2 | 0x1)  # TASK_TIME | ACL_API
        ok(acl.prof.start(cfg), "prof.start")
        for i in range(4):
            ok(acl.rt.memcpy_async(x, 4 * n, host, 4 * n, 1, copy_s), "H2D")
            ok(acl.rt.record_event(ev, copy_s), "record")
            ok(acl.rt.stream_wait_event(comp_s, ev), "wait")
            ok(acl.rt.launch_kernel(ADD, 2, [x, y, z, n, "float32"], comp_s), "add")
        ok(acl.rt.synchronize_stream(comp_s), "sync")
        ok(acl.prof.stop(cfg), "prof.stop")
        ok(acl.prof.finalize(), "prof.finalize")
        R["copy"], _ = acl.rt.stream_get_id(copy_s)
        R["comp"], _ = acl.rt.stream_get_id(comp_s)
    """, {**ENV, "ASCEND_GLOBAL_LOG_LEVEL": "0",
          "ASCEND_PROCESS_LOG_PATH": str(tmp_path / "logs")}, timeout=90)
    prof_dir = _only_prof_dir(tmp_path)
    run = model.load(prof_dir)
    streams = _by_stream(run)
    assert set(streams) == {r["copy"], r["comp"]}
    copy, comp = streams[r["copy"]], streams[r["comp"]]
    assert [t.kind for t in copy] == ["MEMCPY_ASYNC", "EVENT_RECORD"] * 4
    assert [t.kind for t in comp] == ["EVENT_WAIT", "AI_VECTOR_CORE"] * 4
    assert [t.seq for t in copy] == list(range(1, 9)) == [t.seq for t in comp]
    assert all(t.engine == "dma" and t.size == 4 << 18 for t in copy[::2])
    assert all(t.engine == "aivector" and t.name == "add" and t.size == 2 for t in comp[1::2])
    for lane in (copy, comp):  # one clock: submit <= start <= end, in stream order
        for t in lane:
            assert 0 < t.submit_ns <= t.start_ns <= t.end_ns
        for prev, nxt in itertools.pairwise(lane):
            assert prev.end_ns <= nxt.start_ns
    assert all(t.dur_ns > 0 for t in copy[::2])
    waits_ = comp[::2]
    for i, w in enumerate(waits_):  # each wait was released by its own iteration's record
        rec = w.released_by
        assert rec is copy[2 * i + 1]
        assert rec.end_ns <= w.end_ns  # a wait ends only once its record has
    out = os.path.join(prof_dir, "mindstudio_profiler_output")
    timeline = [f for f in os.listdir(out) if f.startswith("msprof_") and f.endswith(".json")]
    with open(os.path.join(out, timeline[0])) as f:
        events = json.load(f)
    chrome_trace.check(events)
    assert sum(e["ph"] == "s" for e in events) == 4
    tracks = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert {f"Stream {r['copy']}", f"Stream {r['comp']}", "Engine DMA",
            "Engine AI Vector"} <= tracks
    assert any(e["ph"] == "C" and e["name"] == "HBM used" for e in events)
    assert any(e["name"] == "AscendCL@aclrtMemcpyAsync" for e in events)
    # DEBUG logs of both sides are instant events inside the run's time span
    logs = [e for e in events if e.get("cat") == "log"]
    host_pid = (run.host["pid"] << 10) | (7 << 5) | 31
    card_pid = (run.host["pid"] << 10) | (14 << 5) | 0
    assert any(e["pid"] == host_pid and "submitted to stream" in e["name"] for e in logs)
    assert any(e["pid"] == card_pid and "complete" in e["name"] for e in logs)
    first = min(t.start_ns for t in run.devices[0].tasks) + run.wall_offset_ns
    assert all(e["ts"] * 1000 >= first - 2e9 for e in logs)
    rows = {}
    for kind in ("op_summary", "task_time", "api_statistic"):
        [name] = [f for f in os.listdir(out) if f.startswith(kind)]
        with open(os.path.join(out, name), newline="") as f:
            rows[kind] = list(csv.reader(f))
    assert rows["op_summary"][0] == export.OP_SUMMARY and len(rows["op_summary"]) == 5
    assert rows["task_time"][0] == export.TASK_TIME and len(rows["task_time"]) == 17
    api = {row[2]: row for row in rows["api_statistic"][1:]}
    assert rows["api_statistic"][0] == export.API_STATISTIC
    assert api["aclrtMemcpyAsync"][4] == "4" and api["aclrtLaunchKernel"][4] == "4"


BOTTLENECK_APP = """
import threading
import numpy as np
import acl
from npuemu.host.core.kernel import LIBRARY

acl.init()
acl.rt.set_device(0)
binary, _ = acl.rt.binary_load_from_file(LIBRARY)
matmul, _ = acl.rt.binary_get_function(binary, "matmul")
add, _ = acl.rt.binary_get_function(binary, "add")
mixed, _ = acl.rt.create_stream()   # copies AND compute, in order: the bottleneck
waiter, _ = acl.rt.create_stream()  # waits for every step of `mixed`
shared, _ = acl.rt.create_stream()  # two host threads submit to it
ev, _ = acl.rt.create_event()
m = 192
a, _ = acl.rt.malloc(4 * m * m, 0)
b, _ = acl.rt.malloc(4 * m * m, 0)
c, _ = acl.rt.malloc(4 * m * m, 0)
big = 8 << 20
src, _ = acl.rt.malloc(big, 0)
dst, _ = acl.rt.malloc(big, 0)
for step in range(6):
    acl.rt.memcpy_async(dst, big, src, big, 3, mixed)
    acl.rt.launch_kernel(matmul, 4, [a, b, c, m, m, m, "float32"], mixed)
    acl.rt.record_event(ev, mixed)
    acl.rt.stream_wait_event(waiter, ev)
    acl.rt.launch_kernel(add, 1, [a, b, c, 64, "float32"], waiter)

def submit():
    acl.rt.set_device(0)
    for _ in range(20):
        acl.rt.memset_async(c, 4096, 0, 4096, shared)

threads = [threading.Thread(target=submit) for _ in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
acl.rt.synchronize_device()
ids = [acl.rt.stream_get_id(s)[0] for s in (mixed, waiter, shared)]
print("STREAMS", *ids)
"""


def test_msprof_cli_finds_the_bottleneck_and_the_shared_stream(npuemu_cli, tmp_path):
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(BOTTLENECK_APP))
    out = tmp_path / "out"
    res = npuemu_cli("msprof", f"--application=python {app}", f"--output={out}",
                     "--aicpu=on", "--sys-hardware-mem=on", env=ENV, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "[INFO] Profiling finished." in res.stdout
    mixed, waiter, shared = (int(v) for v in
                             res.stdout.split("STREAMS", 1)[1].split("\n", 1)[0].split())
    prof_dir = _only_prof_dir(out)
    report = waits.analyze(model.load(prof_dir))
    assert report.bottleneck == (0, mixed)
    assert report.shared_streams == [(0, shared)]
    text = waits.format_report(report)
    assert f"stream {mixed} is the bottleneck" in text and "move its copies" in text
    assert f"stream {waiter} (" in text
    res = npuemu_cli("msprof", "--analyze", f"--output={out}",
                     f"--plot={tmp_path / 'timeline.png'}", env=ENV, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"stream {mixed} is the bottleneck" in res.stdout
    assert f"stream {shared} receives tasks from 2 host threads" in res.stdout
    assert (tmp_path / "timeline.png").read_bytes()[:4] == b"\x89PNG"
    def kinds() -> list[str]:  # the exported files by kind (their names less the time)
        files = os.listdir(os.path.join(prof_dir, "mindstudio_profiler_output"))
        return sorted(f.rsplit("_", 1)[0] for f in files if export.EXPORTED.fullmatch(f))

    before = kinds()
    res = npuemu_cli("msprof", "--export=on", f"--output={prof_dir}", env=ENV, timeout=120)
    assert res.returncode == 0 and "Export finished" in res.stdout, res.stdout + res.stderr
    assert kinds() == before == sorted(set(before))  # a re-export: one copy of each file


CRASH_APP = """
import os, signal, time
import acl

acl.init()
acl.rt.set_device(0)
s, _ = acl.rt.create_stream()
p, _ = acl.rt.malloc(1 << 20, 0)
for _ in range(10):
    acl.rt.memset_async(p, 1 << 20, 7, 1 << 20, s)
acl.rt.synchronize_stream(s)
if os.environ.get("HOW") == "kill":
    time.sleep(0.5)  # several drain periods: the records reach the raw files
    os.kill(os.getpid(), signal.SIGKILL)
raise RuntimeError("the program fails after its tasks ran")
"""


@pytest.mark.parametrize("how", ["raise", "kill"])
def test_a_crashing_program_still_leaves_a_readable_trace(npuemu_cli, tmp_path, how):
    app = tmp_path / "crash.py"
    app.write_text(textwrap.dedent(CRASH_APP))
    out = tmp_path / "out"
    res = npuemu_cli("msprof", f"--application=python {app}", f"--output={out}",
                     env={**ENV, "HOW": how}, timeout=120)
    assert res.returncode != 0
    if how == "raise":
        assert "RuntimeError: the program fails" in res.stderr
    prof_dir = _only_prof_dir(out)
    run = model.load(prof_dir)
    memsets = [t for t in run.devices[0].tasks if t.kind == "MEMSET_ASYNC"]
    assert [t.seq for t in memsets] == list(range(1, 11))
    timeline = [f for f in os.listdir(os.path.join(prof_dir, "mindstudio_profiler_output"))
                if f.startswith("msprof_")]
    with open(os.path.join(prof_dir, "mindstudio_profiler_output", timeline[0])) as f:
        chrome_trace.check(json.load(f))


def test_overflow_is_counted_never_silent(run_py, tmp_path):
    r = run_scenario(run_py, PRELUDE, f"""
        from npuemu.host.api import profile
        s = stream()
        p = malloc(4096)
        with profile({str(tmp_path)!r}, export=False) as prof:
            gate = hold(s)  # the tasks queue up behind it, then complete in one burst
            for _ in range(2000):
                ok(acl.rt.memset_async(p, 4096, 1, 4096, s), "memset")
            gate.set()
            ok(acl.rt.synchronize_stream(s), "sync")
        R["dir"] = prof.dir
    """, {**ENV, "NPUEMU_TRACE_RECORDS": "16"}, timeout=120)
    run = model.load(r["dir"])
    recorded = len(run.devices[0].tasks)
    assert run.dropped > 0
    assert recorded + run.dropped == 2001  # the host func + 2000 memsets: each one counted
    paths = export.export(r["dir"])
    with open(paths["waits"]) as f:
        assert f"{run.dropped} records DROPPED" in f.read()
