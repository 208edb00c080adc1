"""npuemu's pyACL-compatible ``acl`` module. ``import acl`` resolves here in every Python
process of an environment where npuemu is installed (the top-level ``acl`` package shipped
with npuemu forwards to this module), unless a real pyACL comes earlier on ``sys.path``.

Submodules as in pyACL: ``acl.rt`` (runtime), ``acl.util`` (pointer helpers), ``acl.op``
(single operators), ``acl.mdl`` (offline models), ``acl.prof`` (profiling), ``acl.media``
(DVPP images and video). ``acl.mdl``, ``acl.media`` and ``acl.prof`` are imported on first
use (an attribute read, ``from acl import mdl`` or ``import acl.mdl``), so a program that
uses only the runtime does not pay for the model, codec and profiler modules. Calls return
``ret`` or a tuple ending in ``ret``; pointers and handles are ints. Calls that take no
parameters accept and ignore extra arguments, as pyACL's do.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any

from npuemu.host.acl import data, op, rt, tensor, util
from npuemu.host.acl._wrap import fail as _fail
from npuemu.host.acl._wrap import recent_message as _recent_message
from npuemu.host.acl._wrap import with_result as _with_result
from npuemu.host.acl.tensor import *  # noqa: F403  (tensor descriptors, op attributes)
from npuemu.host.core import device, plog
from npuemu.host.core.runtime import get as _runtime
from npuemu.shared import errors, logring
from npuemu.shared.enums import AclLogLevel

ACL_MAJOR_VERSION, ACL_MINOR_VERSION, ACL_PATCH_VERSION = 1, 17, 0

_init_lock = threading.Lock()
_finalized = False  # aclFinalizeFlag: starts false, so a finalize before any init succeeds
_finalize_hooks: list[Callable[[], Any]] = []


def on_finalize(hook: Callable[[], Any]) -> None:
    """Register what ``acl.finalize`` releases for a feature of the ACL layer (op caches of
    ``acl.op``, loaded models of ``acl.mdl``, profiling), as the real runtime's finalize
    callbacks do. Hooks run in registration order; one that raises is logged and skipped."""
    with _init_lock:
        _finalize_hooks.append(hook)


def init(config_path: str | None = None, *_ignored: Any) -> int:
    """Mirrors ``aclInit``; a second call returns ACL_ERROR_REPEAT_INITIALIZE (100002);
    after ``finalize`` it initializes again. Of the config file only ``max_opqueue_num``
    is read (``acl.op``; 100000 if <= 0). The node configuration (``NPUEMU_*``, ``ASCEND_*``) is
    checked here: a bad value returns 100000 with one line in ``get_recent_err_msg``."""
    global _finalized
    rt_ = _runtime()
    with _init_lock:
        if rt_.initialized:
            return errors.ACL_ERROR_REPEAT_INITIALIZE
        try:
            rt_.check_config()
        except errors.AclError as err:
            return _fail(err, "init", errors.ACL_ERROR_INVALID_PARAM)
        ret = op.configure(config_path)  # the "max_opqueue_num" key
        if ret:
            return ret
        rt_.initialized = True
        _finalized = False
    return 0


def finalize(*_ignored: Any) -> int:
    """Mirrors ``aclFinalize``: releases what the ACL layer holds (the finalize hooks of
    ``acl.op``/``acl.mdl``/profiling; the host log is flushed; data buffers still alive are
    reported in it) and marks the process finalized. As in the real runtime it does not reset
    devices: memory, streams and contexts stay valid and ``acl.rt`` calls keep working
    (release them with ``reset_device`` before, or let the process exit). A repeat returns
    ACL_ERROR_REPEAT_FINALIZE (100037); a finalize before any ``init`` succeeds once, as
    the real runtime's flag starts cleared. Blocks only while the hooks run."""
    global _finalized
    rt_ = _runtime()
    with _init_lock:
        if _finalized:
            return errors.ACL_ERROR_REPEAT_FINALIZE
        hooks = list(_finalize_hooks)
        _finalized = True
        rt_.initialized = False
    for hook in hooks:
        try:
            hook()
        except Exception as exc:  # one feature's failure must not stop the others
            plog.log(logring.ERROR, f"aclFinalize: {getattr(hook, '__name__', hook)}: {exc}",
                     module="ASCENDCL")
    live = data.live_count()
    if live:
        plog.log(logring.WARNING, f"aclFinalize: {live} data buffer(s) never destroyed",
                 module="ASCENDCL")
    return 0


def get_soc_name(*_ignored: Any) -> str | None:
    """Mirrors ``aclrtGetSocName`` (the string; None where the C call returns NULL)."""
    return device.soc_name()


def get_version(*_ignored: Any) -> tuple[int, int, int, int]:
    """Mirrors ``aclrtGetVersion``: ``(major, minor, patch, ret)``."""
    return ACL_MAJOR_VERSION, ACL_MINOR_VERSION, ACL_PATCH_VERSION, 0


get_device_capability = _with_result(0)(device.device_capability)
"""``aclGetDeviceCapability`` -> ``(value, ret)`` (a C API call pyACL does not bind; named as
this module names the other ``acl*`` calls)."""


def get_recent_err_msg(*_ignored: Any) -> str:
    """Mirrors ``aclGetRecentErrMsg``: the text of this thread's most recent failure."""
    return _recent_message()


_APP_LEVELS = {AclLogLevel.ACL_DEBUG: logring.DEBUG, AclLogLevel.ACL_INFO: logring.INFO,
               AclLogLevel.ACL_WARNING: logring.WARNING, AclLogLevel.ACL_ERROR: logring.ERROR}


def app_log(level: int, msg: str, *_location: Any) -> None:
    """Mirrors ``aclAppLog``: one line in this process's host plog, module APP, if the level
    is enabled (``ASCEND_GLOBAL_LOG_LEVEL``/``ASCEND_MODULE_LOG_LEVEL``). An unknown level
    writes nothing (as the real runtime's filter does); a non-int level or non-str message is
    TypeError, as pyACL's argument parser raises. Returns None, like pyACL."""
    if isinstance(level, bool) or not isinstance(level, int):
        raise TypeError(f"app_log: level must be an int, got {type(level).__name__}")
    if not isinstance(msg, str):
        raise TypeError(f"app_log: msg must be a str, got {type(msg).__name__}")
    slog_level = _APP_LEVELS.get(level)  # type: ignore[call-overload]
    if slog_level is not None:
        plog.log(slog_level, msg.replace("\n", " "), module="APP")


_ON_FIRST_USE = ("mdl", "media", "prof")
"""The submodules imported on first use (``__getattr__``)."""

create_data_buffer = data.create
destroy_data_buffer = data.destroy
get_data_buffer_addr = data.get_addr
get_data_buffer_size = data.get_size_u32
get_data_buffer_size_v2 = data.get_size
update_data_buffer = data.update
data_type_size = data.type_size

__all__ = ["app_log", "create_data_buffer", "data_type_size", "destroy_data_buffer",
           "finalize", "get_data_buffer_addr", "get_data_buffer_size",
           "get_data_buffer_size_v2", "get_device_capability", "get_recent_err_msg",
           "get_soc_name", "get_version",
           "init", "on_finalize", "op", "rt", "update_data_buffer", "util", *_ON_FIRST_USE,
           *tensor.__all__]

def __getattr__(name: str) -> Any:
    """``acl.mdl``, ``acl.media``, ``acl.prof``: imported on first use (see the docstring)."""
    if name in _ON_FIRST_USE:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_ON_FIRST_USE})
