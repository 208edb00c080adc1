"""npuemu's host runtime: the process that uses the emulated NPUs.

Two faces over one core (``runtime``, ``device``, ``memory``):

- the Pythonic API, re-exported here from :mod:`npuemu.host.api`: ``Device``,
  ``DeviceBuffer``, ``DeviceArray``, ``device_count`` and friends, raising the ``AclError``
  subclasses (``e.code``, ``e.name``);
- the pyACL-compatible module, ``from npuemu.host import acl`` (``acl.rt.malloc(...)`` returns
  ``(ptr, ret)``), which is what ``import acl`` resolves to under ``npuemu run``.

Importing this package is cheap and starts nothing: the error classes are plain imports,
the API classes load on first access (PEP 562), ``acl`` is never imported from here, and a
node is only started (or attached) by the first call that needs a device.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from npuemu.shared.errors import (
    AclError,
    ContextError,
    DeviceError,
    DeviceLostError,
    InvalidDeviceError,
    OutOfMemoryError,
    ParamError,
    ResourceError,
    StorageError,
    SyncTimeoutError,
)

if TYPE_CHECKING:
    from npuemu.host.api import (
        Device,
        DeviceArray,
        DeviceBuffer,
        Event,
        Kernel,
        MemInfo,
        Stream,
        current_device,
        device_count,
        empty_cache,
        leak_report,
        load_kernels,
        memory_allocated,
        memory_reserved,
        memory_snapshot,
        memory_stats,
        pool_stats,
        reset_peak_memory_stats,
        retained_devices,
    )

_LAZY = frozenset({"Device", "DeviceArray", "DeviceBuffer", "Event", "Kernel", "MemInfo",
                   "Stream", "current_device", "device_count", "load_kernels",
                   "retained_devices", "empty_cache", "leak_report", "memory_allocated",
                   "memory_reserved", "memory_snapshot", "memory_stats", "pool_stats",
                   "reset_peak_memory_stats"})

__all__ = [
    "AclError",
    "ContextError",
    "Device",
    "DeviceArray",
    "DeviceBuffer",
    "DeviceError",
    "DeviceLostError",
    "Event",
    "InvalidDeviceError",
    "Kernel",
    "MemInfo",
    "OutOfMemoryError",
    "ParamError",
    "ResourceError",
    "StorageError",
    "Stream",
    "SyncTimeoutError",
    "current_device",
    "device_count",
    "empty_cache",
    "leak_report",
    "load_kernels",
    "memory_allocated",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "pool_stats",
    "reset_peak_memory_stats",
    "retained_devices",
]


def __getattr__(name: str) -> Any:
    # Only the API names: anything else (e.g. ``acl`` in ``from npuemu.host import acl``)
    # must raise AttributeError so that the import system loads the submodule itself.
    if name in _LAZY:
        value = getattr(importlib.import_module("npuemu.host.api"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY)
