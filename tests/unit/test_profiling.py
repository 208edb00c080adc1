"""Profiling without device processes: the trace ring (writer and reader over a real shared
memory segment), the raw-data loader, exporters (Chrome trace schema, CSV columns), the
waits report's diagnoses, and acl.prof's state machine and codes."""

from __future__ import annotations

import csv
import json
import os
import secrets
import threading
from types import SimpleNamespace

import chrome_trace
import jsonschema
import numpy as np
import pytest

from npuemu.device.trace import TraceWriter
from npuemu.host.acl import prof as acl_prof
from npuemu.host.driver.trace import RECORD_DTYPE, TraceReader
from npuemu.host.prof import export, model, waits
from npuemu.host.prof.model import Task
from npuemu.shared import errors
from npuemu.shared.protocol import Op
from npuemu.shared.trace import TRACE_HEADER


# ----------------------------------------------------------------------------- trace ring
def _fake_link(node: str, slot: int = 3) -> SimpleNamespace:
    ctl = memoryview(bytearray(8 * 2048)).cast("Q")
    return SimpleNamespace(node=node, dev=0, slot=slot, logical=0, tracer=None, ctl=ctl,
                           closing=False)


def _fake_task(seq: int, client_slot: int = 3, op: int = Op.MEMSET_ASYNC) -> SimpleNamespace:
    stream = SimpleNamespace(client=SimpleNamespace(slot=client_slot), slot=1, sid=7)
    return SimpleNamespace(op=op, stream=stream, seq=seq, submit_ns=1000 + seq,
                           start_ns=2000 + seq, end_ns=3000 + seq, engine="dma",
                           args=(0, 0, 4096))


@pytest.fixture
def ring(monkeypatch):
    monkeypatch.setenv("NPUEMU_TRACE_RECORDS", "8")
    node = f"t{secrets.token_hex(4)}"
    writer = TraceWriter(node, 0, boot_ns=1)
    reader = TraceReader(_fake_link(node))
    yield writer, reader
    reader.close()
    writer.close()


def test_ring_records_in_order_and_counts_what_overflows(ring):
    writer, reader = ring
    for seq in range(1, 21):
        writer.write(_fake_task(seq), 0)
    got = reader.drain()
    assert list(got["seq"]) == list(range(1, 9))  # the first 8 fit, the rest are dropped
    assert reader.dropped() == 12
    assert set(got["stream_id"]) == {7} and set(got["size"]) == {4096}
    assert all(got["submit_ns"] < got["start_ns"]) and all(got["start_ns"] < got["end_ns"])
    for seq in range(21, 24):  # room again after the drain
        writer.write(_fake_task(seq), 0)
    assert list(reader.drain()["seq"]) == [21, 22, 23]
    assert reader.dropped() == 12


def test_ring_keeps_only_the_readers_client_and_kernel_names(ring):
    writer, reader = ring
    writer.write(_fake_task(1, client_slot=5), 0)  # another process's task
    kernel = _fake_task(2, op=Op.LAUNCH)
    kernel.args = (1, "matmul", 4, [], SimpleNamespace(__npu_kernel__="aicore"))
    kernel.engine = "aicore"
    writer.write(kernel, 507015)
    got = reader.drain()
    assert list(got["seq"]) == [2] and got["code"][0] == 507015 and got["size"][0] == 4
    assert reader.names()[got["name"][0] - 1] == "matmul"


def test_refused_tasks_are_recorded_and_broken_records_counted(ring):
    writer, reader = ring
    refused = _fake_task(1, op=-1)  # the scheduler's op of a task refused in its turn
    refused.args = (107000,)
    writer.write(refused, 107000)
    broken = _fake_task(2)
    broken.args = ()  # a record that cannot be made: counted, never raised
    writer.write(broken, 0)
    got = reader.drain()
    assert list(got["op"]) == [0xFFFF] and got["code"][0] == 107000
    assert reader.dropped() == 1


def test_stamp_marks_frames_and_counts_threads(ring):
    _writer, reader = ring
    reader.start()
    assert reader.link.tracer is reader
    frame = reader.stamp((Op.MEMSET_ASYNC, 0, 4, 1, 0, 0, 16))
    assert frame[1] > 0 and frame[2:] == (4, 1, 0, 0, 16)
    reader.stop()
    assert reader.link.tracer is None
    [(key, count)] = reader.submitters.items()
    assert key[0] == 4 and threading.current_thread().name in key[1] and count == 1


def test_a_second_live_reader_is_refused(ring):
    _writer, reader = ring
    reader.words[TRACE_HEADER.READER_PID] = os.getppid()  # a live process other than us
    with pytest.raises(errors.AclError) as info:
        TraceReader(_fake_link(reader.link.node))
    assert info.value.code == errors.ACL_ERROR_PROF_ALREADY_RUN
    reader.words[TRACE_HEADER.READER_PID] = os.getpid()


# ----------------------------------------------------------------------------- synthetic runs
def _task(stream, seq, kind, start, end, engine="dma", slot=None, eslot=0, egen=0, name=None):
    return Task(0, stream, slot if slot is not None else stream, seq, kind, name or kind, engine,
                start - 5, start, end, 1 << 20, 0, eslot, egen, 0)


def _pipeline_run(mixed: bool) -> model.Run:
    """Stream 1 copies (and, if mixed, computes) then records; stream 2 waits, computes."""
    tasks, t = [], 0
    for i in range(1, 5):
        tasks.append(_task(1, 3 * i - 2, "MEMCPY_ASYNC", t, t + 100))
        if mixed:
            tasks.append(_task(1, 3 * i - 1, "AI_CORE", t + 100, t + 200, "aicore",
                               name="matmul"))
        end = t + (200 if mixed else 100)
        tasks.append(_task(1, 3 * i, "EVENT_RECORD", end, end + 1, "scheduler", eslot=9,
                           egen=i))
        tasks.append(_task(2, 2 * i - 1, "EVENT_WAIT", t, end + 2, "scheduler", eslot=9,
                           egen=i))
        tasks.append(_task(2, 2 * i, "AI_VECTOR_CORE", end + 2, end + 20, "aivector",
                           name="add"))
        t = end + 25
    run = model.Run("x", {"pid": 1234, "wall_offset_ns": 0})
    run.devices[0] = model.Device(0, {"dropped": 0, "submitters": []}, tasks,
                                  [[0, 1 << 20, {}], [100, 2 << 20, {1: 0}],
                                   [200, 2 << 20, {1: 1000}]])
    model._link_waits(run)
    return run


def test_waits_are_linked_to_the_record_that_released_them():
    run = _pipeline_run(mixed=True)
    for t in run.devices[0].tasks:
        if t.kind == "EVENT_WAIT":
            assert t.released_by is not None and t.released_by.event_gen == t.event_gen
            assert t.released_by.stream == 1


def test_report_names_the_bottleneck_that_mixes_copies_and_compute():
    report = waits.analyze(_pipeline_run(mixed=True))
    assert report.bottleneck == (0, 1)
    text = waits.format_report(report)
    assert "stream 1 is the bottleneck" in text and "move its copies" in text
    s2 = next(s for s in report.streams if s.stream == 2)
    assert s2.waited_on.keys() == {1} and s2.waiting_ns > s2.busy_ns
    assert 0.99 < sum(s2.share(x) for x in (s2.busy_ns, s2.waiting_ns, s2.idle_ns)) < 1.01


def test_report_on_all_copy_bottleneck_and_on_a_shared_stream():
    run = _pipeline_run(mixed=False)
    tid_a, tid_b = "MainThread (tid 1, #1)", "Thread-1 (tid 2, #2)"
    run.devices[0].info["submitters"] = [[2, tid_a, 4], [2, tid_b, 4], [1, tid_a, 8]]
    report = waits.analyze(run)
    text = waits.format_report(report)
    assert report.bottleneck == (0, 1) and "move its copies" not in text
    assert report.shared_streams == [(0, 2)]
    assert "receives tasks from 2 host threads" in text


def test_shared_stream_advice_names_the_emulated_stream_limit(monkeypatch):
    run = _pipeline_run(mixed=False)
    run.devices[0].info["submitters"] = [[2, "a (tid 1, #1)", 4], [2, "b (tid 2, #2)", 4]]
    monkeypatch.setenv("NPUEMU_MAX_STREAMS", "200")
    assert "at most 200 streams per card" in waits.format_report(waits.analyze(run))
    monkeypatch.delenv("NPUEMU_MAX_STREAMS")
    assert "at most 1024 streams per card" in waits.format_report(waits.analyze(run))


def test_overlap_of_copies_and_compute():
    run = model.Run("x", {})
    run.devices[0] = model.Device(0, {}, [_task(1, 1, "MEMCPY_ASYNC", 0, 100),
                                          _task(2, 1, "AI_CORE", 50, 250, "aicore")], [])
    dev = waits.analyze(run).devices[0]
    assert dev.overlap_ns == 50 and dev.overlap == 0.5


def check_chrome_trace(events: list) -> None:
    chrome_trace.check(events)


def test_the_schema_check_can_fail():
    good = [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0}]
    check_chrome_trace(good)
    for bad in ([{**good[0], "dur": -1}], [{**good[0], "ts": "1.0"}],
                [{"ph": "s", "name": "e", "pid": 1, "tid": 1, "ts": 1, "id": 1}],
                [{"ph": "f", "name": "e", "pid": 1, "tid": 1, "ts": 1, "id": 1}]):
        with pytest.raises((AssertionError, jsonschema.ValidationError)):
            check_chrome_trace(bad)


def test_timeline_is_chrome_trace_with_tracks_flows_and_counters():
    run = _pipeline_run(mixed=True)
    events = export.timeline(run)
    check_chrome_trace(events)
    names = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert {"Stream 1", "Stream 2", "Engine DMA", "Engine AI Core"} <= names
    assert sum(e["ph"] == "s" for e in events) == 4
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert counters == {"HBM used", "P2P link 0<->1"}
    pids = {e["pid"] for e in events}
    assert pids == {(1234 << 10) | (14 << 5) | 0}


def _write_raw(prof_dir, tasks: list[tuple], names=("matmul",), cut: int = 0) -> None:
    data = os.path.join(prof_dir, "device_0", "data")
    os.makedirs(data)
    os.makedirs(os.path.join(prof_dir, "host", "data"))
    with open(os.path.join(prof_dir, "host", "data", "info.json"), "w") as f:
        json.dump({"pid": 42, "wall_offset_ns": 0}, f)
    with open(os.path.join(prof_dir, "host", "data", "api.jsonl"), "w") as f:
        f.write(json.dumps(["aclrtMemcpy", 5, 100, 300]) + "\n")
        f.write(json.dumps(["aclrtMemcpy", 5, 400, 500]) + "\n{\"cut")  # cut line
    with open(os.path.join(data, "info.json"), "w") as f:
        json.dump({"device": 0, "dropped": 3, "names": list(names), "submitters": []}, f)
    rows = np.array(tasks, RECORD_DTYPE).tobytes()
    with open(os.path.join(data, "task.bin"), "wb") as f:
        f.write(rows[: len(rows) - cut])


def _row(op, sid, seq, engine, start, end, size=0, name=0, eslot=0, egen=0):
    return (op, 0, sid, sid, seq, engine, start - 10, start, end, size, 0, eslot, egen, name,
            0, 0)


def test_export_writes_the_msprof_layout_and_columns(tmp_path):
    prof_dir = str(tmp_path / "PROF_000001_20260101000000000_00000042AAAAAAAA")
    _write_raw(prof_dir, [_row(Op.COPY_ASYNC, 1, 1, 1, 1000, 2000, size=4096),
                          _row(Op.LAUNCH, 1, 2, 2, 2000, 5000, size=8, name=1),
                          _row(Op.RECORD, 1, 3, 0, 5000, 5001, eslot=1, egen=1),
                          _row(Op.WAIT_EVENT, 2, 1, 0, 900, 5002, eslot=1, egen=1)],
               cut=40)  # the last record is cut short (a crash): it is not read
    paths = export.export(prof_dir)
    out = os.path.join(prof_dir, "mindstudio_profiler_output")
    assert all(os.path.dirname(p) == out for p in paths.values())

    def read(kind):
        with open(paths[kind], newline="") as f:
            return list(csv.reader(f))

    assert read("op_summary")[0] == export.OP_SUMMARY
    op_rows = read("op_summary")[1:]
    assert [(r[4], r[7], r[9]) for r in op_rows] == [("matmul", "AI_CORE", "3.000")]
    assert read("task_time")[0] == export.TASK_TIME
    assert [r[2] for r in read("task_time")[1:]] == ["MEMCPY_ASYNC", "KERNEL_AICORE",
                                                     "EVENT_RECORD"]
    assert read("op_statistic")[0] == export.OP_STATISTIC
    api = read("api_statistic")
    assert api[0] == export.API_STATISTIC and api[1][2:5] == ["aclrtMemcpy", "0.300", "2"]
    with open(paths["timeline"]) as f:
        check_chrome_trace(json.load(f))
    with open(os.path.join(out, "README.txt")) as f:
        assert "records dropped (trace ring full): 3" in f.read()
    assert export.find_prof_dirs(str(tmp_path)) == [prof_dir]


def test_plot_draws_a_png(tmp_path):
    from npuemu.host.prof import plot

    path = plot.plot(_pipeline_run(mixed=True), str(tmp_path / "t.png"))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert [label for label, _ in plot.lanes(_pipeline_run(mixed=True))] == [
        "dev 0 stream 1", "dev 0 stream 2", "dev 0 aicore", "dev 0 aivector", "dev 0 dma"]


# ----------------------------------------------------------------------------- acl.prof codes
@pytest.fixture
def aclprof():
    yield acl_prof
    if acl_prof._running is not None:
        acl_prof.stop(acl_prof._running[0])
    if acl_prof._path is not None:
        acl_prof.finalize()


def test_acl_prof_state_machine_codes(aclprof, tmp_path):
    P = aclprof
    cfg = P.create_config([0], P.ACL_AICORE_NONE, 0, P.ACL_PROF_TASK_TIME)
    assert cfg != 0
    assert P.start(cfg) == errors.ACL_ERROR_PROF_NOT_RUN  # before init
    assert P.finalize() == errors.ACL_ERROR_PROF_NOT_RUN
    assert P.set_config(1, "x") == errors.ACL_ERROR_PROF_NOT_RUN
    assert P.init("") == errors.ACL_ERROR_INVALID_FILE
    assert P.init("x" * 4097) == errors.ACL_ERROR_INVALID_FILE
    assert P.init(str(tmp_path)) == 0
    assert P.init(str(tmp_path)) == errors.ACL_ERROR_REPEAT_INITIALIZE
    assert P.set_config(1, "200MB") == 0 and P.set_config(17, "x") == 100000
    assert P.start(0xBAD) == errors.ACL_ERROR_INVALID_PARAM
    assert P.start(cfg) == 0
    assert P.start(cfg) == errors.ACL_ERROR_PROF_ALREADY_RUN
    other = P.create_config([1], P.ACL_AICORE_NONE, 0, P.ACL_PROF_TASK_TIME)
    assert P.stop(other) == errors.ACL_ERROR_INVALID_PARAM
    assert P.stop(cfg) == 0
    assert P.stop(cfg) == errors.ACL_ERROR_PROF_NOT_RUN
    assert P.destroy_config(other) == 0 and P.destroy_config(other) == 100000
    assert P.finalize() == 0
    prof_dirs = export.find_prof_dirs(str(tmp_path))
    assert len(prof_dirs) == 1
    assert os.path.isdir(os.path.join(prof_dirs[0], "mindstudio_profiler_output"))
    assert P.init(str(tmp_path)) == 0 and P.finalize() == 0  # init/finalize pair up again


@pytest.mark.parametrize("args", [([0, 0], 1, 0, 2), ([-1], 1, 0, 2), ([0], 42, 0, 2),
                                  ([0], 1, 0, 0), ([0], 1, 0, 1 << 40), ("x", 1, 0, 2)])
def test_create_config_rejects_bad_arguments_with_null(args):
    assert acl_prof.create_config(*args) == 0


def test_msproftx_marks_and_ranges(aclprof, tmp_path):
    P = aclprof
    assert P.create_stamp() == 0  # not collecting msproftx: NULL
    assert P.init(str(tmp_path)) == 0
    cfg = P.create_config([0], P.ACL_AICORE_NONE, 0,
                          P.ACL_PROF_TASK_TIME | P.ACL_PROF_MSPROFTX | P.ACL_PROF_ACL_API)
    assert P.start(cfg) == 0
    stamp = P.create_stamp()
    assert stamp != 0
    assert P.set_stamp_trace_message(stamp, "step one!", 8) == 0
    assert P.mark(stamp) == 0
    assert P.push(stamp) == 0 and P.pop() == 0
    assert P.pop() == errors.ACL_ERROR_INVALID_PARAM  # empty stack
    range_id, ret = P.range_start(stamp)
    assert ret == 0 and range_id > 0
    done = []
    worker = threading.Thread(target=lambda: done.append(P.range_stop(range_id)))
    worker.start()
    worker.join()
    assert done == [0] and P.range_stop(range_id) == errors.ACL_ERROR_INVALID_PARAM
    assert P.mark(0xBAD) == errors.ACL_ERROR_INVALID_PARAM
    assert P.mark_ex("m" * 128, 0) == errors.ACL_ERROR_INVALID_PARAM
    P.destroy_stamp(stamp)
    assert P.stop(cfg) == 0 and P.finalize() == 0
    prof_dir = export.find_prof_dirs(str(tmp_path))[0]
    run = model.load(prof_dir)
    assert [(r["kind"], r["message"]) for r in run.tx] == [
        ("mark", "step one"), ("push", "step one"), ("range", "step one")]
    out = os.path.join(prof_dir, "mindstudio_profiler_output")
    tx_csv = [p for p in os.listdir(out) if p.startswith("msprof_tx_")]
    with open(os.path.join(out, tx_csv[0]), newline="") as f:
        assert next(csv.reader(f)) == export.MSPROF_TX


def test_api_timer_names_and_restores():
    from npuemu.host import acl

    assert acl_prof.c_name("aclrt", "memcpy_async") == "aclrtMemcpyAsync"
    original = acl.rt.get_device_count
    seen = []
    timer = acl_prof.ApiTimer()
    timer.install(SimpleNamespace(api=lambda *a: seen.append(a)))
    try:
        assert acl.rt.get_device_count is not original
        acl.get_version()
    finally:
        timer.uninstall()
    assert acl.rt.get_device_count is original
    assert seen and seen[0][0] == "aclGetVersion" and seen[0][1] <= seen[0][2]


def test_pythonic_profile_records_marks_and_ranges_and_exports(tmp_path):
    from npuemu.host.api import profile

    with profile(str(tmp_path)) as prof:
        prof.mark("start")
        with prof.range("step"):
            pass
        with pytest.raises(errors.AclError) as info, profile(str(tmp_path)):
            pass  # one session per process: refused
        assert info.value.code == errors.ACL_ERROR_PROF_ALREADY_RUN
    assert [(r["kind"], r["message"]) for r in model.load(prof.dir).tx] == [
        ("mark", "start"), ("range", "step")]
    assert os.path.exists(prof.outputs["timeline"])
    assert export.find_prof_dirs(str(tmp_path)) == [prof.dir]  # the refused one left none
