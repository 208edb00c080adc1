"""``acl.prof``: pyACL's profiling functions (``aclprof*``, ``acl_prof.h``), and msproftx.

State machine as ``acl_prof.h``'s documentation gives it: ``init(path)`` ->
``create_config`` -> ``start(cfg)`` .. ``stop(cfg)`` -> ``finalize()``; ``destroy_config``
any time. Codes: a second ``init`` 100002; ``init`` while ``npuemu msprof`` profiles the
program 100042; an empty or over-long path 100003; ``start``/``stop``/``set_config``/
``finalize`` before ``init`` 100043; ``start`` while a start is running 100042 (even for
other devices: one running config at a time is a limit of ours, the hardware allows one per
device); ``stop`` with another config than ``start``'s, or an unknown config or stamp,
100000 (our choice: the documentation names no code). ``finalize`` stops a running config and
exports each run of this init into its ``PROF_*/mindstudio_profiler_output/`` (blocks for
the export). A card that another process already profiles is skipped (one reader per card;
the raw data notes it). Model subscription (``model_subscribe`` and the ``get_op_*``
readers) and the step API are not emulated.

msproftx: ``create_stamp`` returns 0 (pyACL's NULL) unless a running config has
``ACL_PROF_MSPROFTX``. ``mark`` is an instant, ``push``/``pop`` a per-thread range,
``range_start``/``range_stop`` a range that may cross threads; ``mark_ex(msg, stream)`` is
recorded as a host mark naming the stream (partial: no marker task is queued on the stream).
The host API timer (``ACL_PROF_ACL_API`` / ``ACL_PROF_RUNTIME_API``) wraps ``acl.*`` and
``acl.rt.*`` while a config runs (see ``ApiTimer``).

Threading model: ``_lock`` guards the module state (path, configs, running session, stamps,
ranges); the push stack is thread-local. None of these calls block except ``stop`` and
``finalize`` (drain and export).
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
import time
from dataclasses import dataclass
from types import FunctionType, ModuleType
from typing import Any

from npuemu.host.prof import export as _export
from npuemu.host.prof import session as _session
from npuemu.host.prof.session import (  # noqa: F401  (re-exported: pyACL users name them)
    ACL_PROF_ACL_API,
    ACL_PROF_AICORE_METRICS,
    ACL_PROF_AICORE_SHAPE,
    ACL_PROF_AICPU,
    ACL_PROF_API_STATS,
    ACL_PROF_GE_API_L0,
    ACL_PROF_GE_API_L1,
    ACL_PROF_HCCL_TRACE,
    ACL_PROF_L2CACHE,
    ACL_PROF_MSPROFTX,
    ACL_PROF_OP_ATTR,
    ACL_PROF_RUNTIME_API,
    ACL_PROF_TASK_MEMORY,
    ACL_PROF_TASK_TIME,
    ACL_PROF_TASK_TIME_L0,
    ACL_PROF_TASK_TIME_L2,
    ACL_PROF_TASK_TIME_L3,
    ACL_PROF_TRAINING_TRACE,
    ALL_DATA_TYPES,
    API_BITS,
)
from npuemu.shared import errors

ACL_AICORE_ARITHMETIC_UTILIZATION = 0
ACL_AICORE_PIPE_UTILIZATION = 1
ACL_AICORE_MEMORY_BANDWIDTH = 2
ACL_AICORE_L0B_AND_WIDTH = 3
ACL_AICORE_RESOURCE_CONFLICT_RATIO = 4
ACL_AICORE_MEMORY_UB = 5
ACL_AICORE_L2_CACHE = 6
ACL_AICORE_PIPE_EXECUTE_UTILIZATION = 7
ACL_AICORE_MEMORY_ACCESS = 8
ACL_AICORE_NONE = 0xFF
_METRICS = {*range(9), ACL_AICORE_NONE}
ACL_PROF_ARGS_MIN, ACL_PROF_ARGS_MAX = 0, 17
MAX_PATH = 4096
MAX_CONFIG_VALUE = 256


@dataclass
class _Config:
    devices: list[int]
    metrics: int
    data_types: int


@dataclass
class _Stamp:
    message: str = ""


_lock = threading.Lock()
_local = threading.local()
_handles = itertools.count(0x7A000040, 0x40)
_path: str | None = None
_configs: dict[int, _Config] = {}
_running: tuple[int, _session.Session] | None = None
_runs: list[str] = []  # PROF_* dirs of this init, exported at finalize
_settings: dict[int, str] = {}
_stamps: dict[int, _Stamp] = {}
_ranges: dict[int, tuple[str, int, int]] = {}  # range id -> (message, thread, start ns)
_range_ids = itertools.count(1)


def _cli_mode() -> bool:
    current = _session.active()
    return current is not None and current.mode == "cli"


def init(path: str) -> int:
    """Mirrors ``aclprofInit(path, len)``: where the ``PROF_*`` directories go."""
    global _path
    with _lock:
        if _cli_mode():
            return errors.ACL_ERROR_PROF_ALREADY_RUN
        if _path is not None:
            return errors.ACL_ERROR_REPEAT_INITIALIZE
        if not isinstance(path, str) or not path or len(path) > MAX_PATH or "\0" in path:
            return errors.ACL_ERROR_INVALID_FILE
        _path = os.path.abspath(path)
        _runs.clear()
        _settings.clear()
        return 0


def create_config(device_ids: list[int], aicore_metrics: int, aicore_events: int,
                  data_type_config: int) -> int:
    """Mirrors ``aclprofCreateConfig``; returns a config handle, 0 (NULL) on bad arguments."""
    try:
        devices = [int(d) for d in device_ids]
    except (TypeError, ValueError):
        return 0
    if (any(d < 0 for d in devices) or len(set(devices)) != len(devices)
            or aicore_metrics not in _METRICS or not isinstance(data_type_config, int)
            or data_type_config <= 0 or data_type_config & ~ALL_DATA_TYPES):
        return 0
    handle = next(_handles)
    with _lock:
        _configs[handle] = _Config(devices, aicore_metrics, data_type_config)
    return handle


def destroy_config(config: int) -> int:
    """Mirrors ``aclprofDestroyConfig``."""
    with _lock:
        if _running is not None and _running[0] == config:
            return errors.ACL_ERROR_PROF_ALREADY_RUN  # still started (our choice of code)
        if _configs.pop(config, None) is None:
            return errors.ACL_ERROR_INVALID_PARAM
    return 0


def set_config(config_type: int, value: str) -> int:
    """Mirrors ``aclprofSetConfig``: recorded (no setting changes what npuemu collects)."""
    with _lock:
        if _path is None:
            return errors.ACL_ERROR_PROF_NOT_RUN
        if (not isinstance(config_type, int)
                or not ACL_PROF_ARGS_MIN < config_type < ACL_PROF_ARGS_MAX
                or not isinstance(value, str) or len(value) > MAX_CONFIG_VALUE):
            return errors.ACL_ERROR_INVALID_PARAM
        _settings[config_type] = value
    return 0


def start(config: int) -> int:
    """Mirrors ``aclprofStart``: record from now on, on the config's devices."""
    global _running
    with _lock:
        if _path is None:
            return errors.ACL_ERROR_PROF_NOT_RUN
        if _cli_mode() or _running is not None:
            return errors.ACL_ERROR_PROF_ALREADY_RUN
        cfg = _configs.get(config)
        if cfg is None:
            return errors.ACL_ERROR_INVALID_PARAM
        hooks = (ApiTimer(),) if cfg.data_types & API_BITS else ()
        run = _session.Session(_path, cfg.data_types, cfg.devices, mode="api", hooks=hooks)
        try:
            _session.activate(run)
        except errors.AclError as err:
            return err.code
        _running = (config, run)
        _runs.append(run.dir)
    return 0


def stop(config: int) -> int:
    """Mirrors ``aclprofStop``: blocks while the cards' last records are drained."""
    global _running
    with _lock:
        if _path is None or _running is None:
            return errors.ACL_ERROR_PROF_NOT_RUN
        if _running[0] != config:
            return errors.ACL_ERROR_INVALID_PARAM
        run, _running = _running[1], None
    _session.deactivate(run)
    return 0


def finalize() -> int:
    """Mirrors ``aclprofFinalize``: stops a running config, exports every run of this init."""
    global _path, _running
    with _lock:
        if _path is None:
            return errors.ACL_ERROR_PROF_NOT_RUN
        running, _running = _running, None
        _path = None
        runs = list(_runs)
        _runs.clear()
    if running is not None:
        _session.deactivate(running[1])
    for prof_dir in runs:
        _export.export(prof_dir)
    return 0


# msproftx ----------------------------------------------------------------------------------
def _tx_session() -> _session.Session | None:
    current = _session.active()
    return current if current is not None and current.running and current.tx_on else None


def create_stamp() -> int:
    """Mirrors ``aclprofCreateStamp``; 0 (NULL) unless msproftx is being collected."""
    if _tx_session() is None:
        return 0
    handle = next(_handles)
    with _lock:
        _stamps[handle] = _Stamp()
    return handle


def destroy_stamp(stamp: int) -> None:
    """Mirrors ``aclprofDestroyStamp``."""
    with _lock:
        _stamps.pop(stamp, None)


def set_stamp_trace_message(stamp: int, msg: str, msg_len: int) -> int:
    """Mirrors ``aclprofSetStampTraceMessage``: the first ``msg_len`` characters."""
    found = _stamps.get(stamp)
    if found is None or not isinstance(msg, str) or not isinstance(msg_len, int) or msg_len < 0:
        return errors.ACL_ERROR_INVALID_PARAM
    found.message = msg[:msg_len]
    return 0


def mark(stamp: int) -> int:
    """Mirrors ``aclprofMark``: an instant event on the calling thread."""
    found, run = _stamps.get(stamp), _tx_session()
    if found is None:
        return errors.ACL_ERROR_INVALID_PARAM
    if run is not None:
        run.tx({"kind": "mark", "message": found.message, "tid": threading.get_ident(),
                "start_ns": time.monotonic_ns(), "end_ns": 0})
    return 0


def mark_ex(msg: str, stream: int) -> int:
    """Mirrors ``aclprofMarkEx``: a host mark naming the stream (no device marker task)."""
    if not isinstance(msg, str) or len(msg) > 127:
        return errors.ACL_ERROR_INVALID_PARAM
    run = _tx_session()
    if run is not None:
        run.tx({"kind": "mark", "message": f"{msg} (stream 0x{int(stream):x})",
                "tid": threading.get_ident(), "start_ns": time.monotonic_ns(), "end_ns": 0})
    return 0


def push(stamp: int) -> int:
    """Mirrors ``aclprofPush``: opens a range on the calling thread's stack."""
    found = _stamps.get(stamp)
    if found is None:
        return errors.ACL_ERROR_INVALID_PARAM
    stack = _local.__dict__.setdefault("stack", [])
    stack.append((found.message, time.monotonic_ns()))
    return 0


def pop() -> int:
    """Mirrors ``aclprofPop``: closes the calling thread's innermost ``push``."""
    stack = _local.__dict__.get("stack")
    if not stack:
        return errors.ACL_ERROR_INVALID_PARAM
    message, begin = stack.pop()
    run = _tx_session()
    if run is not None:
        run.tx({"kind": "push", "message": message, "tid": threading.get_ident(),
                "start_ns": begin, "end_ns": time.monotonic_ns()})
    return 0


def range_start(stamp: int) -> tuple[int, int]:
    """Mirrors ``aclprofRangeStart``: ``(range_id, ret)``."""
    found = _stamps.get(stamp)
    if found is None:
        return 0, errors.ACL_ERROR_INVALID_PARAM
    with _lock:
        range_id = next(_range_ids)
        _ranges[range_id] = (found.message, threading.get_ident(), time.monotonic_ns())
    return range_id, 0


def range_stop(range_id: int) -> int:
    """Mirrors ``aclprofRangeStop``; may be called from another thread than the start."""
    with _lock:
        found = _ranges.pop(range_id, None)
    if found is None:
        return errors.ACL_ERROR_INVALID_PARAM
    run = _tx_session()
    if run is not None:
        message, tid, begin = found
        run.tx({"kind": "range", "message": message, "tid": tid, "start_ns": begin,
                "end_ns": time.monotonic_ns()})
    return 0


# host API timer ------------------------------------------------------------------------------
class ApiTimer:
    """Wraps the public functions of ``acl`` and ``acl.rt`` (module attributes) with timers
    that report ``(C API name, thread, start, end)`` to the session; ``uninstall`` restores
    them. A function the program bound to its own name before the start is not timed."""

    def __init__(self) -> None:
        self.saved: list[tuple[ModuleType, str, Any]] = []

    def install(self, run: _session.Session) -> None:
        from npuemu.host import acl

        for module, prefix in ((acl, "acl"), (acl.rt, "aclrt")):
            for name, fn in list(vars(module).items()):
                if name.startswith("_") or not isinstance(fn, FunctionType):
                    continue
                self.saved.append((module, name, fn))
                setattr(module, name, _timed(fn, c_name(prefix, name), run))

    def uninstall(self) -> None:
        while self.saved:
            module, name, fn = self.saved.pop()
            setattr(module, name, fn)


def c_name(prefix: str, name: str) -> str:
    """``("aclrt", "memcpy_async")`` -> ``"aclrtMemcpyAsync"``."""
    return prefix + "".join(part.capitalize() for part in name.split("_"))


def _timed(fn: Any, api: str, run: _session.Session) -> Any:
    clock = time.monotonic_ns

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        begin = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            run.api(api, begin, clock())

    return timed
