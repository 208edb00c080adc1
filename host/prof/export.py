"""Export a recorded run as msprof does: ``mindstudio_profiler_output/`` in its ``PROF_*`` dir.

Files (``<ts>`` = ``%Y%m%d%H%M%S`` of the export):

- ``msprof_<ts>.json``: the timeline, a JSON array of Chrome trace events (Perfetto and
  chrome://tracing open it). Processes: one per card (``Ascend Hardware``) with a track per
  stream (``Stream <id>``) and per engine (``Engine DMA`` ...), counter tracks for HBM used
  and for each P2P link's traffic, and flow arrows from each event record to the waits it
  released; one for the host API (``CANN``, a track per thread, ``AscendCL@<api>`` slices)
  and one for msproftx marks and ranges (``MsprofTx``). ``pid`` is ``(pid << 10) |
  (sort_index << 5) | device_id`` with device id 31 for host processes, as msprof does.
  Deviation: ``ts``/``dur`` are JSON numbers in microseconds (msprof writes strings with three
  decimals; numbers are what every Chrome-trace reader accepts). Times are the host's wall
  clock (monotonic time plus the offset taken when the session started). Device log lines
  (each card's log ring) and this process's plog lines of the session's window are instant
  events on the card's process and on ``CANN`` (run with ``ASCEND_GLOBAL_LOG_LEVEL=0`` to
  see every malloc and submission beside its task).
- ``op_summary_<ts>.csv`` (kernels), ``op_statistic_<ts>.csv``, ``task_time_<ts>.csv`` (every
  task), ``api_statistic_<ts>.csv`` (if the host API was recorded), ``msprof_tx_<ts>.csv`` (if
  msproftx was), with msprof's columns; values we do not model are ``N/A``.
- ``waits_<ts>.txt``: the waits report (``waits.py``), and ``README.txt``.

Files are created 0600 and the directory 0700, whatever the umask (``shared/private.py``).
Exporting again (``npuemu msprof --export=on``) replaces the files of the earlier export.

``Task Wait Time(us)`` is the gap between the end of the previous task of the same stream and
the start of this one (0 for the first). Partial: no AI Core PMU columns, no model ids,
no step trace.
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import json
import os
import re
import statistics

from npuemu.host.prof import waits
from npuemu.host.prof.model import COMPUTE, Run, Task, load
from npuemu.shared import private

OUTPUT = "mindstudio_profiler_output"
HOST_DEV = 31
SORT_TX, SORT_CANN, SORT_HW = 6, 7, 14
ENGINE_TID = 1 << 20  # engine tracks come after every stream id
ENGINE_LABEL = {"dma": "DMA", "aicore": "AI Core", "aivector": "AI Vector", "aicpu": "AI CPU",
                "dvpp": "DVPP"}

OP_SUMMARY = ["Device_id", "Model ID", "Task ID", "Stream ID", "Op Name", "OP Type",
              "OP State", "Task Type", "Task Start Time(us)", "Task Duration(us)",
              "Task Wait Time(us)", "Block Num"]
OP_STATISTIC = ["Device_id", "OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)",
                "Avg Time(us)", "Max Time(us)", "Ratio(%)"]
TASK_TIME = ["Device_id", "kernel_name", "kernel_type", "stream_id", "task_id", "task_time(us)",
             "task_start(us)", "task_stop(us)"]
API_STATISTIC = ["Device_id", "Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)",
                 "Max(us)", "Variance"]
MSPROF_TX = ["Device_id", "pid", "tid", "category", "event_type", "payload_type",
             "payload_value", "Start_time(us)", "End_time(us)", "message_type", "message",
             "domain", "Device Start_time(us)", "Device End_time(us)"]


def export(prof_dir: str) -> dict[str, str]:
    """Write ``mindstudio_profiler_output/`` for ``prof_dir``; returns {kind: path}."""
    run = load(prof_dir)
    out = os.path.join(prof_dir, OUTPUT)
    private.makedirs(out)
    _remove_earlier(out)
    ts = datetime.datetime.now().strftime("%Y%m%d%H%M%S")
    paths = {"timeline": os.path.join(out, f"msprof_{ts}.json"),
             "op_summary": os.path.join(out, f"op_summary_{ts}.csv"),
             "op_statistic": os.path.join(out, f"op_statistic_{ts}.csv"),
             "task_time": os.path.join(out, f"task_time_{ts}.csv"),
             "waits": os.path.join(out, f"waits_{ts}.txt")}
    with private.open_file(paths["timeline"], "w") as f:
        json.dump(timeline(run), f)
    _write_csv(paths["op_summary"], OP_SUMMARY, op_summary_rows(run))
    _write_csv(paths["op_statistic"], OP_STATISTIC, op_statistic_rows(run))
    _write_csv(paths["task_time"], TASK_TIME, task_time_rows(run))
    if run.api:
        paths["api_statistic"] = os.path.join(out, f"api_statistic_{ts}.csv")
        _write_csv(paths["api_statistic"], API_STATISTIC, api_statistic_rows(run))
    if run.tx:
        paths["msprof_tx"] = os.path.join(out, f"msprof_tx_{ts}.csv")
        _write_csv(paths["msprof_tx"], MSPROF_TX, tx_rows(run))
    with private.open_file(paths["waits"], "w") as f:
        f.write(waits.format_report(waits.analyze(run)))
    with private.open_file(os.path.join(out, "README.txt"), "w") as f:
        f.write(_readme(run, paths))
    return paths


EXPORTED = re.compile(r"(msprof|op_summary|op_statistic|task_time|api_statistic|msprof_tx|waits)"
                      r"_\d{14}\.(json|csv|txt)")
"""The names of the files an export writes (those of an earlier export are replaced)."""


def _remove_earlier(out: str) -> None:
    """Remove what an earlier export of this run wrote, so a re-export (``--export=on``)
    leaves one copy of each file, as msprof's does."""
    for name in os.listdir(out):
        if EXPORTED.fullmatch(name):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(out, name))


def find_prof_dirs(path: str) -> list[str]:
    """``path`` itself if it is a ``PROF_*`` dir, else the ``PROF_*`` dirs directly in it."""
    path = os.path.abspath(path)
    if os.path.basename(path).startswith("PROF_"):
        return [path]
    if not os.path.isdir(path):
        return []
    return sorted(os.path.join(path, d) for d in os.listdir(path) if d.startswith("PROF_"))


# timeline -------------------------------------------------------------------------------------
def _pid(run: Run, sort_index: int, dev: int) -> int:
    return (int(run.host.get("pid", 0)) << 10) | (sort_index << 5) | dev


def timeline(run: Run) -> list[dict]:
    """The Chrome trace events of ``run``."""
    off = run.wall_offset_ns
    events: list[dict] = []

    def us(ns: int) -> float:
        return round((ns + off) / 1000, 3)

    for dev, device in sorted(run.devices.items()):
        pid = _pid(run, SORT_HW, dev)
        events += _process(pid, "Ascend Hardware", f"NPU {dev}", SORT_HW)
        streams = sorted({t.stream for t in device.tasks})
        engines = sorted({t.engine for t in device.tasks if t.engine in ENGINE_LABEL})
        for sid in streams:
            events += _thread(pid, sid, f"Stream {sid}", sid)
        for i, engine in enumerate(engines):
            tid = ENGINE_TID + i
            events += _thread(pid, tid, f"Engine {ENGINE_LABEL[engine]}", tid)
        engine_tid = {e: ENGINE_TID + i for i, e in enumerate(engines)}
        flow = 0
        for t in device.tasks:
            slice_ = {"name": t.name, "ph": "X", "pid": pid, "tid": t.stream,
                      "ts": us(t.start_ns), "dur": max(round(t.dur_ns / 1000, 3), 0.001),
                      "cat": t.kind, "args": _task_args(t, us)}
            events.append(slice_)
            if t.engine in engine_tid:
                events.append({**slice_, "tid": engine_tid[t.engine]})
            if t.kind == "EVENT_WAIT" and t.released_by is not None:
                flow += 1
                r = t.released_by
                events.append({"name": "event", "cat": "event", "ph": "s", "id": flow,
                               "pid": pid, "tid": r.stream, "ts": us(r.start_ns)})
                events.append({"name": "event", "cat": "event", "ph": "f", "bp": "e",
                               "id": flow, "pid": pid, "tid": t.stream,
                               "ts": us(min(max(t.start_ns, r.start_ns), t.end_ns))})
        events += _counters(pid, dev, device.counters, us)
        events += _log_events(pid, run.device_logs.get(dev, []), us)
    events += _host_api(run, us)
    events += _host_tx(run, us)
    return events


def _task_args(t: Task, us) -> dict:
    args = {"Task Type": t.kind, "Task Id": t.seq, "Physic Stream Id": t.stream,
            "Engine": t.engine, "submit(us)": us(t.submit_ns) if t.submit_ns else "N/A",
            "queued(us)": round(max(t.start_ns - t.submit_ns, 0) / 1000, 3)
            if t.submit_ns else "N/A"}
    if t.kind in ("MEMCPY_ASYNC", "MEMSET_ASYNC"):
        args["size(B)"] = t.size
        if t.dur_ns:
            args["bandwidth(GB/s)"] = round(t.size / t.dur_ns, 3)
        if t.peers:
            args["peer devices"] = [p for p in range(64) if t.peers >> p & 1]
    elif t.kind in COMPUTE:
        args["Block Num"] = t.size
    elif t.kind == "EVENT_WAIT":
        args["blocked(us)"] = round(t.dur_ns / 1000, 3)
        if t.released_by is not None:
            args["waited on"] = (f"Stream {t.released_by.stream} task "
                                 f"{t.released_by.seq}")
    if t.code:
        args["error code"] = t.code
    return args


def _counters(pid: int, dev: int, counters: list[list], us) -> list[dict]:
    events = []
    last: dict[str, tuple[int, int]] = {}
    for ns, hbm, links in counters:
        events.append({"name": "HBM used", "ph": "C", "pid": pid, "tid": 0, "ts": us(ns),
                       "args": {"used(MB)": round(hbm / 2**20, 3)}})
        for peer, moved in links.items():
            name = f"P2P link {dev}<->{peer}"
            prev = last.get(name)
            if prev is not None and ns > prev[0]:
                rate = (moved - prev[1]) / (ns - prev[0])  # bytes per ns = GB/s
                events.append({"name": name, "ph": "C", "pid": pid, "tid": 0, "ts": us(ns),
                               "args": {"GB/s": round(rate, 4)}})
            last[name] = (ns, moved)
    return events


def _log_events(pid: int, lines: list, us) -> list[dict]:
    """Log lines as process-wide instant events at their timestamps (host and device lines
    on one time axis)."""
    return [{"name": f"[{line.level}] {line.text.split(' ', 2)[-1][:80]}", "ph": "i", "s": "p",
             "pid": pid, "tid": 0, "ts": us(line.ns), "cat": "log",
             "args": {"line": line.text}} for line in lines]


def _host_api(run: Run, us) -> list[dict]:
    if not run.api and not run.host_log:
        return []
    pid = _pid(run, SORT_CANN, HOST_DEV)
    events = _process(pid, "CANN", "CPU", SORT_CANN)
    events += _log_events(pid, run.host_log, us)
    for tid in sorted({row[1] for row in run.api}):
        events += _thread(pid, tid, f"Thread {tid}", 0)
    for name, tid, start, end in run.api:
        events.append({"name": f"AscendCL@{name}", "ph": "X", "pid": pid, "tid": tid,
                       "ts": us(start), "dur": round(max(end - start, 0) / 1000, 3),
                       "args": {}})
    return events


def _host_tx(run: Run, us) -> list[dict]:
    rows = [r for r in run.tx if r.get("kind") in ("mark", "range", "push")]
    if not rows:
        return []
    pid = _pid(run, SORT_TX, HOST_DEV)
    events = _process(pid, "MsprofTx", "CPU", SORT_TX)
    for tid in sorted({r["tid"] for r in rows}):
        events += _thread(pid, tid, f"Thread {tid}", 0)
    for r in rows:
        if r["kind"] == "mark":
            events.append({"name": r["message"], "ph": "i", "s": "t", "pid": pid,
                           "tid": r["tid"], "ts": us(r["start_ns"]), "args": {}})
        else:
            events.append({"name": r["message"], "ph": "X", "pid": pid, "tid": r["tid"],
                           "ts": us(r["start_ns"]),
                           "dur": round(max(r["end_ns"] - r["start_ns"], 0) / 1000, 3),
                           "args": {"event_type": r["kind"]}})
    return events


def _process(pid: int, name: str, label: str, sort_index: int) -> list[dict]:
    return [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": name}},
            {"name": "process_labels", "ph": "M", "pid": pid, "tid": 0,
             "args": {"labels": label}},
            {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
             "args": {"sort_index": sort_index}}]


def _thread(pid: int, tid: int, name: str, sort_index: int) -> list[dict]:
    return [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}},
            {"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
             "args": {"sort_index": sort_index}}]


# CSVs -----------------------------------------------------------------------------------------
def _waits_between(tasks: list[Task]) -> dict[int, float]:
    """id(task) -> µs between the end of the previous task of its stream and its start."""
    out: dict[int, float] = {}
    last_end: dict[tuple[int, int], float] = {}
    for t in sorted(tasks, key=lambda t: (t.dev, t.stream, t.seq)):
        key = (t.dev, t.stream)
        prev = last_end.get(key)
        out[id(t)] = round(max(t.start_ns - prev, 0) / 1000, 3) if prev else 0.0
        last_end[key] = t.end_ns
    return out


def op_summary_rows(run: Run) -> list[list]:
    tasks = run.all_tasks()
    gaps = _waits_between(tasks)
    off = run.wall_offset_ns
    return [[t.dev, "N/A", t.seq, t.stream, t.name, t.name, "N/A", t.kind,
             f"{(t.start_ns + off) / 1000:.3f}", f"{t.dur_ns / 1000:.3f}", gaps[id(t)], t.size]
            for t in tasks if t.kind in COMPUTE]


def op_statistic_rows(run: Run) -> list[list]:
    groups: dict[tuple, list[float]] = {}
    for t in run.all_tasks():
        if t.kind in COMPUTE:
            groups.setdefault((t.dev, t.name, t.kind), []).append(t.dur_ns / 1000)
    rows = []
    for (dev, name, kind), durs in sorted(groups.items()):
        total = sum(durs)
        dev_total = sum(sum(v) for k, v in groups.items() if k[0] == dev) or 1.0
        rows.append([dev, name, kind, len(durs), f"{total:.3f}", f"{min(durs):.3f}",
                     f"{total / len(durs):.3f}", f"{max(durs):.3f}",
                     f"{100 * total / dev_total:.2f}"])
    return rows


def task_time_rows(run: Run) -> list[list]:
    off = run.wall_offset_ns
    rows = []
    for t in run.all_tasks():
        kind = {"AI_CORE": "KERNEL_AICORE", "AI_VECTOR_CORE": "KERNEL_AIVEC",
                "AI_CPU": "KERNEL_AICPU"}.get(t.kind, t.kind)
        rows.append([t.dev, t.name, kind, t.stream, t.seq, f"{t.dur_ns / 1000:.3f}",
                     f"{(t.start_ns + off) / 1000:.3f}", f"{(t.end_ns + off) / 1000:.3f}"])
    return rows


def api_statistic_rows(run: Run) -> list[list]:
    groups: dict[str, list[float]] = {}
    for name, _tid, start, end in run.api:
        groups.setdefault(name, []).append(max(end - start, 0) / 1000)
    rows = []
    for name, durs in sorted(groups.items(), key=lambda kv: -sum(kv[1])):
        var = statistics.pvariance(durs) if len(durs) > 1 else 0.0
        rows.append(["host", "AscendCL", name, f"{sum(durs):.3f}", len(durs),
                     f"{sum(durs) / len(durs):.3f}", f"{min(durs):.3f}", f"{max(durs):.3f}",
                     f"{var:.3f}"])
    return rows


def tx_rows(run: Run) -> list[list]:
    off, pid = run.wall_offset_ns, run.host.get("pid", 0)
    rows = []
    for r in run.tx:
        if r.get("kind") not in ("mark", "range", "push"):
            continue
        start = f"{(r['start_ns'] + off) / 1000:.3f}"
        end = f"{(r['end_ns'] + off) / 1000:.3f}" if r.get("end_ns") else start
        event = {"mark": "marker", "range": "start/end", "push": "push/pop"}[r["kind"]]
        rows.append(["host", pid, r["tid"], "N/A", event, "N/A", "N/A", start, end,
                     "ascii", r["message"], "default", "N/A", "N/A"])
    return rows


def _write_csv(path: str, header: list[str], rows: list[list]) -> None:
    with private.open_file(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def _readme(run: Run, paths: dict[str, str]) -> str:
    lines = ["npuemu profiling output (msprof layout).", ""]
    for kind, path in paths.items():
        lines.append(f"{os.path.basename(path)}: {kind}")
    lines += ["", f"tasks recorded: {len(run.all_tasks())}",
              f"records dropped (trace ring full): {run.dropped}"]
    return "\n".join(lines) + "\n"
