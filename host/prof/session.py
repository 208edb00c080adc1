"""A profiling session: the ``PROF_*`` directory, a trace reader per card, the drain thread.

``Session(root, data_types, devices)`` creates
``<root>/PROF_<6-digit index>_<YYYYmmddHHMMSSmmm>_<pid, 8 digits><8 letters A-R>/`` with
``host/data/`` and ``device_<id>/data/`` (the real msprof layout). While it runs, a drain
thread copies the cards' trace records out every ``DRAIN_S`` and appends them to the raw
files below, flushed each time, so a program that crashes or is killed still leaves a
readable partial trace; ``export.export(prof_dir)`` turns raw data into
``mindstudio_profiler_output/``.

Raw files (our own format; the real ones are binary slices with ``.done`` markers):
``device_<id>/data/task.bin`` (TRACE_RECORD rows, ``host/driver/trace.py``),
``device_<id>/data/info.json`` (ids, dropped records, kernel names, submitting threads per
stream), ``device_<id>/data/counters.jsonl`` (``[ns, hbm_used, {peer: bytes}]``),
``host/data/info.json``, ``host/data/api.jsonl`` (``[api, tid, start_ns, end_ns]``) and
``host/data/tx.jsonl`` (msproftx marks and ranges); at stop, ``device_<id>/data/device.log``
(the card's log ring) and ``host/data/plog.log`` (this process's plog, if it wrote one).
Every file is created 0600 and every directory 0700, whatever the umask
(``shared/private.py``): a trace shows what the program ran.

Host API calls are timed by a hook the face passes in (``hooks``: the pyACL face's timer in
``host/acl/prof.py``), since a feature must not reach up into a face.

Cards are attached when they are opened (``Runtime.link_hooks``) or, if already open, at
``start``; a card opened by the program later in the run is traced from its first task.

Threading model: ``lock`` guards ``readers`` and every file write; the drain thread (one per
session, started by ``start``, stopped and joined by ``stop``) takes it once per period.
``api``/``tx`` are called from any application thread: they append to plain lists (atomic
appends), which the drain swaps out under ``lock``.
"""

from __future__ import annotations

import datetime
import json
import os
import random
import shutil
import threading
import time
from typing import Any

from npuemu.host.core import plog
from npuemu.host.core import runtime as _runtime
from npuemu.host.driver.trace import TraceReader
from npuemu.shared import errors, private

DRAIN_S = 0.02
ACL_PROF_ACL_API = 0x0001
ACL_PROF_TASK_TIME = 0x0002
ACL_PROF_AICORE_METRICS = 0x0004
ACL_PROF_AICPU = 0x0008
ACL_PROF_L2CACHE = 0x0010
ACL_PROF_HCCL_TRACE = 0x0020
ACL_PROF_TRAINING_TRACE = 0x0040
ACL_PROF_MSPROFTX = 0x0080
ACL_PROF_RUNTIME_API = 0x0100
ACL_PROF_GE_API_L0 = 0x0200
ACL_PROF_TASK_TIME_L0 = 0x0800
ACL_PROF_TASK_MEMORY = 0x1000
ACL_PROF_TASK_TIME_L2 = 0x2000
ACL_PROF_OP_ATTR = 0x4000
ACL_PROF_TASK_TIME_L3 = 0x8000
ACL_PROF_GE_API_L1 = 0x01000000
ACL_PROF_API_STATS = 0x400000000
ACL_PROF_AICORE_SHAPE = 0x800000000
ALL_DATA_TYPES = (ACL_PROF_ACL_API | ACL_PROF_TASK_TIME | ACL_PROF_AICORE_METRICS
                  | ACL_PROF_AICPU | ACL_PROF_L2CACHE | ACL_PROF_HCCL_TRACE
                  | ACL_PROF_TRAINING_TRACE | ACL_PROF_MSPROFTX | ACL_PROF_RUNTIME_API
                  | ACL_PROF_GE_API_L0 | ACL_PROF_TASK_TIME_L0 | ACL_PROF_TASK_MEMORY
                  | ACL_PROF_TASK_TIME_L2 | ACL_PROF_OP_ATTR | ACL_PROF_TASK_TIME_L3
                  | ACL_PROF_GE_API_L1 | ACL_PROF_API_STATS | ACL_PROF_AICORE_SHAPE)
TASK_BITS = (ACL_PROF_TASK_TIME | ACL_PROF_TASK_TIME_L0 | ACL_PROF_TASK_TIME_L2
             | ACL_PROF_TASK_TIME_L3 | ACL_PROF_AICPU | ACL_PROF_AICORE_METRICS
             | ACL_PROF_TASK_MEMORY | ACL_PROF_HCCL_TRACE | ACL_PROF_TRAINING_TRACE)
"""Any of these turns on device task recording (every task type is recorded alike)."""
API_BITS = ACL_PROF_ACL_API | ACL_PROF_RUNTIME_API | ACL_PROF_API_STATS


def new_prof_dir(root: str) -> str:
    """Create and return a fresh ``PROF_*`` directory under ``root``."""
    root = os.path.abspath(root)
    private.makedirs(root)
    index = 1 + sum(1 for name in os.listdir(root) if name.startswith("PROF_"))
    stamp = datetime.datetime.now().strftime("%Y%m%d%H%M%S%f")[:17]
    letters = "".join(random.choice("ABCDEFGHIJKLMNOPQR") for _ in range(8))
    while True:
        path = os.path.join(root, f"PROF_{index:06d}_{stamp}_{os.getpid() % 10**8:08d}{letters}")
        try:
            os.mkdir(path, private.DIR_MODE)
        except FileExistsError:
            index += 1
            continue
        private.makedirs(os.path.join(path, "host", "data"))
        return path


class Session:
    """One profiling run of this process (``aclprofStart`` .. ``aclprofStop``)."""

    def __init__(self, root: str, data_types: int = ACL_PROF_TASK_TIME | ACL_PROF_ACL_API,
                 devices: list[int] | None = None, mode: str = "api",
                 hooks: tuple = ()) -> None:
        self.dir = new_prof_dir(root)
        self.hooks = hooks  # e.g. the pyACL face's API timer: hook.install(session)/uninstall()
        self.data_types = data_types
        self.devices = None if devices is None else set(devices)
        self.mode = mode
        self.lock = threading.Lock()
        self.readers: dict[int, TraceReader] = {}  # logical device id -> reader
        self._info_state: dict[int, tuple] = {}  # what each card's info.json last held
        self._api: list[tuple] = []
        self._tx: list[dict] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.running = False
        self.tasks_on = bool(data_types & TASK_BITS)
        self.api_on = bool(data_types & API_BITS)
        self.tx_on = bool(data_types & ACL_PROF_MSPROFTX)
        self._write_json(os.path.join(self.dir, "host", "data", "info.json"), {
            "pid": os.getpid(), "data_types": data_types, "mode": mode,
            "devices": None if devices is None else sorted(self.devices or ()),
            "start_ns": time.monotonic_ns(),
            "wall_offset_ns": time.time_ns() - time.monotonic_ns()})

    # lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        """Attach to every open card in the set and to those opened later (non-blocking)."""
        rt = _runtime.get()
        if self.tasks_on:
            with rt.lock:
                rt.link_hooks.append(self)
                for od in list(rt.devices.values()):
                    self.opened(od.link)
        for hook in self.hooks:
            hook.install(self)
        self.running = True
        self._stop.clear()
        self._thread = threading.Thread(target=self._drain_loop, name="npuemu-prof-drain",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop recording, drain what the cards recorded, give the rings up (blocks up to
        the drain thread's join, about ``DRAIN_S``)."""
        if not self.running:
            return
        self.running = False
        for hook in self.hooks:
            hook.uninstall()
        rt = _runtime.get()
        with rt.lock:
            if self in rt.link_hooks:
                rt.link_hooks.remove(self)
        for reader in list(self.readers.values()):
            reader.stop()
        self._wait_inflight()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.drain()
        with self.lock:
            for reader in self.readers.values():
                self._save_logs(reader)
                reader.close()
            self.readers.clear()
        path = plog.path()
        if path and os.path.exists(path):
            private.copy_file(path, os.path.join(self.dir, "host", "data", "plog.log"))

    def _wait_inflight(self, timeout_s: float = 2.0) -> None:
        """Give tasks submitted before stop a bounded chance to complete and be recorded."""
        from npuemu.host.core import stream as streams

        deadline = time.monotonic() + timeout_s
        for reader in list(self.readers.values()):
            for stream in streams.streams_of(reader.link):
                while not stream.done(stream.submitted) and time.monotonic() < deadline:
                    if not reader.link.alive():
                        break
                    time.sleep(0.002)

    # runtime link hooks --------------------------------------------------------------------
    def opened(self, link: Any) -> None:
        """A card was opened (under the runtime lock): trace it if it is in the set."""
        if self.devices is not None and link.logical not in self.devices:
            return
        with self.lock:
            if link.logical in self.readers:
                return
            try:
                reader = TraceReader(link)
            except (errors.AclError, OSError) as err:  # never break the program's set_device
                self.tx({"kind": "error", "message": f"device {link.logical} not traced: {err}",
                         "tid": 0, "start_ns": time.monotonic_ns(), "end_ns": 0})
                return
            reader.start()
            self.readers[link.logical] = reader
            private.makedirs(self._dev_dir(link.logical))
            self._write_dev_info(reader)

    def closing(self, link: Any) -> None:
        """A card is about to be released by the program: drain it and let it go."""
        with self.lock:
            reader = self.readers.get(link.logical)
            if reader is None or reader.link is not link:
                return
            self._drain_reader(reader)
            self._save_logs(reader)
            reader.close()
            del self.readers[link.logical]

    # host records --------------------------------------------------------------------------
    def api(self, name: str, start_ns: int, end_ns: int) -> None:
        self._api.append((name, threading.get_ident(), start_ns, end_ns))

    def tx(self, record: dict) -> None:
        self._tx.append(record)

    # drain ---------------------------------------------------------------------------------
    def _drain_loop(self) -> None:
        while not self._stop.wait(DRAIN_S):
            try:
                self.drain()
            except Exception as err:  # keep the program running; say why data is missing
                self.tx({"kind": "error", "message": f"drain failed: {err!r}",
                         "tid": 0, "start_ns": time.monotonic_ns(), "end_ns": 0})

    def drain(self) -> None:
        with self.lock:
            for reader in list(self.readers.values()):
                if reader.link.closing:
                    continue
                self._drain_reader(reader)
            api, self._api = self._api, []
            tx, self._tx = self._tx, []
            host = os.path.join(self.dir, "host", "data")
            if api:
                self._append_lines(os.path.join(host, "api.jsonl"), api)
            if tx:
                self._append_lines(os.path.join(host, "tx.jsonl"), tx)

    def _drain_reader(self, reader: TraceReader) -> None:
        records = reader.drain()
        path = self._dev_dir(reader.link.logical)
        if len(records):
            with private.open_file(os.path.join(path, "task.bin"), "ab") as f:
                f.write(records.tobytes())
        try:
            ns, hbm, links = reader.sample()
        except (ValueError, OSError):  # the link was closed under us
            return
        self._append_lines(os.path.join(path, "counters.jsonl"), [[ns, hbm, links]])
        self._write_dev_info(reader)

    def _save_logs(self, reader: TraceReader) -> None:
        """The card's log ring as ``device_<id>/data/device.log`` (export keeps the lines of
        the session's time window)."""
        with private.open_file(os.path.join(self._dev_dir(reader.link.logical), "device.log"),
                               "w") as f:
            f.write(reader.device_log())

    def _write_dev_info(self, reader: TraceReader) -> None:
        """Rewrite ``info.json`` if what it holds changed since the last time."""
        link = reader.link
        state = (reader.dropped(), reader.words_names(), len(reader.submitters),
                 sum(reader.submitters.values()))
        if self._info_state.get(link.logical) == state:
            return
        self._info_state[link.logical] = state
        self._write_json(os.path.join(self._dev_dir(link.logical), "info.json"), {
            "device": link.logical, "physical": link.dev, "client": link.slot,
            "boot_ns": reader.boot_ns, "capacity": reader.capacity,
            "dropped": reader.dropped(), "names": reader.names(),
            "submitters": [[slot, tid, n] for (slot, tid), n in reader.submitters.items()]})

    def _dev_dir(self, dev: int) -> str:
        return os.path.join(self.dir, f"device_{dev}", "data")

    @staticmethod
    def _append_lines(path: str, rows: list) -> None:
        with private.open_file(path, "a") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)

    @staticmethod
    def _write_json(path: str, data: dict) -> None:
        tmp = path + ".tmp"
        with private.open_file(tmp, "w") as f:
            json.dump(data, f)
        os.replace(tmp, path)


# the process's current session ---------------------------------------------------------------
_active: Session | None = None
_active_lock = threading.Lock()


def active() -> Session | None:
    return _active


def activate(session: Session) -> None:
    """Make ``session`` this process's running session (100042 if one runs already)."""
    global _active
    with _active_lock:
        if _active is not None and _active.running:
            shutil.rmtree(session.dir, ignore_errors=True)  # nothing was recorded into it
            raise errors.error_for(errors.ACL_ERROR_PROF_ALREADY_RUN,
                                   f"profiling already runs into {_active.dir}")
        _active = session
    session.start()


def deactivate(session: Session) -> None:
    global _active
    session.stop()
    with _active_lock:
        if _active is session:
            _active = None
