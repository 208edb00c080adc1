"""The recorded run as plain objects: load a ``PROF_*`` directory's raw data.

``load(prof_dir)`` reads what ``session.py`` wrote (task records, counters, host API calls,
msproftx records, host and device log lines of the session's window) and returns a ``Run``:
tasks per card with their names and kinds resolved, and each event wait linked to the record
that released it. Exporters (``export.py``), the
waits report (``waits.py``) and the plot (``plot.py``) all work on a ``Run``. A file cut short
by a crash is read up to its last whole record or line.
"""

from __future__ import annotations

import datetime
import json
import os
import re
from dataclasses import dataclass, field

import numpy as np

from npuemu.host.driver.trace import ENGINE_NAMES, RECORD_DTYPE
from npuemu.shared.protocol import Op

KERNEL_TYPES = {"aicore": "AI_CORE", "aivector": "AI_VECTOR_CORE", "aicpu": "AI_CPU"}
OP_TYPES = {Op.COPY_ASYNC: "MEMCPY_ASYNC", Op.MEMSET_ASYNC: "MEMSET_ASYNC",
            Op.RECORD: "EVENT_RECORD", Op.RESET_EVENT: "EVENT_RESET",
            Op.WAIT_EVENT: "EVENT_WAIT", Op.CALLBACK: "HOST_CALLBACK",
            Op.MODEL_EXECUTE: "MODEL_EXECUTE", Op.DVPP: "DVPP", 0xFFFF: "REFUSED"}
COPIES = ("MEMCPY_ASYNC", "MEMSET_ASYNC")
COMPUTE = tuple(KERNEL_TYPES.values())


@dataclass
class Task:
    dev: int
    stream: int  # device stream id
    slot: int
    seq: int  # task id
    kind: str  # MEMCPY_ASYNC, AI_CORE, EVENT_WAIT, ...
    name: str  # kernel name, or the kind
    engine: str  # dma, aicore, aivector, aicpu, scheduler
    submit_ns: int
    start_ns: int
    end_ns: int
    size: int
    code: int
    event_slot: int
    event_gen: int
    peers: int
    released_by: Task | None = None  # for EVENT_WAIT: the EVENT_RECORD it waited for

    @property
    def dur_ns(self) -> int:
        return max(self.end_ns - self.start_ns, 0)


@dataclass
class Device:
    id: int
    info: dict
    tasks: list[Task]
    counters: list[list]  # [ns, hbm_used, {peer: bytes}]


@dataclass
class LogLine:
    ns: int  # monotonic ns (wall clock of the line minus the session's offset)
    level: str
    text: str  # the whole line


@dataclass
class Run:
    dir: str
    host: dict
    devices: dict[int, Device] = field(default_factory=dict)
    api: list[list] = field(default_factory=list)  # [api name, tid, start_ns, end_ns]
    tx: list[dict] = field(default_factory=list)
    host_log: list[LogLine] = field(default_factory=list)
    device_logs: dict[int, list[LogLine]] = field(default_factory=dict)

    @property
    def wall_offset_ns(self) -> int:
        return int(self.host.get("wall_offset_ns", 0))

    def all_tasks(self) -> list[Task]:
        return [t for d in self.devices.values() for t in d.tasks]

    @property
    def dropped(self) -> int:
        return sum(int(d.info.get("dropped", 0)) for d in self.devices.values())


def load(prof_dir: str) -> Run:
    """The run recorded in ``prof_dir`` (a ``PROF_*`` directory)."""
    host_dir = os.path.join(prof_dir, "host", "data")
    run = Run(prof_dir, _read_json(os.path.join(host_dir, "info.json")))
    run.api = _read_lines(os.path.join(host_dir, "api.jsonl"))
    run.tx = _read_lines(os.path.join(host_dir, "tx.jsonl"))
    for entry in sorted(os.listdir(prof_dir)):
        if not entry.startswith("device_"):
            continue
        data = os.path.join(prof_dir, entry, "data")
        info = _read_json(os.path.join(data, "info.json"))
        dev = int(info.get("device", entry.split("_", 1)[1]))
        tasks = _tasks(dev, os.path.join(data, "task.bin"), info.get("names", []))
        counters = _read_lines(os.path.join(data, "counters.jsonl"))
        run.devices[dev] = Device(dev, info, tasks, counters)
    _link_waits(run)
    window = _window(run)
    run.host_log = _read_log(os.path.join(host_dir, "plog.log"), run.wall_offset_ns, window)
    for dev in run.devices:
        run.device_logs[dev] = _read_log(os.path.join(prof_dir, f"device_{dev}", "data",
                                                      "device.log"), run.wall_offset_ns, window)
    return run


_LOG_LINE = re.compile(r"^\[(\w+)\] \S+?\(\d+,[^)]*\):"
                       r"(\d{4}-\d\d-\d\d-\d\d:\d\d:\d\d)\.(\d{3})\.(\d{3}) ")


def _window(run: Run) -> tuple[int, int]:
    """Monotonic ns from the session's start to the last thing recorded (+ 1 s)."""
    ends = [t.end_ns for t in run.all_tasks()] + [row[3] for row in run.api]
    start = int(run.host.get("start_ns", 0))
    return start, max([start, *ends]) + 1_000_000_000


def _read_log(path: str, wall_offset_ns: int, window: tuple[int, int]) -> list[LogLine]:
    """The slog lines of ``path`` inside ``window`` (their local wall time made monotonic);
    continuation lines (tracebacks) stay with their line."""
    out: list[LogLine] = []
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        m = _LOG_LINE.match(line)
        if m is None:
            if out:
                out[-1].text += "\n" + line
            continue
        wall = datetime.datetime.strptime(m.group(2), "%Y-%m-%d-%H:%M:%S").timestamp()
        ns = int(wall) * 10**9 + int(m.group(3)) * 10**6 + int(m.group(4)) * 10**3
        mono = ns - wall_offset_ns
        if window[0] <= mono <= window[1]:
            out.append(LogLine(mono, m.group(1), line))
    return out


def _tasks(dev: int, path: str, names: list[str]) -> list[Task]:
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        raw = f.read()
    raw = raw[: len(raw) - len(raw) % RECORD_DTYPE.itemsize]  # a record cut by a crash
    rows = np.frombuffer(raw, RECORD_DTYPE)
    tasks = []
    for r in rows.tolist():
        (op, _client, slot, sid, seq, engine, submit, start, end, size, code, eslot, egen,
         name, peers, _res) = r
        engine_name = ENGINE_NAMES.get(engine, "scheduler")
        if op == Op.LAUNCH:
            kind = KERNEL_TYPES.get(engine_name, "AI_CORE")
            label = names[name - 1] if 0 < name <= len(names) else "kernel"
        else:
            kind = OP_TYPES.get(op, f"OP_{op}")
            label = kind
        tasks.append(Task(dev, sid, slot, seq, kind, label, engine_name, submit, start, end,
                          size, code, eslot, egen, peers))
    tasks.sort(key=lambda t: (t.start_ns, t.stream, t.seq))
    return tasks


def _link_waits(run: Run) -> None:
    """Point each EVENT_WAIT at the record it waited for: the record of the same event slot
    and generation that completed before the wait did (or, if that one is missing, the first
later generation); an event slot reused after destroy_event restarts its generations, so
among equals the latest record wins."""
    for device in run.devices.values():
        records: dict[int, list[Task]] = {}
        for t in device.tasks:
            if t.kind == "EVENT_RECORD":
                records.setdefault(t.event_slot, []).append(t)
        for t in device.tasks:
            if t.kind != "EVENT_WAIT":
                continue
            found = [r for r in records.get(t.event_slot, [])
                     if r.event_gen >= t.event_gen and r.end_ns <= t.end_ns]
            if found:  # the latest such record (a reused slot restarts its generations)
                gen = min(r.event_gen for r in found)
                t.released_by = max((r for r in found if r.event_gen == gen),
                                    key=lambda r: r.end_ns)


def _read_json(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _read_lines(path: str) -> list:
    rows = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:  # the last line of a crashed run
                    break
    except FileNotFoundError:
        pass
    return rows
